"""int8 quantization with one absmax scale per row, and back, default warps.

``quantize_int8``: one row per program, BLOCK_SIZE = next_power_of_2(n_cols); scale = absmax / 127,
q = x / scale rounded half away from zero (fp16 in, int8 + fp32 scales out). ``dequantize_int8``:
flat 1D grid of 1024-element blocks, row = offset // n_cols (int8 + fp32 scales in, bf16 out).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def quantize_int8_kernel(x_ptr, q_ptr, scale_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    absmax = tl.maximum(tl.max(tl.abs(x), axis=0), 1e-8)
    scale = absmax / 127.0
    q = x / scale
    q = tl.where(q >= 0, q + 0.5, q - 0.5).to(tl.int8)
    tl.store(q_ptr + row * row_stride + cols, q, mask=mask)
    tl.store(scale_ptr + row, scale)


def quantize_int8(x: torch.Tensor):
    n_rows, n_cols = x.shape
    q = torch.empty(x.shape, device=x.device, dtype=torch.int8)
    scale = torch.empty(n_rows, device=x.device, dtype=torch.float32)
    quantize_int8_kernel[(n_rows,)](x, q, scale, x.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return q, scale


@triton.jit
def dequantize_int8_kernel(q_ptr, scale_ptr, out_ptr, n_elements, n_cols, BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    offsets = pid * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n_elements
    q = tl.load(q_ptr + offsets, mask=mask, other=0).to(tl.float32)
    scale = tl.load(scale_ptr + offsets // n_cols, mask=mask, other=0.0)
    tl.store(out_ptr + offsets, (q * scale).to(tl.bfloat16), mask=mask)


def dequantize_int8(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    out = torch.empty(q.shape, device=q.device, dtype=torch.bfloat16)
    n_elements = q.numel()
    dequantize_int8_kernel[(triton.cdiv(n_elements, 1024),)](q, scale, out, n_elements, q.shape[-1],
                                                             BLOCK_SIZE=1024)
    return out
