"""The grid of an Inductor kernel as a rule, recomputed by Inductor's own grid code.

Inductor's launcher computes the grid from ``inductor_meta["grid_type"]`` (``Grid1D``,
``Grid2D``, ``Grid2DWithYZOverflow``, ``FixedGrid``, combo grids, ...), the chosen config's block
sizes (``XBLOCK``, ``YBLOCK``, ``R0_BLOCK``, ``RSPLIT`` ...) and the launch's scalar arguments
(``xnumel``, ``ynumel``, ``r0_numel``, and for ``FixedGrid`` the extra launcher arguments
``_grid_0..2``). ``GridExpr.from_meta(inductor_meta, config).eval_slow(scalars)`` is that
computation in torch 2.11 and 2.13 alike (checked in both sources), so a variant that changes a
block size gets the grid Inductor's launcher would have launched.

A rule is plain JSON::

    {"kind": "inductor", "grid_type": "Grid1D",
     "inductor_meta": {only the keys the grid classes read},
     "scalars": {"xnumel": 1024000, ...}}   # int arguments at capture, the fallback scope

Pure Python on any machine (it imports only ``torch._inductor.runtime.triton_heuristics``).
"""

from __future__ import annotations

from typing import Any, Iterable, Mapping

from tritune.model.launch import SpecError

KIND = "inductor"
# The inductor_meta keys the GridExpr classes read (torch 2.11-2.13).
GRID_META_KEYS = ("grid_type", "fixed_grid", "extra_launcher_args", "precomputed_grids",
                  "combo_grid_meta", "RSPLIT_SIZE")


def grid_rule(inductor_meta: Mapping[str, Any], scalars: Mapping[str, Any]) -> dict:
    """The rule for a kernel with this ``inductor_meta``, launched with these scalar arguments."""
    if not inductor_meta.get("grid_type"):
        raise SpecError(f"kernel {inductor_meta.get('kernel_name', '?')}: inductor_meta has no grid_type "
                        "(torch older than 2.6?): cannot rebuild its grid")
    meta = {key: inductor_meta[key] for key in GRID_META_KEYS if key in inductor_meta}
    ints = {name: value for name, value in scalars.items() if _is_int(value)}
    return {"kind": KIND, "grid_type": meta["grid_type"], "inductor_meta": meta, "scalars": ints}


def grid_for(rule: Mapping[str, Any], constexprs: Mapping[str, Any],
             args: Mapping[str, Any] | Iterable[Any] | None = None) -> tuple[int, int, int]:
    """The grid Inductor's launcher computes for these block sizes (``constexprs``) and scalar
    arguments (``args``: a name -> value mapping, or a spec's ``ArgSpec`` list; the rule's
    captured scalars fill in what is missing)."""
    if rule.get("kind") != KIND:
        raise SpecError(f"not an Inductor grid rule: kind {rule.get('kind')!r}")
    from torch._inductor.runtime import triton_heuristics

    meta = dict(rule.get("inductor_meta") or {"grid_type": rule.get("grid_type")})
    grid_type = meta.get("grid_type")
    grid_class = getattr(triton_heuristics, str(grid_type), None)
    base = getattr(triton_heuristics, "GridExpr", None)
    if base is None or not (isinstance(grid_class, type) and issubclass(grid_class, base)):
        import torch

        raise SpecError(f"grid type {grid_type!r} is unknown to torch {torch.__version__}'s Inductor")
    scope = {**rule.get("scalars", {}), **_scalars(args)}
    blocks = {name: value for name, value in constexprs.items() if _is_int(value)}
    try:
        grid = base.from_meta(meta, blocks).eval_slow(scope)
    except NameError as exc:  # the grid reads a scalar that neither the args nor the rule have
        raise SpecError(f"{grid_type} grid: {exc} (missing from the arguments and the rule)") from None
    except (AssertionError, KeyError) as exc:
        raise SpecError(f"{grid_type} grid rejects constexprs {blocks}: {type(exc).__name__} {exc}") from None
    return tuple(int(g) for g in grid)  # type: ignore[return-value]


def _scalars(args: Mapping[str, Any] | Iterable[Any] | None) -> dict[str, int]:
    if args is None:
        return {}
    if isinstance(args, Mapping):
        return {name: value for name, value in args.items() if _is_int(value)}
    found = {}
    for arg in args:  # ArgSpec list
        if getattr(arg, "kind", None) == "scalar" and _is_int(arg.value):
            found[arg.name] = arg.value
    return found


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
