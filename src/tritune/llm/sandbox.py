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
  class Triton did not list. An attribute of a value is one of ``VALUE_ATTRS`` (``tl.tensor``'s
  and ``tl.dtype``'s public ones, less what reaches the IR). No dunder or private attribute, no
  ``_``-keyword (``_semantic=``), no subscript of anything but a value (a module, a literal list,
  a builtin's result), no lambda, comprehension, generator, walrus, class, nested function,
  ``global``, ``nonlocal``, ``try``, ``with``, ``yield``, ``await``, f-string, dict or set.
* no torch at all: a kernel that calls torch is a fallback, and a reply writes kernels only.

``check(code, context=captured_source)`` reads the captured file the reply is spliced into (its
tree, never run): names it binds by imports of known Triton/Inductor helper modules, its literal
constants and its ``@triton.jit`` functions become usable; a name it binds to anything else is not
(``tl = numpy`` there would make the reply's ``tl.load`` numpy's). ``check_variant_source`` checks a
stored variant: equal to the captured file but for top-level functions and added imports and
constants, each of which must pass.
"""
from __future__ import annotations

import ast
import functools
import inspect
import types
from typing import Any, Iterable

# the import statements a reply may hold, as ast.unparse writes each, and the module each binds
_IMPORTS = {
    "import triton": ("triton", "triton"),
    "import triton.language as tl": ("tl", "tl"),
    "import math": ("math", "math"),
    "from triton.language.extra import libdevice": ("libdevice", "libdevice"),
    "from triton.language.extra.cuda import libdevice": ("libdevice", "libdevice"),
}
ALLOWED_IMPORTS = tuple(_IMPORTS)

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

# Python builtins a kernel may call: those Triton's code generator itself knows (its
# ``builtin_namespace``, less getattr/hasattr/isinstance/list/print)
SAFE_BUILTINS = frozenset({"range", "min", "max", "int", "float", "len"})
# tl.* in __all__ that are refused: arbitrary PTX, or a Python callable applied per element
_DENIED = {"inline_asm_elementwise": "it is arbitrary PTX", "map_elementwise": "it applies a Python callable"}
_TL_CLASSES = frozenset({"constexpr", "range", "static_range"})  # classes a kernel calls
_ENUMS = {"PropagateNan": frozenset({"ALL", "NONE"})}
_MATH_CONSTANTS = frozenset({"pi", "e", "tau", "inf", "nan"})
_DTYPE_ATTRS = frozenset({"primitive_bitwidth", "int_bitwidth", "element_ty", "fp_mantissa_width",
                          "exponent_bias", "get_int_max_value", "get_int_min_value"})
_VALUE_DENIED = frozenset({"handle", "type", "to_ir", "mangle", "codegen_name", "cache_key_part", "scalar",
                           "with_element_ty", "kind", "KIND"})
_JIT_KWARGS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"})
_LOOPS = frozenset({("builtin", "range"), ("tl", "range"), ("tl", "static_range")})
_WORDS = {
    ast.Lambda: "a lambda", ast.NamedExpr: "an assignment expression (:=)", ast.ListComp: "a comprehension",
    ast.SetComp: "a comprehension", ast.DictComp: "a comprehension", ast.GeneratorExp: "a generator",
    ast.JoinedStr: "an f-string", ast.FormattedValue: "an f-string", ast.Dict: "a dict", ast.Set: "a set",
    ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield", ast.Starred: "a starred value",
    ast.ClassDef: "a class", ast.FunctionDef: "a nested function", ast.AsyncFunctionDef: "an async function",
    ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Try: "a try statement", ast.With: "a with statement",
    ast.AsyncWith: "a with statement", ast.AsyncFor: "an async loop", ast.Import: "an import",
    ast.ImportFrom: "an import", ast.Delete: "a del statement", ast.Raise: "a raise", ast.Match: "a match",
    ast.Expr: "an expression", ast.If: "an if statement", ast.For: "a loop", ast.While: "a loop",
    ast.AugAssign: "an augmented assignment", ast.Assert: "an assert",
}
if hasattr(ast, "TryStar"):
    _WORDS[ast.TryStar] = "a try statement"


class Unsafe(ValueError):
    """Code that may not run: ``line`` (1-based, 0 when unknown) and ``reason``; str() is
    ``line N: reason``."""

    failure_kind = "unsafe"  # the worker's failure kind when replay refuses a stored variant

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


# -------------------------------------------------------------------------- the allowed API

@functools.cache
def module_members() -> dict[str, dict[str, str]]:
    """Each module a kernel may name -> its members a kernel may reach and what each is: another
    module of this table, or ``fn`` (called), ``dtype``, ``const``, ``enum``. Generated from
    Triton's public API, so a Triton upgrade brings its new functions and nothing else."""
    import triton.language as tl
    from triton.language.extra import libdevice

    members: dict[str, dict[str, str]] = {"triton": {"language": "tl", "cdiv": "fn", "next_power_of_2": "fn"}}
    tl_members = members["tl"] = {"math": "tl.math", "extra": "tl.extra"}
    for name in tl.__all__:
        value = getattr(tl, name, None)
        if name in _DENIED or name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if isinstance(value, tl.dtype):
            tl_members[name] = "dtype"
        elif name in _ENUMS:
            tl_members[name] = "enum"
        elif inspect.isclass(value):
            if name in _TL_CLASSES:
                tl_members[name] = "fn"
        elif callable(value):
            tl_members[name] = "fn"
        elif isinstance(value, (int, float)):
            tl_members[name] = "const"
    members["tl.math"] = {n: "fn" for n, v in vars(tl.math).items() if not n.startswith("_") and callable(v)
                          and not inspect.isclass(v) and getattr(v, "__module__", "").startswith("triton.language")}
    members["tl.extra"] = {"cuda": "tl.extra.cuda", "libdevice": "libdevice"}
    members["tl.extra.cuda"] = {"libdevice": "libdevice"}
    members["libdevice"] = {n: "fn" for n, v in vars(libdevice).items()
                            if not n.startswith("_") and inspect.isfunction(v) and v.__module__ == libdevice.__name__}
    members["math"] = {n: "const" for n in _MATH_CONSTANTS}
    return members


@functools.cache
def _helpers() -> dict[str, str]:
    """Inductor's ``triton_helpers``: its jit functions and Triton builtins (less inline asm and
    the eager random kernel). Imported only for a file that imports it (torch is then loaded)."""
    try:
        from torch._inductor.runtime import triton_helpers
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError:
        return {}
    return {n: "fn" for n, v in vars(triton_helpers).items()
            if not n.startswith("_") and "inline_asm" not in n and n != "rand_eager_kernel"
            and (isinstance(v, (JITFunction, InterpretedFunction)) or getattr(v, "__triton_builtin__", False))}


def _members(module: str) -> dict[str, str]:
    return _helpers() if module == "triton_helpers" else module_members()[module]


@functools.cache
def value_attrs() -> frozenset[str]:
    """Attributes of a value (a tensor, a pointer, a descriptor, a dtype) a kernel may use:
    ``tl.tensor``'s and ``tl.tensor_descriptor``'s public methods and properties and ``tl.dtype``'s
    ``is_*`` tests and widths, less what reaches the IR."""
    import triton.language as tl

    found = {n for n in dir(tl.tensor) if not n.startswith("_")} | {"dtype", "shape", "numel", "T"}
    found |= {n for n in dir(tl.tensor_descriptor) if not n.startswith("_")}  # a_desc.load([m, k])
    found |= {n for n in dir(tl.dtype) if n.startswith("is_")} | _DTYPE_ATTRS
    return frozenset(found - _VALUE_DENIED)


VALUE_ATTRS = value_attrs  # a function: the set is built from Triton on first use


# -------------------------------------------------------------------------------- the checks

def check(code: str, context: str | None = None) -> None:
    """Raise ``Unsafe`` for the first (by position) construct of ``code`` that is not allowed.
    ``context``: the captured file's text the code is spliced into (read, never run)."""
    _Checker(_parse(code, "the code"), _Context.of(context)).raise_first()


def check_variant_source(captured: str, variant: str, kernel: str) -> None:
    """Raise ``Unsafe`` unless ``variant`` (a stored whole-file source) is ``captured`` except for
    top-level functions and added imports and constants, each of which passes the allowlist with
    ``captured`` as context. The captured file's other statements may only be kept, in order, or
    dropped: they are the user's code, the rest is not."""
    before, after = _parse(captured, "the captured file"), _parse(variant, "the variant's source")
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
    _Checker(ast.Module(body=changed, type_ignores=[]), _Context.of(captured, before)).raise_first()


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
    return rule == "llm" or rule not in _tritune_rules(tuple(RULES))


@functools.cache
def _tritune_rules(names: tuple[str, ...]) -> frozenset[str]:
    return frozenset(names) - {"llm"}


def _parse(code: str, what: str) -> ast.Module:
    try:
        return ast.parse(code)
    except SyntaxError as e:
        raise Unsafe(e.lineno or 0, f"{what} does not parse: {e.msg}") from None
    except ValueError as e:  # null bytes
        raise Unsafe(0, f"{what} does not parse: {e}") from None


def _literal(node: ast.AST) -> bool:
    """``1``, ``-1.5``, ``"x"``, ``None``, ``True`` (no bytes, no containers)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool, str, type(None))


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ``["a", "b", "c"]``; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


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
        tree = tree or _parse(source, "the captured file")
        literal = _literal_targets(tree)
        kinds: dict[str, set[tuple[str, str]]] = {}
        for name, node in _bound_at_module(tree):
            kinds.setdefault(name, set()).add(cls._kind(name, node, literal))
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
    def _kind(name: str, node: ast.AST, literal: set[int]) -> tuple[str, str]:
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
        if id(node) in literal:  # `N = 4`, `N: tl.constexpr = tl.constexpr(4)` at top level
            return "const", ""
        return "other", ""

    def _is_jit(self, decorator: ast.expr) -> bool:
        parts = _chain(decorator.func if isinstance(decorator, ast.Call) else decorator)
        return parts is not None and len(parts) == 2 and self.modules.get(parts[0]) == "triton" \
            and parts[1] == "jit"


def _literal_targets(tree: ast.Module) -> set[int]:
    """The ids of the names that top-level ``NAME = literal`` / ``tl.constexpr(literal)`` bind."""
    found = set()
    for stmt in tree.body:
        value = stmt.value if isinstance(stmt, (ast.Assign, ast.AnnAssign)) else None
        if value is None or not (_literal(value) or _constexpr_of_literal(value)):
            continue
        for target in (stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]):
            if isinstance(target, ast.Name):
                found.add(id(target))
    return found


def _constexpr_of_literal(node: ast.AST) -> bool:
    """``tl.constexpr(literal)`` as written (which ``tl`` is, the caller checks)."""
    return isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
        and _chain(node.func) in (["tl", "constexpr"], ["triton", "language", "constexpr"]) \
        and _literal(node.args[0])


class _Checker:
    """The grammar, walked once over a reply's tree; ``problems`` in position order."""

    def __init__(self, tree: ast.Module, context: _Context):
        self.context = context
        self.problems: list[tuple[int, int, str]] = []  # line, order found (inner first), why
        self.modules: dict[str, str] = {}  # the reply's imports: name -> module
        self.jit: set[str] = set()  # the reply's @triton.jit functions
        self.constants: set[str] = set()
        self.bound: dict[str, int] = {}
        for stmt in tree.body:
            self._declare(stmt)
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                self._function(stmt)

    def raise_first(self) -> None:
        if self.problems:
            line, *_, reason = min(self.problems)
            raise Unsafe(line, reason)

    def bad(self, node: ast.AST, reason: str) -> None:
        self.problems.append((getattr(node, "lineno", 0) or 0, len(self.problems), reason))

    # ------------------------------------------------------------------------- module level
    def _declare(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str):
            return  # the docstring
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            for alias in stmt.names:
                one = type(stmt)(names=[alias], **({} if isinstance(stmt, ast.Import) else
                                                   {"module": stmt.module, "level": stmt.level}))
                text = ast.unparse(one)
                if text not in _IMPORTS:
                    self.bad(stmt, f"{text} is not allowed (allowed imports: {'; '.join(ALLOWED_IMPORTS)})")
                    continue
                name, module = _IMPORTS[text]
                if self._bind(stmt, name, "module", module):
                    self.modules[name] = module
        elif isinstance(stmt, ast.FunctionDef):
            if self._bind(stmt, stmt.name, "jit"):
                self.jit.add(stmt.name)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self._constant(stmt)
        else:
            what = "a call" if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) else \
                _WORDS.get(type(stmt), f"a {type(stmt).__name__} statement")
            self.bad(stmt, f"{what} at module level is not allowed (only the allowed imports, constants and "
                           "@triton.jit functions)")

    def _bind(self, node: ast.AST, name: str, kind: str, module: str = "") -> bool:
        """A module-level name of the reply; False (and a problem) when it may not be bound."""
        context = self.context
        if name.startswith("__"):
            self.bad(node, f"name {name} is not allowed (dunder names reach the interpreter's internals)")
        elif name in SAFE_BUILTINS:
            self.bad(node, f"binding {name} is not allowed (it is a builtin kernels use)")
        elif name in self.bound and not (kind == "module" and self.modules.get(name) == module):
            self.bad(node, f"binding {name} again is not allowed (bound on line {self.bound[name]})")
        elif name in context.bound and not (kind == "module" and context.modules.get(name) == module) \
                and not (kind == "jit" and name in context.jit):
            self.bad(node, f"binding {name} is not allowed (the captured file binds {name} itself)")
        else:
            self.bound.setdefault(name, node.lineno)
            return True
        return False

    def _constant(self, stmt: ast.Assign | ast.AnnAssign) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        if len(targets) != 1 or not isinstance(targets[0], ast.Name):
            self.bad(stmt, "a module-level assignment binds one name to a literal")
            return
        name = targets[0].id
        if isinstance(stmt, ast.AnnAssign) and not self._is(stmt.annotation, "tl", "constexpr"):
            self.bad(stmt.annotation, f"the annotation of {name} must be tl.constexpr")
        value = stmt.value
        if value is None or not (_literal(value) or (_constexpr_of_literal(value) and self._is(value.func, "tl",
                                                                                                "constexpr"))):
            self.bad(value or stmt, f"the value of {name} must be a literal or tl.constexpr(literal)")
        elif self._bind(stmt, name, "const"):
            self.constants.add(name)

    def _module_of(self, name: str) -> str | None:
        return self.modules.get(name) or (self.context.modules.get(name) if name not in self.bound else None)

    def _is(self, node: ast.AST, module: str, member: str) -> bool:
        """Whether ``node`` is ``module.member`` (``tl.constexpr``) through any name bound to it."""
        parts = _chain(node)
        if parts is None:
            return False
        if len(parts) == 3 and self._module_of(parts[0]) == "triton" and parts[1] == "language":
            parts = ["tl", parts[2]]
        elif len(parts) == 2:
            parts = [self._module_of(parts[0]) or "", parts[1]]
        return parts == [module, member]

    def _function(self, fn: ast.FunctionDef) -> None:
        kept = self.context.jit.get(fn.name, set())
        decorators = [d for d in fn.decorator_list if ast.dump(d) not in kept]  # the user's own, unchanged
        if not fn.decorator_list or not self._is_jit(fn.decorator_list[-1]):
            self.bad(fn, f"function {fn.name} is not allowed: a reply holds only @triton.jit functions "
                         "(@triton.jit innermost)")
        for i, decorator in enumerate(decorators):
            self._decorator(decorator, last=i == len(decorators) - 1)
        args = fn.args
        if args.vararg or args.kwarg:
            self.bad(fn, f"{fn.name} takes *args or **kwargs: not allowed")
        params = [*args.posonlyargs, *args.args, *args.kwonlyargs]
        for arg in params:
            if arg.arg.startswith("__"):
                self.bad(arg, f"parameter {arg.arg} is not allowed (a dunder name)")
            if arg.annotation is not None and not self._is(arg.annotation, "tl", "constexpr"):
                self.bad(arg.annotation, f"the annotation of {arg.arg} must be tl.constexpr (annotations run at "
                                         "import)")
        for default in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
            if not _literal(default):
                self.bad(default, "a default value must be a literal (defaults run at import)")
        if fn.returns is not None:
            self.bad(fn.returns, f"the return annotation of {fn.name} is not allowed (annotations run at import)")
        local = {a.arg for a in params}
        for node in ast.walk(ast.Module(body=fn.body, type_ignores=[])):
            if isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                local.add(node.id)
        _Body(self, fn.name, frozenset(local)).statements(fn.body)

    def _is_jit(self, decorator: ast.expr) -> bool:
        return self._is(decorator.func if isinstance(decorator, ast.Call) else decorator, "triton", "jit")

    def _decorator(self, decorator: ast.expr, last: bool) -> None:
        if not (last and self._is_jit(decorator)):
            self.bad(decorator, f"decorator {ast.unparse(decorator)} is not allowed (only @triton.jit, or the "
                                "kernel's own decorators unchanged: a decorator runs at import)")
            return
        if isinstance(decorator, ast.Call):
            if decorator.args:
                self.bad(decorator, "triton.jit takes keyword arguments only as a decorator")
            for kw in decorator.keywords:
                value = kw.value
                values = value.elts if isinstance(value, (ast.List, ast.Tuple)) else [value]
                if kw.arg not in _JIT_KWARGS:
                    self.bad(value, f"triton.jit's argument {kw.arg} is not allowed (allowed: "
                                    f"{', '.join(sorted(_JIT_KWARGS))})")
                elif not all(_literal(v) for v in values):
                    self.bad(value, f"triton.jit's {kw.arg} must be a literal or a list of literals")

    # ------------------------------------------------------------------------------ names
    def resolve(self, name: str) -> tuple[str, str]:
        """A module-level name a kernel uses -> (kind, what): ``module`` (which), ``jit``,
        ``const``, ``builtin``; ("", "") when it is none of them."""
        if name in self.modules:
            return "module", self.modules[name]
        if name in self.jit:
            return "jit", name
        if name in self.constants:
            return "const", name
        if name in self.bound:
            return "", ""
        context = self.context
        if name in context.modules:
            return "module", context.modules[name]
        if name in context.jit:
            return "jit", name
        if name in context.constants:
            return "const", name
        if name in SAFE_BUILTINS and name not in context.bound:
            return "builtin", name
        return "", ""


class _Body:
    """A kernel body's statements and expressions; ``local``: its parameters and the names it
    assigns (Python makes those local throughout the function)."""

    def __init__(self, checker: _Checker, kernel: str, local: frozenset[str]):
        self.checker, self.kernel, self.local = checker, kernel, local
        self.bad = checker.bad

    def statements(self, body: list[ast.stmt]) -> None:
        for stmt in body:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                self.target(target)
            self.expr(stmt.value)
        elif isinstance(stmt, ast.AugAssign):
            self.target(stmt.target)
            self.expr(stmt.value)
        elif isinstance(stmt, ast.AnnAssign):
            self.target(stmt.target)
            if not self.checker._is(stmt.annotation, "tl", "constexpr"):
                self.bad(stmt.annotation, "an annotation in a kernel must be tl.constexpr")
            if stmt.value is not None:
                self.expr(stmt.value)
        elif isinstance(stmt, (ast.Expr, ast.Return)):
            if stmt.value is not None:
                self.expr(stmt.value)
        elif isinstance(stmt, (ast.If, ast.While)):
            self.expr(stmt.test)
            self.statements(stmt.body)
            self.statements(stmt.orelse)
        elif isinstance(stmt, ast.For):
            self.target(stmt.target)
            if not (isinstance(stmt.iter, ast.Call) and self.callee(stmt.iter.func) in _LOOPS):
                self.bad(stmt.iter, "a kernel loops only over range, tl.range or tl.static_range")
            self.expr(stmt.iter)
            self.statements(stmt.body)
            self.statements(stmt.orelse)
        elif isinstance(stmt, ast.Assert):
            self.expr(stmt.test)
            if stmt.msg is not None and not _literal(stmt.msg):
                self.bad(stmt.msg, "an assert's message must be a literal")
        elif not isinstance(stmt, (ast.Pass, ast.Break, ast.Continue)):
            self.bad(stmt, f"{_WORDS.get(type(stmt), type(stmt).__name__)} is not allowed in a kernel")

    def target(self, node: ast.expr) -> None:
        if isinstance(node, ast.Name):
            if node.id.startswith("__"):
                self.bad(node, f"name {node.id} is not allowed (a dunder name)")
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                self.target(elt)
        else:
            self.bad(node, f"assigning to {ast.unparse(node)} is not allowed (a kernel assigns to names only)")

    # ------------------------------------------------------------------------ expressions
    def expr(self, node: ast.expr) -> None:
        if isinstance(node, ast.Constant):
            return
        if isinstance(node, ast.Name):
            self.name(node)
        elif isinstance(node, ast.Attribute):
            self.attribute(node)
        elif isinstance(node, ast.Call):
            self.call(node)
        elif isinstance(node, ast.Subscript):
            self.subscript(node)
        elif isinstance(node, (ast.Tuple, ast.List)):
            for elt in node.elts:
                if isinstance(elt, ast.Starred):
                    self.bad(elt, "a starred value is not allowed in a kernel")
                else:
                    self.expr(elt)
        elif isinstance(node, (ast.BinOp, ast.UnaryOp, ast.BoolOp, ast.Compare, ast.IfExp)):
            for child in ast.iter_child_nodes(node):
                if isinstance(child, ast.expr):
                    self.expr(child)
        else:
            self.bad(node, f"{_WORDS.get(type(node), type(node).__name__)} is not allowed in a kernel")

    def name(self, node: ast.Name) -> None:
        name = node.id
        if name.startswith("__"):
            self.bad(node, f"name {name} is not allowed (dunder names reach the interpreter's internals)")
        elif name in self.local:
            return
        kind, what = self.checker.resolve(name)
        if kind == "module":
            self.bad(node, f"module {name} may only be used as {name}.member")
        elif kind == "builtin":
            self.bad(node, f"builtin {name} may only be called")
        elif not kind and not name.startswith("__"):
            self.bad(node, f"name {name} is not allowed in kernel {self.kernel} (not a parameter, a local, a "
                           "constant, a @triton.jit function or an allowed module)")

    def chain(self, node: ast.Attribute) -> str | None:
        """What a chain from a module reaches (``fn``, ``dtype``, ``const``, ``enum``, a module),
        with a problem for each step outside ``module_members()``; None: not a chain from a module
        (a value's attribute), or refused."""
        parts = _chain(node)
        if parts is None or parts[0] in self.local:
            return None
        kind, where = self.checker.resolve(parts[0])
        if kind != "module":
            return None
        for i, part in enumerate(parts[1:], 1):
            shown = ".".join(parts[:i + 1])
            if where == "enum":
                where = "const" if part in _ENUMS.get(parts[i - 1], ()) else ""
            elif where in ("fn", "dtype", "const"):
                if part not in value_attrs() or where == "fn":
                    self.bad(node, f"{shown} is not allowed (not a public attribute of a value)")
                    return "refused"
                where = "const"
            else:
                members = _members(where)
                where = members.get(part, "")
                if where == "" and part in _DENIED:
                    self.bad(node, f"{shown} is not allowed ({_DENIED[part]})")
                    return "refused"
            if not where:
                self.bad(node, f"{shown} is not allowed (not in Triton's public kernel API)")
                return "refused"
        if where in module_members() or where == "triton_helpers":
            self.bad(node, f"{'.'.join(parts)} is a module: use one of its functions")
            return "refused"
        return where

    def attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if attr.startswith("_"):
            self.bad(node, f"attribute {attr} is not allowed (dunder and private attributes reach the "
                           "interpreter's and Triton's internals)")
            return
        if self.chain(node) is not None:
            return
        self.expr(node.value)  # first: of open(...).read, open is the problem to report
        if attr not in value_attrs():
            self.bad(node, f"attribute {attr} is not allowed ({ast.unparse(node)}: a value's attributes are "
                           "tl.tensor's and tl.dtype's public ones)")

    def callee(self, func: ast.expr) -> tuple[str, str] | None:
        """What a call calls: ("builtin", name), ("jit", name), ("tl", member) and the like for a
        chain from a module, ("value", method); None when it may not be called (a problem added)."""
        if isinstance(func, ast.Name):
            if func.id in self.local:
                self.bad(func, f"calling {func.id} is not allowed (a parameter or local is not a function)")
                return None
            kind, what = self.checker.resolve(func.id)
            if kind in ("builtin", "jit"):
                return kind, what
            self.name(func) if kind != "module" else self.bad(func, f"module {func.id} is not callable")
            if kind == "const":
                self.bad(func, f"calling {func.id} is not allowed (a constant)")
            return None
        if isinstance(func, ast.Attribute):
            if func.attr.startswith("_"):
                self.attribute(func)
                return None
            reached = self.chain(func)
            if reached == "fn":
                parts = _chain(func)
                return self.checker.resolve(parts[0])[1] if len(parts) == 2 else "tl", parts[-1]
            if reached is not None:
                if reached != "refused":
                    self.bad(func, f"{ast.unparse(func)} is not callable")
                return None
            self.attribute(func)
            return "value", func.attr
        self.expr(func)
        self.bad(func, f"calling {ast.unparse(func)} is not allowed (a kernel calls functions by name)")
        return None

    def call(self, node: ast.Call) -> None:
        callee = self.callee(node.func)
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                if callee is None or callee[0] in ("builtin", "jit", "value"):
                    self.bad(arg, "a starred argument is allowed only in calls of Triton's functions")
                else:
                    self.expr(arg.value)
            else:
                self.expr(arg)
        for kw in node.keywords:
            if kw.arg is None:
                self.bad(kw.value, "a **keyword argument is not allowed")
            elif kw.arg.startswith("_"):
                self.bad(kw.value, f"keyword argument {kw.arg} is not allowed (Triton's internals)")
            else:
                self.expr(kw.value)

    def subscript(self, node: ast.Subscript) -> None:
        base = node.value
        ok = (isinstance(base, ast.Name) and base.id in self.local) or isinstance(base, ast.Subscript) \
            or (isinstance(base, ast.Attribute) and self._value_attribute(base)) \
            or (isinstance(base, ast.Call) and self._api_call(base)) \
            or (isinstance(base, (ast.BinOp, ast.Compare, ast.UnaryOp, ast.BoolOp))  # (offs < n)[None, :]
                and not any(isinstance(c, (ast.List, ast.Tuple)) for c in ast.iter_child_nodes(base)))
        if not ok:
            self.bad(node, f"subscript of {ast.unparse(base)} is not allowed (only of tensors, pointers and "
                           "their shapes)")
            return
        self.expr(base)
        self.index(node.slice)

    def _value_attribute(self, node: ast.Attribute) -> bool:
        parts = _chain(node)
        return parts is None or parts[0] in self.local

    def _api_call(self, node: ast.Call) -> bool:
        """A call of Triton's API or of a value's method (what a kernel subscripts), not of a
        builtin or a jit function."""
        func = node.func
        if not isinstance(func, ast.Attribute):
            return False
        parts = _chain(func)
        return parts is None or parts[0] in self.local or self.checker.resolve(parts[0])[0] == "module"

    def index(self, node: ast.expr) -> None:
        if isinstance(node, ast.Slice):
            for part in (node.lower, node.upper, node.step):
                if part is not None:
                    self.expr(part)
        elif isinstance(node, ast.Tuple):
            for elt in node.elts:
                self.index(elt)
        else:
            self.expr(node)
