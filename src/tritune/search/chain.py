"""A source rewrite's chain in a variant: the rule, its parameters, then the config set on top.

``Variant.rewrite`` records the rule (``{"rule", "exact", "params"}``); the options and
constexprs of the same variant are the config the search found on the rewritten source. The
chain decides how the variant is verified (the weakest mode of its parts) and how the results
name it (``label``: ``pipeline-loop(S=3)``, then ``+ num_warps=8`` when a config is set).
"""

from __future__ import annotations

import dataclasses

from tritune.model.variant import Variant
from tritune.rewrites.base import EXACT, FAST_MATH, OPT_IN, TF32, TOLERANCE, Rewrite

MODES = {EXACT: "bitwise", TOLERANCE: "tolerance", FAST_MATH: "fast_math", TF32: "tf32"}  # class -> its gate
STRICTEST_FIRST = ("bitwise", "tolerance", "fast_math", "tf32")


def record(rewrite: Rewrite) -> dict:
    """What a variant keeps of the rewrite that made its source (JSON values only)."""
    return {"rule": rewrite.rule, "exact": rewrite.exact, "params": dict(rewrite.params)}


def label(rewrite: dict) -> str:
    """``rule(param=value, ...)``, as ``Rewrite.name`` writes it."""
    return Rewrite(rewrite["rule"], rewrite["exact"], "", "", dict(rewrite.get("params") or {})).name


def variant_of(rewrite: Rewrite, config: Variant | None = None) -> Variant:
    """The rewrite as a variant, with ``config``'s options and constexprs on top (a held decision's)."""
    return on_rewrite(Variant(name=rewrite.name, source=rewrite.source, grid=rewrite.grid,
                              fast_math=rewrite.exact in OPT_IN, rewrite=record(rewrite),
                              assumes=tuple(rewrite.assumes)), config)


def on_rewrite(base: Variant, config: Variant | None) -> Variant:
    """``config``'s options and constexprs on ``base``'s rewritten source (and its own grid, a
    persistent-grid rewrite's); named by the chain."""
    options, constexprs = dict(config.options if config else {}), dict(config.constexprs if config else {})
    if not (options or constexprs):
        return dataclasses.replace(base, name=label(base.rewrite), options={}, constexprs={})
    settings = Variant(options=options, constexprs=constexprs).describe()
    return dataclasses.replace(base, name=f"{label(base.rewrite)} + {settings}", options=options,
                               constexprs=constexprs, tiled=bool(config and config.tiled))


def rewrite_mode(variant: Variant) -> str:
    """The gate the variant's rewrite needs ("bitwise" when it has none)."""
    return MODES[variant.rewrite["exact"]] if variant.rewrite else "bitwise"


def weakest(*modes: str) -> str:
    """The mode that lets the most through: a chain is only as exact as its least exact part."""
    return max(modes, key=STRICTEST_FIRST.index)
