"""A model's module for ``tritune generate --llm`` -> the module tritune writes, from checked parts only.

The reply's code is untrusted. ``assemble(code, inputs, name=...)`` reads it (its syntax tree,
never run), splits its module-level statements into two parts, checks each with its own allowlist,
and writes the module itself:

- **kernels**: imports (but ``import torch``), constants and decorated functions (the
  ``@triton.jit`` kernels), each statement's lines as the reply wrote them, checked by the kernel
  allowlist (``allowlist.sandbox.check``) behind tritune's kernel header (``KERNEL_HEADER``);
- **launcher**: the one undecorated ``def run(...)``, checked by the launcher allowlist
  (``launcher.check_launcher``: shape arithmetic, allocations, views, launches of those kernels).

The module is tritune's docstring, ``import torch``, ``KERNEL_HEADER``, the kernels part and
``run``, nothing else: the reply's own docstring, comments between statements, its ``import torch``
and an ``if __name__ == "__main__":`` block (it never runs on import; dropped, not shipped) are left
out. Anything else at module level would run at import or go unchecked, and is refused
(``sandbox.Unsafe``, ``line N: what``, N a line of the reply): a call or other expression, an
``if``, a loop, a class, a plain function besides ``run``, a torch import but ``import torch``, two
statements on one line, a name the launcher relies on (``launcher.RESERVED``) bound otherwise. The
written text is parsed once more and must hold exactly the checked statements, in order.
"""

from __future__ import annotations

import ast
import dataclasses
from typing import Any, Sequence

from tritune.allowlist import sandbox
from tritune.allowlist.sandbox import Unsafe, parse
from tritune.generate.launcher import NUMBER, OTHER, RESERVED, TENSOR, check_launcher

KERNEL_HEADER = "import triton\nimport triton.language as tl\nimport math\n"
_HEADER_IMPORTS = frozenset(KERNEL_HEADER.splitlines())
_CONSTEXPR = ("tl.constexpr", "triton.language.constexpr")


@dataclasses.dataclass(frozen=True)
class Assembled:
    text: str  # the module tritune writes
    kernels: tuple[str, ...]  # the kernels' names, as written


def input_kinds(cases: Sequence[Any]) -> list[str]:
    """The kind of each of ``run``'s parameters over the spec's cases (``Case.tensors``): ``TENSOR``
    or ``NUMBER`` where every case agrees, else ``OTHER`` (run may not use it)."""
    import torch

    def kind(value: Any) -> str:
        if isinstance(value, torch.Tensor):
            return TENSOR
        return NUMBER if isinstance(value, (bool, int, float)) else OTHER

    kinds = []
    for column in zip(*(case.tensors for case in cases)):
        found = {kind(value) for value in column}
        kinds.append(found.pop() if len(found) == 1 else OTHER)
    return kinds


def assemble(code: str, inputs: Sequence[str], *, name: str = "generated") -> Assembled:
    """The module for ``code`` (see the module doc); raises ``Unsafe`` for the first part refused.
    ``inputs``: the kinds of ``run``'s parameters (``input_kinds``)."""
    try:
        return _assemble(code, inputs, name)
    except RecursionError:  # a sum of thousands of terms: the checkers read trees recursively
        raise Unsafe(0, "the code is nested too deeply to be checked") from None


def _assemble(code: str, inputs: Sequence[str], name: str) -> Assembled:
    code = code.replace("\r\n", "\n").replace("\r", "\n")
    tree = parse(code, "the reply")
    lines = code.split("\n")
    parts = _split(tree)
    kernel_lines: list[str] = []
    origin: list[int] = []  # the reply's line of each line of the kernels part (0: a separator)
    for node in parts.kernels:
        start, end = _first_line(node), node.end_lineno
        kernel_lines += lines[start - 1:end] + ["", ""]
        origin += list(range(start, end + 1)) + [0, 0]
    kernels_text = "\n".join(kernel_lines).rstrip() + "\n"
    checked = f"{KERNEL_HEADER}\n\n{kernels_text}"
    offset = checked.count("\n") - kernels_text.count("\n")  # lines before the kernels part
    try:
        sandbox.check(checked)
    except Unsafe as exc:
        line = origin[exc.line - offset - 1] if 0 < exc.line - offset <= len(origin) else 0
        raise Unsafe(line, exc.reason) from None
    start = _first_line(parts.run)
    launcher = "\n".join(lines[start - 1:parts.run.end_lineno]) + "\n"
    try:
        check_launcher(launcher, parts.signatures, inputs, parts.constants, parts.constexprs)
    except Unsafe as exc:
        raise Unsafe(exc.line + start - 1 if exc.line else 0, exc.reason) from None
    text = f"{_docstring(name)}import torch\n{checked}\n\n{launcher}"
    _same_statements(text, checked, launcher)
    return Assembled(text, tuple(parts.signatures))


@dataclasses.dataclass
class _Parts:
    kernels: list[ast.stmt]  # imports, constants, decorated functions: the kernels part, in order
    run: ast.FunctionDef
    signatures: dict[str, list[str]]  # kernel name -> its parameters
    constexprs: dict[str, list[str]]  # kernel name -> its parameters annotated tl.constexpr
    constants: set[str]  # names bound to a literal number (run may read them)


def _split(tree: ast.Module) -> _Parts:
    kernels: list[ast.stmt] = []
    runs: list[ast.FunctionDef] = []
    signatures: dict[str, list[str]] = {}
    constexprs: dict[str, list[str]] = {}
    bound: dict[str, int] = {}  # name -> how often the module level binds it
    numbers: set[str] = set()
    body = tree.body[1:] if tree.body and _is_docstring(tree.body[0]) else tree.body
    previous_end = 0
    for node in body:
        if _first_line(node) <= previous_end:
            raise Unsafe(node.lineno, "one statement per line at module level")
        previous_end = node.end_lineno
        if _main_block(node):
            continue  # never runs on import: dropped, not shipped
        if isinstance(node, ast.FunctionDef) and not node.decorator_list and node.name == "run":
            runs.append(node)
            if len(runs) > 1:
                raise Unsafe(node.lineno, "run() is defined twice")
            continue
        if isinstance(node, ast.FunctionDef) and not node.decorator_list:
            raise Unsafe(node.lineno, f"def {node.name}: a plain function; the module holds @triton.jit kernels "
                                      "and one run() only")
        if isinstance(node, (ast.Import, ast.ImportFrom)) and _is_torch(node):
            if _plain_torch(node):
                continue  # tritune's header imports torch
            raise Unsafe(node.lineno, "torch is imported by tritune as `import torch`, for run() only: no other "
                                      "import of torch")
        if isinstance(node, ast.Import) and ast.unparse(node) in _HEADER_IMPORTS:
            continue  # the header has it
        if not isinstance(node, (ast.Import, ast.ImportFrom, ast.Assign, ast.AnnAssign, ast.FunctionDef)):
            raise Unsafe(node.lineno, f"{_word(node)} at module level: only imports, constants, @triton.jit kernels "
                                      "and one run(); nothing that runs at import")
        for target, legit in _bindings(node):
            if target in RESERVED and not legit:
                raise Unsafe(node.lineno, f"the module may not bind the name {target} (run() relies on it)")
            bound[target] = bound.get(target, 0) + 1
        if isinstance(node, ast.FunctionDef):
            args = node.args
            params = args.posonlyargs + args.args + args.kwonlyargs
            signatures[node.name] = [a.arg for a in params]
            constexprs[node.name] = [a.arg for a in params if a.annotation is not None
                                     and ast.unparse(a.annotation).split(".")[-1] == "constexpr"]
        elif _literal_number(node):
            numbers.add(_target_name(node))
        kernels.append(node)
    if not runs:
        raise Unsafe(0, "the module defines no run(...) launcher")
    constants = {name for name in numbers if bound.get(name) == 1 and name not in signatures}
    return _Parts(kernels, runs[0], signatures, constexprs, constants)


def _same_statements(text: str, checked: str, launcher: str) -> None:
    """The written module parses to tritune's docstring and ``import torch`` followed by exactly
    the statements that were checked: nothing unchecked slipped in between the parts."""
    written = [ast.dump(node) for node in ast.parse(text).body]
    wanted = [ast.dump(node) for node in ast.parse(checked).body + ast.parse(launcher).body]
    if written[2:] != wanted or len(written) != len(wanted) + 2:
        raise Unsafe(0, "the assembled module is not its checked parts")


# ------------------------------------------------------------------------------------ helpers

def _first_line(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None)
    return decorators[0].lineno if decorators else node.lineno


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _main_block(node: ast.stmt) -> bool:
    """``if __name__ == "__main__":`` with no else."""
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Compare) and not node.orelse and isinstance(test.left, ast.Name)
            and test.left.id == "__name__" and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)
            and isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value == "__main__")


def _is_torch(node: ast.Import | ast.ImportFrom) -> bool:
    modules = [alias.name for alias in node.names] if isinstance(node, ast.Import) else [node.module or ""]
    return any(m == "torch" or m.startswith("torch.") for m in modules)


def _plain_torch(node: ast.Import | ast.ImportFrom) -> bool:
    return isinstance(node, ast.Import) and [(a.name, a.asname) for a in node.names] == [("torch", None)]


def _bindings(node: ast.stmt) -> list[tuple[str, bool]]:
    """(name, whether that is ``import triton[.x]`` binding triton itself) of each name ``node`` binds."""
    if isinstance(node, ast.Import):
        return [(a.asname or a.name.split(".")[0], a.asname is None and a.name.split(".")[0] == "triton")
                for a in node.names]
    if isinstance(node, ast.ImportFrom):
        return [(a.asname or a.name, False) for a in node.names]
    if isinstance(node, ast.FunctionDef):
        return [(node.name, False)]
    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
    return [(n.id, False) for t in targets for n in ast.walk(t) if isinstance(n, ast.Name)]


def _literal_number(node: ast.stmt) -> bool:
    """``NAME = 64``, ``NAME: tl.constexpr = 64``, ``NAME = tl.constexpr(64)``."""
    if _target_name(node) is None:
        return False
    value = node.value
    if isinstance(value, ast.Call) and ast.unparse(value.func) in _CONSTEXPR and len(value.args) == 1 \
            and not value.keywords:
        value = value.args[0]
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    return isinstance(value, ast.Constant) and type(value.value) in (bool, int, float)


def _target_name(node: ast.stmt) -> str | None:
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        return node.targets[0].id
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return node.target.id
    return None


def _word(node: ast.stmt) -> str:
    words = {ast.Expr: "an expression", ast.If: "an if statement", ast.For: "a loop", ast.While: "a loop",
             ast.With: "a with statement", ast.Try: "a try statement", ast.ClassDef: "a class",
             ast.AsyncFunctionDef: "an async function", ast.AugAssign: "an augmented assignment",
             ast.Delete: "del", ast.Global: "global", ast.Raise: "raise", ast.Assert: "assert"}
    return words.get(type(node), type(node).__name__)


def _docstring(name: str) -> str:
    shown = "".join(c for c in name if c.isalnum() or c in "_-.") or "generated"
    return (f'"""{shown}: Triton kernel(s) written by a model for `tritune generate --llm`.\n\n'
            "tritune assembled this module from the checked parts of the reply only: its @triton.jit kernels\n"
            "(with their imports and constants; the kernel allowlist) and run() (the launcher allowlist).\n"
            '"""\n')
