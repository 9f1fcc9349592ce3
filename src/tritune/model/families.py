"""The names of the proposer families: one vocabulary for the bottleneck's order, the loop's
registry, each proposer's ``name``, ``--families``/``--without`` and the results.

``INDUCTOR_BLOCKS`` is not a family of its own: the bottleneck names it for an Inductor kernel's
blocks, which two families search (``ALIASES``: the launch-config search over XBLOCK/R0_BLOCK,
and a persistent reduction rewritten to loop). ``LLM``, the model family, is also the rule a
model's variant names as the one that made its source (``Variant.rewrite["rule"]``).
"""

from typing import Any

LAUNCH_CONFIG = "launch-config"
PASSES = "passes"
CACHE_HINTS = "cache-hints"
LOOPED_REDUCTION = "looped-reduction"
SOURCE_REWRITE = "source-rewrite"
LLM = "llm"
INDUCTOR_BLOCKS = "inductor-blocks"

ALL = (LAUNCH_CONFIG, PASSES, CACHE_HINTS, LOOPED_REDUCTION, SOURCE_REWRITE, LLM)  # the default order
ALIASES = {INDUCTOR_BLOCKS: (LAUNCH_CONFIG, LOOPED_REDUCTION)}


def by_model(variant: Any) -> bool:
    """Whether a model wrote ``variant``'s source (its rewrite rule is the model family's name);
    False for None (the baseline) and anything without a rewrite."""
    rewrite = getattr(variant, "rewrite", None)
    return isinstance(rewrite, dict) and rewrite.get("rule") == LLM
