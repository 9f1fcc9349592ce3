"""Odd shapes derived from a spec's first case, for verification (Liger-Kernel's habit: a kernel
that is right at (8, 256, 1024) may still drop the tail of a row of 1023 or of a single row).

From the *frame*, the shape all the case's tensors broadcast to (else, for tensors that do not
broadcast together, such as a matmul's, the shape of the first tensor of the highest rank):

    odd       every dim a non-multiple of 16 (``odd_size``: 1024 -> 1023, 8 -> 7, 1 -> 3), so
              the last block of a row and of the rows is partial
    one row   every leading dim 1, the last dim as it is
    larger    the first dim doubled (the last dim for a rank-1 frame), for a grid that grows

A dim the spec pins (``spec.pinned``) keeps the case's size in every derivation and sampled size.

Broadcasting stays consistent: every tensor is right-aligned against the frame, and a dim equal to
the frame's dim there changes with it (a bias ``[1024]`` of ``x[8, 256, 1024]`` follows ``x``'s last
dim); any other dim (a broadcast 1) stays. Scalars stay as they are. The tensors are fresh, of the
same dtype and device, from one generator seeded with ``seed``: ``randn`` for floats (its absolute
value where the original holds no negative number: a spec may take a ``sqrt`` or a ``log``),
``randint`` over the original's range for integers (indices stay valid), coin flips for bools.

A derivation is skipped when its shapes equal those of a case already there (the spec's own or an
earlier derivation: "one row" of a rank-1 spec is the spec's case), or when the reference fails
on it (a spec that needs a multiple of 16 gets no odd case).
"""

from __future__ import annotations

import math
from typing import Callable

from tritune.generate.spec import Case, GenSpec, SpecError, shapes_text

Shape = tuple[int, ...]


def odd_size(size: int) -> int:
    """A size near ``size`` that is not a multiple of 16 (nor even, but for 2 -> 4): an even size
    one less, an odd size two more (1 -> 3: the odd case is not the single row)."""
    return size - 1 if size % 2 == 0 and size > 2 else size + 2


def odd(frame: Shape) -> Shape:
    return tuple(odd_size(d) for d in frame)


def one_row(frame: Shape) -> Shape:
    return tuple(1 for _ in frame[:-1]) + frame[-1:]


def larger(frame: Shape) -> Shape:
    return (2 * frame[0],) + frame[1:]


DERIVATIONS: tuple[tuple[str, Callable[[Shape], Shape]], ...] = (("odd", odd), ("one row", one_row),
                                                                   ("larger", larger))


def derived_cases(spec: GenSpec, device: str, *, seed: int = 0) -> list[Case]:
    """The derived cases of ``spec`` on ``device`` (see the module doc), ``derived=True``."""
    import torch

    cases = spec.cases(device)
    first = cases[0].tensors
    frame = _frame([t.shape for t in first if isinstance(t, torch.Tensor)])
    if not frame:  # 0-d tensors only: no shape to change
        return []
    seen = {shapes_text(c.tensors) for c in cases}
    generators: dict = {}
    derived = []
    kept = pinned_frame_dims(spec, first, frame)  # a pinned dim keeps the case's size
    for label, derive in DERIVATIONS:
        target = tuple(frame[j] if j in kept else d for j, d in enumerate(derive(frame)))
        args = at_frame(first, frame, target, generators, seed)
        case = _new(spec, label, args, seen)
        if case is not None:
            derived.append(case)
    return derived


def at_frame(args: tuple, frame: Shape, target: Shape, generators: dict, seed: int) -> tuple:
    """``args`` with each tensor made fresh at its shape right-aligned against ``frame`` and resized
    to ``target`` (``resized``, ``_fresh``); scalars as they are."""
    import torch

    return tuple(_fresh(t, resized(tuple(t.shape), frame, target), generators, seed) if isinstance(t, torch.Tensor)
                 else t for t in args)


def _new(spec: GenSpec, label: str, args: tuple, seen: set[str]) -> Case | None:
    """A derived case of ``args``, unless its shapes are in ``seen`` (then added) or the reference refuses it."""
    if shapes_text(args) in seen:
        return None
    case = Case(label, args, derived=True)
    try:
        spec.outputs(case)
    except SpecError:
        return None
    seen.add(shapes_text(args))
    return case


FAMILY_CASES = 16  # sizes sampled per dtype pattern of the spec's cases (issue 25: at least 16)
FAMILY_GROWTH = 4  # a sampled dim reaches up to this many times the case's (some large)


def family_cases(spec: GenSpec, known: list[Case], *, seed: int = 0, count: int = FAMILY_CASES) -> list[Case]:
    """Sizes of the spec's family its own cases do not show (``known``: the spec's cases and the
    derived ones, as ``check`` made them): for the first case of each pattern of tensor dtypes, ``count`` frames drawn from one seeded generator, each dim from 1 to
    ``FAMILY_GROWTH`` times the case's, at most ``FAMILY_GROWTH`` times its elements in all, none with
    the shapes of a case or a derived case (kernel.py serves those by their own launchers). The first
    frame has every dim doubled and odd, the second single rows of another width, the third
    ``FAMILY_GROWTH`` times the case's first dim; broadcast is kept as ``resized`` keeps it. Then,
    for each of the spec's own cases, the frames ``near`` it, where kernel.py's tuning by size
    takes over. Labelled ``family N``, ``derived=True``; a frame the reference refuses is drawn again
    (``near``'s are left out)."""
    import random

    import torch

    draw = random.Random(seed)
    # not the shapes of the spec's cases nor of the derived ones: kernel.py serves those by their own launchers
    cases, seen, generators = [], {shapes_text(c.tensors) for c in known}, {}
    patterns: dict[tuple, Case] = {}
    for case in (c for c in known if not c.derived):
        patterns.setdefault(tuple(str(t.dtype) for t in case.tensors if isinstance(t, torch.Tensor)), case)
    for first in patterns.values():
        tensors = first.tensors
        frame = _frame([t.shape for t in tensors if isinstance(t, torch.Tensor)])
        if not frame:
            continue
        kept = pinned_frame_dims(spec, tensors, frame)
        made = 0
        for k in range(count * 4):  # a frame the cases have, or the reference refuses, is drawn again
            if made == count:
                break
            if k == 0:
                target = odd(tuple(2 * d for d in frame))
            elif k == 1:  # single rows of another width: sizes of 1, which symbolic sizes leave to the cases
                target = one_row(frame)[:-1] + (odd_size(frame[-1] + 2),)
            elif k == 2:
                target = (FAMILY_GROWTH * frame[0],) + frame[1:]
            else:
                target = tuple(draw.randint(1, max(2, FAMILY_GROWTH * d)) for d in frame)
                total, limit = math.prod(target), FAMILY_GROWTH * math.prod(frame)
                if total > limit:  # at most FAMILY_GROWTH times the case's elements: a rank-4 spec's 4x each dim is 256x
                    scale = (limit / total) ** (1 / len(target))
                    target = tuple(max(1, int(d * scale)) for d in target)
            target = tuple(frame[j] if j in kept else d for j, d in enumerate(target))
            args = at_frame(tensors, frame, target, generators, seed)
            case = _new(spec, f"family {len(cases)}", args, seen)
            if case is not None:
                cases.append(case)
                made += 1
    for own in (c for c in known if not c.derived):  # where kernel.py's tuning takes over (``near``)
        tensors = own.tensors
        frame = _frame([t.shape for t in tensors if isinstance(t, torch.Tensor)])
        kept = pinned_frame_dims(spec, tensors, frame)
        for target in near(frame):
            if any(target[j] != frame[j] for j in kept):
                continue
            args = at_frame(tensors, frame, target, generators, seed)
            case = _new(spec, f"family {len(cases)}", args, seen)
            if case is not None:
                cases.append(case)
    return cases


def pinned_frame_dims(spec: GenSpec, tensors: tuple, frame: Shape) -> set[int]:
    """The frame's dims the spec pins (``spec.pinned``, each tensor right-aligned against the frame):
    the family's sizes keep them as the case has them."""
    kept = set()
    for position, value in enumerate(tensors):
        if hasattr(value, "dim"):
            kept |= {len(frame) - value.dim() + d for d in spec.pinned_dims(position, value.dim())}
    return {j for j in kept if 0 <= j < len(frame)}


def beyond(spec: GenSpec, known: list[Case], *, least: int = 1 << 15, seed: int = 0) -> list[list[Case]]:
    """Sizes of the family past every case's bucket, for running kernel.py's timed launches
    (``check._each_configuration`` takes the first its family serves of each list): one list per
    dtype pattern of the spec's own cases (each pattern has its own family), from its largest case,
    with the first dim of its frame above every case's first dim (``2 d + 1``, doubled on until the
    frame holds ``least`` elements, so a block of 2048 runs many programs); first with each other
    dim, where unpinned, even and above 2, one less (odd: the elements, and a row however the
    reduced dims combine, are then odd where no dim of 2 or pinned even dim stays, so no block
    divides them and every configuration runs its masked tail), then with each such dim alone one
    less (from the last), then as the case has them: the family or the reference may refuse an odd
    dim. No size for a pattern whose first dim is pinned; a size the reference refuses is left
    out. Labelled ``beyond``, ``derived=True``."""
    import torch

    from tritune.generate.family import patterns

    own = [c for c in known if not c.derived]
    frames = [_frame([t.shape for t in c.tensors if isinstance(t, torch.Tensor)]) for c in own]
    firsts = [f[0] for f in frames if f]
    groups = []
    for case in patterns(own):
        frame = _frame([t.shape for t in case.tensors if isinstance(t, torch.Tensor)])
        pinned = pinned_frame_dims(spec, case.tensors, frame) if frame else set()
        if not frame or 0 in pinned:
            continue
        first = 2 * max(firsts) + 1
        while first * math.prod(frame[1:]) < least:
            first = 2 * first + 1
        even = [d for d in range(len(frame) - 1, 0, -1) if d not in pinned and frame[d] > 2 and frame[d] % 2 == 0]
        odd = [tuple(n - 1 if d in dims else n for d, n in enumerate(frame)) for dims in [even] + [[d] for d in even]]
        targets = list(dict.fromkeys([(first,) + f[1:] for f in odd] + [(first,) + frame[1:]]))
        made = [_new(spec, "beyond", at_frame(case.tensors, frame, target, {}, seed), set()) for target in targets]
        groups.append([c for c in made if c is not None])
    return groups


def near(frame: Shape) -> list[Shape]:
    """Frames beside a case's, for the paths kernel.py's family takes by size (``emit.tuning``):
    the first dim another size of its bucket (the case's configuration, and its kernel specialized
    on the case's other sizes); the first dim in another bucket (the general configuration, the
    specialized kernel); the last dim another size of its bucket (the case's configuration, the
    general kernel). A frame whose dims leave no other size of their bucket is left out."""
    if not frame:
        return []
    found = []
    first = _other_in_bucket(frame[0])
    if first is not None:
        found.append((first,) + frame[1:])
    found.append((2 * frame[0] + 1,) + frame[1:])
    last = _other_in_bucket(frame[-1])
    if last is not None and len(frame) > 1:
        found.append(frame[:-1] + (last,))
    return found


def _other_in_bucket(size: int) -> int | None:
    """Another size of ``size``'s power-of-two bucket: one below it where the bucket has room, else
    one above; None for sizes of 2 and less (their bucket holds no other size of 2 or more)."""
    if size <= 2:
        return None
    low = 1 << (size - 1).bit_length() - 1  # the bucket is (low, 2 * low]
    if size - 1 > low:
        return size - 1
    return size + 1 if size + 1 <= 2 * low else None


def resized(shape: Shape, frame: Shape, target: Shape) -> Shape:
    """``shape`` right-aligned against ``frame``: each dim equal to the frame's becomes ``target``'s."""
    offset = len(frame) - len(shape)
    return tuple(target[offset + j] if 0 <= offset + j and size == frame[offset + j] else size
                 for j, size in enumerate(shape))


def _frame(shapes: list) -> Shape:
    import torch

    try:
        return tuple(torch.broadcast_shapes(*shapes))
    except RuntimeError:  # shapes that do not broadcast together (a matmul's): the highest rank's
        return tuple(max(shapes, key=len))


def _fresh(like, shape: Shape, generators: dict, seed: int):
    """A new tensor of ``shape`` with ``like``'s dtype and device (see the module doc)."""
    import torch

    generator = generators.get(like.device)
    if generator is None:
        generator = generators[like.device] = torch.Generator(device=like.device).manual_seed(seed)
    make = {"generator": generator, "device": like.device}
    if like.dtype.is_floating_point or like.dtype.is_complex:
        # fp32 first: fp8 has no randn of its own
        fresh = torch.randn(shape, dtype=like.dtype if like.dtype.is_complex else torch.float32, **make)
        if like.dtype.is_floating_point and like.numel() and bool((like.float() >= 0).all()):
            fresh = fresh.abs()
        return fresh.to(like.dtype)
    if like.dtype == torch.bool:
        return torch.randint(0, 2, shape, **make).bool()
    low, high = (int(like.min()), int(like.max()) + 1) if like.numel() else (0, 2)
    return torch.randint(low, high, shape, dtype=like.dtype, **make)
