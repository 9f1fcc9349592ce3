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
