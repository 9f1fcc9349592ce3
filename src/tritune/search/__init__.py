"""Search: the variants worth trying for a launch (``space``: the knobs; ``proposers``: who proposes;
``cache_hints``: eviction-policy variants of the kernel's source; ``looped_reduction``: an Inductor
persistent reduction rewritten to loop; ``rewrites``: the source rewrite rules' variants; ``chain``:
a rewrite and the config on top of it; ``family``: a proposer with its verification mode, and the
``Context`` the loop hands it; ``changes``: which knobs a variant turns; ``inductor_configs``: the
configs Inductor's max-autotune would time, where the config search starts; ``cost``: a static
cost model that ranks a far-off launch's spanning first round)."""

from tritune.search.cache_hints import CacheHintProposer
from tritune.search.changes import changed_knobs
from tritune.search.family import Context, Family
from tritune.search.looped_reduction import LoopedReductionProposer
from tritune.search.proposers import LaunchConfigSearch, PassSetProposer, Proposer, config_of, variant_of
from tritune.search.rewrites import SourceRewriteProposer
from tritune.search.space import Knob, knobs

__all__ = ["CacheHintProposer", "Context", "Family", "Knob", "LaunchConfigSearch", "LoopedReductionProposer",
           "PassSetProposer", "Proposer", "SourceRewriteProposer", "changed_knobs", "config_of", "knobs",
           "variant_of"]
