"""Kernels for the guard-region tests and benchmarks/guard_gpu.py: each test plants a bug in one
(a mask removed, an offset moved) as a source variant of this file."""
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 3.0, mask=mask)


@triton.jit
def neighbours(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # out[i] = x[i] + x[i + 1]; the last element has no right neighbour
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    right = tl.load(x_ptr + offs + 1, mask=offs + 1 < n, other=0.0)
    tl.store(out_ptr + offs, x + right, mask=mask)


@triton.jit
def unmasked(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # written for n % BLOCK == 0: no masks
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) * 3.0)


@triton.jit
def tiles(x_ptr, out_ptr, m, n, stride, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    # out = 3 x over an m x n row-major matrix, one BLOCK_M x BLOCK_N tile per program
    offs_m = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)
    offs_n = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)
    offs = offs_m[:, None] * stride + offs_n[None, :]
    rows, cols = offs_m[:, None] < m, offs_n[None, :] < n
    x = tl.load(x_ptr + offs, mask=rows & cols)
    tl.store(out_ptr + offs, x * 3.0, mask=rows & cols)
