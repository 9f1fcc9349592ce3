"""Proposer families behind one interface, and how each family's candidates are verified.

A family wraps a proposer (``tritune.search``) with the verification mode its variants need:

    launch-config   num_warps, num_stages, maxnreg, grid blocks, Inductor's XBLOCK/YBLOCK/R0_BLOCK
                    -> ``tolerance``: another block or warp count may reorder a reduction; a
                    variant that changes only ``maxnreg`` -> ``bitwise`` (a register cap moves
                    values to local memory, never changes an operation)
    looped-reduction  an Inductor persistent reduction rewritten to loop over its row
                    (``search.looped_reduction``) -> ``tolerance``: a sum is added chunk by chunk
    passes          tritune's exact IR passes -> ``bitwise``; the fast-math set (only with
                    ``--fast-math``) -> ``fast_math`` (max relative error 1e-4, NaN/Inf parity)
    cache-hints     eviction policy per load -> ``bitwise``: a cache hint changes no arithmetic

The bottleneck classifier names families in its own vocabulary (``tritune.profile.FAMILIES``);
``inductor-blocks`` is the launch-config search over Inductor's block knobs, then the persistent
reduction's R0_BLOCK that coordinate descent never moves (the looped rewrite).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Callable

from tritune.capture.spec import LaunchSpec
from tritune.replay import Variant
from tritune.search import space
from tritune.search.looped_reduction import LoopedReductionProposer
from tritune.search.proposers import LaunchConfigSearch, PassSetProposer, Trial

ALIASES = {"inductor-blocks": ("launch-config", "looped-reduction")}
DEFAULT_ORDER = ["launch-config", "passes", "cache-hints", "looped-reduction"]
DEFAULT_KNOBS = ("block", "num_warps", "num_stages")


@dataclasses.dataclass
class Family:
    name: str
    proposer: Any  # a tritune.search Proposer
    mode: Callable[[Variant], str]

    def propose(self, spec: LaunchSpec, trials: list[Trial], limit: int, knob_roles: tuple[str, ...]) -> list[Variant]:
        if isinstance(self.proposer, LaunchConfigSearch):
            self.proposer.order = _knob_order(spec, knob_roles)
        return self.proposer.propose(spec, trials, limit)


def families_for(spec: LaunchSpec, fast_math: bool = False, root: str | None = None) -> list[Family]:
    """``root``: the capture directory, whose copy of the source the cache hints rewrite (the
    program's own file may have changed since the capture)."""
    found = [Family("launch-config", LaunchConfigSearch(), _launch_config_mode),
             Family("passes", PassSetProposer(fast_math=fast_math, root=root), _pass_mode)]
    hints = _cache_hint_proposer(root)
    if hints is not None:
        found.append(Family("cache-hints", hints, _bitwise))
    found.append(Family("looped-reduction", LoopedReductionProposer(root), _tolerance))  # [] unless persistent
    return found


def order_of(bottleneck: dict | None) -> tuple[list[str], tuple[str, ...]]:
    """(family names most promising first, knob roles first) from a bottleneck's JSON."""
    if not bottleneck:
        return list(DEFAULT_ORDER), DEFAULT_KNOBS
    names = [name for n in bottleneck.get("proposers") or DEFAULT_ORDER for name in ALIASES.get(n, (n,))]
    return list(dict.fromkeys(names + DEFAULT_ORDER)), tuple(bottleneck.get("knobs") or DEFAULT_KNOBS)


def _knob_order(spec: LaunchSpec, roles: tuple[str, ...]) -> list[str]:
    """Knob names most promising first: the bottleneck's roles; for a launch Inductor's coordinate
    descent already tuned, the knobs it never turns (num_stages, maxnreg) before those it walked
    to a local optimum (its blocks and warps), whatever the roles."""
    from tritune.profile.bottleneck import Bottleneck, order_knobs

    names = order_knobs(Bottleneck("given", "", (), (), tuple(roles)), [k.name for k in space.knobs(spec)])
    if spec.kind == "inductor" and spec.extra.get("config_from") == "coordinate_descent":
        names.sort(key=lambda name: name in space.COORDINATE_DESCENT_KNOBS)  # stable: roles kept within
    return names


def _cache_hint_proposer(root: str | None) -> Any | None:
    from tritune.search.cache_hints import CacheHintProposer

    return CacheHintProposer(root)


def use_registers(families: list[Family], registers: int | None) -> None:
    """The baseline's register count: ``maxnreg`` then offers only caps below it (each one step
    of occupancy), not a no-op cap above what the kernel uses."""
    for family in families:
        if isinstance(family.proposer, LaunchConfigSearch):
            family.proposer.registers = registers


def _tolerance(variant: Variant) -> str:
    return "tolerance"


def _launch_config_mode(variant: Variant) -> str:
    only_registers = not variant.constexprs and set(variant.options) == {"maxnreg"}
    return "bitwise" if only_registers else "tolerance"


def _bitwise(variant: Variant) -> str:
    return "bitwise"


def _pass_mode(variant: Variant) -> str:
    return "fast_math" if variant.fast_math else "bitwise"
