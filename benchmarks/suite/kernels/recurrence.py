"""Scans of linear-attention and state-space models, fp32.

``linear_recurrence``: h[t] = a[t] * h[t - 1] + x[t] along each row (the gated first-order
recurrence of accelerated-scan, Mamba and RG-LRU), one row per program in one block (BLOCK_SIZE =
next_power_of_2(T)), with ``tl.associative_scan`` over (a, x) pairs and accelerated-scan's
``first_order_op`` as the combine function.

``chunk_local_cumsum``: flash-linear-attention's chunk_local_cumsum for gates g (batch, T, heads):
the cumulative sum restarts every 64 time steps; one 64-step chunk of one head per program on a
(chunks, batch * heads) grid, read and written through block pointers with stride ``heads``.
"""

import torch
import triton
import triton.language as tl


@triton.jit
def first_order_op(fl, xl, fr, xr):
    f = fr * fl
    x = fr * xl + xr
    return f, x


@triton.jit
def linear_recurrence_kernel(a_ptr, x_ptr, h_ptr, row_stride, n_cols, BLOCK_SIZE: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE)
    mask = cols < n_cols
    a = tl.load(a_ptr + row * row_stride + cols, mask=mask, other=1.0)
    x = tl.load(x_ptr + row * row_stride + cols, mask=mask, other=0.0)
    _, h = tl.associative_scan((a, x), axis=0, combine_fn=first_order_op)
    tl.store(h_ptr + row * row_stride + cols, h, mask=mask)


def linear_recurrence(a: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    n_rows, n_cols = x.shape
    h = torch.empty_like(x)
    linear_recurrence_kernel[(n_rows,)](a, x, h, x.stride(0), n_cols, BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return h


@triton.jit
def chunk_local_cumsum_kernel(s, o, T, H: tl.constexpr, BT: tl.constexpr):
    i_t, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    bos = i_b * T
    p_s = tl.make_block_ptr(s + bos * H + i_h, (T,), (H,), (i_t * BT,), (BT,), (0,))
    p_o = tl.make_block_ptr(o + bos * H + i_h, (T,), (H,), (i_t * BT,), (BT,), (0,))
    b_s = tl.load(p_s, boundary_check=(0,)).to(tl.float32)
    b_o = tl.cumsum(b_s, axis=0)
    tl.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0,))


def chunk_local_cumsum(g: torch.Tensor, chunk_size: int = 64) -> torch.Tensor:
    B, T, H = g.shape
    out = torch.empty_like(g)
    grid = (triton.cdiv(T, chunk_size), B * H)
    chunk_local_cumsum_kernel[grid](g, out, T, H=H, BT=chunk_size)
    return out
