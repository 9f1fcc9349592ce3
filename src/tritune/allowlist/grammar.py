"""The grammar untrusted kernel code is checked against (``allowlist.sandbox`` says what it allows and
why): ``Checker(tree, context).problems`` walks a reply's tree once, never running any of it, and
lists what is not allowed by position (line, order found, reason)."""
from __future__ import annotations

import ast
from typing import Any

from tritune.allowlist.kernel_api import DENIED, ENUMS, SAFE_BUILTINS, members, module_members, value_attrs

# the import statements a reply may hold, as ast.unparse writes each, and the module each binds
IMPORTS = {
    "import triton": ("triton", "triton"),
    "import triton.language as tl": ("tl", "tl"),
    "import math": ("math", "math"),
    "from triton.language.extra import libdevice": ("libdevice", "libdevice"),
    "from triton.language.extra.cuda import libdevice": ("libdevice", "libdevice"),
}

_JIT_KWARGS = frozenset({"do_not_specialize", "do_not_specialize_on_alignment", "debug", "noinline"})
_LOOPS = frozenset({("builtin", "range"), ("api", "tl.range"), ("api", "tl.static_range"),
                    ("api", "triton.language.range"), ("api", "triton.language.static_range")})
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


def literal(node: ast.AST) -> bool:
    """``1``, ``-1.5``, ``"x"``, ``None``, ``True`` (no bytes, no containers)."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
        return isinstance(node, ast.Constant) and type(node.value) in (int, float)
    return isinstance(node, ast.Constant) and type(node.value) in (int, float, bool, str, type(None))


def chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ``["a", "b", "c"]``; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    return [node.id, *reversed(parts)] if isinstance(node, ast.Name) else None


def constexpr_of_literal(node: ast.AST) -> bool:
    """``tl.constexpr(literal)`` as written (which ``tl`` is, the caller checks)."""
    return isinstance(node, ast.Call) and len(node.args) == 1 and not node.keywords \
        and chain(node.func) in (["tl", "constexpr"], ["triton", "language", "constexpr"]) \
        and literal(node.args[0])


class Checker:
    """The grammar, walked once over a reply's tree; ``problems`` in position order."""

    def __init__(self, tree: ast.Module, context: Any):  # sandbox._Context: what the captured file binds
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
                if text not in IMPORTS:
                    self.bad(stmt, f"{text} is not allowed (allowed imports: {'; '.join(IMPORTS)})")
                    continue
                name, module = IMPORTS[text]
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
        if value is None or not (literal(value) or (constexpr_of_literal(value) and self._is(value.func, "tl",
                                                                                                "constexpr"))):
            self.bad(value or stmt, f"the value of {name} must be a literal or tl.constexpr(literal)")
        elif self._bind(stmt, name, "const"):
            self.constants.add(name)

    def _module_of(self, name: str) -> str | None:
        return self.modules.get(name) or (self.context.modules.get(name) if name not in self.bound else None)

    def _is(self, node: ast.AST, module: str, member: str) -> bool:
        """Whether ``node`` is ``module.member`` (``tl.constexpr``) through any name bound to it."""
        parts = chain(node)
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
            if not literal(default):
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
                elif not all(literal(v) for v in values):
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

    def __init__(self, checker: Checker, kernel: str, local: frozenset[str]):
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
            if stmt.msg is not None and not literal(stmt.msg):
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
        parts = chain(node)
        if parts is None or parts[0] in self.local:
            return None
        kind, where = self.checker.resolve(parts[0])
        if kind != "module":
            return None
        for i, part in enumerate(parts[1:], 1):
            shown = ".".join(parts[:i + 1])
            if where == "enum":
                where = "const" if part in ENUMS.get(parts[i - 1], ()) else ""
            elif where in ("fn", "dtype", "const"):
                if part not in value_attrs() or where == "fn":
                    self.bad(node, f"{shown} is not allowed (not a public attribute of a value)")
                    return "refused"
                where = "const"
            else:
                table = members(where)
                where = table.get(part, "")
                if where == "" and part in DENIED:
                    self.bad(node, f"{shown} is not allowed ({DENIED[part]})")
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
        """What a call calls: ("builtin", name), ("jit", name), ("api", "tl.load") for a chain from
        a module, ("value", method); None when it may not be called (a problem added)."""
        if isinstance(func, ast.Name):
            if func.id in self.local:
                self.bad(func, f"calling {func.id} is not allowed (a parameter or local is not a function)")
                return None
            kind, what = self.checker.resolve(func.id)
            if kind in ("builtin", "jit"):
                return kind, what
            if kind == "module":
                self.bad(func, f"module {func.id} is not callable")
            else:
                self.name(func)
            if kind == "const":
                self.bad(func, f"calling {func.id} is not allowed (a constant)")
            return None
        if isinstance(func, ast.Attribute):
            if func.attr.startswith("_"):
                self.attribute(func)
                return None
            reached = self.chain(func)
            if reached == "fn":
                parts = chain(func)
                return "api", ".".join([self.checker.resolve(parts[0])[1], *parts[1:]])  # "tl.range"
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
        parts = chain(node)
        return parts is None or parts[0] in self.local

    def _api_call(self, node: ast.Call) -> bool:
        """A call of Triton's API or of a value's method (what a kernel subscripts), not of a
        builtin or a jit function."""
        func = node.func
        if not isinstance(func, ast.Attribute):
            return False
        parts = chain(func)
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
