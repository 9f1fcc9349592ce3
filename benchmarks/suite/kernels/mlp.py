"""MLP activation kernels from training and inference code, math in fp32.

``swiglu_bwd`` is Liger-Kernel's SwiGLU backward: one row per program (BLOCK_SIZE =
next_power_of_2(n_cols)), recomputes silu(a) and writes da and db in place over a and b (bf16).

``silu_and_mul`` is LightLLM's: the packed (tokens, 2 * d) gate|up projection to (tokens, d), 128 x
128 tiles on a 2D grid, silu(gate) rounded to the input type before the product (fp16: the
interpreter multiplies bf16 tensors as integers, so the product in bf16 cannot be checked on the CPU).

``bias_gelu`` is the bias + exact (erf) GELU of a fused MLP epilogue over the flattened (tokens,
hidden) tensor in tiny 128-element blocks: a huge 1D grid, one small tile per program (fp16).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def swiglu_bwd_kernel(dc_ptr, a_ptr, b_ptr, stride, n_cols: tl.constexpr, BLOCK_SIZE: tl.constexpr):
    program_id = tl.program_id(0).to(tl.int64)
    dc_ptr += program_id * stride
    a_ptr += program_id * stride
    b_ptr += program_id * stride
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols
    dc_row = tl.load(dc_ptr + col_offsets, mask=mask, other=0)
    a_row = tl.load(a_ptr + col_offsets, mask=mask, other=0).to(tl.float32)
    b_row = tl.load(b_ptr + col_offsets, mask=mask, other=0)
    sig_a = tl.sigmoid(a_row)
    silu_a = a_row * sig_a
    db_row = dc_row * silu_a
    da_row = dc_row * (silu_a * (1 - sig_a) + sig_a) * b_row
    tl.store(a_ptr + col_offsets, da_row, mask=mask)
    tl.store(b_ptr + col_offsets, db_row, mask=mask)


def swiglu_bwd(a: torch.Tensor, b: torch.Tensor, dc: torch.Tensor):
    n_rows, n_cols = a.shape
    swiglu_bwd_kernel[(n_rows,)](dc, a, b, dc.stride(0), n_cols=n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return a, b


@triton.jit
def silu_and_mul_kernel(input_ptr, output_ptr, stride_input_m, stride_input_n, stride_output_m, stride_output_n,
                        size_m, size_n, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    stride_input_m = stride_input_m.to(tl.int64)
    stride_output_m = stride_output_m.to(tl.int64)
    tid = tl.program_id(0)
    pid = tl.program_id(1)
    m_offsets = tid * BLOCK_M + tl.arange(0, BLOCK_M)
    n_offsets = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    gate_offsets = m_offsets[:, None] * stride_input_m + n_offsets[None, :] * stride_input_n
    up_offsets = m_offsets[:, None] * stride_input_m + (n_offsets[None, :] + size_n) * stride_input_n
    res_offsets = m_offsets[:, None] * stride_output_m + n_offsets[None, :] * stride_output_n
    mask = (n_offsets < size_n)[None, :] & (m_offsets < size_m)[:, None]
    up = tl.load(input_ptr + up_offsets, mask=mask, other=0.0)
    gate = tl.load(input_ptr + gate_offsets, mask=mask, other=0.0).to(tl.float32)
    gate = gate / (1 + tl.exp(-gate))
    gate = gate.to(tl.float16)
    tl.store(output_ptr + res_offsets, up * gate, mask=mask)


def silu_and_mul(x: torch.Tensor) -> torch.Tensor:
    size_m, size_n = x.shape[0], x.shape[1] // 2
    out = torch.empty((size_m, size_n), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(size_m, 128), triton.cdiv(size_n, 128))
    silu_and_mul_kernel[grid](x, out, x.stride(0), x.stride(1), out.stride(0), out.stride(1), size_m, size_n,
                              BLOCK_M=128, BLOCK_N=128)
    return out


@triton.jit
def bias_gelu_kernel(x_ptr, bias_ptr, out_ptr, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    x = tl.load(x_ptr + offsets, mask=mask).to(tl.float32)
    bias = tl.load(bias_ptr + offsets % n_cols, mask=mask).to(tl.float32)
    x = x + bias
    y = 0.5 * x * (1 + tl.math.erf(x * 0.7071067811865476))
    tl.store(out_ptr + offsets, y.to(tl.float16), mask=mask)


def bias_gelu(x: torch.Tensor, bias: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n_elements = x.numel()
    bias_gelu_kernel[(triton.cdiv(n_elements, 128),)](x, bias, out, n_elements, x.shape[-1], BLOCK_SIZE=128)
    return out
