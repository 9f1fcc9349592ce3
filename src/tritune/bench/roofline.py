"""Bytes a launch must move through device memory, and how close its time comes to that floor.

The floor (METHOD.md's "fewest bytes"): each input read once, each output written once. Where
Inductor gave its own count (``kernel_num_gb``, captured into ``spec.extra``) that is used, since
Inductor knows which buffers a kernel really reads. Otherwise the count is computed from the
spec's tensors and labelled an estimate:

- a tensor the kernel does not write is read once; a written tensor is written once; an in-out
  tensor (read and written) counts twice. A written tensor is in-out when the capture says the
  kernel loads from it (``spec.extra["reads"]``, a list of argument names) or, without that, when
  it is named like Inductor's ``in_out_ptr*``.
- a tensor's bytes are those of the elements its view addresses, not its storage (a slice of a
  large buffer moves only the slice): dimensions of stride 0 (broadcasts) add nothing, and the
  count never exceeds the span from the first to the last element the view reaches (views that
  overlap themselves, like ``unfold``).

The same floor for a function's live tensors (``io_bytes``: ``tritune generate`` times whole
functions, not captured launches): each input tensor read once, each output tensor written once,
``numel * element_size`` each, a tensor passed twice counted once.

Achieved bandwidth is bytes over time; the roofline fraction is that over the measured
device-to-device copy bandwidth (read + write, the same accounting).
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any

from tritune.kernel_facts import itemsize
from tritune.model.launch import ArgSpec, LaunchSpec, min_storage_size

INOUT_PREFIX = "in_out_ptr"  # Inductor's name for a buffer a kernel reads and writes in place


@dataclasses.dataclass(frozen=True)
class Traffic:
    """Bytes one launch moves; ``source`` is "inductor" (its kernel_num_gb) or "estimate"."""

    bytes: int
    source: str
    read_bytes: int | None = None  # None where Inductor gave only the total
    write_bytes: int | None = None

    @property
    def estimated(self) -> bool:
        return self.source != "inductor"


def view_elements(arg: ArgSpec) -> int:
    """Distinct elements a tensor view addresses (see the module docstring)."""
    if any(size == 0 for size in arg.shape):
        return 0
    distinct = math.prod(size for size, step in zip(arg.shape, arg.stride) if step != 0)
    span = min_storage_size(arg.shape, arg.stride, 0)
    return min(distinct, span)


def view_bytes(arg: ArgSpec) -> int:
    return view_elements(arg) * itemsize(arg.dtype)


def is_read(spec: LaunchSpec, arg: ArgSpec) -> bool:
    """Loaded by the kernel: as capture found in the TTIR (``extra["reads"]``) when it could;
    else every input, and an output only under Inductor's in-out name."""
    reads = spec.extra.get("reads")
    if reads is not None:
        return arg.name in reads
    return not arg.written or arg.name.startswith(INOUT_PREFIX)


def traffic(spec: LaunchSpec) -> Traffic:
    """Bytes moved by one launch of ``spec``."""
    num_gb = spec.extra.get("kernel_num_gb")
    if num_gb is not None:
        return Traffic(bytes=round(float(num_gb) * 1e9), source="inductor")  # Inductor's GB are 1e9 B
    read = sum(view_bytes(a) for a in spec.tensors if is_read(spec, a))
    written = sum(view_bytes(a) for a in spec.written)
    return Traffic(bytes=read + written, source="estimate", read_bytes=read, write_bytes=written)


def distinct_tensors(value: Any) -> list:
    """The tensors in a function's arguments or result (a tensor, or a tuple/list of them and
    scalars), each once: a tensor passed twice is read once."""
    items = value if isinstance(value, (tuple, list)) else [value]
    seen, out = set(), []
    for item in items:
        if hasattr(item, "numel") and hasattr(item, "element_size") and id(item) not in seen:
            seen.add(id(item))
            out.append(item)
    return out


def io_bytes(inputs: Any, outputs: Any) -> int:
    """Each input tensor read once + each output tensor written once (``numel * element_size``)."""
    return sum(t.numel() * t.element_size() for t in [*distinct_tensors(inputs), *distinct_tensors(outputs)])


def achieved_gbps(nbytes: int, ms: float | None) -> float | None:
    """GB/s (1e9 bytes per second) for ``nbytes`` moved in ``ms``; None without a usable time."""
    if ms is None or ms <= 0 or not math.isfinite(ms):
        return None
    return nbytes / (ms * 1e-3) / 1e9


def roofline_fraction(gbps: float | None, copy_gbps: float | None) -> float | None:
    """Achieved over copy bandwidth: 1.0 means as fast as a device-to-device copy moves bytes."""
    if gbps is None or not copy_gbps:
        return None
    return gbps / copy_gbps


def floor_ms(nbytes: int, copy_gbps: float) -> float:
    """The time ``nbytes`` take at copy bandwidth: no version of the kernel runs much faster."""
    return nbytes / (copy_gbps * 1e9) * 1e3
