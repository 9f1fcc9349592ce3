"""Kernels whose fixed grid a block constexpr matches by arithmetic without tiling it
(``tests/capture/test_grid_blocks.py``), beside one it does tile."""

import triton
import triton.language as tl


@triton.jit
def per_head_kernel(q_ptr, out_ptr, stride_qb, stride_qh, BLOCK_D: tl.constexpr):
    # one program per (batch, head); a head's row of BLOCK_D, which must equal the head size. The
    # grid's heads equal cdiv(stride_qb, BLOCK_D): arithmetic alone explains them by the block
    b = tl.program_id(0)
    h = tl.program_id(1)
    offs = tl.arange(0, BLOCK_D)
    row = tl.load(q_ptr + b * stride_qb + h * stride_qh + offs)
    tl.store(out_ptr + b * stride_qb + h * stride_qh + offs, row * 2)


@triton.jit
def block_first_kernel(x_ptr, first_ptr, n, BLOCK: tl.constexpr):
    # one value a program (its block's first), into a buffer the host sized for the captured block
    pid = tl.program_id(0)
    tl.store(first_ptr + pid, tl.load(x_ptr + pid * BLOCK))


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(x_ptr + offs_m[:, None] * N + offs_n[None, :], mask=mask)
    tl.store(y_ptr + offs_n[None, :] * M + offs_m[:, None], tile, mask=mask)
