"""The allowlist a model's ``run(...)`` launcher passes before it is written into a module.

``tritune generate --llm`` keeps one piece of host code from a reply: ``run``, which allocates the
outputs and launches the reply's kernels. Host code is not a kernel: it runs in the worker when
tritune verifies the module and in the user's program once ``kernel.py`` ships, so it may be
nothing but launch arithmetic. ``check_launcher(code, kernels, inputs, constants)`` reads ``code``
(its syntax tree, never run) and raises ``sandbox.Unsafe`` (``line N: what``) unless it is exactly
one ``def run(<one plain parameter per input of the spec>):`` whose body holds only:

* assignments to plain local names (a name, or a tuple of names unpacking a shape) of values of
  one of these kinds, each name keeping its kind:
  - number: literals, parameters that are scalars, the module's literal constants,
    ``x.numel() x.dim() x.ndim x.element_size() x.is_contiguous() x.stride(i) x.size(i)``,
    ``s[i]`` of a shape, ``+ - * // %``, unary ``-``, comparisons, ``and or not``,
    ``min max len``, ``triton.cdiv``, ``triton.next_power_of_2``, ``a if c else b``;
  - shape: ``x.shape``, ``x.size()``, ``x.stride()``, tuples of numbers, slices and ``+`` of shapes;
  - dtype: ``x.dtype``, ``torch.<dtype>``; device: ``x.device``;
  - tensor: the parameters that are tensors; ``torch.empty``, ``torch.zeros`` (a shape, or numbers;
    ``dtype=``, ``device=``), ``torch.empty_like``, ``torch.zeros_like``, ``torch.empty_strided``,
    ``x.new_empty``, ``x.new_zeros``; the views ``x.contiguous()``, ``x.view(...)``,
    ``x.reshape(...)`` (a shape, numbers, or for ``view`` a dtype);
* kernel launches, as statements: ``kernel[grid](args..., NAME=number)``, ``kernel`` one of the
  reply's ``@triton.jit`` kernels, each argument a tensor or a number, each keyword one of that
  kernel's parameters or a launch option (``OPTIONS``); the grid a tuple of one to three numbers
  (or a name bound to one), or ``lambda meta: (...)`` whose numbers may also read
  ``meta["NAME"]``, NAME one of the kernel's ``tl.constexpr`` parameters (not a tensor's values);
* ``if`` on a number, ``return`` of tensors (one, or a tuple or list), ``pass``, a docstring.

Nothing else: no other call, attribute, subscript or name; no import, nested ``def``, lambda but
the grid's, default value, annotation, decorator, loop, ``with``, ``try``, ``global``, walrus,
comprehension or f-string; no assignment into a tensor or an attribute; no arithmetic on tensors
(a torch op would compute the result on the host). Every name resolves to a parameter, a local
bound above, a constant or kernel of the module, or the ``torch``/``triton`` root of an allowed
call. Numbers never come from a tensor's values (no ``.item()``, no subscript of a tensor), so a
launcher cannot branch on the data it is given. Loops are refused: a launch repeated over a range
is one launch with a larger grid.
"""

from __future__ import annotations

import ast
from typing import Mapping, NoReturn, Sequence

from tritune.allowlist.sandbox import Unsafe, parse

# kinds of values
NUMBER, SHAPE, TENSOR, DTYPE, DEVICE, META, OTHER = "number", "shape", "tensor", "dtype", "device", "meta", "other"

OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")  # launch options besides the kernel's parameters
DTYPES = frozenset({"float16", "bfloat16", "float32", "float64", "half", "float", "double", "int8", "int16",
                    "int32", "int64", "uint8", "bool", "long", "int", "short", "float8_e4m3fn", "float8_e5m2"})
_ALLOCATORS = frozenset({"empty", "zeros"})  # torch.X(shape or numbers, dtype=, device=)
_LIKE = frozenset({"empty_like", "zeros_like"})  # torch.X(tensor, dtype=, device=)
_NEW = frozenset({"new_empty", "new_zeros"})  # x.X(shape or numbers, dtype=, device=)
_NUMBER_METHODS = frozenset({"numel", "dim", "element_size", "is_contiguous"})  # x.X() -> number
_INDEXED_METHODS = frozenset({"stride", "size"})  # x.X() -> shape, x.X(i) -> number
_VIEWS = frozenset({"view", "reshape"})
_TENSOR_ATTRIBUTES = {"shape": SHAPE, "dtype": DTYPE, "device": DEVICE, "ndim": NUMBER}
_ARITHMETIC = (ast.Add, ast.Sub, ast.Mult, ast.FloorDiv, ast.Mod)
_COMPARISONS = (ast.Eq, ast.NotEq, ast.Lt, ast.LtE, ast.Gt, ast.GtE)
_BUILTINS = frozenset({"min", "max", "len"})
# names the launcher relies on: the module may not bind them otherwise (``assemble`` checks)
RESERVED = frozenset({"torch", "triton", "run"}) | _BUILTINS

# the rules in the model's words, for the prompt (check_launcher is what enforces them)
LAUNCHER_RULES = """\
`run(...)` is checked too and rejected, unrun, unless it is only launch arithmetic:
- `def run(a, b, ...)`: one plain parameter per input of `reference`, no defaults, annotations or decorators.
- local names bound to: sizes (`x.shape`, `x.shape[i]`, `x.numel()`, `x.dim()`, `x.stride(i)`,
  `x.size(i)`, literals, module constants, `+ - * // %`, `min`, `max`, `triton.cdiv`,
  `triton.next_power_of_2`, tuples of those), `x.dtype`, `torch.float32`-style dtypes, `x.device`;
- outputs from `torch.empty`, `torch.empty_like`, `torch.zeros`, `torch.zeros_like`,
  `torch.empty_strided`, `x.new_empty`, `x.new_zeros` (shape, `dtype=`, `device=` only), and the views
  `x.contiguous()`, `x.view(...)`, `x.reshape(...)`;
- launches `kernel[grid](tensors and sizes..., NAME=size)` of your @triton.jit kernels (NAME one of
  the kernel's parameters, or num_warps, num_stages, num_ctas, maxnreg), the grid a tuple of one to
  three sizes or `lambda meta: (triton.cdiv(n, meta["BLOCK"]),)`;
- `if` on sizes, dtypes or devices; `return` of the output tensor(s).
Nothing else in run(): no other torch call or tensor arithmetic (the kernels compute everything), no
loops, imports, nested functions, other lambdas, getattr, open, or subscripts of anything but a shape.
"""


def check_launcher(code: str, kernels: Mapping[str, Sequence[str]], inputs: Sequence[str],
                   constants: Sequence[str] = (), constexprs: Mapping[str, Sequence[str]] | None = None) -> None:
    """Raise ``Unsafe`` unless ``code`` is one ``run`` launcher of the allowed form (module doc).

    ``kernels``: the module's kernel names -> their parameter names; ``inputs``: the kind of each of
    ``run``'s parameters (``TENSOR``, ``NUMBER``, else ``OTHER``: a value run may not use);
    ``constants``: the module's names bound to literal numbers; ``constexprs``: kernel name -> its
    ``tl.constexpr`` parameters, the only ones its grid lambda may read (``meta["BLOCK"]``: the
    other entries of ``meta`` are the launch's tensors, and a grid must not depend on their values);
    None: any parameter."""
    tree = parse(code, "run()")
    if len(tree.body) != 1 or not isinstance(tree.body[0], ast.FunctionDef) or tree.body[0].name != "run":
        raise Unsafe(_line(tree.body[0] if tree.body else tree),
                     "the launcher must be one def run(...) and nothing else")
    readable = dict(kernels) if constexprs is None else {name: constexprs.get(name, ()) for name in kernels}
    _Launcher(dict(kernels), list(inputs), frozenset(constants), readable).function(tree.body[0])


class _Launcher:
    """The kinds of run()'s names, statement by statement; ``refuse`` on the first thing outside the grammar."""

    def __init__(self, kernels: dict[str, Sequence[str]], inputs: list[str], constants: frozenset[str],
                 readable: dict[str, Sequence[str]]) -> None:
        self.kernels, self.inputs, self.constants, self.readable = kernels, inputs, constants, readable
        self.kinds: dict[str, str] = {}
        self.meta: str | None = None  # the grid lambda's parameter, inside it
        self.meta_names: Sequence[str] = ()  # what it may read: the launched kernel's constexprs

    # ---------------------------------------------------------------------------- statements

    def function(self, node: ast.FunctionDef) -> None:
        args = node.args
        if node.decorator_list:
            _refuse(node.decorator_list[0], "run() may have no decorator")
        if node.returns is not None or args.vararg or args.kwarg or args.kwonlyargs or args.defaults \
                or args.kw_defaults:
            _refuse(node, "run() takes plain positional parameters only: no defaults, annotations, *args or **kwargs")
        params = args.posonlyargs + args.args
        if len(params) != len(self.inputs):
            _refuse(node, f"run() must take the reference's {len(self.inputs)} argument(s), not {len(params)}")
        for param, kind in zip(params, self.inputs):
            if param.annotation is not None:
                _refuse(param, "run() takes plain positional parameters only: no defaults, annotations, "
                               "*args or **kwargs")
            self.bind(param, param.arg, kind)
        body = node.body
        if body and _docstring(body[0]):
            body = body[1:]
        self.block(body)

    def block(self, statements: list[ast.stmt]) -> None:
        for statement in statements:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Assign):
            if len(node.targets) != 1:
                _refuse(node, "one target per assignment")
            self.assign(node.targets[0], node.value)
        elif isinstance(node, ast.AugAssign):
            if not isinstance(node.target, ast.Name) or not isinstance(node.op, _ARITHMETIC):
                _refuse(node, "an augmented assignment only as `n += size` to a local name")
            self.expect(node.value, NUMBER)
            if self.name(node.target) != NUMBER:
                _refuse(node, f"{node.target.id} is not a size")
        elif isinstance(node, ast.Expr):
            self.launch(node.value)
        elif isinstance(node, ast.If):
            self.expect(node.test, NUMBER)
            self.block(node.body)
            self.block(node.orelse)
        elif isinstance(node, ast.Return):
            self.returned(node)
        elif not isinstance(node, ast.Pass):
            _refuse(node, f"{_STATEMENTS.get(type(node), type(node).__name__)} is not allowed in run()")

    def assign(self, target: ast.expr, value: ast.expr) -> None:
        if isinstance(target, ast.Name):
            self.bind(target, target.id, self.kind(value))
            return
        if not isinstance(target, ast.Tuple) or not all(isinstance(t, ast.Name) for t in target.elts):
            _refuse(target, "assignment only to local names (never into a tensor, a subscript or an attribute)")
        if isinstance(value, ast.Tuple) and len(value.elts) == len(target.elts):
            kinds = [self.kind(v) for v in value.elts]
        elif self.kind(value) == SHAPE:
            kinds = [NUMBER] * len(target.elts)
        else:
            _refuse(value, "a tuple of names unpacks a shape or a tuple of as many values only")
        for name, kind in zip(target.elts, kinds):
            self.bind(name, name.id, kind)

    def bind(self, node: ast.AST, name: str, kind: str) -> None:
        if _dunder(name) or name in RESERVED or name in self.kernels or name in self.constants:
            _refuse(node, f"run() may not bind the name {name}")
        if kind == META:
            _refuse(node, "the grid lambda's meta is read as meta[\"NAME\"] only")
        known = self.kinds.get(name)
        if known is not None and known != kind:
            _refuse(node, f"{name} was a {known}, now a {kind}: one kind per name")
        self.kinds[name] = kind

    def launch(self, node: ast.expr) -> None:
        """``kernel[grid](args..., NAME=number)``, the only statement that is an expression."""
        if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Subscript)
                and isinstance(node.func.value, ast.Name) and node.func.value.id in self.kernels):
            self.kind(node)  # what in it is refused, if anything: the more precise reason
            _refuse(node, "an expression statement in run() must be a launch kernel[grid](...) of one of "
                          "the module's @triton.jit kernels")
        kernel = node.func.value.id
        self.grid(node.func.slice, kernel)
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                _refuse(arg, "no *arguments in a launch")
            if self.kind(arg) not in (TENSOR, NUMBER):
                _refuse(arg, "a launch passes tensors and sizes only")
        for keyword in node.keywords:
            if keyword.arg is None:
                _refuse(keyword, "no **arguments in a launch")
            if keyword.arg not in self.kernels[kernel] and keyword.arg not in OPTIONS:
                _refuse(keyword, f"{keyword.arg}= is neither a parameter of {kernel} nor a launch option "
                                 f"({', '.join(OPTIONS)})")
            self.expect(keyword.value, NUMBER)

    def grid(self, node: ast.expr, kernel: str) -> None:
        if isinstance(node, ast.Lambda):
            args = node.args
            if (len(args.args) != 1 or args.posonlyargs or args.vararg or args.kwarg or args.kwonlyargs
                    or args.defaults or args.kw_defaults):
                _refuse(node, "a grid lambda takes one plain parameter: lambda meta: (...)")
            meta = args.args[0].arg
            if meta in self.kinds or meta in self.constants or meta in self.kernels or meta in RESERVED \
                    or _dunder(meta):
                _refuse(node, f"the grid lambda's parameter {meta} hides another name")
            if isinstance(node.body, ast.Lambda):
                _refuse(node.body, "a grid lambda returns a tuple of sizes")
            self.meta, self.meta_names = meta, self.readable[kernel]
            try:
                self.grid(node.body, kernel)
            finally:
                self.meta, self.meta_names = None, ()
            return
        elements = node.elts if isinstance(node, ast.Tuple) else None
        if elements is not None and not 1 <= len(elements) <= 3:
            _refuse(node, "a grid has one to three sizes")
        self.expect(node, SHAPE, "a grid is a tuple of sizes or lambda meta: (...)")

    def returned(self, node: ast.Return) -> None:
        value = node.value
        values = value.elts if isinstance(value, (ast.Tuple, ast.List)) else [value]
        if value is None or not values:
            _refuse(node, "run() returns its output tensor(s)")
        for v in values:
            self.expect(v, TENSOR, "run() returns tensors only (its outputs, one or a tuple or list)")

    # --------------------------------------------------------------------------- expressions

    def expect(self, node: ast.expr, kind: str, why: str | None = None) -> None:
        found = self.kind(node)
        if found != kind:
            _refuse(node, why or f"a {kind} is needed here, not a {found}")

    def kind(self, node: ast.expr) -> str:
        """The kind of ``node``'s value; ``refuse`` for anything outside the grammar."""
        if isinstance(node, ast.Constant):
            if isinstance(node.value, (bool, int, float)):
                return NUMBER
            _refuse(node, f"a {type(node.value).__name__} literal is not allowed in run(): sizes only")
        if isinstance(node, ast.Name):
            return self.name(node)
        if isinstance(node, ast.Attribute):
            return self.attribute(node)
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        if isinstance(node, ast.BinOp):
            left, right = self.kind(node.left), self.kind(node.right)
            if isinstance(node.op, _ARITHMETIC) and left == right == NUMBER:
                return NUMBER
            if isinstance(node.op, ast.Add) and left == right == SHAPE:
                return SHAPE
            _refuse(node, f"arithmetic on a {left} and a {right}: run() computes sizes only "
                          "(+ - * // % of sizes, + of shapes)")
        if isinstance(node, ast.UnaryOp):
            self.expect(node.operand, NUMBER, "- and not apply to sizes only")
            return NUMBER
        if isinstance(node, ast.BoolOp):
            for value in node.values:
                self.expect(value, NUMBER, "and/or apply to sizes and comparisons only")
            return NUMBER
        if isinstance(node, ast.Compare):
            for op in node.ops:
                if not isinstance(op, _COMPARISONS):
                    _refuse(node, "comparisons are == != < <= > >= only")
            for operand in [node.left, *node.comparators]:
                if self.kind(operand) not in (NUMBER, SHAPE, DTYPE, DEVICE):
                    _refuse(operand, "comparisons of sizes, shapes, dtypes and devices only")
            return NUMBER
        if isinstance(node, ast.IfExp):
            self.expect(node.test, NUMBER)
            kind = self.kind(node.body)
            self.expect(node.orelse, kind, "both branches of `a if c else b` must be of one kind")
            return kind
        if isinstance(node, ast.Tuple):
            for element in node.elts:
                self.expect(element, NUMBER, "a tuple in run() holds sizes only")
            return SHAPE
        _refuse(node, f"{_EXPRESSIONS.get(type(node), type(node).__name__)} is not allowed in run()")

    def name(self, node: ast.Name) -> str:
        name = node.id
        if name == self.meta:
            return META
        if name in self.kinds:
            kind = self.kinds[name]
            if kind == OTHER:
                _refuse(node, f"{name} is an input run() cannot use (neither a tensor nor a number)")
            return kind
        if name in self.constants:
            return NUMBER
        if name in ("torch", "triton"):
            _refuse(node, f"{name} may be used only in the calls and dtypes the rules list")
        if name in self.kernels:
            _refuse(node, f"the kernel {name} may only be launched: {name}[grid](...)")
        _refuse(node, f"{name} is not a parameter, a local bound above or a constant of the module")

    def attribute(self, node: ast.Attribute) -> str:
        if isinstance(node.value, ast.Name) and node.value.id == "torch":  # never a local: RESERVED
            if node.attr in DTYPES:
                return DTYPE
            _refuse(node, f"torch.{node.attr} is not allowed in run()")
        base = self.kind(node.value)  # what is refused inside first: the innermost reason
        if base == TENSOR and not _dunder(node.attr) and node.attr in _TENSOR_ATTRIBUTES:
            return _TENSOR_ATTRIBUTES[node.attr]
        _refuse(node, f"the attribute .{node.attr} is not allowed in run()")

    def subscript(self, node: ast.Subscript) -> str:
        base = self.kind(node.value)
        index = node.slice
        if base == META:
            if isinstance(index, ast.Constant) and isinstance(index.value, str) and index.value in self.meta_names:
                return NUMBER
            _refuse(node, 'the grid lambda reads meta["NAME"] only, NAME a tl.constexpr parameter of the kernel')
        if base != SHAPE:
            _refuse(node, "a subscript of anything but a shape (x.shape[i]) is not allowed in run()")
        if isinstance(index, ast.Slice):
            for part in (index.lower, index.upper, index.step):
                if part is not None:
                    self.expect(part, NUMBER)
            return SHAPE
        self.expect(index, NUMBER)
        return NUMBER

    def call(self, node: ast.Call) -> str:
        func = node.func
        for arg in node.args:
            if isinstance(arg, ast.Starred):
                _refuse(arg, "no *arguments in run()")
        for keyword in node.keywords:
            if keyword.arg is None:
                _refuse(keyword, "no **arguments in run()")
        if isinstance(func, ast.Name) and func.id in _BUILTINS:  # never a local: RESERVED
            return self.builtin(node, func.id)
        if isinstance(func, ast.Attribute) and isinstance(func.value, ast.Name) \
                and func.value.id in ("torch", "triton"):  # never locals: RESERVED
            return self.module_call(node, f"{func.value.id}.{func.attr}")
        if isinstance(func, ast.Attribute):
            if self.kind(func.value) == TENSOR and not _dunder(func.attr):
                return self.method(node, func.attr)
        elif not isinstance(func, ast.Name):
            self.kind(func)  # what is refused inside first: the innermost reason
        _refuse(node, f"the call {_callee(func)}(...) is not allowed in run()")

    def builtin(self, node: ast.Call, name: str) -> str:
        if node.keywords:
            _refuse(node, f"{name}() takes no keywords here")
        if name == "len":
            if len(node.args) != 1:
                _refuse(node, "len(shape) takes one shape")
            self.expect(node.args[0], SHAPE, "len() of a shape only")
            return NUMBER
        if len(node.args) < 2:
            _refuse(node, f"{name}() of two or more sizes")
        for arg in node.args:
            self.expect(arg, NUMBER, f"{name}() of sizes only")
        return NUMBER

    def module_call(self, node: ast.Call, name: str) -> str:
        if name in ("triton.cdiv", "triton.next_power_of_2"):
            wanted = 2 if name == "triton.cdiv" else 1
            if len(node.args) != wanted or node.keywords:
                _refuse(node, f"{name} takes {wanted} size(s)")
            for arg in node.args:
                self.expect(arg, NUMBER)
            return NUMBER
        attr = name.removeprefix("torch.")
        if name.startswith("torch.") and attr in _ALLOCATORS:
            self.sizes(node, node.args)
        elif name.startswith("torch.") and attr in _LIKE:
            if len(node.args) != 1:
                _refuse(node, f"{name} takes one tensor")
            self.expect(node.args[0], TENSOR)
        elif name == "torch.empty_strided":
            if len(node.args) != 2:
                _refuse(node, "torch.empty_strided takes a shape and strides")
            for arg in node.args:
                self.expect(arg, SHAPE)
        else:
            _refuse(node, f"{name} is not allowed in run(): the kernels compute; run() allocates and launches")
        self.allocation_keywords(node)
        return TENSOR

    def method(self, node: ast.Call, name: str) -> str:
        args = node.args
        if name in _NUMBER_METHODS or name == "contiguous":
            if args or node.keywords:
                _refuse(node, f".{name}() takes no arguments")
            return TENSOR if name == "contiguous" else NUMBER
        if name in _INDEXED_METHODS:
            if node.keywords or len(args) > 1:
                _refuse(node, f".{name}() or .{name}(i) only")
            if not args:
                return SHAPE
            self.expect(args[0], NUMBER)
            return NUMBER
        if name in _VIEWS:
            if node.keywords:
                _refuse(node, f".{name}() takes no keywords")
            if name == "view" and len(args) == 1 and self.kind(args[0]) == DTYPE:
                return TENSOR
            self.sizes(node, args)
            return TENSOR
        if name in _NEW:
            self.sizes(node, args)
            self.allocation_keywords(node)
            return TENSOR
        _refuse(node, f"the method .{name}() is not allowed in run()")

    def sizes(self, node: ast.Call, args: list[ast.expr]) -> None:
        """One shape, or one or more numbers."""
        kinds = [self.kind(arg) for arg in args]
        if kinds == [SHAPE] or (kinds and all(kind == NUMBER for kind in kinds)):
            return
        _refuse(node, "a shape is one tuple of sizes, or sizes as arguments")

    def allocation_keywords(self, node: ast.Call) -> None:
        for keyword in node.keywords:
            want = {"dtype": DTYPE, "device": DEVICE}.get(keyword.arg)
            if want is None:
                _refuse(keyword, f"{keyword.arg}= is not allowed: allocations take dtype= and device= only")
            self.expect(keyword.value, want)


# ------------------------------------------------------------------------------------ helpers

_STATEMENTS = {
    ast.Import: "an import", ast.ImportFrom: "an import", ast.FunctionDef: "a nested def",
    ast.AsyncFunctionDef: "a nested def", ast.ClassDef: "a class", ast.For: "a loop", ast.While: "a loop",
    ast.AsyncFor: "a loop", ast.With: "a with statement", ast.AsyncWith: "a with statement",
    ast.Try: "a try statement", ast.Global: "global", ast.Nonlocal: "nonlocal", ast.Delete: "del",
    ast.Raise: "raise", ast.Assert: "assert", ast.AnnAssign: "an annotated assignment",
}
_EXPRESSIONS = {
    ast.Lambda: "a lambda (but a launch's grid)", ast.NamedExpr: "the walrus :=", ast.JoinedStr: "an f-string",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator", ast.List: "a list", ast.Dict: "a dict", ast.Set: "a set",
    ast.Starred: "a starred value", ast.Await: "await", ast.Yield: "yield", ast.YieldFrom: "yield",
}


def _refuse(node: ast.AST, reason: str) -> NoReturn:
    raise Unsafe(_line(node), reason)


def _line(node: ast.AST) -> int:
    return getattr(node, "lineno", 0) or 0


def _dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _callee(func: ast.expr) -> str:
    try:
        text = ast.unparse(func)
    except Exception:  # noqa: BLE001 - a name for a message only
        text = type(func).__name__
    return text if len(text) <= 60 else text[:57] + "..."
