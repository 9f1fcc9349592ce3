"""Small Triton kernels with seed 000's patterns, compiled for sm_90 in tests (no GPU needed)."""

import triton
import triton.language as tl


@triton.jit
def table1(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    # seed 000 Table I: one pointer loaded twice with different hints, each reduced
    row = tl.program_id(0)
    offs = tl.arange(0, BLOCK)
    mask = offs < n
    a = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0, eviction_policy="evict_last")
    b = tl.load(x_ptr + row * n + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    total = tl.sum(a, 0) + tl.sum(b, 0)
    tl.store(out_ptr + row, total)


@triton.jit
def cg_then_evict_first(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # a naive merge would combine .cg (first) with evict_first (second): ptxas rejects that
    offs = tl.arange(0, BLOCK)
    a = tl.load(x_ptr + offs, cache_modifier=".cg")
    b = tl.load(x_ptr + offs, eviction_policy="evict_first")
    tl.store(out_ptr + offs, a * b)


@triton.jit
def divide_chain(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # seed 000 Table II case 1 with a power-of-two constant at the end
    offs = tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs)
    y = tl.load(out_ptr + offs)
    tl.store(out_ptr + offs, x / tl.sum(x, 0) / tl.sum(y, 0) / 4.0)


SIGNATURES = {
    "table1": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 128}),
    "cg_then_evict_first": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 128}),
    "divide_chain": ({"x_ptr": "*fp32", "out_ptr": "*fp32", "BLOCK": "constexpr"}, {"BLOCK": 128}),
}


def compile_sm90(name: str):
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    signature, constexprs = SIGNATURES[name]
    source = ASTSource(globals()[name], signature=signature, constexprs=constexprs)
    return triton.compile(source, target=GPUTarget("cuda", 90, 32))
