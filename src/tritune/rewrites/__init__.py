"""Source rewrites of a kernel an expert would make, legal by analysis (``base`` says how a rule
works). One rule a module; ``RULES`` is the registry: adding a rule is its module plus one line."""

from __future__ import annotations

from tritune.rewrites.base import (CLASSES, EXACT, FAST_MATH, NOALIAS, TOLERANCE, Edit, KernelSource, Knob,
                                   NotRewritable, Rewrite, Rule)

RULES: dict[str, Rule] = {}

__all__ = ["CLASSES", "EXACT", "FAST_MATH", "NOALIAS", "TOLERANCE", "Edit", "KernelSource", "Knob", "NotRewritable",
           "Rewrite", "Rule", "RULES"]
from tritune.rewrites.pipeline_loop import PipelineLoop  # noqa: E402
RULES[PipelineLoop.name] = PipelineLoop()
from tritune.rewrites.persistent_grid import PersistentGrid  # noqa: E402
RULES[PersistentGrid.name] = PersistentGrid()
from tritune.rewrites.hoist_invariant_load import HoistInvariantLoad  # noqa: E402
RULES[HoistInvariantLoad.name] = HoistInvariantLoad()
from tritune.rewrites.broadcast_sum_to_dot import BroadcastSumToDot  # noqa: E402
RULES[BroadcastSumToDot.name] = BroadcastSumToDot()
