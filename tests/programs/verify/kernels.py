"""Baseline kernels for tests/replay_verify/test_verify_check.py. Planted wrong variants are edits of this text
made in the test (each edit names the line it breaks), loaded through ``Variant(source=...)``."""

import triton
import triton.language as tl


@triton.jit
def axpy(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    out = 2.0 * x + y
    tl.store(out_ptr + offs, out, mask=mask)


@triton.jit
def ratio(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=1.0)
    y = tl.load(y_ptr + offs, mask=mask, other=1.0)
    tl.store(out_ptr + offs, x / y, mask=mask)


@triton.jit
def two_outputs(x_ptr, plus_ptr, square_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(plus_ptr + offs, x + 1.0, mask=mask)
    tl.store(square_ptr + offs, x * x, mask=mask)


@triton.jit
def accumulate(x_ptr, acc_ptr, n, BLOCK: tl.constexpr):
    # acc is read and written: its contents before the launch are an input
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    acc = tl.load(acc_ptr + offs, mask=mask)
    tl.store(acc_ptr + offs, acc + x, mask=mask)


@triton.jit
def scale_rows(x_ptr, out_ptr, M, N, stride_x, stride_out, BLOCK_N: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK_N)
    mask = cols < N
    x = tl.load(x_ptr + row * stride_x + cols, mask=mask)
    tl.store(out_ptr + row * stride_out + cols, x * (row + 1), mask=mask)


@triton.jit
def quantize(x_ptr, q_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(q_ptr + offs, (x * 10.0).to(tl.int32), mask=mask)


@triton.jit
def fill(out_ptr, n, VALUE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.full((BLOCK,), VALUE, tl.int32), mask=mask)


@triton.jit
def even_only(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # writes every other element by design: the odd ones keep whatever was there
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = (offs < n) & (offs % 2 == 0)
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x * 3.0, mask=mask)


@triton.jit
def total(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
    # every element added atomically into one address: on a GPU the order of the adds changes
    # from run to run. (Not tl.sum: in a test process that imported triton before setting
    # TRITON_INTERPRET, the interpreter cannot call triton.language's own jit functions.)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0)
    tl.atomic_add(total_ptr + offs * 0, x, mask=mask)


@triton.jit
def scale_by(x_ptr, s_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # one scale for the whole tensor, read from memory (a quantization scale, positive in practice)
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    s = tl.load(s_ptr)
    tl.store(out_ptr + offs, x * s, mask=mask)
