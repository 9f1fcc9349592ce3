"""Elementwise kernels as people write them: one flat 1D grid, a hardcoded BLOCK_SIZE, default warps.

vector add (fp32), fused scale + per-column bias (fp16, math in fp32), residual add + scale (bf16)
and an AdamW step that updates three of its four tensors in place.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(axis=0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x + y, mask=mask)


def add(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = out.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    add_kernel[grid](x, y, out, n_elements, BLOCK_SIZE=1024)
    return out


@triton.jit
def scale_bias_kernel(x_ptr, bias_ptr, out_ptr, scale, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    bias = tl.load(bias_ptr + offsets % n_cols, mask=mask).to(tl.float32)
    out = x * scale + bias
    tl.store(out_ptr + offsets, out.to(out_ptr.dtype.element_ty), mask=mask)


def scale_bias(x: torch.Tensor, bias: torch.Tensor, scale: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    grid = (triton.cdiv(n_elements, 1024),)
    scale_bias_kernel[grid](x, bias, out, scale, n_elements, x.shape[-1], BLOCK_SIZE=1024)
    return out


@triton.jit
def residual_add_scale_kernel(x_ptr, residual_ptr, out_ptr, alpha, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    residual = tl.load(residual_ptr + offsets, mask=mask).to(tl.float32)
    out = residual + alpha * x
    tl.store(out_ptr + offsets, out.to(tl.bfloat16), mask=mask)


def residual_add_scale(x: torch.Tensor, residual: torch.Tensor, alpha: float) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    BLOCK_SIZE = 512
    grid = (triton.cdiv(n_elements, BLOCK_SIZE),)
    residual_add_scale_kernel[grid](x, residual, out, alpha, n_elements, BLOCK_SIZE=BLOCK_SIZE)
    return out


@triton.jit
def adamw_kernel(param_ptr, grad_ptr, exp_avg_ptr, exp_avg_sq_ptr, n_elements,
                 lr, beta1, beta2, eps, weight_decay, bias_correction1, bias_correction2,
                 BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    param = tl.load(param_ptr + offsets, mask=mask)
    grad = tl.load(grad_ptr + offsets, mask=mask)
    exp_avg = tl.load(exp_avg_ptr + offsets, mask=mask)
    exp_avg_sq = tl.load(exp_avg_sq_ptr + offsets, mask=mask)

    param = param * (1 - lr * weight_decay)
    exp_avg = beta1 * exp_avg + (1 - beta1) * grad
    exp_avg_sq = beta2 * exp_avg_sq + (1 - beta2) * grad * grad
    denom = tl.sqrt(exp_avg_sq / bias_correction2) + eps
    param = param - lr * (exp_avg / bias_correction1) / denom

    tl.store(param_ptr + offsets, param, mask=mask)
    tl.store(exp_avg_ptr + offsets, exp_avg, mask=mask)
    tl.store(exp_avg_sq_ptr + offsets, exp_avg_sq, mask=mask)


def adamw_step(param, grad, exp_avg, exp_avg_sq, step, lr=1e-3, beta1=0.9, beta2=0.999, eps=1e-8,
               weight_decay=1e-2):
    """One AdamW step, in place on ``param``, ``exp_avg`` and ``exp_avg_sq``; returns them."""
    n_elements = param.numel()
    grid = (triton.cdiv(n_elements, 1024),)
    adamw_kernel[grid](param, grad, exp_avg, exp_avg_sq, n_elements, lr, beta1, beta2, eps, weight_decay,
                       1 - beta1 ** step, 1 - beta2 ** step, BLOCK_SIZE=1024)
    return param, exp_avg, exp_avg_sq
