"""The proposer families the loop runs, and the order the bottleneck gives them.

A family (``search.family.Family``) is a proposer with the verification mode its variants need:

    launch-config   num_warps, num_stages, maxnreg, grid blocks, Inductor's XBLOCK/YBLOCK/R0_BLOCK,
                    Inductor's max-autotune configs first (``search.inductor_configs``)
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
    llm             a model's rewrite of the kernel (``llm.family``, only with ``--llm``) ->
                    ``tolerance``; costly: it gets the rounds the others leave

``REGISTRY`` lists them, in the default order; adding a family is its module (a proposer, its
mode and a maker taking ``Setup``) and one line there. Every family gets the same
``Context`` each round. The bottleneck classifier names families in its own vocabulary
(``tritune.profile.FAMILIES``); ``inductor-blocks`` is the launch-config search over Inductor's
block knobs, then the persistent reduction's R0_BLOCK that coordinate descent never moves (the
looped rewrite).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from tritune.llm.family import LLMSession
from tritune.model import families as names
from tritune.model.launch import LaunchSpec
from tritune.model.variant import Variant
from tritune.search import rewrites
from tritune.search.cache_hints import CacheHintProposer
from tritune.search.family import Context, Family
from tritune.search.looped_reduction import LoopedReductionProposer
from tritune.search.proposers import LaunchConfigSearch, PassSetProposer, config_mode

__all__ = ["ALIASES", "Context", "DEFAULT_KNOBS", "DEFAULT_ORDER", "Family", "REGISTRY", "Setup", "families_for",
           "order_of"]


def _tolerance(variant: Variant) -> str:
    return "tolerance"


def _bitwise(variant: Variant) -> str:
    return "bitwise"


def _pass_mode(variant: Variant) -> str:
    return "fast_math" if variant.fast_math else "bitwise"


@dataclasses.dataclass(frozen=True)
class Setup:
    """What a family maker may need: ``llm`` is the run's ``llm.family.LLMSession`` (None: no
    model), with the store, key and run its exchanges are kept under."""

    fast_math: bool = False
    root: str | None = None
    llm: LLMSession | None = None
    store: Any = None
    key: Any = None
    run_id: int | None = None


def _launch_config(setup: Setup) -> Family:
    return Family(LaunchConfigSearch.name, LaunchConfigSearch(), config_mode, reads_context=True)


def _passes(setup: Setup) -> Family:
    return Family(PassSetProposer.name, PassSetProposer(fast_math=setup.fast_math, root=setup.root), _pass_mode)


def _cache_hints(setup: Setup) -> Family:
    return Family(CacheHintProposer.name, CacheHintProposer(setup.root), _bitwise)


def _looped_reduction(setup: Setup) -> Family:
    return Family(LoopedReductionProposer.name, LoopedReductionProposer(setup.root), _tolerance)  # [] unless persistent


def _source_rewrite(setup: Setup) -> Family:
    return rewrites.family(setup.fast_math, setup.root)


def _llm(setup: Setup) -> Family | None:
    if setup.llm is None:
        return None  # no endpoint given: no such family this run
    from tritune.llm.family import family

    return family(setup.llm, setup.store, setup.key, setup.run_id)


# Setup -> the family for one kernel's loop (None: not available this run), in the default order
REGISTRY: tuple[Callable[[Setup], Family | None], ...] = (
    _launch_config, _passes, _cache_hints, _looped_reduction, _source_rewrite, _llm,
)
ALIASES = names.ALIASES
DEFAULT_ORDER = list(names.ALL)
DEFAULT_KNOBS = ("block", "num_warps", "num_stages")


def families_for(spec: LaunchSpec, fast_math: bool = False, root: str | None = None, **setup: Any) -> list[Family]:
    """``root``: the capture directory, whose copy of the source the source families rewrite (the
    program's own file may have changed since the capture); ``setup``: the rest of ``Setup``.
    Every family available, whatever ``spec``: one that has nothing for it proposes nothing."""
    made = Setup(fast_math=fast_math, root=root, **setup)
    return [family for family in (make(made) for make in REGISTRY) if family is not None]


def order_of(bottleneck: dict | None) -> tuple[list[str], tuple[str, ...]]:
    """(family names most promising first, knob roles first) from a bottleneck's JSON."""
    if not bottleneck:
        return list(DEFAULT_ORDER), DEFAULT_KNOBS
    names = [name for n in bottleneck.get("proposers") or DEFAULT_ORDER for name in ALIASES.get(n, (n,))]
    return list(dict.fromkeys(names + DEFAULT_ORDER)), tuple(bottleneck.get("knobs") or DEFAULT_KNOBS)
