"""Fine-grained quantization as LLM inference engines do it: one scale per group or block.

``quantize_int8_group`` is SGLang's per-token-group int8 quantization: every 128 consecutive values
of a row form a group with its own absmax / 127 scale, one program per group (a huge 1D grid of
128-element tiles; bf16 in, int8 + fp32 scales out). It rounds half away from zero before the cast
(SGLang truncates; truncation turns 126.99999 into 126, so the absmax element of a group would
depend on fp32 division rounding).

``dequantize_fp8_block`` is DeepSeek-V3's weight_dequant: an fp8 (e4m3) weight with one fp32
scale per 128 x 128 block, back to bf16, one block per program on a 2D grid.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def quantize_int8_group_kernel(y_ptr, y_q_ptr, y_s_ptr, y_stride, N, eps, BLOCK: tl.constexpr):
    g_id = tl.program_id(0)
    y_ptr += g_id * y_stride
    y_q_ptr += g_id * y_stride
    y_s_ptr += g_id
    cols = tl.arange(0, BLOCK)
    mask = cols < N
    y = tl.load(y_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    _absmax = tl.maximum(tl.max(tl.abs(y)), eps)
    y_s = _absmax / 127.0
    y_q = y / y_s
    y_q = tl.where(y_q >= 0, y_q + 0.5, y_q - 0.5)
    y_q = tl.clamp(y_q, -127.0, 127.0).to(tl.int8)
    tl.store(y_q_ptr + cols, y_q, mask=mask)
    tl.store(y_s_ptr, y_s)


def quantize_int8_group(x: torch.Tensor, group_size: int = 128, eps: float = 1e-10):
    x_q = torch.empty(x.shape, device=x.device, dtype=torch.int8)
    x_s = torch.empty(x.shape[:-1] + (x.shape[-1] // group_size,), device=x.device, dtype=torch.float32)
    M = x.numel() // group_size
    quantize_int8_group_kernel[(M,)](x, x_q, x_s, group_size, group_size, eps,
                                     BLOCK=triton.next_power_of_2(group_size))
    return x_q, x_s


@triton.jit
def dequantize_fp8_block_kernel(x_ptr, s_ptr, y_ptr, M, N, BLOCK_SIZE: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    n = tl.cdiv(N, BLOCK_SIZE)
    offs_m = pid_m * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    offs_n = pid_n * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    offs = offs_m[:, None] * N + offs_n[None, :]
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    x = tl.load(x_ptr + offs, mask=mask).to(tl.float32)
    s = tl.load(s_ptr + pid_m * n + pid_n)
    y = x * s
    tl.store(y_ptr + offs, y, mask=mask)


def dequantize_fp8_block(x: torch.Tensor, s: torch.Tensor, block_size: int = 128) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((M, N), device=x.device, dtype=torch.bfloat16)
    grid = (triton.cdiv(M, block_size), triton.cdiv(N, block_size))
    dequantize_fp8_block_kernel[grid](x, s, y, M, N, BLOCK_SIZE=block_size)
    return y
