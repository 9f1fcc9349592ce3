"""Compare one output of a candidate with the baseline's, element by element.

Poison. Before a run, every output the kernel does not read is filled with a sentinel, so an
element still holding it afterwards was never written:
  floats   signalling-NaN bit patterns. No arithmetic produces one (GPUs and numpy return the
           canonical quiet NaN, and every operation on a signalling NaN quiets it), so one run
           tells written from unwritten.
  others   integers, bool (as bytes) and fp8 (no signalling NaN) have no value a kernel cannot
           legitimately write. Each side runs twice, poisoned with two different sentinels: an
           element is unwritten only if it holds sentinel 1 after the first run and sentinel 2
           after the second (a deterministic kernel writes the same value both times).

``compare`` is computed in float64 over chunks of ``CHUNK`` elements (views, no copy of the
whole output), so 4 GB outputs do not run out of memory.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Iterator, Mapping, Sequence

from tritune.verify.tolerances import Tolerance, tolerance_for

CHUNK = 1 << 24

# dtype -> (integer dtype of the same size, sentinel 1, sentinel 2), as bit patterns
_SIGNALLING_NAN = {
    # exponent all ones, quiet bit (the mantissa's top bit) clear, mantissa non-zero
    "float16": ("int16", 0x7DBA, 0x7D5B),
    "bfloat16": ("int16", 0x7F9A, 0x7F8D),
    "float32": ("int32", 0x7FBADBAD, 0x7FA5A5A5),
    "float64": ("int64", 0x7FF4DEADBEEF0000, 0x7FF2BADC0FFEE000),
}
_BY_SIZE = {  # element size -> (signed dtype, sentinel 1, sentinel 2): any value may be legitimate
    1: ("uint8", 0xA5, 0x5A),  # bool (stored 0/1) and fp8 as bytes; int8 through its own view
    2: ("int16", 0x7ADA, -0x5A5B),
    4: ("int32", 0x7ADBEEF5, -0x5EADBEEF),
    8: ("int64", 0x7ADBEEF5DEADBEEF, -0x5EADBEEFDEADBEEF),
}
_INT8 = ("int8", 0x5A, -0x6B)


def dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _sentinel(t) -> tuple[str, int, int]:
    name = dtype_name(t)
    if name in _SIGNALLING_NAN:
        return _SIGNALLING_NAN[name]
    if name == "int8":
        return _INT8
    if t.dtype.is_complex:
        raise ValueError(f"cannot poison a {name} tensor: complex outputs are not supported")
    return _BY_SIZE[t.element_size()]


def one_run_sound(t) -> bool:
    """True where one poisoned run tells unwritten elements apart (signalling-NaN floats)."""
    return dtype_name(t) in _SIGNALLING_NAN


def bits(t):
    """The raw bits of ``t`` as an integer tensor of the same shape and strides."""
    import torch

    return t.view(getattr(torch, _sentinel(t)[0]))


def poison(tensors: Sequence, which: int = 1) -> None:
    """Fill every element of each tensor (views included) with sentinel ``which`` (1 or 2)."""
    for t in tensors:
        entry = _sentinel(t)
        bits(t).fill_(entry[which])


def holds_poison(t, which: int = 1):
    """Boolean tensor: elements still holding sentinel ``which``."""
    return bits(t) == _sentinel(t)[which]


def unwritten(t, which: int = 1) -> int:
    """Elements holding sentinel ``which`` (exact for floats; see the module doc for others)."""
    return int(holds_poison(t, which).sum())


# ---------------------------------------------------------------------------------- chunking

def chunks(tensors: Sequence, limit: int = CHUNK) -> Iterator[tuple[int, list]]:
    """``(flat start, [1-D chunk of each tensor])`` over same-shape tensors in row-major order;
    a chunk is a copy of at most ``limit`` elements (a view where the layout allows)."""
    first = tensors[0]
    if first.dim() == 0 or first.numel() <= limit:
        yield 0, [t.reshape(-1) for t in tensors]
        return
    row = first[0].numel()
    rows = max(1, limit // max(row, 1))
    for start in range(0, first.shape[0], rows):
        part = [t[start:start + rows] for t in tensors]
        if rows > 1 or row <= limit:
            yield start * row, [p.reshape(-1) for p in part]
        else:  # one row is too big: split it along the next dimension
            for offset, inner in chunks([p[0] for p in part], limit):
                yield start * row + offset, inner


def unravel(flat: int, shape: Sequence[int]) -> tuple[int, ...]:
    index = []
    for size in reversed(list(shape)):
        index.append(flat % size if size else 0)
        flat = flat // size if size else 0
    return tuple(reversed(index))


# ------------------------------------------------------------------------------------ result

@dataclasses.dataclass
class Worst:
    """The element that is furthest off (or, when all pass, closest to failing)."""

    index: tuple[int, ...]
    base: Any
    cand: Any
    abs_err: float
    rel_err: float
    reason: str  # "value", "bits", "unwritten", "extra_write", "nan", "inf"
    score: float  # > 1 (or inf) fails under a tolerance; > 0 fails when exact
    base_unwritten: bool = False
    cand_unwritten: bool = False

    def describe(self, name: str) -> str:
        where = f"{name}[{', '.join(map(str, self.index))}]"
        base = "unwritten" if self.base_unwritten else _show(self.base)
        cand = "unwritten" if self.cand_unwritten else _show(self.cand)
        errors = "" if self.reason in ("unwritten", "extra_write") else \
            f" (abs err {self.abs_err:.3g}, rel err {self.rel_err:.3g})"
        return f"{where}: baseline {base}, candidate {cand}{errors}"

    def to_json(self) -> dict:
        body = dataclasses.asdict(self)
        body["index"] = list(self.index)
        return {k: _finite(v) for k, v in body.items()}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> "Worst":
        """``to_json``'s body back: the errors and score as floats (NaN/Inf came as strings, an
        unreadable one is NaN), ``index`` a tuple, keys it does not know left out. The values stay
        as JSON held them (a non-finite one as its string, which ``describe`` shows as it is)."""
        known = {f.name for f in dataclasses.fields(cls)}
        fields = {k: v for k, v in body.items() if k in known}
        fields["index"] = tuple(fields.get("index") or ())
        for key in ("abs_err", "rel_err", "score"):
            fields[key] = _number(fields.get(key))
        return cls(**fields)


@dataclasses.dataclass
class CompareResult:
    name: str
    dtype: str
    shape: tuple[int, ...]
    mode: str
    tolerance: Tolerance
    ok: bool = True
    elements: int = 0
    bad: int = 0
    unwritten: int = 0  # the candidate left unwritten where the baseline wrote
    extra_writes: int = 0  # the candidate wrote where the baseline did not
    both_unwritten: int = 0  # neither wrote (a kernel that writes part of its output by design)
    nan_mismatch: int = 0
    inf_mismatch: int = 0
    max_abs_err: float = 0.0  # over elements both wrote, finite in both
    max_rel_err: float = 0.0
    poisoned: bool = True
    worst: Worst | None = None
    input_set: int | None = None  # the seed of the inputs, when part of a verification
    draw: str | None = None  # the transformed draw of that set's values ("x1e3"...), None for the set itself

    def message(self) -> str:
        """One line naming the output, the worst element and both values."""
        if self.worst is None:
            return f"{self.name}: {self.elements} elements identical"
        rule = f"{self.mode}{_tol_text(self.tolerance)}"
        if self.ok:
            return f"{self.worst.describe(self.name)}, within {rule}"
        return f"{self.worst.describe(self.name)}; {self.bad} of {self.elements} elements bad ({rule})"

    def to_json(self) -> dict:
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        body["shape"] = list(self.shape)
        body["tolerance"] = self.tolerance.to_json()
        body["worst"] = self.worst.to_json() if self.worst else None
        return {k: _finite(v) for k, v in body.items()}


def worst_of(checks: Iterable[CompareResult]) -> CompareResult | None:
    """The check holding the worst element (the highest score, the first of equal ones); None
    where no check has a worst element."""
    return max((c for c in checks if c.worst is not None), key=lambda c: c.worst.score, default=None)


def _tol_text(tol: Tolerance) -> str:
    return "" if tol.exact else f" rtol {tol.rtol:g} atol {tol.atol:g}"


def _show(value: Any) -> str:
    return f"{value:.9g}" if isinstance(value, float) else str(value)  # 9 digits tell fp32 values apart


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def _finite(value: Any) -> Any:
    """JSON has no NaN/Inf: write them as strings."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


# ----------------------------------------------------------------------------------- compare

def compare(name: str, base, cand, mode: str = "tolerance", tolerance: Tolerance | None = None, *,
            poisoned: bool = True, base_alt=None, cand_alt=None, limit: int = CHUNK) -> CompareResult:
    """Compare ``cand`` with ``base`` (same shape and dtype) under ``mode``.

    ``tolerance`` defaults to the table's entry for the dtype. ``poisoned``: both were poisoned
    with sentinel 1 before their run, so elements still holding it are unwritten; ``base_alt``
    and ``cand_alt`` are the runs poisoned with sentinel 2 (needed for non-float outputs, where
    unwritten means sentinel 1 in the first run and sentinel 2 in the second). Both unwritten is
    fine: a kernel may write part of its output by design.
    """
    if tuple(base.shape) != tuple(cand.shape) or base.dtype != cand.dtype:
        raise ValueError(f"{name}: baseline {dtype_name(base)}{list(base.shape)} and candidate "
                         f"{dtype_name(cand)}{list(cand.shape)} differ in shape or dtype")
    dtype = dtype_name(base)
    tol = tolerance or tolerance_for(dtype, mode)
    result = CompareResult(name, dtype, tuple(base.shape), mode, tol, elements=base.numel(), poisoned=poisoned)
    sentinel = _sentinel(base)
    tensors = [base, cand] + [t for t in (base_alt, cand_alt) if t is not None]
    best = (0.0, None)  # (score, flat index)
    for start, parts in chunks(tensors, limit):
        score = _chunk(result, parts, base_alt is not None, cand_alt is not None, sentinel, tol)
        if score is not None and score.numel():
            top = int(score.argmax())  # the first of equal maxima
            if float(score[top]) > best[0]:
                best = (float(score[top]), start + top)
    result.ok = result.bad == 0
    if best[1] is not None:
        result.worst = _worst(result, base, cand, best, base_alt, cand_alt, sentinel)
    return result


def _chunk(result: CompareResult, parts: list, has_base_alt: bool, has_cand_alt: bool,
           sentinel: tuple, tol: Tolerance):
    """Add one chunk's counts to ``result``; the per-element score (float64) of the chunk."""
    import torch

    b, c = parts[0], parts[1]
    rest = iter(parts[2:])
    b2 = next(rest) if has_base_alt else None
    c2 = next(rest) if has_cand_alt else None
    int_type = getattr(torch, sentinel[0])
    bb, cb = b.view(int_type), c.view(int_type)
    if result.poisoned:
        bu = _unwritten(bb, b2, int_type, sentinel)
        cu = _unwritten(cb, c2, int_type, sentinel)
    else:
        bu = cu = torch.zeros_like(bb, dtype=torch.bool)
    written = ~bu & ~cu
    missing, extra = cu & ~bu, bu & ~cu
    result.unwritten += int(missing.sum())
    result.extra_writes += int(extra.sum())
    result.both_unwritten += int((bu & cu).sum())

    is_float = b.dtype.is_floating_point
    x, y = b.double(), c.double()
    nan = (x.isnan() != y.isnan()) & written if is_float else torch.zeros_like(written)
    inf = ((x.isinf() | y.isinf()) & (x != y) & ~x.isnan() & ~y.isnan() & written) if is_float \
        else torch.zeros_like(written)
    finite = written & x.isfinite() & y.isfinite()
    diff = torch.where(finite, (x - y).abs(), torch.zeros_like(x))
    rel = torch.where(diff == 0, torch.zeros_like(x), diff / x.abs())  # x == 0 < diff: inf
    if finite.any():
        result.max_abs_err = max(result.max_abs_err, float(diff.max()))
        result.max_rel_err = max(result.max_rel_err, float(rel.max()))
    if tol.exact:
        differ = (bb != cb) & written
        # bits differ at equal values (-0.0 and 0.0, two NaN payloads): the smallest positive score
        value = torch.where(differ, torch.clamp(diff, min=1e-300), torch.zeros_like(x))
    else:
        allowed = tol.atol + tol.rtol * x.abs()
        value = torch.where(finite, diff / allowed, torch.zeros_like(x))  # 0 / 0 -> nan: fixed below
        value = torch.where(finite & (diff == 0), torch.zeros_like(x), value)
        differ = finite & (diff > allowed)
    categorical = missing | extra | nan | inf
    result.nan_mismatch += int(nan.sum())
    result.inf_mismatch += int(inf.sum())
    result.bad += int((categorical | differ).sum())
    return torch.where(categorical, torch.full_like(x, math.inf), value)


def _unwritten(raw, alt, int_type, sentinel):
    held = raw == sentinel[1]
    if alt is not None:
        held &= alt.view(int_type) == sentinel[2]
    return held


def _worst(result: CompareResult, base, cand, best: tuple, base_alt, cand_alt, sentinel) -> Worst:
    score, flat = best
    index = unravel(flat, base.shape)
    b, c = base[index], cand[index]
    bu = cu = False
    if result.poisoned:
        bu = _element_unwritten(b, base_alt, index, sentinel)
        cu = _element_unwritten(c, cand_alt, index, sentinel)
    x, y = float(b.double()), float(c.double())
    abs_err = abs(x - y) if math.isfinite(x) and math.isfinite(y) else math.inf
    rel_err = 0.0 if x == y else (abs_err / abs(x) if x else math.inf)
    if cu and not bu:
        reason = "unwritten"
    elif bu and not cu:
        reason = "extra_write"
    elif math.isnan(x) != math.isnan(y):
        reason = "nan"
    elif (math.isinf(x) or math.isinf(y)) and x != y:
        reason = "inf"
    else:
        reason = "bits" if result.tolerance.exact else "value"
    return Worst(index, b.item(), c.item(), abs_err, rel_err, reason, score, bu, cu)


def _element_unwritten(element, alt, index, sentinel) -> bool:
    held = bool(bits(element) == sentinel[1])
    if alt is not None:
        held = held and bool(bits(alt[index]) == sentinel[2])
    return held


# ----------------------------------------------------------------------- baseline against itself

@dataclasses.dataclass
class Spread:
    """How two runs of the baseline on the same inputs differ (atomics reorder additions)."""

    differing: int = 0  # elements whose bits differ (among those written in both)
    max_abs: float = 0.0  # largest |difference| where both are finite
    parity_flips: int = 0  # NaN/Inf in one run and not in the other

    @property
    def deterministic(self) -> bool:
        return self.differing == 0


def spread(first, second, *, poisoned: bool = False, limit: int = CHUNK) -> Spread:
    """Compare two baseline runs. ``poisoned``: ``first`` ran poisoned with sentinel 1 and
    ``second`` with sentinel 2, and elements unwritten in both are left out."""
    import torch

    sentinel = _sentinel(first)
    int_type = getattr(torch, sentinel[0])
    out = Spread()
    for _, (a, b) in chunks([first, second], limit):
        ab, bb = a.view(int_type), b.view(int_type)
        keep = ~((ab == sentinel[1]) & (bb == sentinel[2])) if poisoned else torch.ones_like(ab, dtype=torch.bool)
        differ = (ab != bb) & keep
        out.differing += int(differ.sum())
        x, y = a.double(), b.double()
        finite = keep & x.isfinite() & y.isfinite()
        if a.dtype.is_floating_point:
            flips = (x.isnan() != y.isnan()) | ((x.isinf() | y.isinf()) & (x != y) & ~x.isnan() & ~y.isnan())
            out.parity_flips += int((flips & keep).sum())
        if finite.any():
            out.max_abs = max(out.max_abs, float(torch.where(finite, (x - y).abs(), torch.zeros_like(x)).max()))
    return out


def depends_on_initial(run, initial, other_run, other_initial, *, limit: int = CHUNK) -> bool:
    """True if a tensor's contents after the kernel depend on its contents before, i.e. the
    kernel reads it (an in-out argument), so it must not be poisoned. The two runs had the same
    inputs and different starting contents of this tensor. Each element must either come out the
    same from both (written from the inputs alone) or keep its starting contents in both
    (unwritten); anything else came from reading it."""
    import torch

    int_type = getattr(torch, _sentinel(run)[0])
    for _, parts in chunks([run, initial, other_run, other_initial], limit):
        a, ia, b, ib = (p.view(int_type) for p in parts)
        if bool(((a != b) & ~((a == ia) & (b == ib))).any()):
            return True
    return False
