"""Guard regions: every replayed tensor lives inside a larger buffer whose margins hold a known
pattern, so a write outside the tensor lands in a margin (where ``breach`` sees it) instead of in
another allocation, and a read outside it gets poison.

Margin: on each side, enough for one block to overrun the tensor along every dimension at once:
``block`` x the sum of its strides elements, where ``block`` is the launch's largest block
constexpr (``largest_block``); so a 2-D tile whose row mask is missing (up to BLOCK_M rows of
``stride`` elements past the last row) still lands in the margin. At least ``MIN_MARGIN_BYTES``,
rounded up to a multiple of it, and at most ``MAX_MARGIN_BYTES`` (64 MiB): above the cap the
margin is the cap, and an access further than 64 MiB past a tensor jumps it (guard regions miss
it; compute-sanitizer does not). The tensor's data pointer moves by a multiple of 64 KiB, so its
alignment (Triton specializes pointers divisible by 16) is what it would be without the guard.

Patterns (one element): signalling NaNs for floats, so anything computed from a margin value is
NaN, and any arithmetic on one quiets it (changes its bits), so a value computed from a margin and
stored back into one is seen; ``0xD_`` bytes for integers and bools; fp8 NaN (0x7F in both
e4m3fn and e5m2). The low four bits carry a per-tensor ``tag`` (its position among the launch's
tensors), so a value copied from one tensor's margin into another's is seen too. All differ from
``tritune.verify.compare``'s output poison (other signalling-NaN payloads, 0xA5 / 0x5A bytes), so
a margin value copied into an output is never taken for an unwritten element.

``allocate`` makes a guarded storage (``make_args`` fills it), ``guarded`` copies an existing
tensor into one, ``breach`` checks both margins afterwards.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from tritune.kernel_facts import ITEMSIZE

MIN_MARGIN_BYTES = 64 * 1024
# Per side: bounds the memory a guard costs (two sides per tensor, each filled and checked after
# every run) while covering a 128-row tile over rows of 64K fp32 elements (128 x 256 KiB = 32 MiB).
MAX_MARGIN_BYTES = 64 * 1024 * 1024  # a multiple of MIN_MARGIN_BYTES: the alignment is kept
MAX_BLOCK = 1 << 20  # triton.language.TRITON_MAX_TENSOR_NUMEL: no block is larger

_FLOATS = {  # dtype -> signalling NaN (quiet bit clear, payload non-zero) before the tag
    "float16": 0x7CA0,
    "bfloat16": 0x7FA0,
    "float32": 0x7FA0DA00,
    "float64": 0x7FF4DADADADADA00,
}
_FP8_NAN = {"float8_e4m3fn": 0x7F, "float8_e5m2": 0x7F}  # no room for a tag
_TAGS = 16
_INTS = {1: "int8", 2: "int16", 4: "int32", 8: "int64"}


@dataclasses.dataclass(frozen=True)
class Guard:
    """Where one tensor sits in its guarded buffer; sizes in elements of its dtype."""

    margin: int  # on each side
    size: int  # the tensor's own storage
    tag: int


def layout(spec: Any, block: int | None = None, *, margins: bool = True) -> dict[str, Guard]:
    """Tensor argument of a ``LaunchSpec`` -> its ``Guard``; ``block`` and the tensor's strides size
    its margins (``block`` by default the spec's largest block constexpr); ``margins=False``: none."""
    if not margins:
        return {a.name: Guard(0, a.storage_size, tag) for tag, a in enumerate(spec.tensors)}
    block = largest_block(spec.constexprs) if block is None else block
    # an unknown dtype gets byte-sized margins here; make_args refuses it
    sizes = {a.name: ITEMSIZE.get(a.dtype, 1) for a in spec.tensors}
    return {a.name: Guard(margin_elements(sizes[a.name], block, sum(abs(s) for s in a.stride)),
                          a.storage_size, tag)
            for tag, a in enumerate(spec.tensors)}


def margin_elements(element_size: int, block: int = 0, stride: int = 1) -> int:
    """Elements of margin on each side for an overrun of ``block`` steps of ``stride`` elements
    (see the module doc); ``block`` alone: a tensor's worth of ``block`` elements."""
    wanted = max(MIN_MARGIN_BYTES, int(block) * max(int(stride), 1) * element_size)
    wanted = min(-(-wanted // MIN_MARGIN_BYTES) * MIN_MARGIN_BYTES, MAX_MARGIN_BYTES)
    return wanted // element_size


def largest_block(*constexprs: dict[str, Any]) -> int:
    """The largest constexpr that can be a block size, 0 when there is none: a power of two no
    larger than Triton's largest tensor (``tl.arange`` needs both), so a constant such as a fill
    value or a flag (bools) does not size the margins."""
    values = [v for c in constexprs for v in c.values()
              if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_BLOCK and v & (v - 1) == 0]
    return max(values, default=0)


def word(dtype, tag: int = 0) -> int:
    """The margin pattern of ``dtype`` as one signed integer word (see ``_words``)."""
    name = str(dtype).removeprefix("torch.")
    width = min(dtype.itemsize, 8)
    if name in _FLOATS:
        value = _FLOATS[name] ^ tag % _TAGS
    elif name in _FP8_NAN:
        value = _FP8_NAN[name]
    else:
        value = int.from_bytes(bytes([0xD0 | tag % _TAGS]) + b"\xDA" * (width - 1), "little")
    return int.from_bytes(value.to_bytes(width, "little"), "little", signed=True)


def _words(flat):
    """A 1-D tensor as integers of its element size (of 8 bytes for wider elements, complex), and
    how many of them make one element."""
    import torch

    width = min(flat.element_size(), 8)
    return flat.view(getattr(torch, _INTS[width])), flat.element_size() // width


def allocate(dtype, device: str, guard: Guard):
    """A storage of ``guard.size`` elements inside a buffer with ``guard.margin`` pattern elements
    on each side: a 1-D view whose ``storage_offset()`` is the margin."""
    import torch

    margin, size = guard.margin, guard.size
    buffer = torch.empty(margin + size + margin, dtype=dtype, device=device)
    for side in (buffer[:margin], buffer[margin + size:]):
        _words(side)[0].fill_(word(dtype, guard.tag))
    return buffer[margin:margin + size]


def storage_elements(t) -> int:
    """Elements of ``t``'s whole storage (what ``guarded`` copies): a view's included."""
    return t.untyped_storage().nbytes() // t.element_size()


def guarded(t, margin: int, tag: int = 0):
    """``t`` (its whole storage) copied into a guarded buffer: a view with ``t``'s shape, strides
    and storage offset (plus the margin)."""
    size = storage_elements(t)
    storage = allocate(t.dtype, t.device, Guard(margin, size, tag))
    storage.copy_(t.as_strided((size,), (1,), 0))
    return storage.as_strided(t.shape, t.stride(), margin + t.storage_offset())


@dataclasses.dataclass(frozen=True)
class Breach:
    """Margin elements of one tensor that changed: which side, how many, and the one nearest the
    tensor's storage (1 = the element right next to it)."""

    tensor: str
    side: str  # "before" or "after"
    changed: int
    nearest: int

    def describe(self) -> str:
        where = "before the start" if self.side == "before" else "past the end"
        return (f"{self.tensor}: {self.changed} guard element(s) changed {where} of its storage, "
                f"the nearest {self.nearest} element(s) {where.split()[0]} it")

    def to_json(self) -> dict:
        return dataclasses.asdict(self)


def breach(name: str, t, guard: Guard) -> Breach | None:
    """The first side (before, then after) of ``t``'s guarded buffer whose margin changed; None if
    both still hold the pattern."""
    import torch

    margin = guard.margin
    flat = t.as_strided((margin + guard.size + margin,), (1,), 0)
    for side, part in (("before", flat[:margin]), ("after", flat[margin + guard.size:])):
        words, per = _words(part)
        bad = (words != word(t.dtype, guard.tag)).nonzero().flatten()
        if bad.numel():
            elements = torch.unique(bad // per)
            nearest = margin - int(elements[-1]) if side == "before" else int(elements[0]) + 1
            return Breach(name, side, int(elements.numel()), nearest)
    return None
