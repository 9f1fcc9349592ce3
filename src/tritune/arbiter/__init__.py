"""The arbiter (TritonForge's Performance-Arbitrator): accept or reject a candidate, continue or
finish the search of a kernel.

- ``rules``    pure decisions on numbers: ``judge_candidate``, ``screen_candidate``, ``next_step``.
- ``confirm``  the interleaved re-timing of baseline and candidate that an acceptance needs.

Importing this package loads neither torch nor Triton.
"""

from tritune.arbiter.confirm import (ConfirmError, Confirmation, Timer, confirm, confirm_job, confirm_spec,
                                     confirmation_from_json, cpu_timer, cuda_timer, default_timer)
from tritune.arbiter.rules import (NOT_FINAL, Decision, Round, Verdict, beats_held, judge_candidate, next_step,
                                   screen_candidate)

__all__ = ["NOT_FINAL", "ConfirmError", "Confirmation", "Decision", "Round", "Timer", "Verdict", "beats_held", "confirm",
           "confirm_job", "confirm_spec", "confirmation_from_json", "cpu_timer", "cuda_timer", "default_timer",
           "judge_candidate", "next_step", "screen_candidate"]
