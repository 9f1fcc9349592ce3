"""Whether a launch's tensor arguments overlap in memory: the no-alias assumption and its check.

A variant may be built assuming that the kernel's distinct pointer arguments never point into
the same memory (``NOALIAS``; ``Variant.assumes``): ``merge-redundant-loads`` may then keep a
load of ``in_out_ptr0`` across a store through ``out_ptr0``. Replay gives every argument a
tensor of its own, so verification runs under the assumption; a live program may not (an
in-place call passes one buffer as input and output), so:

- capture records which tensor arguments of a launch overlap (``record``:
  ``spec.extra["overlapping"]``, pairs of names; absent in captures made before it existed,
  which ``disjoint_at_capture`` treats as unknown, never as disjoint);
- the applier uses a variant that assumes it only for a launch whose tensors are ``disjoint``
  and launches the baseline otherwise.

A tensor's address range is ``[data_ptr, data_ptr + extent)`` with the extent in bytes from its
sizes, strides and item size (torch has no negative strides, so ``data_ptr`` is its lowest
address); an empty tensor covers nothing. A kernel that reaches past its view through a base
pointer with offsets of its own is outside what this check sees, as it is outside replay's.
The check sorts the ranges by start and compares neighbours: O(n log n) for n tensors, a few
microseconds in Python for the handful a kernel takes.
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tritune.model.launch import min_storage_size
from tritune.model.variant import NOALIAS

OVERLAPPING = "overlapping"  # the key in LaunchSpec.extra


def span(tensor: Any) -> tuple[int, int]:
    """``(first byte, one past the last)`` of the memory a tensor view covers."""
    start = tensor.data_ptr()
    if tensor.is_contiguous():
        return start, start + tensor.nbytes
    return start, start + min_storage_size(tensor.shape, tensor.stride()) * tensor.element_size()


def disjoint(tensors: Iterable[Any]) -> bool:
    """True when no two of the tensors share a byte."""
    return _disjoint_spans([span(t) for t in tensors])


def _disjoint_spans(spans: list[tuple[int, int]]) -> bool:
    end = None
    for start, stop in sorted(spans):
        if start == stop:
            continue  # empty: covers nothing
        if end is not None and start < end:
            return False
        end = stop if end is None or stop > end else end
    return True


def overlapping(named: Mapping[str, Any]) -> list[list[str]]:
    """Pairs of names whose tensors share a byte, each pair in argument order (capture)."""
    order = {name: i for i, name in enumerate(named)}
    spans = sorted((*span(t), name) for name, t in named.items())
    pairs, open_ = [], []
    for start, stop, name in spans:
        if start == stop:
            continue
        open_ = [(end, other) for end, other in open_ if end > start]
        pairs += [sorted((other, name), key=order.get) for _, other in open_]
        open_.append((stop, name))
    return sorted(pairs, key=lambda pair: (order[pair[0]], order[pair[1]]))


def record(extra: dict, named: Mapping[str, Any]) -> None:
    """Note in a spec's ``extra`` which tensor arguments of the captured launch overlap; left
    unknown (absent) when a tensor's address cannot be read."""
    try:
        extra[OVERLAPPING] = overlapping(named)
    except Exception:  # noqa: BLE001 - e.g. a tensor without storage: unknown, never "disjoint"
        extra.pop(OVERLAPPING, None)


def disjoint_at_capture(spec: Any) -> bool:
    """The captured launch's tensor arguments were recorded and none overlapped."""
    return spec.extra.get(OVERLAPPING) == []


class Guard:
    """The per-launch check of one prepared launch. A prepared launch serves one signature, which
    fixes each argument's class and each tensor's dtype and shape (not its strides): the tensors
    sit at fixed positions, and a contiguous one covers a fixed number of bytes, so a launch
    reads only each tensor's address and whether it is contiguous (each torch call costs a
    launch about 0.1-0.4 us)."""

    __slots__ = ("positions", "names", "nbytes")

    def __init__(self, args: tuple, kwargs: Mapping[str, Any], tensor: type):
        self.positions = tuple(i for i, a in enumerate(args) if isinstance(a, tensor))
        self.names = tuple(k for k, v in kwargs.items() if isinstance(v, tensor))
        self.nbytes = tuple(t.nbytes for t in self._tensors(args, kwargs))

    def _tensors(self, args: tuple, kwargs: Mapping[str, Any]) -> list:
        found = [args[i] for i in self.positions]
        return found + [kwargs[name] for name in self.names] if self.names else found

    def __call__(self, args: tuple, kwargs: Mapping[str, Any]) -> bool:
        """True when the launch's tensors are disjoint: the variant may run."""
        spans = []
        for tensor, nbytes in zip(self._tensors(args, kwargs), self.nbytes):
            start = tensor.data_ptr()
            spans.append((start, start + nbytes) if tensor.is_contiguous() else span(tensor))
        if len(spans) == 2:
            (a, a_end), (b, b_end) = spans
            return a_end <= b or b_end <= a or a == a_end or b == b_end
        return _disjoint_spans(spans)


def assumes_noalias(variant: Any) -> bool:
    """Whether ``variant`` needs the check: it says so, or its pass set runs in no-alias mode (a
    variant stored before ``assumes`` existed, or written by hand without it, is still guarded)."""
    if NOALIAS in variant.assumes:
        return True
    if not variant.passes:
        return False
    from tritune.passes import resolve

    return NOALIAS in resolve(variant.passes)
