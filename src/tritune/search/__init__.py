"""Search: the variants worth trying for a launch (``space``: the knobs; ``proposers``: who proposes;
``cache_hints``: eviction-policy variants of the kernel's source)."""

from tritune.search.cache_hints import CacheHintProposer
from tritune.search.proposers import LaunchConfigSearch, PassSetProposer, Proposer, Trial, config_of, variant_of
from tritune.search.space import Knob, knobs

__all__ = ["CacheHintProposer", "Knob", "LaunchConfigSearch", "PassSetProposer", "Proposer", "Trial", "config_of",
           "knobs", "variant_of"]
