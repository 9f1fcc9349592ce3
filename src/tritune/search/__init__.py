"""Search: the variants worth trying for a launch (``space``: the knobs; ``proposers``: who proposes)."""

from tritune.search.proposers import LaunchConfigSearch, PassSetProposer, Proposer, Trial, config_of, variant_of
from tritune.search.space import Knob, knobs

__all__ = ["Knob", "LaunchConfigSearch", "PassSetProposer", "Proposer", "Trial", "config_of", "knobs", "variant_of"]
