"""broadcast-sum-to-dot (tolerance; tf32 variants fast-math): a sum over the shared axis of a
broadcast product is a matrix product, computed by ``tl.dot``::

    tl.sum(a[:, :, None] * b[None, :, :], axis=1)        ->  tl.dot(a, b, input_precision="ieee")
    tl.sum(a[:, None, :] * b[None, :, :], axis=2)        ->  tl.dot(a, tl.trans(b), ...)     b: [N, K]
    tl.sum(a[:, :, :, None] * b[:, None, :, :], axis=2)  ->  tl.dot(a, b, ...)   3-D: leading batch axis
    tl.sum(x[None, :] * W, axis=1)                       ->  GEMV, padded to a 16-column tl.dot (below)
    acc += tl.sum(<a matrix product>)                    ->  acc = tl.dot(a, b, acc, ...)  (fp32 only)

The pattern: ``tl.sum(X * Y, axis=r)`` written in the call (a literal axis, no ``keep_dims``, an
optional ``dtype=tl.<float>``), each factor ``e[...]`` with only ``:`` and ``None`` in the
subscript, or a bare ``e`` (broadcast from the left, as Triton does). The rule infers each
factor's shape and dtype from the kernel: ``tl.arange(0, NAME)`` with ``NAME`` a literal or a
constexpr, ``tl.zeros``/``tl.full``, loads of pointer parameters, ``.to``, elementwise arithmetic
(``_Infer`` lists what it follows); a value it does not follow is "not understood" and the rule
does not fire. Every product axis is then one of: the summed axis ``r`` (both factors: K), an axis
of X only (M), of Y only (N), of both (a batch axis: only the leading one, as ``tl.dot`` wants).

Legal when:
- axis ``r`` belongs to both factors, at most one axis to X only and one to Y only, no axis to
  neither, and any other axis both share is the leading batch axis. One free axis on each side is
  a matrix product (either factor's axes in either order: the one whose axis comes first in the
  result is ``tl.dot``'s left operand, ``tl.trans``/``tl.permute`` puts K where ``tl.dot`` wants
  it); a free axis on one side only is a matrix-vector product (GEMV);
- every ``tl.dot`` dimension (M, N, K; the GEMV's matrix side and K) is at least 16: from the
  launch's constexprs when known, refused when smaller, stated as a condition in ``why`` when not
  known (the static ``tritune rewrites``);
- both factors are float32, float16 or bfloat16 (or not known: ``why`` then states that it assumes
  fp32 inputs). Integer factors are refused: the original multiplies in the factors' type (int8
  products wrap at 8 bits before ``tl.sum`` widens them to int32) while ``tl.dot`` multiplies int8
  exactly into int32, and int16/32/64 have no ``tl.dot`` at all; integer results are verified
  exactly, so a rewrite that differs on overflow would be wrong, not merely reordered. float64 and
  fp8 factors are refused (not handled);
- the factors' expressions only read memory and compute (everything ``_Infer`` follows is free of
  side effects), so evaluating them in ``tl.dot``'s operand order instead of the product's is the
  same.

Numerics (verified against the tolerance table, not bitwise):
- fp32 factors: ``input_precision="ieee"``: every product and sum in fp32, like the original, in
  another order (and with fused multiply-adds). ``tf32x3`` and ``tf32`` are separate rewrites of
  class fast_math: tensor-core inputs rounded to tf32 (10-bit mantissa; tf32x3 recovers most of it
  with three products), so they are less accurate by design.
- fp16/bf16 factors: the original rounds each product to 16 bits and adds in 16 bits; ``tl.dot``
  multiplies exactly and adds in fp32, then the rule casts back (``.to(tl.float16)``), so the
  result has the original's dtype and is more accurate (only the final rounding). It differs
  from the baseline by the baseline's own rounding error: usually within the table's fp16/bf16
  entry, but a sum with cancellation can lose more than that in 16 bits (random [16 x 16] @
  [16 x 32] fp16 data: 4 of 512 outputs beyond it), and a kernel that adds such sums into an fp32
  value is held to the fp32 entry. The gate then rejects the rewrite: safe, if a pity. With
  ``dtype=tl.float32`` on the sum the result stays fp32.
- mixed float factors are cast to float32 first (exact), as Triton's promotion does for the product.

GEMV padding: ``tl.dot`` wants N >= 16, a matrix-vector product has N = 1. The vector ``v`` [K]
becomes P [K, 16] with ``P[:, 0] = v`` and every other column exactly zero (``tl.where``), and
``D = W @ P`` [N, 16]; ``D[:, 0]`` is the original sum (the same products, added in another order).
The other columns are ``W @ 0``: zero, or NaN where W holds an inf or NaN, so they are masked to
exact zeros by a second ``tl.where`` before the ``tl.sum`` over the 16 columns that takes column 0:
``x + 0.0 == x`` for every x (NaN stays NaN; only ``-0.0`` becomes ``+0.0``). A vector on the left
(``tl.sum(W * v[:, None], axis=0)``, W [K, N]) pads rows instead: ``P @ W`` with P [16, K]. This
costs 16x the multiply-adds; it pays on tensor cores (16-bit factors, tf32) where a dot of 16
columns costs what one column does, and the search measures whether it pays.

Accumulator: ``acc += tl.sum(...)`` becomes ``acc = tl.dot(a, b, acc, ...)`` only for a matrix
product whose sum is fp32 and an fp32 ``acc`` of the same shape: both add the same fp32 terms to
acc, in another order. For a 16-bit sum the original rounds the sum to 16 bits before adding it,
so the rule keeps ``acc += tl.dot(...).to(tl.float16)`` (the same rounding points); GEMV sums are
replaced in place too.

Launch facts read (``KernelSource.launch``, all optional): ``"constexprs"``: {name: value} of
the constexpr parameters (a constexpr the launch does not give takes its default), ``"dtypes"``:
{pointer parameter: torch dtype name without "torch.", e.g. "float16"} of the tensor arguments.

Parameters: ``precision`` ("ieee", "tf32x3", "tf32") and ``sites`` (indices of the kernel's
``tl.sum`` calls in source order; all that qualify unless given).
"""

from __future__ import annotations

import ast
import dataclasses

from tritune.rewrites.base import FAST_MATH, TF32, TOLERANCE, Edit, KernelSource, NotRewritable, Rewrite, dotted, keyword

PAD = 16  # every tl.dot dimension at least this (Triton 3.6 on sm_90 needs K >= 16; 16 is portable)
FLOATS = ("float32", "float16", "bfloat16")
PRECISIONS = {"ieee": TOLERANCE, "tf32x3": FAST_MATH, "tf32": TF32}
FAST_MATH_WHY = {"tf32x3": "fast-math: fp32 inputs as three tf32 products (close to fp32, not ieee)",
                 "tf32": "fast-math: fp32 inputs rounded to tf32 (10-bit mantissa)"}
INTEGER_WHY = ("integer factors: the original multiplies in the factors' type (int8 wraps) before tl.sum widens, "
               "tl.dot multiplies int8 exactly into int32 (and has no int16/32/64): results differ on overflow")
# tl.<name> -> torch dtype name
DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "bfloat16", "float64": "float64",
          "int1": "bool", "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64",
          "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
          "float8e4nv": "float8_e4m3fn", "float8e5": "float8_e5m2"}
TL_NAMES = {torch: tl for tl, torch in DTYPES.items()}
ELEMENTWISE = {"exp", "exp2", "log", "log2", "sqrt", "rsqrt", "abs", "sigmoid", "sin", "cos", "erf", "floor",
               "ceil", "fma", "maximum", "minimum", "where", "clamp"}
REDUCTIONS = {"sum", "max", "min"}


@dataclasses.dataclass(frozen=True)
class Value:
    """What the rule knows of one value of the kernel."""

    shape: tuple | None = None  # dims: int, or the source text of a size not known here; None: unknown
    dtype: str | None = None    # torch dtype name; "weak_int"/"weak_float" for a Python number
    pointee: str | None = None  # a pointer's element dtype
    const: int | None = None    # a compile-time integer


UNKNOWN = Value()


class BroadcastSumToDot:
    name = "broadcast-sum-to-dot"
    exact = TOLERANCE

    def rewrites(self, kernel: KernelSource) -> list[Rewrite]:
        sites, _ = self.sites(kernel)
        fp32 = any(site.dtype in ("float32", None) for site in sites)
        return [self._rewrite(kernel, sites, p) for p in PRECISIONS if p == "ieee" or fp32]

    def apply(self, kernel: KernelSource, params: dict) -> Rewrite:
        unknown = set(params) - {"precision", "sites"}
        if unknown:
            raise NotRewritable(f"{self.name} has no parameter {sorted(unknown)[0]!r}")
        precision = params.get("precision", "ieee")
        if precision not in PRECISIONS:
            raise NotRewritable(f"precision {precision!r} is not one of {sorted(PRECISIONS)}")
        sites, refused = self.sites(kernel)
        if "sites" in params:
            by_index = {site.index: site for site in sites}
            for index in params["sites"]:
                if index not in by_index:
                    raise NotRewritable(f"tl.sum #{index}: {refused.get(index, 'no such tl.sum in the kernel')}")
            sites = [by_index[i] for i in params["sites"]]
        return self._rewrite(kernel, sites, precision)

    def sites(self, kernel: KernelSource) -> tuple[list["Site"], dict[int, str]]:
        """The kernel's rewritable sums, and why each other ``tl.sum`` is not one (NotRewritable
        when none is)."""
        infer = _Infer(kernel)
        infer.block(kernel.function.body)
        sites, refused = [], {}
        for index, call in enumerate(kernel.calls("sum")):
            env, stmt = infer.seen.get(call, ({}, None))
            try:
                site = _site(kernel, call, index, env, stmt)
            except NotRewritable as why:
                refused[index] = f"line {call.lineno}: {why}"
                continue
            if sites and site.span[0] < sites[-1].span[1]:  # inside a sum already rewritten
                refused[index] = f"line {call.lineno}: inside the sum of line {sites[-1].line}"
                continue
            sites.append(site)
        if not sites:
            raise NotRewritable("; ".join(refused.values()) or "no tl.sum in the kernel")
        return sites, refused

    def _rewrite(self, kernel: KernelSource, sites: list["Site"], precision: str) -> Rewrite:
        why = "; ".join(site.why for site in sites)
        if precision in FAST_MATH_WHY:
            why = f"{FAST_MATH_WHY[precision]}; {why}"
        return Rewrite(rule=self.name, exact=PRECISIONS[precision], why=why,
                       source=kernel.edit(site.edit(precision) for site in sites),
                       params={"precision": precision, "sites": [site.index for site in sites]})


@dataclasses.dataclass(frozen=True)
class Site:
    """One ``tl.sum`` the rule rewrites: ``text`` replaces bytes ``span`` (the call, or the whole
    ``acc += ...`` statement), with ``{precision}`` to fill in."""

    index: int
    line: int
    span: tuple[int, int]
    text: str
    why: str
    dtype: str | None  # the factors' common dtype, None if not known

    def edit(self, precision: str) -> Edit:
        return Edit(*self.span, self.text.replace("{precision}", precision))


# --------------------------------------------------------------------------------- the site

def _site(kernel: KernelSource, call: ast.Call, index: int, env: dict, stmt: ast.stmt | None) -> Site:
    """The rewrite of one ``tl.sum`` call, or NotRewritable with the reason (module docstring)."""
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        raise NotRewritable("unpacked arguments")
    if {k.arg for k in call.keywords} - {"input", "axis", "keep_dims", "dtype"} or len(call.args) > 4:
        raise NotRewritable("arguments tl.sum does not take")
    product, axis = keyword(call, "input", 0), _int(keyword(call, "axis", 1))
    keep, want = keyword(call, "keep_dims", 2), keyword(call, "dtype", 3)
    if keep is not None and not (isinstance(keep, ast.Constant) and keep.value is False):
        raise NotRewritable("keep_dims: the result keeps the summed axis")
    if not (isinstance(product, ast.BinOp) and isinstance(product.op, ast.Mult)):
        raise NotRewritable("the summed value is not a product written in the call")
    if axis is None:
        raise NotRewritable("the axis is not a literal int")
    infer = _Infer(kernel, env)
    x, y = _factor(kernel, infer, product.left, "left"), _factor(kernel, infer, product.right, "right")
    rank = max(len(x.full), len(y.full))
    x, y = x.padded(rank), y.padded(rank)
    r = axis + rank if axis < 0 else axis
    if not 0 <= r < rank:
        raise NotRewritable(f"axis {axis} is not an axis of the rank-{rank} product")
    if not (x.full[r] and y.full[r]):
        raise NotRewritable(f"axis {axis} is not an axis of both factors (a broadcast axis, nothing to contract)")
    axes = [p for p in range(rank) if p != r]
    if any(not x.full[p] and not y.full[p] for p in axes):
        raise NotRewritable("an axis of neither factor")
    shared = [p for p in axes if x.full[p] and y.full[p]]
    if shared not in ([], [0]):
        raise NotRewritable("the factors share axes besides the summed one and a leading batch axis "
                            "(not a broadcast product)")
    conditions = _same_sizes(x, y, [r, *shared])
    free_x = [p for p in axes if x.full[p] and not y.full[p]]
    free_y = [p for p in axes if y.full[p] and not x.full[p]]
    if len(free_x) > 1 or len(free_y) > 1 or not (free_x or free_y):
        raise NotRewritable(f"factors of ranks {x.rank} and {y.rank} over {rank} axes are not a matrix or "
                            "matrix-vector product")
    dtype, casts, out = _dtypes(kernel, x, y, want)
    product = _Product(kernel, call, x, y, r, bool(shared), dotted(call.func).rsplit(".", 1)[0], casts, out,
                       conditions)
    text, span, what = (product.matmul(free_x[0], free_y[0], stmt, env) if free_x and free_y
                        else product.gemv((free_x or free_y)[0], matrix=x if free_x else y))
    if dtype is None:
        numerics = "assumes fp32 factors (dtype not known)"
    else:
        back = f", cast back to {out}" if out in ("float16", "bfloat16") else ""
        numerics = f"{dtype} factors, fp32 accumulation{back}"
    why = f"line {call.lineno}: tl.sum over the shared axis is a {what} ({numerics}"
    why += f"; if {', '.join(dict.fromkeys(conditions))})" if conditions else ")"
    return Site(index, call.lineno, span, text, why, dtype)


@dataclasses.dataclass(frozen=True)
class _Product:
    """A classified broadcast product ``x * y`` summed over ``r``, and how to write its dot."""

    kernel: KernelSource
    call: ast.Call
    x: "Factor"
    y: "Factor"
    r: int
    batch: bool  # product axis 0 is a batch axis of both factors
    lang: str  # the file's name for triton.language
    casts: dict  # side -> dtype to cast that factor to, or None
    out: str | None  # the sum's result dtype
    conditions: list  # shape conditions not known here, for ``why``

    def matmul(self, free_x: int, free_y: int, stmt: ast.stmt | None, env: dict) -> tuple[str, tuple, str]:
        """(text, span, what) of the matrix product: the factor whose free axis comes first in
        the result is tl.dot's left operand."""
        x, y, r, lang = self.x, self.y, self.r, self.lang
        (left, lfree), (right, rfree) = sorted([(x, free_x), (y, free_y)], key=lambda pair: pair[1])
        m, n, k = left.size(lfree), right.size(rfree), left.size(r)
        _check(self.conditions, {"M": m, "N": n, "K": k, "the other factor's K": right.size(r)})
        a = _oriented(lang, left, self.casts[left.side], self.batch, free_first=True, free=lfree, k=r)
        b = _oriented(lang, right, self.casts[right.side], self.batch, free_first=False, free=rfree, k=r)
        acc = _accumulator(stmt, self.call, env, self.out, (*left.batch_dims(self.batch), m, n))
        dot = f'{lang}.dot({a}, {b}{", " + acc if acc else ""}, input_precision="{{precision}}")'
        what = f"{'batched ' if self.batch else ''}matrix product [{m}, {k}] @ [{k}, {n}]"
        if acc:
            return f"{acc} = {dot}", self.kernel.span(stmt), f"{what} into {acc}"
        return _cast(dot, self.out, lang), self.kernel.span(self.call), what

    def gemv(self, free: int, matrix: "Factor") -> tuple[str, tuple, str]:
        """(text, span, what) of the matrix-vector product, padded to PAD columns (or rows)."""
        vector, r, lang, batch = (self.y if matrix is self.x else self.x), self.r, self.lang, self.batch
        n, k = matrix.size(free), matrix.size(r)
        _check(self.conditions, {"N": n, "K": k, "the vector's K": vector.size(r)})
        column = matrix.own(free) < matrix.own(r)  # W [N, K] @ P [K, 16]; else P [16, K] @ W [K, N]
        pad = ("[None, None, :]" if batch else "[None, :]") if column else ("[None, :, None]" if batch else "[:, None]")
        spread = ("[:, :, None]" if batch else "[:, None]") if column else ("[:, None, :]" if batch else "[None, :]")
        cast = self.casts[vector.side]
        vec = _with_cast(lang, vector, cast) if cast else _atom(vector.text, vector.node)
        padded = f"{lang}.where({lang}.arange(0, {PAD}){pad} == 0, {vec}{spread}, 0)"
        mat = _with_cast(lang, matrix, self.casts[matrix.side])
        dot = f'{lang}.dot({mat + ", " + padded if column else padded + ", " + mat}, input_precision="{{precision}}")'
        axis = (2 if batch else 1) if column else (1 if batch else 0)
        # the padding columns are W @ 0: NaN where W holds inf or NaN, so masked to exact zeros
        text = f"{lang}.sum({lang}.where({lang}.arange(0, {PAD}){pad} == 0, {dot}, 0.0), axis={axis})"
        shape = f"[{n}, {k}] @ [{k}]" if column else f"[{k}] @ [{k}, {n}]"
        what = f"{'batched ' if batch else ''}matrix-vector product {shape}, padded to {PAD}"
        return _cast(text, self.out, lang), self.kernel.span(self.call), what


@dataclasses.dataclass(frozen=True)
class Factor:
    """One factor of the product: the expression ``node`` (``text``) and, per product axis,
    whether it is one of the expression's own axes (``:``) or a broadcast one (``None``)."""

    side: str
    node: ast.expr
    text: str
    value: Value
    full: tuple[bool, ...]

    @property
    def rank(self) -> int:
        return len(self.value.shape)

    def padded(self, rank: int) -> "Factor":
        return dataclasses.replace(self, full=(False,) * (rank - len(self.full)) + self.full)

    def own(self, axis: int) -> int:
        """The expression's own axis at product axis ``axis``."""
        return sum(self.full[:axis])

    def size(self, axis: int):
        return self.value.shape[self.own(axis)]

    def batch_dims(self, batch: bool) -> tuple:
        return (self.value.shape[0],) if batch else ()


def _factor(kernel: KernelSource, infer: "_Infer", node: ast.expr, side: str) -> Factor:
    inner, full = node, None
    if isinstance(node, ast.Subscript):
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if all(_is_full(i) or _is_none(i) for i in items):
            inner, full = node.value, tuple(_is_full(i) for i in items)
    value = infer.value(inner)
    text = kernel.segment(inner)  # verbatim: a multi-line text lands inside the new call's brackets
    if value.shape is None:
        raise NotRewritable(f"the {side} factor's shape is not known ({text})")
    full = full if full is not None else (True,) * len(value.shape)
    if sum(full) != len(value.shape):
        raise NotRewritable(f"the {side} factor {text} has rank {len(value.shape)}, its subscript {sum(full)} axes")
    return Factor(side, inner, text, value, full)


def _dtypes(kernel: KernelSource, x: Factor, y: Factor, want: ast.expr | None) -> tuple[str | None, dict, str | None]:
    """(the factors' common dtype, the cast each side needs, the sum's result dtype); None: not
    known. Refuses integers and floats ``tl.dot`` is not used for here."""
    known = [f.value.dtype for f in (x, y) if f.value.dtype is not None]
    for d in known:
        if d == "bool" or "int" in d:
            raise NotRewritable(INTEGER_WHY)
        if d not in FLOATS:
            raise NotRewritable(f"{d} factors (not handled)")
    common = None if len(known) < 2 else known[0] if known[0] == known[1] else "float32"
    casts = {f.side: "float32" if common == "float32" and f.value.dtype != "float32" else None for f in (x, y)}
    out = common
    if want is not None:
        out = DTYPES.get((dotted(want) or "").rsplit(".", 1)[-1]) if _is_lang(kernel, want) else None
        if out not in FLOATS:
            raise NotRewritable(f"tl.sum(dtype={kernel.segment(want)}) is not a float dtype the rule handles")
    return common, casts, out


def _accumulator(stmt: ast.stmt | None, call: ast.Call, env: dict, out: str | None, shape: tuple) -> str | None:
    """``acc`` of ``acc += <this sum>`` when the dot may accumulate into it (module docstring)."""
    if not (isinstance(stmt, ast.AugAssign) and isinstance(stmt.op, ast.Add) and stmt.value is call
            and isinstance(stmt.target, ast.Name)):
        return None
    acc = env.get(stmt.target.id, UNKNOWN)
    if out != "float32" or acc.dtype != "float32" or acc.shape != tuple(shape):
        return None
    return stmt.target.id


def _oriented(lang: str, f: Factor, cast: str | None, batch: bool, *, free_first: bool, free: int, k: int) -> str:
    """The factor as ``tl.dot``'s left ([.., M, K]: free axis first) or right ([.., K, N]) operand."""
    text = _with_cast(lang, f, cast)
    if (f.own(free) < f.own(k)) == free_first:
        return text
    return f"{lang}.permute({text}, (0, 2, 1))" if batch else f"{lang}.trans({text})"


def _with_cast(lang: str, f: Factor, cast: str | None) -> str:
    # float16 x float32 (or x bfloat16): Triton's product promotes to fp32, exactly; tl.dot wants one dtype
    return f"{_atom(f.text, f.node)}.to({lang}.{TL_NAMES[cast]})" if cast else f.text


def _cast(text: str, out: str | None, lang: str) -> str:
    # tl.dot returns fp32 for fp16/bf16 factors; the original sum had their dtype
    return f"{text}.to({lang}.{TL_NAMES[out]})" if out in ("float16", "bfloat16") else text


def _atom(text: str, node: ast.expr) -> str:
    if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript, ast.Constant)):
        return text
    return f"({text})"


def _check(conditions: list[str], dims: dict) -> None:
    for name, size in dims.items():
        if isinstance(size, int):
            if size < PAD:
                raise NotRewritable(f"{name} = {size} < {PAD}: too small for tl.dot")
        else:
            conditions.append(f"{size} >= {PAD}")


def _same_sizes(x: Factor, y: Factor, axes: list[int]) -> list[str]:
    """Refuses a size-1 (broadcast) side of an axis both factors hold; the conditions for sizes
    not known to be equal (the original compiles only if they are, or one is 1)."""
    conditions = []
    for axis in axes:
        a, b = x.size(axis), y.size(axis)
        if a == b:
            continue
        if 1 in (a, b) or (isinstance(a, int) and isinstance(b, int)):
            raise NotRewritable(f"axis {axis} has sizes {a} and {b}: a broadcast, not a shared axis")
        conditions.append(f"{a} == {b}")
    return conditions


def _int(node: ast.expr | None) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _int(node.operand)
        return -inner if inner is not None else None
    return None


def _is_full(node: ast.expr) -> bool:
    return isinstance(node, ast.Slice) and node.lower is None and node.upper is None and node.step is None


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _is_lang(kernel: KernelSource, node: ast.expr) -> bool:
    name = dotted(node)
    return name is not None and "." in name and name.rsplit(".", 1)[0] in kernel.language


# ------------------------------------------------------------------------- shapes and dtypes

class _Infer:
    """Shapes and dtypes of the kernel's values, statement by statement (``seen``: the names'
    values where each ``tl.sum`` call is evaluated, and its statement).

    Follows: literals, parameters (constexpr values and pointer dtypes from the launch),
    arithmetic and comparisons (Triton's broadcasting, from the left), ``[:, None]`` subscripts,
    ``tl.arange``, ``tl.zeros``/``tl.full``, ``tl.load``, ``.to``/``tl.cast``, ``tl.program_id``,
    ``tl.sum``/``max``/``min``, ``tl.trans`` of a matrix, ``tl.reshape``/``tl.broadcast_to`` and the
    elementwise functions of ``ELEMENTWISE``. Anything else is unknown. Branches that bind a name
    to different values leave it unknown; a name a loop rebinds loses its compile-time value
    (Triton keeps a loop-carried value's type, so its shape and dtype stay)."""

    def __init__(self, kernel: KernelSource, env: dict | None = None) -> None:
        self.kernel = kernel
        self.seen: dict[ast.Call, tuple[dict, ast.stmt]] = {}
        if env is not None:
            self.env = env
            return
        launch = kernel.launch or {}
        consts = dict(_defaults(kernel.function)) if kernel.launch is not None else {}
        consts.update(launch.get("constexprs") or {})
        dtypes = launch.get("dtypes") or {}
        constexprs = kernel.constexpr_params()
        self.env = {}
        for name in kernel.params:
            value = consts.get(name) if name in constexprs else None
            self.env[name] = Value((), const=value if type(value) is int else None, pointee=dtypes.get(name))

    # statements ---------------------------------------------------------------------------
    def block(self, stmts: list[ast.stmt]) -> None:
        for stmt in stmts:
            self.statement(stmt)

    def statement(self, stmt: ast.stmt) -> None:
        for part in _evaluated(stmt):
            for node in ast.walk(part):
                if isinstance(node, ast.Call) and self.kernel.is_language(node.func, "sum"):
                    self.seen[node] = (dict(self.env), stmt)
        if isinstance(stmt, ast.If):
            before = self.env
            self.env = dict(before)
            self.block(stmt.body)
            body, self.env = self.env, dict(before)
            self.block(stmt.orelse)
            other = self.env
            self.env = {n: body[n] if body.get(n) == other.get(n) else UNKNOWN for n in body.keys() | other.keys()}
        elif isinstance(stmt, (ast.For, ast.While)):
            for name in {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}:
                if name in self.env:
                    self.env[name] = dataclasses.replace(self.env[name], const=None)
            if isinstance(stmt, ast.For):
                self.bind(stmt.target, Value((), "int32"))
            self.block(stmt.body)
            self.block(stmt.orelse)
        elif isinstance(stmt, ast.With):
            self.block(stmt.body)
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if isinstance(target, ast.Tuple) and isinstance(stmt.value, ast.Tuple) \
                        and len(target.elts) == len(stmt.value.elts):
                    values = [self.value(v) for v in stmt.value.elts]  # all before any binds: a, b = b, a
                    for t, v in zip(target.elts, values):
                        self.bind(t, v)
                else:
                    self.bind(target, self.value(stmt.value))
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            self.bind(stmt.target, self.value(stmt.value))
        elif isinstance(stmt, ast.AugAssign):
            self.bind(stmt.target, self.value(ast.BinOp(ast.Name(getattr(stmt.target, "id", ""), ast.Load()),
                                                        stmt.op, stmt.value)))

    def bind(self, target: ast.expr, value: Value) -> None:
        if isinstance(target, ast.Name):
            self.env[target.id] = value
        else:  # a tuple from a call, an attribute, a subscript: whatever it binds is not known
            for node in ast.walk(target):
                if isinstance(node, ast.Name):
                    self.env[node.id] = UNKNOWN

    # expressions --------------------------------------------------------------------------
    def value(self, node: ast.expr) -> Value:
        if isinstance(node, ast.Constant):
            if type(node.value) is int:
                return Value((), "weak_int", const=node.value)
            return Value((), "weak_float") if type(node.value) is float else UNKNOWN
        if isinstance(node, ast.Name):
            return self.env.get(node.id, UNKNOWN)
        if isinstance(node, ast.BinOp):
            return self.binop(node)
        if isinstance(node, ast.UnaryOp):
            v = self.value(node.operand)
            const = -v.const if isinstance(node.op, ast.USub) and v.const is not None else None
            return Value(v.shape, "bool" if isinstance(node.op, ast.Not) else v.dtype, const=const)
        if isinstance(node, ast.Compare):
            values = [self.value(n) for n in [node.left, *node.comparators]]
            return Value(_broadcast(*(v.shape for v in values)), "bool")
        if isinstance(node, ast.Subscript):
            return self.subscript(node)
        if isinstance(node, ast.Call):
            return self.call(node)
        return UNKNOWN

    def binop(self, node: ast.BinOp) -> Value:
        left, right = self.value(node.left), self.value(node.right)
        shape = _broadcast(left.shape, right.shape)
        if left.pointee or right.pointee:  # pointer arithmetic: a pointer plus an offset, nothing else
            if not isinstance(node.op, (ast.Add, ast.Sub)) or (left.pointee and right.pointee):
                return UNKNOWN
            return Value(shape, pointee=left.pointee or right.pointee)
        const = _fold(node.op, left.const, right.const)
        return Value(shape, _promote(left.dtype, right.dtype, isinstance(node.op, ast.Div)), const=const)

    def subscript(self, node: ast.Subscript) -> Value:
        v = self.value(node.value)
        items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if v.shape is None or not all(_is_full(i) or _is_none(i) for i in items) \
                or sum(map(_is_full, items)) != len(v.shape):
            return UNKNOWN
        dims = iter(v.shape)
        return Value(tuple(next(dims) if _is_full(i) else 1 for i in items), v.dtype, v.pointee)

    def call(self, node: ast.Call) -> Value:
        func = node.func
        if isinstance(func, ast.Attribute) and func.attr == "to" and not _is_lang(self.kernel, func):
            target = keyword(node, "dtype", 0)
            return Value(self.value(func.value).shape, self.dtype(target))  # x.to(tl.float32)
        name = (dotted(func) or "").rsplit(".", 1)[-1] if _is_lang(self.kernel, func) else None
        args = node.args
        if name is None or any(isinstance(a, ast.Starred) for a in args):
            return UNKNOWN
        if name == "arange" and len(args) == 2:
            return Value((self.size(args[1], args[0]),), "int32")
        if name in ("zeros", "full"):
            dtype = keyword(node, "dtype", 1 if name == "zeros" else 2)
            return Value(self.shape(keyword(node, "shape", 0)), self.dtype(dtype))
        if name == "load" and args:  # the pointer broadcast with the mask and other, as Triton does
            pointer = self.value(args[0])
            extra = [self.value(e).shape for e in (keyword(node, "mask", 1), keyword(node, "other", 2))
                     if e is not None]
            return Value(_broadcast(pointer.shape, *extra), pointer.pointee)
        if name == "cast" and len(args) >= 1:
            return Value(self.value(args[0]).shape, self.dtype(keyword(node, "dtype", 1)))
        if name in ("program_id", "num_programs"):
            return Value((), "int32")
        if name in REDUCTIONS and args:
            return self.reduction(node, name)
        if name == "trans" and len(args) == 1:
            v = self.value(args[0])
            return Value(v.shape[::-1], v.dtype) if v.shape is not None and len(v.shape) == 2 else UNKNOWN
        if name in ("reshape", "broadcast_to") and len(args) == 2:
            return Value(self.shape(args[1]), self.value(args[0]).dtype)
        if name in ELEMENTWISE and args:
            values = [self.value(a) for a in args]
            floats = values[1:] if name == "where" else values
            dtype = floats[0].dtype
            for v in floats[1:]:
                dtype = _promote(dtype, v.dtype)
            return Value(_broadcast(*(v.shape for v in values)), dtype)
        return UNKNOWN

    def reduction(self, node: ast.Call, name: str) -> Value:
        v, axis = self.value(node.args[0]), _int(keyword(node, "axis", 1))
        keep = keyword(node, "keep_dims", 2)
        if v.shape is None or axis is None or not -len(v.shape) <= axis < len(v.shape) \
                or not (keep is None or isinstance(keep, ast.Constant) and type(keep.value) is bool) \
                or keyword(node, "dtype", 3) is not None:
            return UNKNOWN
        axis %= len(v.shape)
        shape = v.shape[:axis] + ((1,) if keep is not None and keep.value else ()) + v.shape[axis + 1:]
        dtype = v.dtype
        if name == "sum" and dtype in ("bool", "int8", "int16"):
            dtype = "int32"  # tl.sum widens narrow integers
        elif name == "sum" and dtype in ("uint8", "uint16"):
            dtype = "uint32"
        return Value(shape, dtype)

    def size(self, end: ast.expr, start: ast.expr | None = None):
        """A dimension: an int when known, else the text of its size (``BLOCK_M``)."""
        lo, hi = (self.value(start).const if start is not None else 0), self.value(end).const
        if lo is not None and hi is not None:
            return hi - lo
        text = self.kernel.segment(end)
        return text if lo == 0 else f"{text} - {self.kernel.segment(start)}"

    def shape(self, node: ast.expr | None) -> tuple | None:
        if not isinstance(node, (ast.List, ast.Tuple)):
            return None
        return tuple(self.size(e) for e in node.elts)

    def dtype(self, node: ast.expr | None) -> str | None:
        if node is None or not _is_lang(self.kernel, node):
            return None
        return DTYPES.get(dotted(node).rsplit(".", 1)[-1])


def _evaluated(stmt: ast.stmt) -> list[ast.AST]:
    """What executing ``stmt`` itself evaluates: a compound statement's header, not its body."""
    if isinstance(stmt, (ast.If, ast.While)):
        return [stmt.test]
    if isinstance(stmt, ast.For):
        return [stmt.iter]
    if isinstance(stmt, ast.With):
        return [item.context_expr for item in stmt.items]
    if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Try)):
        return []  # a nested definition is not the kernel's code; Triton has no try
    return [stmt]


def _defaults(fn: ast.FunctionDef) -> dict:
    """Literal defaults of the parameters (a launch that leaves a constexpr out gets these)."""
    args = [*fn.args.posonlyargs, *fn.args.args]
    pairs = list(zip(args[len(args) - len(fn.args.defaults):], fn.args.defaults))
    pairs += [(a, d) for a, d in zip(fn.args.kwonlyargs, fn.args.kw_defaults) if d is not None]
    return {a.arg: d.value for a, d in pairs if isinstance(d, ast.Constant)}


def _broadcast(*shapes) -> tuple | None:
    """Triton's broadcast (numpy's: ranks aligned on the right); None when not known or when two
    sizes differ without one being 1 (or cannot be compared here)."""
    if any(s is None for s in shapes):
        return None
    rank = max(map(len, shapes), default=0)
    out = [1] * rank
    for shape in shapes:
        for i, size in enumerate((1,) * (rank - len(shape)) + tuple(shape)):
            if out[i] == 1:
                out[i] = size
            elif size != 1 and size != out[i]:
                return None
    return tuple(out)


def _promote(a: str | None, b: str | None, divide: bool = False) -> str | None:
    """Triton's result dtype of arithmetic on ``a`` and ``b``, for the dtypes this rule needs
    (None: not known). A Python number takes the tensor's dtype (an int's float, for a float)."""
    if a is None or b is None:
        return None
    weak = ("weak_int", "weak_float")
    if a in weak and b in weak:
        out = "weak_float" if "weak_float" in (a, b) else "weak_int"
    elif a in weak or b in weak:
        number, tensor = (a, b) if a in weak else (b, a)
        out = "float32" if number == "weak_float" and not _is_float(tensor) else tensor
    elif a == b:
        out = a
    elif _is_float(a) and _is_float(b):
        order = ("float64", "float32")
        out = next((d for d in order if d in (a, b)), "float32")  # fp16 with bf16: fp32
    elif _is_float(a) or _is_float(b):
        out = a if _is_float(a) else b
    elif "bool" in (a, b):
        out = b if a == "bool" else a
    else:
        return None  # two integer types: not needed here
    if divide and not _is_float(out):
        return "float32" if out != "weak_int" else "weak_float"
    return out


def _is_float(dtype: str | None) -> bool:
    return dtype is not None and (dtype.startswith("float") or dtype in ("bfloat16", "weak_float"))


def _fold(op: ast.operator, a: int | None, b: int | None) -> int | None:
    if a is None or b is None:
        return None
    ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.FloorDiv: int.__floordiv__,
           ast.Mod: int.__mod__, ast.LShift: int.__lshift__, ast.RShift: int.__rshift__}
    try:
        return ops[type(op)](a, b) if type(op) in ops else None
    except (ZeroDivisionError, ValueError):
        return None
