"""How a launch's grid follows from its arguments, so a variant that changes a block size gets
the grid it needs: ``{"kind": "cdiv", "dims": [...]}`` (format in ``spec``).

Per grid dimension we look for an integer ``numel`` (a scalar argument or a constexpr) and an
integer constexpr ``block`` with ``dim == ceil(numel / block)``:

* a callable grid (``grid=lambda meta: ...``, what autotuned kernels use) is *probed*: called
  again with each constexpr doubled and halved; a dimension that moves is explained by the pair
  that predicts all three values (``"from": "probe"``). A constexpr that moves a dimension no
  pair explains (``cdiv(M, BM) * cdiv(N, BN)``) is listed in ``unexplained``: replay must not
  change it.
* a fixed grid (a tuple the program computed) can only be matched by arithmetic: only dimensions
  above 1, only constexprs named ``*BLOCK*`` (``"from": "arithmetic"``). A dimension of 1 is
  left constant: ``ceil(n / BLOCK) == 1`` also holds for a one-row kernel whose row fits in a
  block, and changing that grid would launch programs for rows that do not exist.

Either way, given ``tiles`` (``capture.grid_blocks.tiles``: the pairs of dimension and block
whose program index reaches memory only scaled by that block, read from the kernel's source), a
block only explains a dimension it tiles: arithmetic matches coincidences (``heads ==
cdiv(stride_qbs, BLOCK_DMODEL)``; a square grid's second dimension and its first block), and a
probed grid may follow a block the kernel's output layout depends on (one partial sum a program).
A probed block refused so is ``unexplained``. ``tiles=None`` (no source to read): arithmetic alone.
A rule made with ``tiles`` says so (``"tiles": true``), and so does each variant verified on it.
"""

from __future__ import annotations

from typing import Any, Callable


def cdiv(a: int, b: int) -> int:
    return -(-a // b)


def pad3(grid: Any) -> list[int]:
    dims = [int(g) for g in grid]
    if not 1 <= len(dims) <= 3:
        raise ValueError(f"grid {tuple(grid)!r} does not have 1 to 3 dimensions")
    return dims + [1] * (3 - len(dims))


def infer(grid: list[int], given: int, grid_fn: Callable | None, bound: dict[str, Any],
          constexprs: dict[str, Any], scalars: dict[str, Any],
          tiles: set[tuple[int, str]] | None = None) -> tuple[dict | None, list[str]]:
    """``(grid_rule or None, constexprs that move the grid in a way no rule explains)``.

    ``grid``: the launch's grid padded to 3; ``given``: how many dimensions the program gave;
    ``bound``: the arguments the grid function is called with; ``scalars``: runtime scalars;
    ``tiles``: which block may explain which dimension (module docstring), None for any.
    """
    ints = {k: v for k, v in constexprs.items() if _is_int(v)}
    blocks = sorted((k for k, v in ints.items() if v > 0), key=lambda k: "BLOCK" not in k.upper())
    numels = [(k, v) for k, v in scalars.items() if _is_int(v)] + list(ints.items())
    dims: list[dict] = [{"const": g} for g in grid]
    unexplained: list[str] = []
    if grid_fn is not None:
        _probe(grid, given, grid_fn, bound, blocks, ints, numels, dims, unexplained, tiles)
        origin = "probe"
    else:
        _arithmetic(grid, given, blocks, ints, numels, dims, tiles)
        origin = "arithmetic"
    if not any("block" in d for d in dims):
        return None, unexplained
    rule = {"kind": "cdiv", "dims": dims, "from": origin}
    if tiles is not None:
        rule["tiles"] = True  # a variant verified on it says so (``Variant.tiled``): the applier uses it too
    return rule, unexplained


def _probe(grid, given, grid_fn, bound, blocks, ints, numels, dims, unexplained, tiles) -> None:
    for block in blocks:
        value = ints[block]
        probes = {value: grid}
        for scaled in (value * 2, value // 2):
            if scaled >= 1 and scaled != value:
                try:
                    probes[scaled] = pad3(grid_fn({**bound, block: scaled}))
                except Exception:  # noqa: BLE001 - the user's grid function may reject the value
                    continue
        moved = [d for d in range(given) if any(p[d] != grid[d] for p in probes.values())]
        for d in moved:
            numel = _explain(d, block, probes, numels)
            if numel is not None and "block" not in dims[d] and (tiles is None or (d, block) in tiles):
                dims[d] = {"numel": numel, "block": block}
            elif block not in unexplained:
                unexplained.append(block)


def _explain(d: int, block: str, probes: dict[int, list[int]], numels) -> str | None:
    for name, n in numels:
        if name != block and all(cdiv(n, b) == g[d] for b, g in probes.items()):
            return name
    return None


def _arithmetic(grid, given, blocks, ints, numels, dims, tiles) -> None:
    named = [b for b in blocks if "BLOCK" in b.upper()]
    for d in range(given):
        if grid[d] <= 1:
            continue
        for block in named:
            if tiles is not None and (d, block) not in tiles:
                continue
            found = next((name for name, n in numels
                          if "BLOCK" not in name.upper() and cdiv(n, ints[block]) == grid[d]), None)
            if found is not None:
                dims[d] = {"numel": found, "block": block}
                break


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
