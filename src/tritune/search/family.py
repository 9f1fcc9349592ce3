"""A proposer family, and the one value the loop hands every family when it asks for proposals.

``Family``: a proposer with the verification mode its variants need (``tritune.loop.families``
registers them). A proposer sees the launch and its trials (``propose(spec, trials, limit)``);
one that needs more of the loop's state reads the ``Context`` (``propose_in(context, limit)``,
``reads_context=True``), instead of the loop setting attributes on the proposers it recognises.

``Context``, what the loop knows about one kernel:

    spec        the captured launch
    trials      every candidate so far, with its failure kind and message (``Trial``)
    root        the capture directory (its ``sources/`` copy is the text a source rewrite edits)
    fast_math   whether the user allows fast-math variants
    profile     the latest profile's JSON (facts, bottleneck): the baseline's, then the accepted
                variant's after each acceptance
    knob_roles  launch-config knobs first in this order (the bottleneck's ``knobs``)
    hints       refine hints after the last acceptance (``profile.hints_from_delta``: action, text)
    accepted    the decision held so far (``Variant()`` while there is none)
    registers   the baseline's registers per thread, when analysed (trims ``maxnreg``)
    baseline_ms the baseline's time (None before it is timed)
    prior       whole launch configs the store decided for kernels like this one, best first
                (``search.prior``): the config search proposes them first

Pure data: reading ``source`` is the only work it does, once.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable

from tritune.model.launch import LaunchSpec, SpecError
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.search.cache_hints import CacheHintProposer


@dataclasses.dataclass(frozen=True)
class Context:
    spec: LaunchSpec
    trials: list[Trial] = dataclasses.field(default_factory=list)
    root: str | None = None
    fast_math: bool = False
    profile: dict = dataclasses.field(default_factory=dict)
    knob_roles: tuple[str, ...] = ()
    hints: tuple[dict, ...] = ()
    accepted: Variant = Variant()
    registers: int | None = None
    baseline_ms: float | None = None
    prior: tuple[dict, ...] = ()

    @property
    def bottleneck(self) -> dict | None:
        return self.profile.get("bottleneck") or None

    @functools.cached_property
    def source(self) -> str | None:
        """The kernel's captured source file, read as the cache-hint proposer reads it (the
        capture's copy); None when it cannot be read: no source rewrite is proposed then."""
        try:
            return CacheHintProposer(self.root).source_of(self.spec)
        except (SpecError, OSError, UnicodeDecodeError):
            return None


@dataclasses.dataclass
class Family:
    name: str
    proposer: Any  # ``propose(spec, trials, limit)``; with ``reads_context``: ``propose_in(context, limit)``
    mode: Callable[[Variant], str]  # the verification mode of each variant it proposes
    reads_context: bool = False
    # A family that costs per proposal (a model's tokens): it never takes a model-free family's
    # slot; the loop gives it the rounds that remain once those are done (``loop.kernel``).
    costly: bool = False

    def propose(self, context: Context, limit: int) -> list[Variant]:
        if self.reads_context:
            return self.proposer.propose_in(context, limit)
        return self.proposer.propose(context.spec, context.trials, limit)
