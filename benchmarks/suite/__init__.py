"""A suite of hand-written Triton kernels, written the way people commonly write them (fixed
small blocks, default ``num_warps``), each with a torch reference, a realistic GPU size and a small
odd size for the CPU interpreter. ``run.py`` is the program ``tritune capture``/``optimize`` run.

``SUITE`` lists every ``Case``; ``by_name(names)`` picks some; ``compare`` checks an output.
Importing this package imports torch and triton: set ``TRITON_INTERPRET=1`` first to run the
kernels on the CPU.
"""

from __future__ import annotations

from benchmarks.suite.case import CATEGORIES, TOLERANCE, Case, Comparison, Tolerance, compare
from benchmarks.suite.cases_dense import CASES as _DENSE
from benchmarks.suite.cases_infer import CASES as _INFER
from benchmarks.suite.cases_pointwise import CASES as _POINTWISE
from benchmarks.suite.cases_rows import CASES as _ROWS
from benchmarks.suite.cases_train import CASES as _TRAIN

SUITE: list[Case] = [*_POINTWISE, *_ROWS, *_DENSE, *_TRAIN, *_INFER]

__all__ = ["CATEGORIES", "SUITE", "TOLERANCE", "Case", "Comparison", "Tolerance", "by_name", "compare"]


def by_name(names: list[str] | None = None) -> list[Case]:
    """The cases called ``names``, in suite order (all when None); unknown names raise ValueError."""
    if not names:
        return list(SUITE)
    known = {case.name for case in SUITE}
    unknown = [name for name in names if name not in known]
    if unknown:
        raise ValueError(f"unknown kernel(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    wanted = set(names)
    return [case for case in SUITE if case.name in wanted]
