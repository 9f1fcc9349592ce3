"""Small kernels for replay tests (run under TRITON_INTERPRET=1)."""

import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    index = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, tl.load(src_ptr + index, mask=mask), mask=mask)


wrapped_add = triton.heuristics({"BLOCK": lambda args: 64})(add_kernel)
