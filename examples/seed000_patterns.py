"""Kernels reproducing the patterns of seed 000 (Triton IR optimization), small and readable.

- Table I: the same pointer loaded twice, differing only in ``eviction_policy`` (evict_last then
  evict_first), each load reduced. MLIR CSE does not merge them; ``merge-redundant-loads`` does,
  and then the two reduces are identical. ``row_sum_twice_kernel`` is the single-pass form (the
  shape Inductor emits when R0_BLOCK >= r0_numel); ``looped_row_sum_twice_kernel`` loops.
- Table II: division chains. ``(a / b) / c -> a / (b * c)`` and ``c / (a / b) -> (c * b) / a``
  (fast-math: reassociation changes rounding).
- Division by constants: by a power of two (``x / 8 -> x * 0.125``, exact) and by another
  constant (``x / 3 -> x * (1 / 3)``, fast-math).

    tritune analyze examples/seed000_patterns.py
"""

import triton
import triton.language as tl


@triton.jit
def row_sum_twice_kernel(x_ptr, sum_ptr, total_ptr, n_cols, BLOCK_N: tl.constexpr = 1024):
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK_N)
    mask = offs < n_cols
    first = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0, eviction_policy="evict_last")
    second = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    tl.store(sum_ptr + row, tl.sum(first, axis=0))
    tl.store(total_ptr + row, tl.sum(second, axis=0))


@triton.jit
def looped_row_sum_twice_kernel(x_ptr, sum_ptr, sq_ptr, n_cols, BLOCK_N: tl.constexpr = 256):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    acc_sq = tl.zeros([BLOCK_N], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_N):
        offs = start + tl.arange(0, BLOCK_N)
        mask = offs < n_cols
        first = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0, eviction_policy="evict_last")
        second = tl.load(x_ptr + row * n_cols + offs, mask=mask, other=0.0, eviction_policy="evict_first")
        acc += first
        acc_sq += second * second
    tl.store(sum_ptr + row, tl.sum(acc, axis=0))
    tl.store(sq_ptr + row, tl.sum(acc_sq, axis=0))


@triton.jit
def division_chain_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr = 1024):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    c = tl.load(c_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, (a / b) / c, mask=mask)  # Table II case 1


@triton.jit
def division_chain_divisor_kernel(a_ptr, b_ptr, c_ptr, out_ptr, n, BLOCK: tl.constexpr = 1024):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(a_ptr + offs, mask=mask)
    b = tl.load(b_ptr + offs, mask=mask)
    c = tl.load(c_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, c / (a / b), mask=mask)  # Table II case 2


@triton.jit
def divide_by_power_of_two_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr = 1024):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) / 8.0, mask=mask)


@triton.jit
def divide_by_constant_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr = 1024):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) / 3.0, mask=mask)
