"""Data movement: a tiled 2D transpose (32 x 32 tiles, fp32) and an embedding gather (one token
per program row, 256-column blocks on the grid's second axis, fp16 table, int64 ids)."""

import torch
import triton
import triton.language as tl


@triton.jit
def transpose_kernel(x_ptr, y_ptr, M, N, stride_xm, stride_ym, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid_m = tl.program_id(0)
    pid_n = tl.program_id(1)
    offs_m = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    mask = (offs_m[:, None] < M) & (offs_n[None, :] < N)
    tile = tl.load(x_ptr + offs_m[:, None] * stride_xm + offs_n[None, :], mask=mask)
    tl.store(y_ptr + offs_n[None, :] * stride_ym + offs_m[:, None], tile, mask=mask)


def transpose(x: torch.Tensor) -> torch.Tensor:
    M, N = x.shape
    y = torch.empty((N, M), device=x.device, dtype=x.dtype)
    grid = (triton.cdiv(M, 32), triton.cdiv(N, 32))
    transpose_kernel[grid](x, y, M, N, x.stride(0), y.stride(0), BLOCK_M=32, BLOCK_N=32)
    return y


@triton.jit
def embedding_kernel(ids_ptr, table_ptr, out_ptr, dim, BLOCK_SIZE: tl.constexpr):
    token = tl.program_id(0)
    pid_d = tl.program_id(1)
    idx = tl.load(ids_ptr + token)
    offs = pid_d * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offs < dim
    row = tl.load(table_ptr + idx * dim + offs, mask=mask)
    tl.store(out_ptr + token * dim + offs, row, mask=mask)


def embedding(ids: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    n_tokens = ids.numel()
    dim = table.shape[1]
    out = torch.empty((n_tokens, dim), device=table.device, dtype=table.dtype)
    grid = (n_tokens, triton.cdiv(dim, 256))
    embedding_kernel[grid](ids, table, out, dim, BLOCK_SIZE=256)
    return out
