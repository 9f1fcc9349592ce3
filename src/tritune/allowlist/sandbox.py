"""The check untrusted kernel code passes before anything of it runs: a grammar of what it MAY be.

A model's reply is untrusted code, and so is any stored source variant tritune did not derive by
one of its own rules. It is read as a syntax tree (never run) and refused, with ``Unsafe`` (one
line: ``line N: what``), unless it is only this (an allowlist: what is not named here is refused,
so a bypass needs a hole in the grammar, not a name missing from a list):

* module level: the imports of ``ALLOWED_IMPORTS`` (exactly those forms), a docstring, names bound
  to a literal (``1024``, ``-1.5``, ``"x"``, ``None``) or ``tl.constexpr(literal)``, and
  ``@triton.jit`` functions. A decorator is ``triton.jit`` (its arguments literals) or, on a
  function replacing one of the captured file's, one of that function's own decorators, unchanged
  (Inductor's ``@triton_heuristics.pointwise(...)``: the user's code, not the reply's). Parameters
  take literal defaults and no annotation but ``tl.constexpr``; no ``*args``/``**kwargs``.
* a kernel body: assignments to names, ``if``/``while``, ``for`` over ``range``/``tl.range``/
  ``tl.static_range``, ``return``/``break``/``continue``/``pass``, ``assert`` and expressions of
  arithmetic, comparisons, tuples and lists, calls and subscripts. Every name is a parameter, a
  local, a constant, a ``@triton.jit`` function (of the reply or of the captured file), one of
  ``SAFE_BUILTINS`` (called), or a module (``tl``, ``triton``, ``math``, ``libdevice``,
  ``triton_helpers``, ``tl_math``) used only as the root of an attribute chain that ends on a
  member of ``module_members()``: generated from Triton's public API (``triton.language.__all__``
  less inline asm, ``tl.math``, libdevice, Inductor's jit helpers), never reaching a module or
  class Triton did not list (``allowlist.kernel_api``). An attribute of a value is one of
  ``value_attrs()`` (``tl.tensor``'s and ``tl.dtype``'s public ones, less what reaches the IR). No dunder or private attribute, no
  ``_``-keyword (``_semantic=``), no subscript of anything but a value (a module, a literal list,
  a builtin's result), no lambda, comprehension, generator, walrus, class, nested function,
  ``global``, ``nonlocal``, ``try``, ``with``, ``yield``, ``await``, f-string, dict or set.
* no torch at all: a kernel that calls torch is a fallback, and a reply writes kernels only.

The grammar itself is ``allowlist.grammar``; this module holds the API (``check``, ``Unsafe``, ``RULES``)
and what a captured file binds. ``check(code, context=captured_source)`` reads the captured file the reply is spliced into (its
tree, never run): names it binds by imports of known Triton/Inductor helper modules, its literal
constants and its ``@triton.jit`` functions become usable; a name it binds to anything else is not
(``tl = numpy`` there would make the reply's ``tl.load`` numpy's). ``check_variant_source`` checks a
stored variant: equal to the captured file but for top-level functions and added imports and
constants, each of which must pass.
"""
from __future__ import annotations

import ast
import functools
from typing import Any, Iterable

from tritune.allowlist.grammar import IMPORTS, Checker, chain, constexpr_of_literal, literal
from tritune.allowlist.kernel_api import SAFE_BUILTINS, module_members, value_attrs  # noqa: F401 - the API's tables
from tritune.model import families
from tritune.model.failures import UNSAFE

ALLOWED_IMPORTS = tuple(IMPORTS)  # the import statements a reply may hold, as ast.unparse writes them

# the captured file's imports that bind a helper module: (module, name) -> which module; module ""
# for ``import name as alias``. Anything else it imports is the user's, and not the reply's to use.
_CONTEXT_IMPORTS = {
    ("", "triton"): "triton", ("", "triton.language"): "tl", ("triton", "language"): "tl",
    ("", "math"): "math", ("", "triton.language.math"): "tl.math", ("triton.language", "math"): "tl.math",
    ("triton.language.extra", "libdevice"): "libdevice", ("triton.language.extra.cuda", "libdevice"): "libdevice",
    ("torch._inductor.runtime.triton_helpers", "libdevice"): "libdevice",
    ("torch._inductor.runtime.triton_helpers", "math"): "tl.math",
    ("torch._inductor.runtime", "triton_helpers"): "triton_helpers",
    ("", "torch._inductor.runtime.triton_helpers"): "triton_helpers",
}

class Unsafe(ValueError):
    """Code that may not run: ``line`` (1-based, 0 when unknown) and ``reason``; str() is
    ``line N: reason``."""

    failure_kind = UNSAFE  # the worker's failure kind when replay refuses a stored variant

    def __init__(self, line: int, reason: str):
        super().__init__(line, reason)  # both in args: it pickles (a worker may raise it)
        self.line, self.reason = line, reason

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


# the rules in the model's words, for the prompt (the check above is what enforces them)
RULES = f"""\
Your code is rejected, unrun, unless it is only what these rules allow:
- module level: a docstring; names bound to a literal or tl.constexpr(literal); @triton.jit functions;
  and only these imports: {"; ".join(ALLOWED_IMPORTS[:3])};
  {"; ".join(ALLOWED_IMPORTS[3:])}.
  No torch anywhere: write kernels only.
- decorators: only @triton.jit (arguments literals), or a decorator the kernel already has, unchanged.
  No triton.autotune/triton.heuristics you add, no lambdas. Defaults: literals; annotations: tl.constexpr.
- in a kernel, every name is a parameter, a local, a constant, a @triton.jit function, range/min/max/
  int/float/len, or tl/triton/math/libdevice (and the file's triton_helpers/tl_math) as `tl.name`;
  use Triton's public functions and dtypes (tl.load, tl.sum, tl.math.exp, libdevice.exp, triton.cdiv...),
  and on values only their public methods and properties (.to, .dtype, .shape, .T, .reshape, .trans...).
- no dunder or private names or attributes, getattr, tl.inline_asm_elementwise, extern calls, lambdas,
  comprehensions, :=, class, nested functions, global, nonlocal, try, with, yield, f-strings, dicts,
  or subscripts of anything but tensors and their shapes (x[:, None] is fine).
"""


def allowed_imports() -> tuple[str, ...]:
    """The import statements a reply may hold, for the prompt's rules."""
    return ALLOWED_IMPORTS


# -------------------------------------------------------------------------------- the checks

def check(code: str, context: str | None = None) -> None:
    """Raise ``Unsafe`` for the first (by position) construct of ``code`` that is not allowed.
    ``context``: the captured file's text the code is spliced into (read, never run)."""
    _raise_first(Checker(parse(code, "the code"), _Context.of(context)))


def check_variant_source(captured: str, variant: str, kernel: str) -> None:
    """Raise ``Unsafe`` unless ``variant`` (a stored whole-file source) is ``captured`` except for
    top-level functions and added imports and constants, each of which passes the allowlist with
    ``captured`` as context. The captured file's other statements may only be kept, in order, or
    dropped: they are the user's code, the rest is not."""
    before, after = parse(captured, "the captured file"), parse(variant, "the variant's source")
    if not any(isinstance(s, ast.FunctionDef) and s.name == kernel for s in after.body):
        raise Unsafe(0, f"the variant's source does not define the kernel {kernel}")
    functions: dict[str, set[str]] = {}
    others = []
    for stmt, text in _statements(captured, before):
        if isinstance(stmt, ast.FunctionDef):
            functions.setdefault(stmt.name, set()).add(text)
        else:
            others.append(text)
    changed, at = [], 0
    for stmt, text in _statements(variant, after):
        if isinstance(stmt, ast.FunctionDef):
            if text not in functions.get(stmt.name, ()):
                changed.append(stmt)
            continue
        if text in others[at:]:
            at = others.index(text, at) + 1
        else:
            changed.append(stmt)
    _raise_first(Checker(ast.Module(body=changed, type_ignores=[]), _Context.of(captured, before)))


def _raise_first(checker: Checker) -> None:
    if checker.problems:
        line, *_, reason = min(checker.problems)
        raise Unsafe(line, reason)


def _statements(text: str, tree: ast.Module) -> list[tuple[ast.stmt, str]]:
    """Each top-level statement with its exact text (whole lines, decorators included): what is
    compared, as written (a statement reformatted is a statement changed)."""
    lines = text.splitlines()
    found = []
    for stmt in tree.body:
        first = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        found.append((stmt, "\n".join(lines[first - 1: stmt.end_lineno])))
    return found


def needs_check(variant: Any) -> bool:
    """Whether a variant's source must pass ``check_variant_source`` where it is imported: it has
    source, and no rule of tritune's made it (a model's, ``rule: llm``, or of unknown origin)."""
    if getattr(variant, "source", None) is None:
        return False
    from tritune.rewrites import RULES

    rule = (getattr(variant, "rewrite", None) or {}).get("rule")
    return rule == families.LLM or rule not in _tritune_rules(tuple(RULES))


@functools.cache
def _tritune_rules(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(names) - {families.LLM}


def parse(code: str, what: str) -> ast.Module:
    """``code``'s syntax tree, or ``Unsafe`` saying that ``what`` does not parse (never run)."""
    try:
        return ast.parse(code)
    except SyntaxError as e:
        raise Unsafe(e.lineno or 0, f"{what} does not parse: {e.msg}") from None
    except ValueError as e:  # null bytes
        raise Unsafe(0, f"{what} does not parse: {e}") from None


def _bound_at_module(tree: ast.Module) -> Iterable[tuple[str, ast.AST]]:
    """Every (name, statement) the module's top level binds, inside top-level blocks too, and every
    name a function declares ``global`` (it rebinds the module's name when it runs)."""
    stack: list[ast.AST] = list(tree.body)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Global):
            for name in node.names:
                yield name, node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            yield node.name, node
            stack.extend(n for n in ast.walk(node) if isinstance(n, ast.Global))
            stack.extend(node.decorator_list)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                yield alias.asname or alias.name.split(".")[0], node
            continue
        if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
            yield node.id, node  # a comprehension's or lambda's own names too: more than binds, never less
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            yield node.name, node
        elif isinstance(node, ast.MatchMapping) and node.rest:
            yield node.rest, node
        stack.extend(ast.iter_child_nodes(node))


class _Context:
    """What the captured file binds that a reply may use: ``modules`` (name -> which helper
    module), ``jit`` (its @triton.jit functions -> their decorators' dumps), ``constants``; and
    ``bound``, every name it binds at all (a reply may not bind those otherwise)."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}
        self.jit: dict[str, set[str]] = {}
        self.constants: set[str] = set()
        self.bound: set[str] = set()

    @classmethod
    def of(cls, source: str | None, tree: ast.Module | None = None) -> "_Context":
        self = cls()
        if source is None:
            return self
        tree = tree or parse(source, "the captured file")
        literals = _literal_targets(tree)
        kinds: dict[str, set[tuple[str, str]]] = {}
        for name, node in _bound_at_module(tree):
            kinds.setdefault(name, set()).add(cls._kind(name, node, literals))
        self.bound = set(kinds)
        for name, found in kinds.items():
            if len(found) != 1:
                continue  # bound twice, as different things: a reply may not rely on either
            [(kind, what)] = found
            if kind == "module":
                self.modules[name] = what
            elif kind == "const":
                self.constants.add(name)
        for node in tree.body:  # jit functions, once modules are known (the decorator needs triton)
            if isinstance(node, ast.FunctionDef) and kinds.get(node.name) == {("def", "")} \
                    and node.decorator_list and self._is_jit(node.decorator_list[-1]):
                self.jit.setdefault(node.name, set()).update(ast.dump(d) for d in node.decorator_list)
        return self

    @staticmethod
    def _kind(name: str, node: ast.AST, literals: set[int]) -> tuple[str, str]:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                if (alias.asname or alias.name.split(".")[0]) != name:
                    continue
                if isinstance(node, ast.Import):
                    key = ("", alias.name if alias.asname else alias.name.split(".")[0])
                else:
                    key = (node.module or "", alias.name) if not node.level else ("", "")
                if key in _CONTEXT_IMPORTS:
                    return "module", _CONTEXT_IMPORTS[key]
            return "other", ""
        if isinstance(node, ast.FunctionDef):
            return "def", ""
        if id(node) in literals:  # `N = 4`, `N: tl.constexpr = tl.constexpr(4)` at top level
            return "const", ""
        return "other", ""

    def _is_jit(self, decorator: ast.expr) -> bool:
        parts = chain(decorator.func if isinstance(decorator, ast.Call) else decorator)
        return parts is not None and len(parts) == 2 and self.modules.get(parts[0]) == "triton" \
            and parts[1] == "jit"


def _literal_targets(tree: ast.Module) -> set[int]:
    """The ids of the names that top-level ``NAME = literal`` / ``tl.constexpr(literal)`` bind."""
    found = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if value is None or not (literal(value) or constexpr_of_literal(value)):
            continue
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
            if isinstance(target, ast.Name):
                found.add(id(target))
    return found


