"""Transformed draws: the first input set again, scaled by 1e3, by 1e-3, and negated.

Why. Fresh N(0, 1) draws leave one hack open: a kernel that is right only for the values such
draws hold (``tl.where(abs(x) < 10, correct, 0)``, a clamp, a table of the values it expects, an
``abs`` where the sign matters). Published catalogues of reward hacks in kernel benchmarks list
such value-conditional shortcuts. Each verified launch therefore also runs baseline and candidate
on the values of its first input set scaled by ``1e3``, by ``1e-3``, and with their sign flipped,
compared with the same tolerance table: a shortcut that holds on N(0, 1) breaks on one of them.

What is transformed: tensor arguments with floating dtypes whose values ``make_args`` drew at
random (``values == "random"``), read-only and in-out alike (an in-out tensor's starting contents
are inputs, and baseline and candidate start from the same transformed copy). Never: saved or
ranged values (indices, sizes: their meaning depends on the value), integers and bools (kept as
they are), scalars (sizes and strides among them). Outputs the kernel does not read are poisoned
before every run anyway. The whole storage of a tensor is transformed, as a flat view between its
guard margins, so overlapping views (a stride of 0) are transformed once per element.

Finite in the dtype: a tensor whose scaled values would overflow its dtype (fp8 e4m3's 448 under
``x1e3``) is left as drawn for that draw, and the draw says so (``Draw.kept``). A draw that changes
nothing is skipped with its reason.

Overflow of the baseline itself. A scaled draw on which the baseline's outputs hold more
non-finite elements than on the unscaled values (``x * x`` of fp16 inputs near 5e3 is inf) is
skipped with the reason recorded: near the dtype's limit a legal reordering can round to the
largest finite value where the baseline rounds to inf, and NaN/Inf parity would reject it. The
negated draw does not change magnitudes: it is always compared, NaN/Inf parity as the table says.

Tolerance on a scaled draw. The table's absolute tolerance is in the units of the unscaled
outputs. Where the baseline's outputs grow on a draw (``x1e3``: a layer norm's backward by ~1e9),
elements whose terms cancel keep the relative rounding error of their terms, which ``rtol * |b|``
of the small result no longer covers: a legal reordering that passed on the unscaled values would
fail there. So on a draw whose baseline outputs are larger than on the unscaled values, ``atol``
grows by that ratio (``magnitude``: the largest finite written element; never below the table's,
never for an exact comparison). Value-conditional shortcuts are wrong by the outputs' own size
there, far beyond it.

What the draws cannot see: a shortcut keyed on something other than magnitude and sign (one
exact input value, a shape, a pointer), and, under ``x1e-3``, an error smaller than the table's
absolute tolerance (fp16's atol is 1e-3, the size of the scaled outputs themselves for a kernel
whose output scales with its inputs: that draw catches magnitude-conditional branches, not
precision).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable

DRAWS: tuple[tuple[str, float], ...] = (("x1e3", 1e3), ("x1e-3", 1e-3), ("negated", -1.0))
_FLOATS = {"float16", "bfloat16", "float32", "float64", "float8_e4m3fn", "float8_e5m2"}


@dataclasses.dataclass
class Draw:
    """One transformed draw: what it did to which tensor, and why it was skipped if it was."""

    name: str  # "x1e3", "x1e-3", "negated"
    factor: float
    transformed: list[str] = dataclasses.field(default_factory=list)
    kept: dict[str, str] = dataclasses.field(default_factory=dict)  # tensor -> why it was left as drawn
    skipped: str | None = None  # why the draw was not compared

    @property
    def scales(self) -> bool:
        return abs(self.factor) != 1.0

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def candidates(spec: Any) -> list[str]:
    """Tensor arguments a draw may transform (module doc)."""
    return [a.name for a in spec.tensors if a.values == "random" and a.dtype in _FLOATS]


def transform(spec: Any, args: dict[str, Any], guards: dict[str, Any], name: str, factor: float,
              outputs: Iterable[str] = ()) -> Draw:
    """Multiply every transformable tensor of ``args`` (fresh from ``make_args``) by ``factor`` in
    place; the ``Draw`` record. ``guards``: the tensors' ``Guard`` (margin, storage size);
    ``outputs``: outputs the kernel does not read (poisoned before every run: left alone)."""
    import torch

    draw = Draw(name, factor)
    poisoned = set(outputs)
    for arg_name in [a for a in candidates(spec) if a not in poisoned]:
        t, guard = args[arg_name], guards[arg_name]
        if guard.size == 0:
            continue
        flat = t.as_strided((guard.size,), (1,), guard.margin)  # the storage between its margins
        wide = flat.double() if t.dtype == torch.float64 else flat.float()
        scaled = wide * factor
        largest = float(scaled.abs().max())
        if largest > torch.finfo(t.dtype).max:
            draw.kept[arg_name] = f"{name} would overflow {str(t.dtype).removeprefix('torch.')} ({largest:.3g})"
            continue
        flat.copy_(scaled)
        draw.transformed.append(arg_name)
    if not draw.transformed:
        draw.skipped = "no floating input drawn at random could be transformed" if not draw.kept else \
            "every floating input would overflow its dtype"
    return draw


def magnitude(t, poisoned: bool) -> float:
    """The largest finite absolute value of an output (0.0 for non-floats or none); ``poisoned``:
    unwritten elements (the poison) are left out."""
    if not t.dtype.is_floating_point or t.numel() == 0:
        return 0.0
    import torch

    from tritune.verify.compare import chunks, holds_poison

    largest = 0.0
    for _, (part,) in chunks([t]):  # over chunks, as compare reads outputs: no copy of a 4 GB one
        wide = part.float() if part.element_size() < 4 else part
        keep = wide.isfinite()
        if poisoned:
            keep &= ~holds_poison(part, 1)
        largest = max(largest, float(torch.where(keep, wide.abs(), torch.zeros_like(wide)).max()))
    return largest


def nonfinite(t, poisoned: bool) -> int:
    """Non-finite elements of an output (0 for non-floats); ``poisoned``: unwritten elements (the
    poison is a NaN) are not counted."""
    if not t.dtype.is_floating_point:
        return 0
    from tritune.verify.compare import holds_poison

    bad = ~(t if t.element_size() > 1 else t.float()).isfinite()  # fp8 has no isfinite of its own
    if poisoned:
        bad &= ~holds_poison(t, 1)
    return int(bad.sum())
