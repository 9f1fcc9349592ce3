"""Normalization backward kernels: dx per row and the weight gradient as partial sums.

``rms_norm_bwd`` is Liger-Kernel's: one program per SM-sized slice of rows (rows_per_program =
ceil(rows / SMs)), a plain ``range`` loop over its rows that advances the row pointers, dx stored
per row and dW accumulated in fp32 registers, one partial dW row per program summed by the wrapper
(bf16 dy, x, w and dx; fp32 rstd from the forward). On the CPU the wrapper takes 4 "SMs".

``layer_norm_bwd`` is the Triton tutorial's ``_layer_norm_bwd_dx_fused``: one program per row
writes dx and adds its dw/db contributions into one of GROUP_SIZE_M partial rows, taking a spin
lock (``atomic_cas`` on a lock word, ``atomic_xchg`` to release) to serialize the programs that
share a partial row; the wrapper sums the partial rows (the tutorial uses a second kernel). fp16
x, dy, w and dx, fp32 mean/rstd and partial sums (the tutorial keeps those in fp16).
"""

import torch
import triton
import triton.language as tl


@triton.jit
def rms_norm_bwd_kernel(dY_ptr, dY_row_stride, dX_ptr, dX_row_stride, X_ptr, X_row_stride, W_ptr, RSTD_ptr,
                        dW_ptr, dW_row_stride, n_rows, n_cols, rows_per_program, BLOCK_SIZE: tl.constexpr):
    row_block_id = tl.program_id(0)
    row_start = row_block_id * rows_per_program
    row_end = min((row_block_id + 1) * rows_per_program, n_rows)
    col_offsets = tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < n_cols

    dW_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
    dY_ptr += row_start * dY_row_stride
    dX_ptr += row_start * dX_row_stride
    X_ptr += row_start * X_row_stride
    RSTD_ptr += row_start
    W_row = tl.load(W_ptr + col_offsets, mask=mask, other=0.0).to(tl.float32)

    for _ in range(row_start, row_end):
        dY_row = tl.load(dY_ptr + col_offsets, mask=mask, other=0.0).to(tl.float32)
        X_row = tl.load(X_ptr + col_offsets, mask=mask, other=0.0).to(tl.float32)
        rstd_row = tl.load(RSTD_ptr)
        m = dY_row * W_row
        dX_row = rstd_row * m
        dX_row += rstd_row * (-(1 / n_cols) * rstd_row * rstd_row * tl.sum(m * X_row, axis=0) * X_row)
        dW_row += dY_row * (X_row * rstd_row)
        tl.store(dX_ptr + col_offsets, dX_row.to(tl.bfloat16), mask=mask)
        dY_ptr += dY_row_stride
        dX_ptr += dX_row_stride
        X_ptr += X_row_stride
        RSTD_ptr += 1

    tl.store(dW_ptr + row_block_id * dW_row_stride + col_offsets, dW_row, mask=mask)


def rms_norm_bwd(dY: torch.Tensor, X: torch.Tensor, W: torch.Tensor, RSTD: torch.Tensor):
    n_rows, n_cols = dY.shape
    sm_count = torch.cuda.get_device_properties(X.device).multi_processor_count if X.is_cuda else 4
    rows_per_program = triton.cdiv(n_rows, sm_count)
    dX = torch.empty_like(dY)
    _dW = torch.empty((sm_count, n_cols), dtype=torch.float32, device=W.device)
    rms_norm_bwd_kernel[(sm_count,)](dY, dY.stride(0), dX, dX.stride(0), X, X.stride(0), W, RSTD, _dW,
                                     _dW.stride(0), n_rows, n_cols, rows_per_program,
                                     BLOCK_SIZE=triton.next_power_of_2(n_cols))
    return dX, _dW.sum(dim=0)


@triton.jit
def layer_norm_bwd_kernel(DX, DY, DW, DB, X, W, Mean, Rstd, Lock, stride, N, GROUP_SIZE_M: tl.constexpr,
                          BLOCK_SIZE_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_SIZE_N)
    mask = cols < N
    X += row * stride
    DY += row * stride
    DX += row * stride
    lock_id = row % GROUP_SIZE_M
    Lock += lock_id
    Count = Lock + GROUP_SIZE_M
    DW = DW + lock_id * N + cols
    DB = DB + lock_id * N + cols
    x = tl.load(X + cols, mask=mask, other=0).to(tl.float32)
    dy = tl.load(DY + cols, mask=mask, other=0).to(tl.float32)
    w = tl.load(W + cols, mask=mask).to(tl.float32)
    mean = tl.load(Mean + row)
    rstd = tl.load(Rstd + row)
    xhat = (x - mean) * rstd
    wdy = w * dy
    xhat = tl.where(mask, xhat, 0.)
    wdy = tl.where(mask, wdy, 0.)
    c1 = tl.sum(xhat * wdy, axis=0) / N
    c2 = tl.sum(wdy, axis=0) / N
    dx = (wdy - (xhat * c1 + c2)) * rstd
    tl.store(DX + cols, dx.to(tl.float16), mask=mask)
    partial_dw = dy * xhat
    partial_db = dy
    while tl.atomic_cas(Lock, 0, 1) == 1:
        pass
    count = tl.load(Count)
    if count == 0:
        tl.atomic_xchg(Count, 1)
    else:
        partial_dw += tl.load(DW, mask=mask)
        partial_db += tl.load(DB, mask=mask)
    tl.store(DW, partial_dw, mask=mask)
    tl.store(DB, partial_db, mask=mask)
    tl.debug_barrier()
    tl.atomic_xchg(Lock, 0)


def layer_norm_bwd(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor, mean: torch.Tensor, rstd: torch.Tensor):
    M, N = x.shape
    GROUP_SIZE_M = 64
    if N <= 8192:
        GROUP_SIZE_M = 96
    if N <= 4096:
        GROUP_SIZE_M = 128
    if N <= 1024:
        GROUP_SIZE_M = 256
    locks = torch.zeros(2 * GROUP_SIZE_M, dtype=torch.int32, device=x.device)
    _dw = torch.zeros((GROUP_SIZE_M, N), dtype=torch.float32, device=x.device)
    _db = torch.zeros((GROUP_SIZE_M, N), dtype=torch.float32, device=x.device)
    dx = torch.empty_like(dy)
    layer_norm_bwd_kernel[(M,)](dx, dy, _dw, _db, x, w, mean, rstd, locks, x.stride(0), N,
                                GROUP_SIZE_M=GROUP_SIZE_M, BLOCK_SIZE_N=triton.next_power_of_2(N))
    return dx, _dw.sum(dim=0), _db.sum(dim=0)
