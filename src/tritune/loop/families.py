"""The proposer families the loop runs, and the order the bottleneck gives them.

A family (``search.family.Family``) is a proposer with the verification mode its variants need:

    launch-config   num_warps, num_stages, maxnreg, grid blocks, Inductor's XBLOCK/YBLOCK/R0_BLOCK
                    -> ``tolerance``: another block or warp count may reorder a reduction; a
                    variant that changes only ``maxnreg`` -> ``bitwise`` (a register cap moves
                    values to local memory, never changes an operation). On a source rewrite the
                    held decision made, the configs go on that source (``search.proposers``).
    passes          tritune's exact IR passes -> ``bitwise``; the fast-math set (only with
                    ``--fast-math``) -> ``fast_math`` (max relative error 1e-4, NaN/Inf parity)
    cache-hints     eviction policy per load -> ``bitwise``: a cache hint changes no arithmetic
    looped-reduction  an Inductor persistent reduction rewritten to loop over its row
                    (``search.looped_reduction``) -> ``tolerance``: a sum is added chunk by chunk
    source-rewrite  the rules of ``tritune.rewrites`` (``search.rewrites``) -> the mode of the
                    rewrite's class: exact -> ``bitwise``, tolerance, fast_math (only with
                    ``--fast-math``)

``REGISTRY`` lists them, in the default order; adding a family is its module (a proposer, its
mode and a ``family(fast_math, root)`` function) and one line there. Every family gets the same
``Context`` each round. The bottleneck classifier names families in its own vocabulary
(``tritune.profile.FAMILIES``); ``inductor-blocks`` is the launch-config search over Inductor's
block knobs, then the persistent reduction's R0_BLOCK that coordinate descent never moves (the
looped rewrite).
"""

from __future__ import annotations

from typing import Callable

from tritune.capture.spec import LaunchSpec
from tritune.replay import Variant
from tritune.search import rewrites
from tritune.search.cache_hints import CacheHintProposer
from tritune.search.family import Context, Family
from tritune.search.looped_reduction import LoopedReductionProposer
from tritune.search.proposers import LaunchConfigSearch, PassSetProposer, config_mode

__all__ = ["ALIASES", "Context", "DEFAULT_KNOBS", "DEFAULT_ORDER", "Family", "REGISTRY", "families_for", "order_of"]


def _tolerance(variant: Variant) -> str:
    return "tolerance"


def _bitwise(variant: Variant) -> str:
    return "bitwise"


def _pass_mode(variant: Variant) -> str:
    return "fast_math" if variant.fast_math else "bitwise"


def _launch_config(fast_math: bool, root: str | None) -> Family:
    return Family(LaunchConfigSearch.name, LaunchConfigSearch(), config_mode, reads_context=True)


def _passes(fast_math: bool, root: str | None) -> Family:
    return Family(PassSetProposer.name, PassSetProposer(fast_math=fast_math, root=root), _pass_mode)


def _cache_hints(fast_math: bool, root: str | None) -> Family:
    return Family(CacheHintProposer.name, CacheHintProposer(root), _bitwise)


def _looped_reduction(fast_math: bool, root: str | None) -> Family:
    return Family(LoopedReductionProposer.name, LoopedReductionProposer(root), _tolerance)  # [] unless persistent


# (fast_math, root) -> the family for one kernel's loop, in the default order
REGISTRY: tuple[Callable[[bool, str | None], Family], ...] = (
    _launch_config, _passes, _cache_hints, _looped_reduction, rewrites.family,
)
ALIASES = {"inductor-blocks": ("launch-config", "looped-reduction")}
DEFAULT_ORDER = [make(False, None).name for make in REGISTRY]
DEFAULT_KNOBS = ("block", "num_warps", "num_stages")


def families_for(spec: LaunchSpec, fast_math: bool = False, root: str | None = None) -> list[Family]:
    """``root``: the capture directory, whose copy of the source the source families rewrite (the
    program's own file may have changed since the capture). Every family, whatever ``spec``: one
    that has nothing for it proposes nothing."""
    return [make(fast_math, root) for make in REGISTRY]


def order_of(bottleneck: dict | None) -> tuple[list[str], tuple[str, ...]]:
    """(family names most promising first, knob roles first) from a bottleneck's JSON."""
    if not bottleneck:
        return list(DEFAULT_ORDER), DEFAULT_KNOBS
    names = [name for n in bottleneck.get("proposers") or DEFAULT_ORDER for name in ALIASES.get(n, (n,))]
    return list(dict.fromkeys(names + DEFAULT_ORDER)), tuple(bottleneck.get("knobs") or DEFAULT_KNOBS)
