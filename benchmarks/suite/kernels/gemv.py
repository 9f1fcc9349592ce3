"""Matrix-vector products written as broadcast multiplies and ``tl.sum`` (no ``tl.dot``), looped
over K with ``range``, fp32 accumulation: how decode-time linear layers are often first written.

``gemv``: y = W x for an nn.Linear weight W (N, K), one program per 64 outputs, 64-wide K blocks:
``acc += tl.sum(x[None, :] * w, axis=1)`` (fp16 in and out).

``gemv_w8a16``: the same with an int8 weight and one fp32 scale per output row, applied after the
loop (weight-only quantization, fp16 activations and output).

``batched_vecmat``: Y = X W for a handful of rows X (B, K) and W (K, N), as small-batch decode
kernels write it: 16 x 16 x 32 tiles reduced with ``tl.sum(a[:, :, None] * b[None, :, :], axis=1)``
(fp16 in and out).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def gemv_kernel(w_ptr, x_ptr, y_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        offs_k = k + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=(offs_n[:, None] < N) & (offs_k[None, :] < K), other=0.0).to(tl.float32)
        acc += tl.sum(x[None, :] * w, axis=1)
    tl.store(y_ptr + offs_n, acc.to(tl.float16), mask=offs_n < N)


def gemv(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    N, K = w.shape
    y = torch.empty(N, device=w.device, dtype=torch.float16)
    gemv_kernel[(triton.cdiv(N, 64),)](w, x, y, N, K, w.stride(0), BLOCK_N=64, BLOCK_K=64)
    return y


@triton.jit
def gemv_w8a16_kernel(w_ptr, scale_ptr, x_ptr, y_ptr, N, K, stride_wn, BLOCK_N: tl.constexpr,
                      BLOCK_K: tl.constexpr):
    pid = tl.program_id(0)
    offs_n = pid * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        offs_k = k + tl.arange(0, BLOCK_K)
        x = tl.load(x_ptr + offs_k, mask=offs_k < K, other=0.0).to(tl.float32)
        w = tl.load(w_ptr + offs_n[:, None] * stride_wn + offs_k[None, :],
                    mask=(offs_n[:, None] < N) & (offs_k[None, :] < K), other=0)
        acc += tl.sum(x[None, :] * w.to(tl.float32), axis=1)
    scale = tl.load(scale_ptr + offs_n, mask=offs_n < N, other=0.0)
    tl.store(y_ptr + offs_n, (acc * scale).to(tl.float16), mask=offs_n < N)


def gemv_w8a16(w: torch.Tensor, scale: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    N, K = w.shape
    y = torch.empty(N, device=w.device, dtype=torch.float16)
    gemv_w8a16_kernel[(triton.cdiv(N, 64),)](w, scale, x, y, N, K, w.stride(0), BLOCK_N=64, BLOCK_K=128)
    return y


@triton.jit
def batched_vecmat_kernel(x_ptr, w_ptr, y_ptr, B, N, K, stride_xb, stride_wk, stride_yb, BLOCK_B: tl.constexpr,
                          BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    pid_b = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_b = pid_b * BLOCK_B + tl.arange(0, BLOCK_B)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    acc = tl.zeros([BLOCK_B, BLOCK_N], dtype=tl.float32)
    for k in range(0, K, BLOCK_K):
        offs_k = k + tl.arange(0, BLOCK_K)
        a = tl.load(x_ptr + offs_b[:, None] * stride_xb + offs_k[None, :],
                    mask=(offs_b[:, None] < B) & (offs_k[None, :] < K), other=0.0).to(tl.float32)
        b = tl.load(w_ptr + offs_k[:, None] * stride_wk + offs_n[None, :],
                    mask=(offs_k[:, None] < K) & (offs_n[None, :] < N), other=0.0).to(tl.float32)
        acc += tl.sum(a[:, :, None] * b[None, :, :], axis=1)
    tl.store(y_ptr + offs_b[:, None] * stride_yb + offs_n[None, :], acc.to(tl.float16),
             mask=(offs_b[:, None] < B) & (offs_n[None, :] < N))


def batched_vecmat(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    B, K = x.shape
    N = w.shape[1]
    y = torch.empty((B, N), device=x.device, dtype=torch.float16)
    grid = (triton.cdiv(B, 16), triton.cdiv(N, 32))
    batched_vecmat_kernel[grid](x, w, y, B, N, K, x.stride(0), w.stride(0), y.stride(0), BLOCK_B=16, BLOCK_N=32,
                                BLOCK_K=16)
    return y
