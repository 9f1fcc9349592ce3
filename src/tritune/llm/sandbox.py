"""The check a model's reply passes before anything of it runs: its syntax tree, read, never run.

A reply is untrusted code. ``check(code)`` raises ``Unsafe`` (one line: ``line N: what``) unless
the code is only this:

* at module level: imports of ``ALLOWED_IMPORTS`` (any alias; ``from triton import jit``), function
  definitions, constants (literals, constants above, arithmetic, tuples/lists/dicts of those,
  ``tl.constexpr(...)``, dtypes such as ``tl.float32``) and strings (the docstring). No call, loop,
  ``if`` (``if __name__ == "__main__":`` included), ``with``, ``try`` or class; no name bound twice.
* decorators (they run at import): ``triton.jit`` (keyword arguments that are constants),
  ``triton.autotune(configs=[triton.Config(...)], key=[...])`` and ``triton.heuristics({name:
  lambda args: ...})``, whose lambdas may only read the launch's arguments and call
  ``triton.cdiv``-like helpers (a lambda that ran torch would compute the output beside the kernel).
  Default values and annotations (they run at import too): constants, dtypes, ``tl.constexpr``.
* anywhere: none of ``FORBIDDEN_NAMES``, no dunder name or attribute and no private attribute
  (``x.__class__``, ``torch._C``: the interpreter's internals), no ``str.format`` (it reads
  attributes named in a string), no import, ``global`` or ``nonlocal`` inside a function, no
  assignment into a module (``tl.load = ...``), and no attribute chain from an imported module
  through ``TORCH_FORBIDDEN`` (files, network, native code), ``TRITON_FORBIDDEN`` (Triton's
  compiler, launcher, settings, hooks and caches) or a standard-library module that a module
  happens to import (``tl.core.inspect``, ``torch.nn.modules.module.torch``).
* kernel bodies (``@triton.jit`` functions) never refer to torch (a kernel that calls torch is a
  fallback, not a kernel) nor to the module's other, plain functions (Triton would run them while
  compiling). Plain functions (a ``run(...)`` launcher) may allocate with torch: tritune never
  calls them and nothing in a reply that passes can.

A reply of functions alone may name things of the module it is spliced into (``libdevice``,
``triton_helpers``); check the reply, not the spliced module, whose own imports are the user's.
"""
from __future__ import annotations

import ast
import sys

ALLOWED_IMPORTS = ("triton", "triton.language", "torch", "math")

FORBIDDEN_NAMES = frozenset({
    "os", "sys", "subprocess", "socket", "ctypes", "importlib", "builtins", "open", "eval", "exec",
    "compile", "__import__", "globals", "locals", "vars", "getattr", "setattr", "delattr", "input",
    "breakpoint", "exit", "quit", "memoryview", "__builtins__",
    "help",  # pydoc's pager starts a process
})

# torch attributes a reply may not reach, with why (checked at every step of a chain from torch)
TORCH_FORBIDDEN = {
    "load": "it reads files", "save": "it writes files", "from_file": "it reads files",
    "serialization": "it reads and writes files", "hub": "it downloads code",
    "ops": "it reaches native operators", "classes": "it reaches native classes",
    "library": "it registers native operators", "cpp_extension": "it compiles and loads native code",
    "jit": "it loads and compiles TorchScript", "package": "it reads and writes packages",
    "compile": "it compiles and caches code", "export": "it writes and loads programs",
    "onnx": "it writes files", "profiler": "it writes traces",
    "distributed": "it opens network connections", "multiprocessing": "it starts processes",
}
# Triton's modules and objects behind a kernel: checked at every step of any chain from a module
TRITON_FORBIDDEN = {
    "runtime": "it reaches Triton's launcher, driver and caches",
    "driver": "it reaches Triton's driver", "compiler": "it reaches Triton's compiler",
    "knobs": "it changes Triton's settings and hooks", "backends": "it reaches Triton's backends",
    "testing": "it runs benchmarks and processes", "tools": "it runs Triton's tools",
    "ir": "it reaches Triton's compiler", "semantic": "it reaches Triton's compiler",
    "target_info": "it reaches Triton's driver", "JITCallable": "it reaches Triton's launcher",
    "JITFunction": "it reaches Triton's launcher",
}
# attributes of any object: under TRITON_INTERPRET=1 a kernel's pointer is a tl.tensor whose
# handle holds a numpy array, and numpy writes files
OBJECT_FORBIDDEN = {"handle": "it reaches the interpreter's arrays", "tofile": "it writes files",
                    "dump": "it writes files"}
# a module's imports are its attributes: tl.core.inspect, torch.nn.modules.module.torch
_REACHED_MODULES = (set(sys.stdlib_module_names) | {"torch", "triton"}) - {"math", "random"}

_TL = "triton.language"
_DTYPES = frozenset({
    "bfloat16", "float16", "float32", "float64", "float8e4b15", "float8e4b8", "float8e4nv",
    "float8e5", "float8e5b16", "int1", "int8", "int16", "int32", "int64", "uint8", "uint16",
    "uint32", "uint64", "void", "bool", "complex64", "complex128", "half", "float", "double",
    "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "long", "int", "short",
})
_MATH_CONSTANTS = frozenset({"math.pi", "math.e", "math.tau", "math.inf", "math.nan"})
_USUAL_NAMES = {"triton": "triton", "tl": _TL, "torch": "torch", "math": "math"}
_CONSTEXPR = (f"{_TL}.constexpr", f"{_TL}.core.constexpr")
# the submodules `from M import name` may bind: those names are modules, never values
_SUBMODULES = frozenset({"language", "extra", "cuda", "hip", "libdevice", "math", "core", "random",
                         "standard", "nn", "linalg", "fft", "special", "functional"})
# no hooks (they run Python), no cache_results (it writes Triton's cache)
_AUTOTUNE_KWARGS = frozenset({"configs", "key", "reset_to_zero", "restore_value", "warmup", "rep",
                              "use_cuda_graph"})
_CONFIG_KWARGS = frozenset({"kwargs", "num_warps", "num_stages", "num_ctas", "maxnreg"})
_JIT_KWARGS = frozenset({"version", "do_not_specialize", "do_not_specialize_on_alignment", "debug",
                         "noinline"})  # repr/launch_metadata are callables
_SAFE_BUILTINS = frozenset({"min", "max", "int", "float", "bool", "abs", "len", "round", "range"})
_READ_ONLY_METHODS = frozenset({"numel", "stride", "size", "dim", "element_size", "is_contiguous"})
_LAUNCH_HELPERS = frozenset({"triton.cdiv", "triton.next_power_of_2"})
_TYPE_NAMES = frozenset({"int", "float", "bool", "str", "bytes", "tuple", "list", "dict", "None"})
_STATEMENT_WORDS = {
    ast.Expr: "an expression", ast.If: "an if statement", ast.With: "a with statement",
    ast.Try: "a try statement", ast.For: "a loop", ast.While: "a loop", ast.ClassDef: "a class",
    ast.AugAssign: "an augmented assignment", ast.Delete: "a del statement",
    ast.AsyncFunctionDef: "an async function", ast.Assert: "an assert", ast.Raise: "a raise",
}
_MODULE_LEVEL = ("only imports of triton, triton.language, torch, math, functions, constants and "
                 "a docstring")


class Unsafe(ValueError):
    """A reply that may not run: ``line`` (1-based, 0 when unknown) and ``reason``; str() is
    ``line N: reason``."""

    def __init__(self, line: int, reason: str):
        super().__init__(line, reason)  # both in args: it pickles (a worker may raise it)
        self.line, self.reason = line, reason

    def __str__(self) -> str:
        return f"line {self.line}: {self.reason}"


# the rules in the model's words, for the prompt (the check above is what enforces them)
RULES = f"""\
Your code is checked before it runs and rejected, unrun, if it breaks these rules:
- module level: only imports of {", ".join(ALLOWED_IMPORTS)}, function definitions, constants
  (literals, arithmetic, tl.constexpr(...)) and a docstring; no other call, loop, if, with or try.
- decorators: only @triton.jit, @triton.autotune(configs=[triton.Config(...)], key=[...]) and
  @triton.heuristics({{"NAME": lambda args: ...}}); default values: constants or dtypes.
- a @triton.jit kernel never uses torch; plain functions may allocate with torch.
- no os, sys, subprocess, open, eval, exec, getattr, dunder names or attributes, private
  attributes, imports inside functions, global or nonlocal.
"""


def allowed_imports() -> tuple[str, ...]:
    """The modules a reply may import, for the prompt's rules."""
    return ALLOWED_IMPORTS


def check(code: str) -> None:
    """Raise ``Unsafe`` for the first (by position) construct of ``code`` that is not allowed."""
    try:
        tree = ast.parse(code)
    except SyntaxError as e:
        raise Unsafe(e.lineno or 0, f"does not parse: {e.msg}") from None
    except ValueError as e:  # null bytes
        raise Unsafe(0, f"does not parse: {e}") from None
    problems = _Checker(tree).problems
    if problems:
        line, *_, reason = min(problems)
        raise Unsafe(line, reason)


def _chain(node: ast.AST) -> list[str] | None:
    """``a.b.c`` -> ``["a", "b", "c"]``; None for anything else."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _root(node: ast.AST) -> ast.Name | None:
    """The name under ``a.b[i].c``."""
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        node = node.value
    return node if isinstance(node, ast.Name) else None


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


class _Checker:
    def __init__(self, tree: ast.Module):
        self.problems: list[tuple[int, int, int, int, str]] = []  # where (start, end), why
        # bound name -> what it is ("triton.language", "triton.jit"); a reply of functions alone
        # uses the usual names of the module it is spliced into
        self.imports: dict[str, str] = dict(_USUAL_NAMES)
        self.modules: set[str] = set(_USUAL_NAMES)  # bound names that are modules
        self.functions: dict[str, bool] = {}  # module-level function -> is it @triton.jit
        self.constants: set[str] = set()
        self.bound: dict[str, int] = {}  # module-level name -> line bound
        self.parents = {c: p for p in ast.walk(tree) for c in ast.iter_child_nodes(p)}
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                self.functions[stmt.name] = False
        for stmt in tree.body:
            self._statement(stmt)
        for stmt in tree.body:  # once every function is known to be @triton.jit or not
            if isinstance(stmt, ast.FunctionDef) and self.functions[stmt.name]:
                self._kernel_body(stmt)
        for node in ast.walk(tree):
            self._anywhere(node)

    def bad(self, node: ast.AST, reason: str) -> None:
        # sorted by start, then end: of a.__class__.__bases__, the inner __class__ comes first
        where = [getattr(node, f, None) or 0 for f in ("lineno", "col_offset", "end_lineno",
                                                       "end_col_offset")]
        self.problems.append((*where, reason))

    def qualname(self, node: ast.AST) -> str | None:
        """``tl.constexpr`` -> ``triton.language.constexpr`` when ``tl`` is imported."""
        parts = _chain(node)
        if parts is None or parts[0] not in self.imports:
            return None
        return ".".join([self.imports[parts[0]], *parts[1:]])

    # module level ------------------------------------------------------------------------------
    def _statement(self, stmt: ast.stmt) -> None:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self._import(stmt)
        elif isinstance(stmt, ast.FunctionDef):
            self._function(stmt)
        elif isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self._constant_definition(stmt)
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) \
                and isinstance(stmt.value.value, str):
            pass  # the docstring, or a string standing as a comment
        elif isinstance(stmt, ast.If) and "__name__" in {n.id for n in ast.walk(stmt.test)
                                                          if isinstance(n, ast.Name)}:
            self.bad(stmt, 'an if __name__ == "__main__": block is not allowed (a reply defines '
                           'functions and constants only)')
        else:
            what = _STATEMENT_WORDS.get(type(stmt), f"a {type(stmt).__name__} statement")
            if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
                what = "a call"
            self.bad(stmt, f"{what} at module level is not allowed ({_MODULE_LEVEL})")

    def _bind(self, node: ast.AST, name: str, what: str | None = None) -> None:
        """A module-level name; ``what`` is an import's target (importing it again is fine)."""
        if name in self.bound and not (what and self.imports.get(name) == what):
            self.bad(node, f"rebinding {name} is not allowed (bound on line {self.bound[name]})")
        elif name in self.imports and self.imports[name] != what:
            self.bad(node, f"rebinding {name} is not allowed (it names {self.imports[name]})")
        self.bound.setdefault(name, node.lineno)
        self._name_allowed(node, name)

    def _import(self, stmt: ast.Import | ast.ImportFrom) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                if self._module_allowed(stmt, alias.name):
                    bound = alias.asname or alias.name.split(".")[0]
                    target = alias.name if alias.asname else bound
                    self._bind(stmt, bound, target)
                    self.imports[bound] = target
                    self.modules.add(bound)
            return
        if stmt.level or not stmt.module:
            self.bad(stmt, "a relative import is not allowed (allowed: "
                           f"{', '.join(ALLOWED_IMPORTS)})")
            return
        if not self._module_allowed(stmt, stmt.module):
            return
        for alias in stmt.names:
            if alias.name == "*":
                self.bad(stmt, f"from {stmt.module} import * is not allowed (name what you use)")
                continue
            target = f"{stmt.module}.{alias.name}"
            reason = self._chain_reason(target.split("."), start=1)
            if reason:
                self.bad(stmt, f"import of {target} is not allowed ({reason})")
                continue
            bound = alias.asname or alias.name
            self._bind(stmt, bound, target)
            self.imports[bound] = target
            if alias.name in _SUBMODULES:
                self.modules.add(bound)

    def _module_allowed(self, stmt: ast.stmt, module: str) -> bool:
        # triton.language's own submodules (libdevice) are what kernels call
        if module in ALLOWED_IMPORTS or module.startswith(f"{_TL}."):
            reason = self._chain_reason(module.split("."), start=1)
            if not reason:
                return True
            self.bad(stmt, f"import of {module} is not allowed ({reason})")
            return False
        self.bad(stmt, f"import of {module} is not allowed (allowed: {', '.join(ALLOWED_IMPORTS)})")
        return False

    def _constant_definition(self, stmt: ast.Assign | ast.AnnAssign) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        names = []
        for target in targets:
            elts = target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]
            if not all(isinstance(e, ast.Name) for e in elts):
                self.bad(stmt, "an assignment at module level may only define plain names")
                return
            names += [e.id for e in elts]
        if isinstance(stmt, ast.AnnAssign):
            self._declaration(stmt.annotation, f"the annotation of {names[0]}")
        configs = stmt.value is not None and any(
            isinstance(n, ast.Call) and self.qualname(n.func) == "triton.Config"
            for n in ast.walk(stmt.value))
        if configs:  # CONFIGS = [triton.Config(...), ...] for triton.autotune(configs=CONFIGS)
            self._tuning_value(stmt.value, frozenset())
        elif stmt.value is not None:
            self._constant(stmt.value, f"the value of {', '.join(names)}")
        for name in names:
            self._bind(stmt, name)
            self.constants.add(name)

    def _constant(self, node: ast.AST, what: str, local: frozenset[str] = frozenset()) -> bool:
        """Literals, constants above, arithmetic, containers, ``tl.constexpr(...)``, dtypes."""
        ok = self._is_constant(node, local)
        if not ok:
            self.bad(node, f"{what} must be a constant (literals, constants defined above, "
                           "arithmetic, tl.constexpr(...), dtypes): it runs at import")
        return ok

    def _is_constant(self, node: ast.AST, local: frozenset[str]) -> bool:
        def each(nodes):
            return all(n is None or self._is_constant(n, local) for n in nodes)
        if isinstance(node, ast.Constant):
            return True
        if isinstance(node, ast.Name):
            return node.id in self.constants or node.id in local
        if isinstance(node, ast.UnaryOp):
            return self._is_constant(node.operand, local)
        if isinstance(node, ast.BinOp):
            return each([node.left, node.right])
        if isinstance(node, ast.BoolOp):
            return each(node.values)
        if isinstance(node, ast.Compare):
            return each([node.left, *node.comparators])
        if isinstance(node, ast.IfExp):
            return each([node.test, node.body, node.orelse])
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            return each(node.elts)
        if isinstance(node, ast.Dict):
            return each(node.keys) and each(node.values)
        if isinstance(node, ast.Call):
            return self.qualname(node.func) in _CONSTEXPR and each(node.args) \
                and each([k.value for k in node.keywords])
        name = self.qualname(node) or ""
        module, _, attr = name.rpartition(".")
        return (module in (_TL, "torch") and attr in _DTYPES) or name in _MATH_CONSTANTS

    def _declaration(self, node: ast.AST, what: str) -> None:
        """An annotation: a constant, a type's name, a chain from an import (``tl.constexpr``,
        ``torch.Tensor``), subscripts and unions of those."""
        def ok(n):
            if isinstance(n, ast.Name):
                return n.id in _TYPE_NAMES or n.id in self.imports or n.id in self.constants
            if isinstance(n, ast.Attribute):
                return self.qualname(n) is not None
            if isinstance(n, ast.Subscript):
                return ok(n.value) and ok(n.slice)
            if isinstance(n, ast.Tuple):
                return all(ok(e) for e in n.elts)
            if isinstance(n, ast.BinOp) and isinstance(n.op, ast.BitOr):
                return ok(n.left) and ok(n.right)
            return self._is_constant(n, frozenset())
        if not ok(node):
            self.bad(node, f"{what} must be a constant, a type or tl.constexpr (it runs at import)")

    # functions and their decorators --------------------------------------------------------------
    def _function(self, fn: ast.FunctionDef) -> None:
        self._bind(fn, fn.name)
        kinds = [self._decorator(d) for d in fn.decorator_list]
        self.functions[fn.name] = is_jit = "jit" in kinds
        if not is_jit and {"autotune", "heuristics"} & set(kinds):
            self.bad(fn, f"triton.autotune and triton.heuristics must decorate a @triton.jit "
                         f"function ({fn.name} is not one)")
        args = fn.args
        for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
            if arg is not None and arg.annotation is not None:
                self._declaration(arg.annotation, f"the annotation of {arg.arg}")
        positional = [*args.posonlyargs, *args.args]
        for arg, default in zip(positional[len(positional) - len(args.defaults):], args.defaults):
            self._constant(default, f"the default value of {arg.arg}")
        for arg, default in zip(args.kwonlyargs, args.kw_defaults):
            if default is not None:
                self._constant(default, f"the default value of {arg.arg}")
        if fn.returns is not None:
            self._declaration(fn.returns, f"the return annotation of {fn.name}")

    def _decorator(self, dec: ast.expr) -> str | None:
        call = dec if isinstance(dec, ast.Call) else None
        name = self.qualname(call.func if call else dec)
        if name == "triton.jit":
            for kw in call.keywords if call else []:
                if kw.arg not in _JIT_KWARGS:
                    self.bad(kw.value, f"triton.jit's argument {kw.arg} is not allowed (allowed: "
                                       f"{', '.join(sorted(_JIT_KWARGS))})")
                else:
                    self._constant(kw.value, f"triton.jit's {kw.arg}")
            if call and call.args:
                self.bad(call, "triton.jit takes keyword arguments only as a decorator")
            return "jit"
        if call and name == "triton.autotune":
            for arg in call.args:
                self._tuning_value(arg, frozenset())
            for kw in call.keywords:
                if kw.arg not in _AUTOTUNE_KWARGS:
                    self.bad(kw.value, f"triton.autotune's argument {kw.arg} is not allowed "
                                       f"(allowed: {', '.join(sorted(_AUTOTUNE_KWARGS))})")
                else:
                    self._tuning_value(kw.value, frozenset())
            return "autotune"
        if call and name == "triton.heuristics" and len(call.args) == 1 and not call.keywords \
                and isinstance(call.args[0], ast.Dict):
            table = call.args[0]
            for key, value in zip(table.keys, table.values):
                if not (isinstance(key, ast.Constant) and isinstance(key.value, str)):
                    self.bad(key or value, "triton.heuristics' keys must be parameter names")
                self._heuristic(value)
            return "heuristics"
        shown = ast.unparse(call.func if call else dec)
        self.bad(dec, f"decorator {shown} is not allowed (only triton.jit, triton.autotune and "
                      "triton.heuristics: a decorator runs at import)")
        return None

    def _tuning_value(self, node: ast.AST, local: frozenset[str]) -> None:
        """What triton.autotune takes: lists of ``triton.Config(...)`` (comprehensions too)."""
        if isinstance(node, (ast.List, ast.Tuple)):
            for elt in node.elts:
                self._tuning_value(elt, local)
        elif isinstance(node, ast.Call) and self.qualname(node.func) == "triton.Config":
            for arg in node.args:
                self._constant(arg, "triton.Config's argument", local)
            for kw in node.keywords:
                if kw.arg == "pre_hook" and isinstance(kw.value, ast.Constant) \
                        and kw.value.value is None:
                    continue
                if kw.arg not in _CONFIG_KWARGS:
                    self.bad(kw.value, f"triton.Config's argument {kw.arg} is not allowed "
                                       f"(allowed: {', '.join(sorted(_CONFIG_KWARGS))})")
                else:
                    self._constant(kw.value, f"triton.Config's {kw.arg}", local)
        elif isinstance(node, (ast.ListComp, ast.GeneratorExp)):
            for gen in node.generators:
                if isinstance(gen.iter, ast.Call) and isinstance(gen.iter.func, ast.Name) \
                        and gen.iter.func.id == "range" and not gen.iter.keywords:
                    for arg in gen.iter.args:
                        self._constant(arg, "range's argument", local)
                else:
                    self._constant(gen.iter, "a comprehension's source", local)
                local |= {n.id for n in ast.walk(gen.target) if isinstance(n, ast.Name)}
                for cond in gen.ifs:
                    self._constant(cond, "a comprehension's condition", local)
            self._tuning_value(node.elt, local)
        else:
            self._constant(node, "triton.autotune's argument", local)

    def _heuristic(self, node: ast.AST) -> None:
        """``lambda args: triton.next_power_of_2(args["N"])``: it runs at every launch, so it may
        read the arguments and compute, never call into torch or the module's functions."""
        if not isinstance(node, ast.Lambda):
            self.bad(node, "triton.heuristics' values must be lambdas")
            return
        local = {a.arg for a in [*node.args.posonlyargs, *node.args.args]}
        for n in ast.walk(node.body):
            if isinstance(n, ast.Name) and not (
                    n.id in local or n.id in self.constants or n.id in _SAFE_BUILTINS
                    or (n.id in self.imports and not self.imports[n.id].startswith("torch"))):
                self.bad(n, f"a heuristic may not use {n.id} (only its arguments, constants, "
                            f"{', '.join(sorted(_SAFE_BUILTINS))}, triton and math)")
            elif isinstance(n, ast.Call) and not (
                    (isinstance(n.func, ast.Name) and n.func.id in _SAFE_BUILTINS)
                    or self.qualname(n.func) in _LAUNCH_HELPERS
                    or (self.qualname(n.func) or "").startswith("math.")
                    or (isinstance(n.func, ast.Attribute) and self.qualname(n.func) is None
                        and n.func.attr in _READ_ONLY_METHODS)):
                self.bad(n, f"a heuristic may not call {ast.unparse(n.func)} (it runs at every "
                            "launch: only builtins like max, triton.cdiv, triton.next_power_of_2, "
                            "math and reads like numel())")
            elif isinstance(n, (ast.Lambda, ast.NamedExpr, ast.comprehension)):
                self.bad(n, "a heuristic must be one expression of its arguments")

    def _kernel_body(self, fn: ast.FunctionDef) -> None:
        torch_names = {"torch"} | {b for b, t in self.imports.items() if t.split(".")[0] == "torch"}
        for node in ast.walk(fn):
            if not isinstance(node, ast.Name):
                continue
            if node.id in torch_names:
                self.bad(node, f"kernel {fn.name} refers to torch ({node.id}): a kernel that "
                               "calls torch is a fallback, not a kernel")
            elif self.functions.get(node.id) is False:
                self.bad(node, f"kernel {fn.name} uses {node.id}, which is not a @triton.jit "
                               "function (Triton would run it while compiling)")

    # every node ----------------------------------------------------------------------------------
    def _anywhere(self, node: ast.AST) -> None:
        if isinstance(node, (ast.Import, ast.ImportFrom)) \
                and not isinstance(self.parents.get(node), ast.Module):
            self.bad(node, "an import inside a function is not allowed (imports belong at module "
                           "level)")
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            word = "global" if isinstance(node, ast.Global) else "nonlocal"
            self.bad(node, f"{word} is not allowed (a function may not rebind module names)")
        elif isinstance(node, (ast.ClassDef, ast.AsyncFunctionDef, ast.Await, ast.AsyncFor,
                               ast.AsyncWith)) and not isinstance(self.parents.get(node), ast.Module):
            self.bad(node, f"{_STATEMENT_WORDS.get(type(node), type(node).__name__)} is not "
                           "allowed in a reply")
        elif isinstance(node, ast.Name):
            self._name_allowed(node, node.id)
            self._name_use(node)
        elif isinstance(node, ast.Attribute):
            self._attribute(node)
        elif isinstance(node, (ast.FunctionDef, ast.Lambda)):
            if isinstance(node, ast.FunctionDef) and not isinstance(self.parents.get(node),
                                                                    ast.Module):
                self._local_binding(node, node.name)
            args = node.args
            for arg in [*args.posonlyargs, *args.args, *args.kwonlyargs, args.vararg, args.kwarg]:
                if arg is not None:
                    self._name_allowed(arg, arg.arg)
                    self._local_binding(arg, arg.arg)
        elif isinstance(node, ast.ExceptHandler) and node.name:
            self._name_allowed(node, node.name)
            self._local_binding(node, node.name)

    def _name_allowed(self, node: ast.AST, name: str) -> None:
        if name in FORBIDDEN_NAMES:
            self.bad(node, f"name {name} is not allowed (files, processes, network and the "
                           "interpreter's internals are off limits)")
        elif _dunder(name):
            self.bad(node, f"dunder name {name} is not allowed (it reaches the interpreter's "
                           "internals)")

    def _name_use(self, node: ast.Name) -> None:
        parent = self.parents.get(node)
        at_module = isinstance(parent, (ast.Assign, ast.AnnAssign)) \
            and isinstance(self.parents.get(parent), ast.Module)
        if isinstance(node.ctx, (ast.Store, ast.Del)) and not at_module:
            self._local_binding(node, node.id)
        elif isinstance(node.ctx, ast.Load) and node.id in self.modules and not (isinstance(parent, ast.Attribute)
                                              and parent.value is node):
            # m = torch; m.load(...) would hide the chain from the checks on attributes
            self.bad(node, f"module {node.id} may only be used as {node.id}.name")

    def _local_binding(self, node: ast.AST, name: str) -> None:
        """Inside a function: shadowing an import or a function would hide what a name is."""
        if name in self.imports or name in self.functions:
            self.bad(node, f"rebinding {name} is not allowed (it names an import or a function)")

    def _attribute(self, node: ast.Attribute) -> None:
        attr = node.attr
        if _dunder(attr):
            self.bad(node, f"attribute {attr} is not allowed (dunder attributes reach the "
                           "interpreter's internals)")
            return
        if attr.startswith("_"):
            self.bad(node, f"private attribute {attr} is not allowed ({ast.unparse(node)})")
            return
        if attr in FORBIDDEN_NAMES:
            self.bad(node, f"attribute {attr} is not allowed ({ast.unparse(node)}: files, "
                           "processes, network and the interpreter's internals are off limits)")
            return
        if attr in OBJECT_FORBIDDEN:
            self.bad(node, f"attribute {attr} is not allowed ({OBJECT_FORBIDDEN[attr]})")
            return
        if attr in ("format", "format_map"):
            self.bad(node, f"str.{attr} is not allowed (it reads attributes named in a string: "
                           "use an f-string)")
            return
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            root = _root(node)
            if root is not None and root.id in self.bound:
                self.bad(node, f"assigning to {ast.unparse(node)} is not allowed (it changes "
                               f"{root.id} for everything that uses it)")
        name = self.qualname(node)
        if name and not isinstance(self.parents.get(node), ast.Attribute):  # the whole chain once
            reason = self._chain_reason(name.split("."), start=1)
            if reason:
                self.bad(node, f"{ast.unparse(node)} is not allowed ({reason})")

    def _chain_reason(self, parts: list[str], start: int) -> str | None:
        """Why the chain ``parts`` (a qualified name) may not be used; None if it may."""
        from_torch = parts[0] == "torch"
        for i, part in enumerate(parts[start:], start):
            if part.startswith("_"):
                return f"{'.'.join(parts[:i + 1])} is private"
            if from_torch and part in TORCH_FORBIDDEN:
                return TORCH_FORBIDDEN[part]
            if part in TRITON_FORBIDDEN:
                return TRITON_FORBIDDEN[part]
            if part in _REACHED_MODULES or part in FORBIDDEN_NAMES:
                return f"it reaches module {part} through {'.'.join(parts[:i])}"
        return None
