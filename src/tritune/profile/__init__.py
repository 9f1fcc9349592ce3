"""Profile: what limits a launch, and what to try next.

- ``bottleneck``  classify a launch from its facts (timing, roofline, static analysis, ncu when
                  present) and turn profiler deltas into refinement hints. Pure logic.

Importing this package loads neither torch nor Triton.
"""

from tritune.profile.bottleneck import (FAMILIES, HINTS, KINDS, Bottleneck, Facts, Hint, classify, dominant_stall,
                                        hints_from_delta, order_knobs, stall_reason, stall_shares)

__all__ = ["Bottleneck", "FAMILIES", "Facts", "HINTS", "Hint", "KINDS", "classify", "dominant_stall",
           "hints_from_delta", "order_knobs", "stall_reason", "stall_shares"]
