"""RMSNorm forward variants from inference engines, statistics in fp32.

``fused_add_rms_norm`` is vLLM's fused_add_rms_norm: residual += x (stored back in bf16), then x
= RMSNorm(residual) * weight, both in place; one program per token, the whole hidden size in one
block (BLOCK_SIZE = next_power_of_2(hidden)).

``rms_norm_persistent`` is the grid-stride form: the wrapper launches about 4 programs per SM and
each walks rows pid, pid + num_programs, ... with ``tl.num_programs``, reloading the weight for
every row inside the loop (fp16 in, weight and out). On the CPU the wrapper takes 4 "SMs".
"""

import torch
import triton
import triton.language as tl


@triton.jit
def fused_add_rms_norm_kernel(x_ptr, residual_ptr, weight_ptr, x_row_stride, r_row_stride, n_cols, eps,
                              BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    x = tl.load(x_ptr + row * x_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    r = tl.load(residual_ptr + row * r_row_stride + cols, mask=mask, other=0.0).to(tl.float32)
    x = x + r
    tl.store(residual_ptr + row * r_row_stride + cols, x.to(tl.bfloat16), mask=mask)
    variance = tl.sum(x * x, axis=0) / n_cols
    rstd = 1 / tl.sqrt(variance + eps)
    w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
    tl.store(x_ptr + row * x_row_stride + cols, (x * rstd * w).to(tl.bfloat16), mask=mask)


def fused_add_rms_norm(x: torch.Tensor, residual: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6):
    n_rows, n_cols = x.shape
    fused_add_rms_norm_kernel[(n_rows,)](x, residual, weight, x.stride(0), residual.stride(0), n_cols, eps,
                                         BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return x, residual


@triton.jit
def rms_norm_persistent_kernel(x_ptr, weight_ptr, y_ptr, row_stride, n_rows, n_cols, eps,
                               BLOCK_SIZE: tl.constexpr):
    pid = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    for row in range(pid, n_rows, tl.num_programs(0)):
        x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0).to(tl.float32)
        rstd = tl.rsqrt(tl.sum(x * x, axis=0) / n_cols + eps)
        w = tl.load(weight_ptr + cols, mask=mask, other=0.0).to(tl.float32)
        tl.store(y_ptr + row * row_stride + cols, (x * rstd * w).to(tl.float16), mask=mask)


def rms_norm_persistent(x: torch.Tensor, weight: torch.Tensor, eps: float = 1e-6) -> torch.Tensor:
    n_rows, n_cols = x.shape
    sm_count = torch.cuda.get_device_properties(x.device).multi_processor_count if x.is_cuda else 4
    y = torch.empty_like(x)
    grid = (min(n_rows, 4 * sm_count),)
    rms_norm_persistent_kernel[grid](x, weight, y, x.stride(0), n_rows, n_cols, eps,
                                     BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return y
