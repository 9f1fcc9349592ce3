"""Verify: compare a variant's outputs with the baseline's, poisoned, on fresh inputs.

``tolerances`` holds the one table of tolerances, ``compare`` the element-wise comparison (and
the poison), ``draws`` the transformed draws (scaled, negated) against value-conditional kernels,
``memory`` the peak device memory of each side, ``check`` the whole verification of a variant
through the replay API.
"""

from tritune.verify.check import WRONG_RESULT, VerifyResult, verify, verify_job
from tritune.verify.compare import (CompareResult, Spread, Worst, bits, compare, holds_poison, poison,
                                    spread, unwritten)
from tritune.verify.draws import DRAWS
from tritune.verify.tolerances import MODES, TABLE, Tolerance, tolerance_for, widen

__all__ = ["CompareResult", "DRAWS", "MODES", "Spread", "TABLE", "Tolerance", "VerifyResult", "WRONG_RESULT", "Worst",
           "bits", "compare", "holds_poison", "poison", "spread", "tolerance_for", "unwritten", "verify",
           "verify_job", "widen"]
