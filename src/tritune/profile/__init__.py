"""Profile: what limits a launch, and what to try next.

- ``bottleneck``  classify a launch from its facts (timing, roofline, static analysis, ncu when
                  present) and turn profiler deltas into refinement hints. Pure logic.
- ``static``      registers, spills, shared memory, occupancy, grid and reduction facts of one
                  captured launch (the compiled kernel on a GPU, an sm_90 compile elsewhere).
- ``ncu``         find Nsight Compute and run it on exactly one launch of one kernel; why not.
- ``ncu_csv``     parse ncu's ``--csv --page raw`` table into Facts keys.
- ``target``      the program ncu profiles: ``python -m tritune.profile.target PAYLOAD.json``.
- ``runner``      ``profile_launch``: timing + static + ncu merged and classified; ``profile_job``
                  for a worker (``"tritune.profile.runner:profile_job"``).

Importing this package loads neither torch nor Triton.
"""

from tritune.profile.bottleneck import (FAMILIES, HINTS, KINDS, Bottleneck, Facts, Hint, classify, dominant_stall,
                                        hints_from_delta, order_knobs, stall_reason, stall_shares)
from tritune.profile.ncu import NcuUnavailable, find_ncu
from tritune.profile.runner import Profile, merge_facts, profile_job, profile_launch

__all__ = ["Bottleneck", "FAMILIES", "Facts", "HINTS", "Hint", "KINDS", "NcuUnavailable", "Profile", "classify",
           "dominant_stall", "find_ncu", "hints_from_delta", "merge_facts", "order_knobs", "profile_job",
           "profile_launch", "stall_reason", "stall_shares"]
