"""The grid of a launch whose decision changes constexprs, when the program gave a fixed grid.

A callable grid (``kernel[lambda meta: ...]``, what autotuned kernels use) needs nothing: Triton
calls it with the launch's constexprs, the decision's included, exactly as if the program had
been written with them. A tuple was computed by the program from the old values, so it is
recomputed the way verification computed it: ``grid_rule.infer`` (the function capture used to
write the spec's ``grid_rule``, from which replay recomputed the grid the variant was verified
on) explains dimensions as ``cdiv(numel, BLOCK)``; those are recomputed from the new values and
every other dimension is kept as the program gave it.

The one case left out (``None``: the launch runs as written, counted as skipped): a changed
integer constexpr named ``*BLOCK*`` gets smaller while a grid dimension of 1 is unexplained.
The arithmetic cannot tell ``cdiv(n, BLOCK) == 1`` (all of n fits one block) from "one program
per row" there, and a smaller block would leave part of n uncovered. A larger block is safe
either way (``cdiv(n, bigger) <= 1``), and an unexplained dimension above 1 is what replay kept
too, so verification ran that very grid.

``tiles`` (``Kernel.tiles``, from the kernel's source) is what capture gave ``infer`` too, for a
decision verified on such a rule (``Variant.tiled``); a decision stored before capture read the
source was verified on arithmetic's rule alone, and gets ``tiles=None``: each its own grid.
"""

from __future__ import annotations

from typing import Any, Mapping

from tritune.capture import grid_rule


def recompute(grid: Any, before: Mapping[str, Any], changes: Mapping[str, Any],
              scalars: Mapping[str, Any], tiles: set[tuple[int, str]] | None = None) -> tuple | None:
    """The grid for ``before`` updated with ``changes`` (constexprs, in parameter order, as capture
    saw them), or None when it cannot be told safely. ``scalars``: the launch's scalar arguments
    in parameter order (``infer`` prefers the first numel that matches, as at capture); ``tiles``:
    the kernel's, for a decision verified on them (module docstring)."""
    given = tuple(grid)
    moved = [name for name, value in changes.items() if _moves(before.get(name), value)]
    if not moved:
        return given
    padded = grid_rule.pad3(given)
    rule, _ = grid_rule.infer(padded, len(given), None, {}, dict(before), dict(scalars), tiles)
    dims = rule["dims"] if rule else [{"const": g} for g in padded]
    after = {**before, **changes}
    if any(_shrinks_unplaced_block(name, before, after, dims, padded, len(given)) for name in moved):
        return None
    values = {**scalars, **after}
    new = [grid_rule.cdiv(int(values[dim["numel"]]), int(values[dim["block"]])) if "block" in dim else padded[i]
           for i, dim in enumerate(dims)]
    return tuple(new[:len(given)])


def _moves(old: Any, new: Any) -> bool:
    """An integer constexpr whose value changes (only those can move a grid)."""
    return _is_int(old) and _is_int(new) and old != new


def _shrinks_unplaced_block(name: str, before: Mapping[str, Any], after: Mapping[str, Any], dims: list[dict],
                            padded: list[int], given: int) -> bool:
    # BLOCK 32 -> 16 with grid (1,): cdiv(20, 32) == 1, or one program per row? Unknown: not applied.
    if "BLOCK" not in name.upper() or after[name] >= before[name]:
        return False
    if any(dim.get("block") == name for dim in dims):
        return False  # placed: recomputed from its numel
    return any(padded[d] == 1 and "block" not in dims[d] for d in range(given))


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
