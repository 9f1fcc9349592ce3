"""Search: the variants worth trying for a launch (``space``: the knobs; ``proposers``: who proposes;
``cache_hints``: eviction-policy variants of the kernel's source; ``looped_reduction``: an Inductor
persistent reduction rewritten to loop; ``changes``: which knobs a variant turns)."""

from tritune.search.cache_hints import CacheHintProposer
from tritune.search.changes import changed_knobs
from tritune.search.looped_reduction import LoopedReductionProposer
from tritune.search.proposers import LaunchConfigSearch, PassSetProposer, Proposer, Trial, config_of, variant_of
from tritune.search.space import Knob, knobs

__all__ = ["CacheHintProposer", "Knob", "LaunchConfigSearch", "LoopedReductionProposer", "PassSetProposer",
           "Proposer", "Trial", "changed_knobs", "config_of", "knobs", "variant_of"]
