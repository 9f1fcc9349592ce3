"""pipeline-loop: loops over loads become ``tl.range(..., num_stages=S)``. The rewrite touches only
the loop's iterator, compiles for sm_90 (and pipelines what was not pipelined), computes bitwise
the same under the interpreter, and refuses every loop it cannot prove safe."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import textwrap

import pytest
import torch

from tritune.analyze import discover
from tritune.analyze.compile import compile_kernel
from tritune.analyze.launch import infer_launch
from tritune.rewrites import NOALIAS, RULES, KernelSource, NotRewritable
from tritune.rewrites.pipeline_loop import PipelineLoop, loops

RULE = PipelineLoop()

# The comment is not ASCII on purpose: ast columns are UTF-8 byte offsets, and an edit computed in
# characters would land a few bytes off.
POSITIVE = textwrap.dedent('''\
    import triton
    import triton.language as tl

    # ünïcode — before the kernels, so byte and character offsets differ below


    @triton.jit
    def matmul(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_bk, stride_cm,
               BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        rm = tl.program_id(0) * BM + tl.arange(0, BM)
        rn = tl.program_id(1) * BN + tl.arange(0, BN)
        rk = tl.arange(0, BK)
        a_ptrs = a_ptr + rm[:, None] * stride_am + rk[None, :]
        b_ptrs = b_ptr + rk[:, None] * stride_bk + rn[None, :]
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):  # the K loop
            a = tl.load(a_ptrs, mask=(rm[:, None] < M) & (rk[None, :] + k < K), other=0.0)
            b = tl.load(b_ptrs, mask=(rk[:, None] + k < K) & (rn[None, :] < N), other=0.0)
            acc += tl.dot(a, b)
            a_ptrs += BK
            b_ptrs += BK * stride_bk
        tl.store(c_ptr + rm[:, None] * stride_cm + rn[None, :], acc, mask=(rm[:, None] < M) & (rn[None, :] < N))


    @triton.jit
    def row_sum(x_ptr, out_ptr, n_cols, stride, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for off in tl.range(0, n_cols,
                            BLOCK):
            cols = off + tl.arange(0, BLOCK)
            acc += tl.load(x_ptr + row * stride + cols, mask=cols < n_cols, other=0.0)
        tl.store(out_ptr + row, tl.sum(acc, 0))


    @triton.jit
    def _scale(x, j):
        return x * (j + 1.0)


    @triton.jit
    def grouped_decay(x_ptr, out_ptr, n_groups, C: tl.constexpr, G: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        col = offs % C
        grp = (offs // C) % G
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for g in range(n_groups - 1, -1, -1):  # last group first: the order matters below
            for j in tl.static_range(2):
                x = tl.load(x_ptr + ((g * G + grp) * C + col) * 2 + j)
                acc = acc * 0.5 + _scale(x, j)
        tl.store(out_ptr + offs, acc)
''')

ITERATORS = {  # kernel -> (the loop's iterator before, after num_stages=S, loop_unroll_factor=U)
    "matmul": ("range(0, K, BK)", "tl.range(0, K, BK, num_stages={S}{U})"),
    "row_sum": ("tl.range(0, n_cols,\n                        BLOCK)",
                "tl.range(0, n_cols,\n                        BLOCK, num_stages={S}{U})"),
    "grouped_decay": ("range(n_groups - 1, -1, -1)", "tl.range(n_groups - 1, -1, -1, num_stages={S}{U})"),
}


def expected(text: str, kernel: str, stages: int, unroll: int) -> str:
    """``text`` with the kernel's loop iterator replaced, computed independently of the rule: the
    original bytes before and after the iterator, the new iterator between them."""
    before, after = ITERATORS[kernel]
    head = text.index(f"def {kernel}(")
    at = text.index(f" in {before}:", head) + len(" in ")
    new = after.format(S=stages, U=f", loop_unroll_factor={unroll}" if unroll > 1 else "")
    data = text.encode()
    start = len(text[:at].encode())
    return (data[:start] + new.encode() + data[start + len(before.encode()):]).decode()


@pytest.mark.parametrize("kernel", sorted(ITERATORS))
def test_only_the_loop_iterator_changes(kernel):
    source = KernelSource.parse(POSITIVE, kernel)
    proposed = RULE.rewrites(source)
    assert [r.params for r in proposed][:4] == [{"loop": 0, "num_stages": s, "loop_unroll_factor": u}
                                              for s, u in ((3, 1), (2, 1), (4, 1), (3, 2))]
    for rewrite in proposed:
        params = rewrite.params
        assert rewrite.source == expected(POSITIVE, kernel, params["num_stages"], params["loop_unroll_factor"])
        assert rewrite.rule == "pipeline-loop" and rewrite.exact == "exact" and rewrite.assumes == ()
        assert {k.name for k in rewrite.knobs} == {"num_stages", "loop_unroll_factor"}
    again = RULE.apply(source, {"loop": 0, "num_stages": 5, "loop_unroll_factor": 4})
    assert again.source == expected(POSITIVE, kernel, 5, 4)


def test_the_rule_is_registered():
    assert isinstance(RULES["pipeline-loop"], PipelineLoop)


def test_tl_is_named_as_the_file_imports_it():
    text = POSITIVE.replace("import triton.language as tl\n", "from triton import language as lang\n").replace(
        "tl.", "lang.")
    rewrite = RULE.apply(KernelSource.parse(text, "matmul"), {"loop": 0, "num_stages": 2})
    assert "for k in lang.range(0, K, BK, num_stages=2):  # the K loop" in rewrite.source


# --------------------------------------------------------------------------------- for sm_90

def compile_sm90(tmp_path, text: str, kernel: str, constexprs: dict, name: str, signature: dict | None = None):
    path = tmp_path / f"{name}.py"
    path.write_text(text)
    kernels, error = discover.discover_file(path)
    assert error is None, error
    [found] = [k for k in kernels if k.name == kernel]
    return compile_kernel(found.fn, infer_launch(found, constexprs=constexprs, signature=signature), 90)


COPY = "ttg.async_copy_global_to_local"


def test_the_row_loop_compiles_and_is_pipelined_only_after_the_rewrite(tmp_path):
    # the launch option num_stages pipelines only loads that feed a dot: the row sum streams its
    # loads one by one until its loop carries num_stages
    kernel = KernelSource.parse(POSITIVE, "row_sum")
    before = compile_sm90(tmp_path, POSITIVE, "row_sum", {"BLOCK": 1024}, "before")
    after = compile_sm90(tmp_path, RULE.apply(kernel, {"loop": 0, "num_stages": 3}).source, "row_sum",
                         {"BLOCK": 1024}, "after")
    assert COPY not in before.ttgir and after.ttgir.count(COPY) >= 2


@pytest.mark.parametrize("kernel, constexprs, params", [
    ("matmul", {"BM": 64, "BN": 64, "BK": 32}, {"num_stages": 4, "loop_unroll_factor": 2}),
    ("grouped_decay", {"C": 64, "G": 4, "BLOCK": 256}, {"num_stages": 2}),
])
def test_rewritten_kernels_compile_for_sm90(tmp_path, kernel, constexprs, params):
    rewrite = RULE.apply(KernelSource.parse(POSITIVE, kernel), {"loop": 0, **params})
    compiled = compile_sm90(tmp_path, rewrite.source, kernel, constexprs, f"{kernel}_rewritten")
    assert compiled.capability == 90 and COPY in compiled.ttgir


# ------------------------------------------------------------------------ under the interpreter

# One process with TRITON_INTERPRET=1 from its start runs every case: Triton's own jit functions
# (tl.zeros, tl.sum) are interpreted only when they were decorated under it, and this process has
# imported them compiled.
RUNNER = textwrap.dedent('''\
    import importlib.util, sys
    import torch

    def matmul(kernel, a, b):
        c = torch.empty(a.shape[0], b.shape[1])
        kernel[(3, 2)](a, b, c, 40, 48, 72, a.stride(0), b.stride(0), c.stride(0), BM=16, BN=32, BK=16)
        return c

    def row_sum(kernel, x):
        out = torch.empty(x.shape[0])
        kernel[(x.shape[0],)](x, out, x.shape[1], x.stride(0), BLOCK=64)
        return out

    def grouped_decay(kernel, x):
        out = torch.empty(4 * 8)
        kernel[(2,)](x, out, 5, C=8, G=4, BLOCK=16)
        return out

    inputs, outputs = torch.load(sys.argv[1]), {}
    for case, path, kernel in zip(*[iter(sys.argv[3:])] * 3):
        spec = importlib.util.spec_from_file_location(case.replace("/", "_"), path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        outputs[case] = globals()[kernel](getattr(module, kernel), *inputs[kernel])
    torch.save(outputs, sys.argv[2])
''')

INTERPRETED = {  # kernel -> the rewrite's parameters
    "matmul": {"num_stages": 3, "loop_unroll_factor": 2},
    "row_sum": {"num_stages": 4},
    "grouped_decay": {"num_stages": 2},
}
# the same loop run upwards: what a rewrite that lost its arguments' order would compute
UPWARD = POSITIVE.replace("range(n_groups - 1, -1, -1)", "range(0, n_groups)")


@pytest.fixture(scope="module")
def interpreted(tmp_path_factory):
    """Inputs and every case's output: each kernel original and rewritten, and the planted one."""
    root = tmp_path_factory.mktemp("pipeline")
    gen = torch.Generator().manual_seed(0)
    inputs = {"matmul": (torch.randn(40, 72, generator=gen), torch.randn(72, 48, generator=gen)),
              "row_sum": (torch.randn(3, 300, generator=gen),),
              "grouped_decay": (torch.randn(5 * 4 * 8 * 2, generator=gen),)}
    torch.save(inputs, root / "inputs.pt")
    argv = []
    for kernel, params in INTERPRETED.items():
        rewritten = RULE.apply(KernelSource.parse(POSITIVE, kernel), {"loop": 0, **params}).source
        for name, text in (("original", POSITIVE), ("rewritten", rewritten)):
            (root / f"{kernel}_{name}.py").write_text(text)
            argv += [f"{kernel}/{name}", str(root / f"{kernel}_{name}.py"), kernel]
    (root / "upward.py").write_text(UPWARD)
    argv += ["grouped_decay/upward", str(root / "upward.py"), "grouped_decay"]
    (root / "run.py").write_text(RUNNER)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(root / "run.py"), str(root / "inputs.pt"), str(root / "out.pt"), *argv],
                          capture_output=True, text=True, timeout=300, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    return inputs, torch.load(root / "out.pt")


@pytest.mark.parametrize("kernel", sorted(INTERPRETED))
def test_the_rewritten_kernel_computes_bitwise_the_same(interpreted, kernel):
    inputs, outputs = interpreted
    assert torch.equal(outputs[f"{kernel}/original"], outputs[f"{kernel}/rewritten"])


def test_the_interpreted_kernels_compute_what_they_should(interpreted):
    # the comparison above is between kernels that really loop several times
    (a, b), (x,), _ = interpreted[0].values()
    outputs = interpreted[1]
    assert torch.allclose(outputs["matmul/original"], a @ b, atol=1e-3, rtol=1e-3)  # 5 K steps of 16
    assert torch.allclose(outputs["row_sum/original"], x.sum(1), atol=1e-4)  # 5 blocks of 64


def test_the_bitwise_comparison_catches_a_loop_that_runs_the_other_way(interpreted):
    outputs = interpreted[1]
    assert not torch.equal(outputs["grouped_decay/original"], outputs["grouped_decay/upward"])


# ------------------------------------------------------------------------ warp specialization

DESCRIPTORS = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def tma_matmul(a_ptr, b_ptr, c_ptr, M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
                   BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr):
        a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])
        b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1], block_shape=[BK, BN])
        pid_m = tl.program_id(0)
        pid_n = tl.program_id(1)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for k in range(0, K, BK):
            acc = tl.dot(a_desc.load([pid_m * BM, k]), b_desc.load([k, pid_n * BN]), acc)
        rm = pid_m * BM + tl.arange(0, BM)
        rn = pid_n * BN + tl.arange(0, BN)
        tl.store(c_ptr + rm[:, None] * N + rn[None, :], acc)
''')


def test_warp_specialize_is_offered_for_a_descriptor_dot_loop_and_compiles(tmp_path):
    proposed = RULE.rewrites(KernelSource.parse(DESCRIPTORS, "tma_matmul"))
    [special] = [r for r in proposed if r.params.get("warp_specialize")]
    assert "for k in tl.range(0, K, BK, num_stages=3, warp_specialize=True):" in special.source
    assert any(k.name == "warp_specialize" for k in special.knobs)
    compiled = compile_sm90(tmp_path, special.source, "tma_matmul",
                            {"M": 256, "N": 256, "K": 256, "BM": 128, "BN": 128, "BK": 64}, "special",
                            signature={"a_ptr": "*fp16", "b_ptr": "*fp16"})
    assert "ttg.warp_specialize" in compiled.ttgir


def test_warp_specialize_is_refused_where_sm90_cannot_use_it():
    for kernel, why in (("matmul", "tensor-descriptor"), ("row_sum", "no tl.dot")):
        source = KernelSource.parse(POSITIVE, kernel)
        assert not any(r.params.get("warp_specialize") for r in RULE.rewrites(source))
        with pytest.raises(NotRewritable, match=why):
            RULE.apply(source, {"loop": 0, "num_stages": 3, "warp_specialize": True})


# ------------------------------------------------------------------------------ must not fire

MUST_NOT = textwrap.dedent('''\
    import triton
    import triton.language as tl
    from mylib import fancy
    from . import kernels_of_mine


    @triton.jit
    def static(x_ptr, out_ptr, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in tl.static_range(4):
            acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)


    @triton.jit
    def no_load(out_ptr, n, BLOCK: tl.constexpr):
        acc = tl.zeros((BLOCK,), dtype=tl.float32)
        for i in range(n):
            acc += i
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)


    @triton.jit
    def float_step(x_ptr, out_ptr, n):
        acc = 0.0
        for i in range(0, n, 2.0):
            acc += tl.load(x_ptr + i)
        tl.store(out_ptr, acc)


    @triton.jit
    def while_loop(x_ptr, out_ptr, n):
        i = 0
        acc = 0.0
        while i < n:
            acc += tl.load(x_ptr + i)
            i += 1
        tl.store(out_ptr, acc)


    @triton.jit
    def staged(x_ptr, out_ptr, n):
        acc = 0.0
        for i in tl.range(0, n, num_stages=2):
            acc += tl.load(x_ptr + i)
        tl.store(out_ptr, acc)


    @triton.jit
    def staged_positionally(x_ptr, out_ptr, n):
        acc = 0.0
        for i in tl.range(0, n, 1, 3):
            acc += tl.load(x_ptr + i)
        tl.store(out_ptr, acc)


    def host_helper(x_ptr, n):
        acc = 0.0
        for i in range(n):
            acc += tl.load(x_ptr + i)
        return acc


    @triton.jit
    def barrier(x_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            acc += tl.load(x_ptr + i)
            tl.debug_barrier()
        tl.store(out_ptr, acc)


    @triton.jit
    def atomic(x_ptr, out_ptr, n):
        for i in range(n):
            tl.atomic_add(out_ptr, tl.load(x_ptr + i))


    @triton.jit
    def carry_rows(p_ptr, n, B: tl.constexpr):
        cols = tl.arange(0, B)
        for i in range(n):
            row = tl.load(p_ptr + i * B + cols)
            tl.store(p_ptr + (i + 1) * B + cols, row + 1.0)


    @triton.jit
    def copy_rows(x_ptr, y_ptr, n, B: tl.constexpr):
        cols = tl.arange(0, B)
        for i in range(n):
            tl.store(y_ptr + i * B + cols, tl.load(x_ptr + i * B + cols) * 2.0)


    @triton.jit
    def scatter_through_table(x_ptr, idx_ptr, y_ptr, n, B: tl.constexpr):
        cols = tl.arange(0, B)
        for i in range(n):
            dst = tl.load(idx_ptr + i).to(tl.pointer_type(tl.float32))
            tl.store(dst + cols, tl.load(x_ptr + i * B + cols))


    @triton.jit
    def nested(x_ptr, out_ptr, rows, n_cols, B: tl.constexpr):
        acc = tl.zeros((B,), dtype=tl.float32)
        for r in range(rows):
            for off in range(0, n_cols, B):
                acc += tl.load(x_ptr + r * n_cols + off + tl.arange(0, B))
        tl.store(out_ptr + tl.arange(0, B), acc)


    @triton.jit
    def unknown_call(x_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            acc += fancy(tl.load(x_ptr + i))
        tl.store(out_ptr, acc)


    @triton.jit
    def volatile(flag_ptr, out_ptr, n):
        seen = 0
        for i in range(n):
            seen += tl.load(flag_ptr, volatile=True)
        tl.store(out_ptr, seen)


    @triton.jit
    def breaks(x_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            acc += tl.load(x_ptr + i)
            if acc > 1.0:
                break
        tl.store(out_ptr, acc)


    @triton.jit
    def indirect_call(x_ptr, out_ptr, n, ops: tl.constexpr):
        acc = 0.0
        for i in range(n):
            acc += ops[0](tl.load(x_ptr + i))
        tl.store(out_ptr, acc)


    @triton.jit
    def relative_module_call(x_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            acc += tl.load(x_ptr + i)
            kernels_of_mine.stash(out_ptr, acc)
        tl.store(out_ptr, acc)


    @triton.jit
    def starred(x_ptr, out_ptr, bounds: tl.constexpr):
        acc = 0.0
        for i in range(*bounds):
            acc += tl.load(x_ptr + i)
        tl.store(out_ptr, acc)
''')

REFUSED = {  # kernel -> what the reason says (without no-alias)
    "static": "static_range",
    "no_load": "no load",
    "float_step": "not an integer: 2.0",
    "while_loop": "while loop",
    "staged": "already carries num_stages",
    "staged_positionally": "already carries num_stages",
    "host_helper": "not a @triton.jit function",
    "barrier": "tl.debug_barrier",
    "atomic": "tl.atomic_add",
    "carry_rows": "stores through p_ptr",
    "copy_rows": "stores through y_ptr",
    "scatter_through_table": "stores through dst",
    "unknown_call": "calls fancy",
    "volatile": "volatile",
    "breaks": "leaves the loop early",
    "starred": "unpacked range arguments",
    "indirect_call": "calls ops\\[0\\]",
    "relative_module_call": "calls kernels_of_mine.stash",  # once taken for a method of a value
}


@pytest.mark.parametrize("kernel", sorted(REFUSED))
def test_must_not_fire(kernel):
    source = KernelSource.parse(MUST_NOT, kernel)
    with pytest.raises(NotRewritable, match=REFUSED[kernel]):
        RULE.rewrites(source)
    with pytest.raises(NotRewritable):
        RULE.apply(source, {"loop": 0, "num_stages": 3})


def test_the_inner_loop_of_a_nest_is_the_one_rewritten():
    source = KernelSource.parse(MUST_NOT, "nested")
    with pytest.raises(NotRewritable, match=r"loop 0 \(line \d+\): contains a loop at line \d+: Triton pipelines "
                                            "innermost loops only"):
        RULE.apply(source, {"loop": 0, "num_stages": 3})
    [proposal] = {r.params["loop"] for r in RULE.rewrites(source)}
    assert proposal == 1
    assert "for off in tl.range(0, n_cols, B, num_stages=3):" in RULE.rewrites(source)[0].source


NOALIAS_CASES = {  # kernel -> None when it fires under no-alias, else the reason it still refuses
    "copy_rows": None,
    "carry_rows": "derives from p_ptr the loop loads",  # in place: aliasing is not the question
    "scatter_through_table": "unknown origin",
    "atomic": "tl.atomic_add",
}


@pytest.mark.parametrize("kernel", sorted(NOALIAS_CASES))
def test_stores_under_noalias(kernel):
    source = KernelSource.parse(MUST_NOT, kernel, noalias=True)
    if NOALIAS_CASES[kernel] is None:
        rewrite = RULE.rewrites(source)[0]
        assert rewrite.assumes == (NOALIAS,) and rewrite.name.startswith("pipeline-loop[noalias]")
        assert "for i in tl.range(n, num_stages=3):" in rewrite.source
    else:
        with pytest.raises(NotRewritable, match=NOALIAS_CASES[kernel]):
            RULE.rewrites(source)


HELPER_POINTER = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def _row(table_ptr, r):
        return tl.load(table_ptr + r).to(tl.pointer_type(tl.float32))


    @triton.jit
    def _shifted(p, r):
        return p + r


    @triton.jit
    def gather_rows(table_ptr, out_ptr, n, B: tl.constexpr):
        src = _row(table_ptr, tl.program_id(0))
        cols = tl.arange(0, B)
        for i in range(n):
            tl.store(out_ptr + i * B + cols, tl.load(src + i * B + cols))


    @triton.jit
    def shifted_rows(x_ptr, out_ptr, n, B: tl.constexpr):
        src = _shifted(x_ptr, tl.program_id(0))
        cols = tl.arange(0, B)
        for i in range(n):
            tl.store(out_ptr + i * B + cols, tl.load(src + i * B + cols))
''')
HELPER_SIGNATURE = {"table_ptr": "*i64", "x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "B": "constexpr"}


def test_a_pointer_a_helper_reads_from_memory_is_of_unknown_origin_under_noalias():
    """``_row`` returns a pointer loaded from the table: it may point into out_ptr's buffer,
    which the guard (argument ranges) cannot see, so the loop must not be pipelined past its
    store. A helper that only offsets its argument keeps the argument's origin."""
    launch = {"signature": HELPER_SIGNATURE}
    with pytest.raises(NotRewritable, match="unknown origin"):
        RULE.rewrites(KernelSource.parse(HELPER_POINTER, "gather_rows", noalias=True, launch=launch))
    assert RULE.rewrites(KernelSource.parse(HELPER_POINTER, "shifted_rows", noalias=True,
                                            launch=launch))[0].assumes == (NOALIAS,)


def test_a_launch_signature_says_which_parameters_are_pointers():
    # n is a pointer by the signature: a store through y_ptr + n may then alias what x_ptr + n reads
    text = MUST_NOT.replace("y_ptr + i * B", "y_ptr + n + i * B").replace("x_ptr + i * B", "x_ptr + n + i * B")
    assert RULE.rewrites(KernelSource.parse(text, "copy_rows", noalias=True))[0].assumes == (NOALIAS,)
    typed = KernelSource.parse(text, "copy_rows", noalias=True,
                               launch={"signature": {"x_ptr": "*fp32", "y_ptr": "*fp32", "n": "*fp32"}})
    with pytest.raises(NotRewritable, match="derives from n"):
        RULE.rewrites(typed)


@pytest.mark.parametrize("params, why", [
    ({"loop": 3, "num_stages": 3}, "no loop 3"),
    ({"loop": 0, "num_stages": 0}, "num_stages must be an integer from 1 to 8"),
    ({"loop": 0, "num_stages": 9}, "num_stages must be"),
    ({"loop": 0, "num_stages": 2, "loop_unroll_factor": True}, "loop_unroll_factor must be"),
    ({"loop": 0, "num_stages": 2, "stages": 2}, "unknown pipeline-loop parameters: stages"),
])
def test_illegal_parameters(params, why):
    with pytest.raises(NotRewritable, match=why):
        RULE.apply(KernelSource.parse(POSITIVE, "row_sum"), params)


def test_loops_are_indexed_in_source_order_whatever_their_kind():
    text = POSITIVE.replace("    acc = tl.zeros((BLOCK,), dtype=tl.float32)\n    for off",
                            "    acc = tl.zeros((BLOCK,), dtype=tl.float32)\n    while row < 0:\n        row += 1\n"
                            "    for off", 1)
    found = loops(KernelSource.parse(text, "row_sum"))
    assert [type(loop.node) for loop in found] == [ast.While, ast.For]
    assert found[0].problem.startswith("a while loop") and found[1].problem is None
    assert RULE.rewrites(KernelSource.parse(text, "row_sum"))[0].params["loop"] == 1
