"""Seed 000's Table I kernel in the common style: parameters named ``X``/``SUM``/``OUT``, not ``*_ptr``.

The same row is loaded twice, differing only in ``eviction_policy``, and each load is reduced.
``tritune analyze tests/data/table1_plain_names.py --constexpr R=128`` must find the pointers
from their use and show ``merge-redundant-loads`` and ``merge-redundant-reduces``.
"""

import triton
import triton.language as tl


@triton.jit
def table1_kernel(X, SUM, OUT, N, R: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, R)
    mask = cols < N
    first = tl.load(X + row * N + cols, mask=mask, other=0.0, eviction_policy="evict_last")
    second = tl.load(X + row * N + cols, mask=mask, other=0.0, eviction_policy="evict_first")
    tl.store(SUM + row, tl.sum(first, axis=0))
    tl.store(OUT + row, tl.sum(second, axis=0))
