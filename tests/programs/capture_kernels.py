"""Small kernels for the capture tests: imported under TRITON_INTERPRET=1 to launch them on the
CPU, and plainly (as JITFunctions) to compile their TTIR for sm_90."""

import itertools

import triton
import triton.language as tl

_ticks = itertools.count(100, -1)


def fake_bench(fn, quantiles=None):
    """A do_bench for the interpreter: runs the trial once; each later config 'runs faster'."""
    fn()
    return [float(next(_ticks))] * 3


@triton.jit
def add_kernel(x_ptr, none_ptr, one, out_ptr, n, scale, BLOCK: tl.constexpr):
    # `none_ptr` (None) and `one` (== 1) are specialized to constants: absent from the TTIR,
    # so out_ptr is the TTIR's second argument, not its fourth.
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs * one, mask=mask)
    tl.store(out_ptr + offs, x * scale, mask=mask)


@triton.jit
def inplace_kernel(x_ptr, n, BLOCK: tl.constexpr = 32):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)


@triton.jit
def atomic_kernel(x_ptr, total_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.atomic_add(total_ptr, tl.sum(tl.load(x_ptr + offs, mask=offs < n, other=0.0), 0))


@triton.jit
def cas_kernel(lock_ptr, x_ptr, out_ptr):
    old = tl.atomic_cas(lock_ptr, 0, 1)
    tl.store(out_ptr, tl.load(x_ptr) + old)


@triton.jit
def loop_kernel(x_ptr, out_ptr, rows, cols, BLOCK: tl.constexpr):
    # both pointers are loop-carried (scf.for iter args), advanced each row
    offs = tl.arange(0, BLOCK)
    src = x_ptr + offs
    dst = out_ptr + offs
    for _ in range(rows):
        tl.store(dst, tl.load(src, mask=offs < cols), mask=offs < cols)
        src += cols
        dst += cols


@triton.jit
def select_kernel(a_ptr, b_ptr, x_ptr, flag, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    target = tl.where(flag > 0, a_ptr, b_ptr)  # arith.select of two pointers: either is written
    tl.store(target + offs, tl.load(x_ptr + offs))


@triton.jit
def block_ptr_kernel(x_ptr, out_ptr, rows, BLOCK: tl.constexpr):
    src = tl.make_block_ptr(x_ptr, (rows, BLOCK), (BLOCK, 1), (0, 0), (1, BLOCK), (1, 0))
    dst = tl.make_block_ptr(out_ptr, (rows, BLOCK), (BLOCK, 1), (0, 0), (1, BLOCK), (1, 0))
    for _ in range(rows):
        tl.store(dst, tl.load(src))
        src = tl.advance(src, (1, 0))
        dst = tl.advance(dst, (1, 0))


@triton.jit
def gather_kernel(src_ptr, idx_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    index = tl.load(idx_ptr + offs, mask=mask, other=0)
    tl.store(out_ptr + offs, tl.load(src_ptr + index, mask=mask), mask=mask)


@triton.jit
def _double(x):
    return x * 2


@triton.jit
def helper_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # calls another jit function: under the interpreter that one is an InterpretedFunction
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, _double(tl.load(x_ptr + offs, mask=offs < n)), mask=offs < n)


@triton.jit
def tile_kernel(x_ptr, out_ptr, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0) * BLOCK_M + tl.arange(0, BLOCK_M)[:, None]
    cols = tl.program_id(1) * BLOCK_N + tl.arange(0, BLOCK_N)[None, :]
    mask = (rows < M) & (cols < N)
    tl.store(out_ptr + rows * N + cols, tl.load(x_ptr + rows * N + cols, mask=mask), mask=mask)


@triton.autotune(configs=[triton.Config({"BLOCK": 16}, num_warps=2), triton.Config({"BLOCK": 32}, num_warps=8)],
                 key=["n"], do_bench=fake_bench)
@triton.jit
def tuned_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 2, mask=mask)


@triton.heuristics({"BLOCK": lambda args: triton.next_power_of_2(args["n"])})
@triton.jit
def heuristic_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) * 3, mask=mask)


@triton.jit
def row_max_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    """Calls tl.max, a jit function of triton.language: the interpreter leaves builtins patched."""
    offs = tl.arange(0, BLOCK)
    tl.store(out_ptr, tl.max(tl.load(x_ptr + offs, mask=offs < n, other=-float("inf")), axis=0))
