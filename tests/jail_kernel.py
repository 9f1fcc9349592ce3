"""A plain kernel function for tests/jail_jobs.py's compile job (made a JITFunction there, so that
TRITON_INTERPRET in the worker does not matter)."""

import triton.language as tl


def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)
