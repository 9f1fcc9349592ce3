"""Prefix sums with ``tl.cumsum``, one row per program, default warps.

``cumsum_row``: the whole row in one block, BLOCK_SIZE = next_power_of_2(n_cols) (fp32).
``cumsum_looped``: long rows in fixed 1024-column blocks with a running carry (int32, exact).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def cumsum_row_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    tl.store(out_ptr + row * row_stride + cols, tl.cumsum(x, axis=0), mask=mask)


def cumsum_row(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    cumsum_row_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out


@triton.jit
def cumsum_looped_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    carry = 0
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0)
        tl.store(out_ptr + row * row_stride + cols, tl.cumsum(x, axis=0) + carry, mask=mask)
        carry += tl.sum(x, axis=0)


def cumsum_looped(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty_like(x)
    cumsum_looped_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK_SIZE=1024)
    return out
