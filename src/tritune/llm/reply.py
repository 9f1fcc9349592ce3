"""A model's reply, untrusted text, turned into the candidate text of the kernel's module.

The reply's first ```python block holds either functions (the kernel, ``@triton.jit`` included,
and any helpers) or a whole module. Functions are spliced into the captured source by name, every
byte outside the replaced spans kept, so the candidate differs from the source only where the
model changed it. Nothing here runs the code: it is only parsed (``tritune.allowlist.sandbox`` decides
whether it may run). A reply that cannot become a candidate raises ``ReplyError``, whose one-line
message goes back to the model.
"""

from __future__ import annotations

import ast
import re
import textwrap

KINDS = ("no_code", "syntax", "missing_kernel", "signature", "not_jit")
MAX_MESSAGE = 300  # the cap on a message fed back to the model

# Python ends a line at \r\n, \r or \n (not at \f or the Unicode separators str.splitlines knows)
_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+\Z")
_FENCE = re.compile(r"```+[ \t]*([\w+-]*)[^\n]*\n?")  # an opening fence; group 1 the language
_CLOSING = re.compile(r"^```+[ \t]*$", re.MULTILINE)
_PYTHON_TAGS = ("python", "py", "python3")
_WRAPPERS = ("triton.autotune", "triton.heuristics")  # may sit above @triton.jit

Def = ast.FunctionDef | ast.AsyncFunctionDef


class ReplyError(ValueError):
    """A reply that cannot become a candidate; ``kind`` is one of ``KINDS``, ``str()`` one line."""

    def __init__(self, kind: str, message: str) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown reply error kind {kind!r}")
        line = " ".join(message.split())
        if len(line) > MAX_MESSAGE:
            line = line[: MAX_MESSAGE - 3] + "..."
        super().__init__(line)
        self.kind = kind

    def __reduce__(self):  # the default would call __init__ with the message alone
        return type(self), (self.kind, str(self))


def first_python_block(text: str) -> str:
    """The code of the first ```python (or ```py) block; with none, of the first unmarked block
    that parses as Python. Newlines come back as ``\\n``. A block cut off by the end of the reply
    (a token limit) runs to the end, so it fails as ``syntax`` with a line number, not as
    ``no_code``."""
    blocks = _fenced_blocks(text.replace("\r\n", "\n").replace("\r", "\n"))
    for tag, code in blocks:
        if tag in _PYTHON_TAGS:
            if not code.strip():
                raise ReplyError("no_code", "the reply's first ```python block is empty")
            return code
    for tag, code in blocks:
        if not tag and code.strip() and _parses(code):
            return code
    raise ReplyError("no_code", "the reply has no ```python code block")


def splice(source: str, kernel: str, code: str) -> str:
    """The new text of the kernel's module: ``code``'s functions put in place of ``source``'s by
    name (new ones just before the kernel, new imports after the last import), or ``code`` itself
    when it is a whole module (any top-level statement other than a def, an import or a string)."""
    code = textwrap.dedent(code.replace("\r\n", "\n").replace("\r", "\n"))
    tree = _parse_reply(code, "the reply's code")
    newline = _newline(source)
    body = [s for s in tree.body if not _is_string(s)]
    if all(isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Import, ast.ImportFrom)) for s in body):
        result = _splice_functions(source, kernel, code, body, newline)
    else:
        result = code.replace("\n", newline)
    if _find_def(_parse_reply(result, "the spliced module"), kernel) is None:
        raise ReplyError("missing_kernel", f"the reply's code does not define the kernel {kernel}")
    return result


def check_kernel(original: str, new: str, kernel: str) -> None:
    """Raise ``ReplyError`` unless the new module's kernel keeps the original's parameter names
    (any order: launches pass them by name) and is a ``@triton.jit`` function, under nothing but
    ``triton.autotune``/``triton.heuristics`` or decorators the original kernel has too (inductor's
    ``@triton_heuristics.pointwise(...)``). An original without the kernel is the caller's mistake,
    not the reply's: a plain ValueError."""
    before = _find_def(ast.parse(original), kernel)
    if before is None:
        raise ValueError(f"the original module has no top-level def {kernel}")
    tree = _parse_reply(new, "the new module")
    after = _find_def(tree, kernel)
    if after is None:
        raise ReplyError("missing_kernel", f"the new module does not define the kernel {kernel}")
    _check_signature(before, after, kernel)
    _check_jit(before, after, tree, kernel)


def kernel_text(source: str, kernel: str) -> str | None:
    """The kernel's def, decorators included, exactly as ``source`` writes it (no final newline);
    None when ``source`` has no top-level def of that name."""
    node = _find_def(ast.parse(source), kernel)
    if node is None:
        return None
    lines = _LINE.findall(source)
    return "".join(lines[_first_line(node) - 1: node.end_lineno]).rstrip("\r\n")


def _fenced_blocks(text: str) -> list[tuple[str, str]]:
    """(language tag in lower case, code) of each fenced block, in order."""
    blocks, at = [], 0
    while (opening := _FENCE.search(text, at)) is not None:
        if opening.start() > 0 and text[opening.start() - 1] != "\n":
            at = opening.end()  # ``` inside a line of prose is not a fence
            continue
        closing = _CLOSING.search(text, opening.end())
        end = closing.start() if closing else len(text)
        blocks.append((opening.group(1).lower(), text[opening.end(): end]))
        at = closing.end() if closing else len(text)
    return blocks


def _splice_functions(source: str, kernel: str, code: str, body: list[ast.stmt], newline: str) -> str:
    tree = ast.parse(source)
    lines = _LINE.findall(source)
    code_lines = _LINE.findall(code)
    defined = {node.name: node for node in tree.body if isinstance(node, Def)}  # the last def binds
    edits: list[tuple[int, int, int, str]] = []  # (first line, end line, order, text), 0-based lines
    replies = {node.name: node for node in body if isinstance(node, Def)}
    helpers = []
    for name, node in replies.items():
        text = "".join(code_lines[_first_line(node) - 1: node.end_lineno]).rstrip("\n") + "\n"
        if name in defined:
            edits.append((_first_line(defined[name]) - 1, defined[name].end_lineno, 2, text))
        else:
            helpers.append(text)
    imports = _new_imports(tree, body)
    if imports:
        at = _import_point(tree)
        edits.append((at, at, 0, "".join(imports)))
    if helpers:
        block = "\n\n".join(helpers)
        if kernel in defined:  # two blank lines between top-level defs, as PEP 8 has them
            at, text = _above_comments(lines, _first_line(defined[kernel]) - 1), block + "\n\n"
        else:
            at, text = len(lines), "\n\n" + block
        edits.append((at, at, 1, text))
    out, done = [], 0
    for start, end, _, text in sorted(edits):
        out.extend(lines[done:start])
        if out and not out[-1].endswith(("\n", "\r")):
            out.append(newline)  # the source ended without a newline where text now follows
        out.append(text.replace("\n", newline))
        done = end
    out.extend(lines[done:])
    return "".join(out)


def _new_imports(tree: ast.Module, body: list[ast.stmt]) -> list[str]:
    """The text of each reply import the source lacks (compared as ``ast.unparse`` writes them)."""
    have = {ast.unparse(s) for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))}
    found = []
    for node in body:
        if isinstance(node, (ast.Import, ast.ImportFrom)) and ast.unparse(node) not in have:
            have.add(ast.unparse(node))
            found.append(ast.unparse(node) + "\n")  # not the reply's line: it may hold two imports
    return found


def _import_point(tree: ast.Module) -> int:
    """The line after the source's last top-level import; else after its docstring; else 0."""
    imports = [s for s in tree.body if isinstance(s, (ast.Import, ast.ImportFrom))]
    if imports:
        return imports[-1].end_lineno
    if tree.body and _is_string(tree.body[0]):
        return tree.body[0].end_lineno
    return 0


def _above_comments(lines: list[str], index: int) -> int:
    """The index of the first of the comment lines right above line ``index``: a comment there
    describes the kernel, so a helper goes above it."""
    while index > 0 and lines[index - 1].lstrip().startswith("#"):
        index -= 1
    return index


def _check_signature(before: Def, after: Def, kernel: str) -> None:
    if after.args.vararg or after.args.kwarg:
        raise ReplyError("signature", f"{kernel} takes *args or **kwargs: launches pass its parameters "
                                      "by name, so each must be named")
    old, new = _parameters(before), _parameters(after)
    if old != new:
        missing = ", ".join(sorted(old - new)) or "none"
        added = ", ".join(sorted(new - old)) or "none"
        raise ReplyError("signature", f"{kernel}'s parameters changed (missing: {missing}; added: {added}); "
                                      "keep their names, the order may change")


def _parameters(node: Def) -> set[str]:
    args = node.args
    return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}


def _check_jit(before: Def, after: Def, tree: ast.Module, kernel: str) -> None:
    if not after.decorator_list:
        raise ReplyError("not_jit", f"{kernel} is not decorated with @triton.jit")
    bound = _triton_bindings(tree)
    *outer, inner = after.decorator_list
    if _resolve(inner, bound) != "triton.jit":
        raise ReplyError("not_jit", f"{kernel}'s innermost decorator is @{ast.unparse(inner)}, "
                                    "not @triton.jit")
    kept = {ast.unparse(d) for d in before.decorator_list}
    for decorator in outer:
        if _resolve(decorator, bound) not in _WRAPPERS and ast.unparse(decorator) not in kept:
            raise ReplyError("not_jit", f"{kernel} is wrapped in @{ast.unparse(decorator)}: only "
                                        "triton.autotune or triton.heuristics may sit above @triton.jit")


def _triton_bindings(tree: ast.Module) -> dict[str, str]:
    """Module-level names that stand for ``triton`` or one of its attributes (``tt`` after
    ``import triton as tt``, ``jit`` after ``from triton import jit``)."""
    bound = {"triton": "triton"}
    for node in tree.body:
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "triton" and alias.asname:
                    bound[alias.asname] = "triton"
        elif isinstance(node, ast.ImportFrom) and node.module == "triton" and not node.level:
            for alias in node.names:
                bound[alias.asname or alias.name] = f"triton.{alias.name}"
    return bound


def _resolve(decorator: ast.expr, bound: dict[str, str]) -> str | None:
    """The dotted name a decorator (or the callee of a decorator call) means, through ``bound``."""
    node = decorator.func if isinstance(decorator, ast.Call) else decorator
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name) or node.id not in bound:
        return None
    return ".".join([bound[node.id], *reversed(parts)])


def _find_def(tree: ast.Module, name: str) -> Def | None:
    found = [n for n in tree.body if isinstance(n, Def) and n.name == name]
    return found[-1] if found else None  # Python binds the last def of a name


def _first_line(node: Def) -> int:
    return min([node.lineno, *(d.lineno for d in node.decorator_list)])


def _is_string(node: ast.stmt) -> bool:
    """A bare string statement (a docstring): no code, so it does not make a reply a module."""
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _newline(source: str) -> str:
    match = re.search(r"\r\n|\r|\n", source)
    return match.group(0) if match else "\n"


def _parses(code: str) -> bool:
    try:
        ast.parse(code)
    except (SyntaxError, ValueError):  # ValueError: a null byte
        return False
    return True


def _parse_reply(code: str, what: str) -> ast.Module:
    try:
        tree = ast.parse(code)
        # compiling (never running) also finds what the parser lets through: a misplaced
        # ``from __future__``, ``return`` outside a function, ``nonlocal`` of nothing
        compile(tree, "<reply>", "exec", dont_inherit=True)
        return tree
    except SyntaxError as exc:
        raise ReplyError("syntax", f"{what} does not parse: line {exc.lineno}: {exc.msg}") from None
    except ValueError as exc:
        raise ReplyError("syntax", f"{what} does not parse: {exc}") from None
