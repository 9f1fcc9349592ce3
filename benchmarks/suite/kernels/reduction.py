"""Reduction kernels with fixed small blocks and default warps.

``row_sum`` loops over each row in 1024-column blocks (fp32). ``col_mean`` reduces over rows with
32 x 128 tiles, one program per 128 columns (fp32). ``max_abs`` takes each block's max and
combines them with ``tl.atomic_max`` into one fp32 value (fp16 input; max is order-free, so the
result is deterministic). ``mse_loss`` writes one partial sum per block and the wrapper adds them
(fp32; no float atomics, so the result is deterministic). ``row_l2_norm`` is the norm of each row
in one block (bf16 in, fp32 out).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def row_sum_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    acc = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        acc += tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0)
    tl.store(out_ptr + row, tl.sum(acc, axis=0))


def row_sum(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    row_sum_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK_SIZE=1024)
    return out


@triton.jit
def col_mean_kernel(x_ptr, out_ptr, n_rows, n_cols, row_stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    cols = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
    for start in range(0, n_rows, BLOCK_M):
        rows = start + tl.arange(0, BLOCK_M)
        mask = (rows[:, None] < n_rows) & (cols[None, :] < n_cols)
        acc += tl.load(x_ptr + rows[:, None] * row_stride + cols[None, :], mask=mask, other=0.0)
    mean = tl.sum(acc, axis=0) / n_rows
    tl.store(out_ptr + cols, mean, mask=cols < n_cols)


def col_mean(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty(n_cols, device=x.device, dtype=torch.float32)
    grid = lambda meta: (triton.cdiv(n_cols, meta["BLOCK_N"]),)  # noqa: E731
    col_mean_kernel[grid](x, out, n_rows, n_cols, x.stride(0), BLOCK_M=32, BLOCK_N=128)
    return out


@triton.jit
def max_abs_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + offsets, mask=offsets < n_elements, other=0.0).to(tl.float32)
    tl.atomic_max(out_ptr, tl.max(tl.abs(x), axis=0))


def max_abs(x: torch.Tensor) -> torch.Tensor:
    out = torch.zeros(1, device=x.device, dtype=torch.float32)
    n_elements = x.numel()
    max_abs_kernel[(triton.cdiv(n_elements, 1024),)](x, out, n_elements, BLOCK_SIZE=1024)
    return out


@triton.jit
def mse_partial_kernel(pred_ptr, target_ptr, partial_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    pred = tl.load(pred_ptr + offsets, mask=mask, other=0.0)
    target = tl.load(target_ptr + offsets, mask=mask, other=0.0)
    diff = pred - target
    tl.store(partial_ptr + pid, tl.sum(diff * diff, axis=0))


def mse_loss(pred: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    n_elements = pred.numel()
    n_blocks = triton.cdiv(n_elements, 1024)
    partial = torch.empty(n_blocks, device=pred.device, dtype=torch.float32)
    mse_partial_kernel[(n_blocks,)](pred, target, partial, n_elements, BLOCK_SIZE=1024)
    return partial.sum() / n_elements


@triton.jit
def row_l2_norm_kernel(x_ptr, out_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    x = tl.load(x_ptr + row * row_stride + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
    tl.store(out_ptr + row, tl.sqrt(tl.sum(x * x, axis=0)))


def row_l2_norm(x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    out = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    row_l2_norm_kernel[(n_rows,)](x, out, x.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return out
