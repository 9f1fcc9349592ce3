"""Activation kernels: flat 1D grid, hardcoded BLOCK_SIZE, default warps, math in fp32.

GELU (tanh form, fp32), SiLU (bf16), SwiGLU (fp16), leaky ReLU (fp16) and ReLU squared (bf16).
triton.language has no tanh; GELU uses tanh(z) = 2 * sigmoid(2z) - 1, as many users write it.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gelu_tanh_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)  # sqrt(2 / pi)
    tanh = 2 * tl.sigmoid(2 * inner) - 1
    tl.store(out_ptr + offsets, 0.5 * x * (1 + tanh), mask=mask)


def gelu_tanh(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    gelu_tanh_kernel[(triton.cdiv(n_elements, 1024),)](x, out, n_elements, BLOCK_SIZE=1024)
    return out


@triton.jit
def silu_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    y = x * tl.sigmoid(x)
    tl.store(out_ptr + offsets, y.to(out_ptr.dtype.element_ty), mask=mask)


def silu(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    silu_kernel[(triton.cdiv(n_elements, 512),)](x, out, n_elements, BLOCK_SIZE=512)
    return out


@triton.jit
def swiglu_kernel(gate_ptr, up_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    gate = tl.load(gate_ptr + offsets, mask=mask).to(tl.float32)
    up = tl.load(up_ptr + offsets, mask=mask).to(tl.float32)
    out = gate * tl.sigmoid(gate) * up
    tl.store(out_ptr + offsets, out.to(tl.float16), mask=mask)


def swiglu(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(gate)
    n_elements = gate.numel()
    grid = lambda meta: (triton.cdiv(n_elements, meta["BLOCK_SIZE"]),)  # noqa: E731
    swiglu_kernel[grid](gate, up, out, n_elements, BLOCK_SIZE=1024)
    return out


@triton.jit
def leaky_relu_kernel(x_ptr, out_ptr, n_elements, negative_slope, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask)
    out = tl.where(x > 0, x, x * negative_slope)
    tl.store(out_ptr + offsets, out, mask=mask)


def leaky_relu(x: torch.Tensor, negative_slope: float = 0.01) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    leaky_relu_kernel[(triton.cdiv(n_elements, 256),)](x, out, n_elements, negative_slope, BLOCK_SIZE=256)
    return out


@triton.jit
def relu_squared_kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    relu = tl.maximum(x, 0.0)
    tl.store(out_ptr + offsets, (relu * relu).to(tl.bfloat16), mask=mask)


def relu_squared(x: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    relu_squared_kernel[(triton.cdiv(n_elements, 128),)](x, out, n_elements, BLOCK_SIZE=128)
    return out
