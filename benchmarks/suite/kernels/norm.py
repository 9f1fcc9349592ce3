"""Normalization kernels, one row per program, default warps, statistics in fp32.

``layer_norm_fwd`` holds the whole row in one block (BLOCK_SIZE = next_power_of_2(n_cols); fp16
in, weight, bias and out). ``rms_norm_fwd`` loops over the row twice in fixed 1024-column blocks
(bf16). ``l2_normalize`` divides each row by its L2 norm, like ``F.normalize`` (fp32, one block).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def layer_norm_fwd_kernel(x_ptr, weight_ptr, bias_ptr, y_ptr, row_stride, n_cols, eps,
                          BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    mean = tl.sum(x, axis=0) / n_cols
    xc = tl.where(mask, x - mean, 0.0)
    var = tl.sum(xc * xc, axis=0) / n_cols
    rstd = 1 / tl.sqrt(var + eps)
    weight = tl.load(weight_ptr + cols, mask=mask).to(tl.float32)
    bias = tl.load(bias_ptr + cols, mask=mask).to(tl.float32)
    y = xc * rstd * weight + bias
    tl.store(y_ptr + row * row_stride + cols, y.to(tl.float16), mask=mask)


def layer_norm_fwd(x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor, eps: float = 1e-5) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    BLOCK_SIZE = triton.next_power_of_2(n_cols)
    layer_norm_fwd_kernel[(n_rows,)](x, weight, bias, y, x.stride(0), n_cols, eps, BLOCK_SIZE=BLOCK_SIZE)
    return y


@triton.jit
def rms_norm_fwd_kernel(x_ptr, weight_ptr, y_ptr, row_stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    x_row = x_ptr + row * row_stride
    y_row = y_ptr + row * row_stride
    sum_sq = tl.zeros([BLOCK_SIZE], dtype=tl.float32)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        x = tl.load(x_row + cols, mask=cols < n_cols, other=0.0).to(tl.float32)
        sum_sq += x * x
    rstd = tl.rsqrt(tl.sum(sum_sq, axis=0) / n_cols + eps)
    for start in range(0, n_cols, BLOCK_SIZE):
        cols = start + tl.arange(0, BLOCK_SIZE)
        mask = cols < n_cols
        x = tl.load(x_row + cols, mask=mask, other=0.0).to(tl.float32)
        w = tl.load(weight_ptr + cols, mask=mask).to(tl.float32)
        tl.store(y_row + cols, (x * rstd * w).to(tl.bfloat16), mask=mask)


def rms_norm_fwd(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    rms_norm_fwd_kernel[(n_rows,)](x, weight, y, x.stride(0), n_cols, eps, BLOCK_SIZE=1024)
    return y


@triton.jit
def l2_normalize_kernel(x_ptr, y_ptr, row_stride, n_cols, eps, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    norm = tl.sqrt(tl.sum(x * x, axis=0))
    y = x / tl.maximum(norm, eps)
    tl.store(y_ptr + row * row_stride + cols, y, mask=mask)


def l2_normalize(x: torch.Tensor, eps: float = 1e-12) -> torch.Tensor:
    n_rows, n_cols = x.shape
    y = torch.empty_like(x)
    l2_normalize_kernel[(n_rows,)](x, y, x.stride(0), n_cols, eps, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y
