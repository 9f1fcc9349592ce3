"""hoist-invariant-load: the rewrite is byte-exact outside its spans, compiles for sm_90 with the load
outside the loop, computes bitwise the same under the interpreter, keeps a zero-trip loop from
touching memory, and refuses the planted illegal cases with their reason."""

from __future__ import annotations

import resource
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import import_interpreted

from tritune.analyze import discover
from tritune.analyze.compile import compile_kernel
from tritune.analyze.launch import infer_launch
from tritune.rewrites import NOALIAS, RULES, KernelSource, NotRewritable
from tritune.rewrites.hoist_invariant_load import NAME, hoistable

RULE = RULES[NAME]

# The comment is not ASCII on purpose: ast columns are UTF-8 byte offsets. tl.full, not tl.zeros:
# the interpreter in this process cannot call triton.language's own jit functions.
KERNELS = textwrap.dedent('''\
    import triton
    import triton.language as tl

    # ünïcode — before the kernels, so byte and character offsets differ below


    @triton.jit
    def scale_bias(x_ptr, s_ptr, b_ptr, out_ptr, n_rows, N, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for row in range(0, n_rows):
            s = tl.load(s_ptr)  # one scale, re-read every row
            acc += tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0) * s + tl.load(b_ptr)
        tl.store(out_ptr + cols, acc, mask=cols < N)


    @triton.jit
    def row_dot(a_ptr, w_ptr, out_ptr, K, n_rows, BLOCK: tl.constexpr):
        pid = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for r in tl.range(pid, n_rows, 2):
            w = tl.load(w_ptr + cols, mask=cols < K,
                        other=0.0)  # the same weights every row
            a = tl.load(a_ptr + r * K + cols, mask=cols < K, other=0.0)
            acc += a * w
        tl.store(out_ptr + pid * BLOCK + cols, acc)


    @triton.jit
    def scale_rows(x_ptr, s_ptr, out_ptr, N, n_rows, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        for row in range(n_rows):
            s = tl.load(s_ptr)
            x = tl.load(x_ptr + row * N + cols, mask=cols < N, other=0.0)
            tl.store(out_ptr + row * N + cols, x * s, mask=cols < N)


    @triton.jit
    def steps(x_ptr, s_ptr, out_ptr, start, START: tl.constexpr, STOP: tl.constexpr, STEP: tl.constexpr,
              BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for i in range(3):
            acc += tl.load(s_ptr + cols)
        for i in tl.static_range(START, STOP):
            acc += tl.load(s_ptr + 1)
        for i in range(8, 0, STEP):
            acc += tl.load(s_ptr + 2) * tl.load(x_ptr + i)
        for i in range(start, 0, STEP):
            acc += tl.load(s_ptr + 3) * tl.load(x_ptr + i)
        tl.store(out_ptr + cols, acc)


    @triton.jit
    def far_scale(x_ptr, s_ptr, out_ptr, far, start, stop, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for i in range(start, stop, -1):
            s = tl.load(s_ptr + far)  # in range only when the loop runs
            acc += tl.load(x_ptr + i * BLOCK + cols) * s
        tl.store(out_ptr + cols, acc)


    @triton.jit
    def scaled(v, s_ptr):
        return v * tl.load(s_ptr)


    @triton.jit
    def pure_helper(x_ptr, s_ptr, out_ptr, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for i in range(n):
            acc = scaled(acc, s_ptr) + tl.load(x_ptr + cols)
        tl.store(out_ptr + cols, acc)
    ''')

# Must not fire: each kernel plants one reason the hoist would be wrong (or unprovable).
ILLEGAL = textwrap.dedent('''\
    import triton
    import triton.language as tl


    @triton.jit
    def same_store(s_ptr, out_ptr, n):
        for i in range(n):
            s = tl.load(s_ptr)
            tl.store(s_ptr, s * 2)  # the next iteration reads what this wrote
            tl.store(out_ptr + i, s)


    @triton.jit
    def loop_variable(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for i in range(n):
            acc += tl.load(x_ptr + i * BLOCK + tl.arange(0, BLOCK))
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)


    @triton.jit
    def advanced(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        ptrs = x_ptr + tl.arange(0, BLOCK)
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for i in range(n):
            acc += tl.load(ptrs)
            ptrs += BLOCK
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)


    @triton.jit
    def updated_mask(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        limit = 1
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for i in range(n):
            acc += tl.load(x_ptr + cols, mask=cols < limit, other=0.0)
            limit = limit + 1
        tl.store(out_ptr + cols, acc)


    @triton.jit
    def under_if(s_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            if i > 2:
                acc += tl.load(s_ptr)
        tl.store(out_ptr, acc)


    @triton.jit
    def conditional_expression(s_ptr, out_ptr, n, flag):
        acc = 0.0
        for i in range(n):
            acc += tl.load(s_ptr) if flag > 0 else 1.0
        tl.store(out_ptr, acc)


    @triton.jit
    def bump(p, v):
        tl.store(p, v)


    @triton.jit
    def helper_store(s_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            acc += tl.load(s_ptr)
            bump(out_ptr, acc)
        tl.store(out_ptr, acc)


    @triton.jit
    def volatile(s_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            acc += tl.load(s_ptr, volatile=True)
        tl.store(out_ptr, acc)


    @triton.jit
    def fetch_again(s_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            acc += tl.load(s_ptr, cache_modifier=".cv")
        tl.store(out_ptr, acc)


    @triton.jit
    def atomic(s_ptr, lock_ptr, out_ptr, n):
        acc = 0.0
        for i in range(n):
            tl.atomic_add(lock_ptr, 1)
            acc += tl.load(s_ptr)
        tl.store(out_ptr, acc)


    @triton.jit
    def gathered_store(s_ptr, idx_ptr, out_ptr, n):
        for i in range(n):
            s = tl.load(s_ptr)
            tl.store(out_ptr + tl.load(idx_ptr + i), s)  # out_ptr + a loaded value: pointer or not?


    @triton.jit
    def block_pointer(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        bp = tl.make_block_ptr(x_ptr, (n,), (1,), (0,), (BLOCK,), (0,))
        acc = tl.full([BLOCK], 0.0, tl.float32)
        for i in range(n):
            acc += tl.load(bp)
            acc += tl.load(bp, boundary_check=(0,))
        tl.store(out_ptr + tl.arange(0, BLOCK), acc)


    @triton.jit
    def runtime_step(s_ptr, out_ptr, n, step):
        acc = 0.0
        for i in range(n, 0, step):
            acc += tl.load(s_ptr)
        tl.store(out_ptr, acc)
    ''')


def parse(name: str, text: str = KERNELS, *, noalias: bool = False) -> KernelSource:
    return KernelSource.parse(text, name, noalias=noalias)


def first(name: str, *, noalias: bool = False):
    return RULE.rewrites(parse(name, noalias=noalias))[0]


def kernel_file(tmp_path: Path, text: str, name: str) -> Path:
    path = tmp_path / f"{name}.py"
    path.write_bytes(text.encode())
    return path


def ttgir(path: Path, kernel: str, **constexprs) -> str:
    """TTGIR of ``kernel`` compiled for sm_90 on the CPU (after Triton's own LICM)."""
    kernels, error = discover.discover_file(path)
    assert error is None, error
    [found] = [k for k in kernels if k.name == kernel]
    return compile_kernel(found.fn, infer_launch(found, constexprs=constexprs), 90).ttgir


def loads_before_loop(ir: str) -> int:
    return ir[:ir.index("scf.for")].count("tt.load")


def run_both(tmp_path: Path, text: str, kernel: str, args: list, **constexprs) -> tuple[torch.Tensor, torch.Tensor]:
    """Run the original and the rewritten kernel under the interpreter; the last tensor argument is
    the output (a fresh copy for each)."""
    outputs = []
    for tag, source in (("before", KERNELS), ("after", text)):
        module = import_interpreted(kernel_file(tmp_path, source, f"hoist_{kernel}_{tag}"), f"hoist_{kernel}_{tag}")
        copied = [a.clone() if isinstance(a, torch.Tensor) else a for a in args]
        out = next(a for a in reversed(copied) if isinstance(a, torch.Tensor))
        getattr(module, kernel)[(2,)](*copied, **constexprs)
        outputs.append(out)
    return outputs[0], outputs[1]


# ----------------------------------------------------------------------------------- positive

def test_a_scalar_scale_and_bias_reloaded_every_row_are_loaded_once_before_the_loop(tmp_path):
    rewrites = RULE.rewrites(parse("scale_bias"))
    assert [r.params for r in rewrites] == [{"load": [0, 1]}, {"load": 0}, {"load": 1}]  # all, then each alone
    both = rewrites[0]
    assert both.rule == NAME and both.exact == "exact" and both.assumes == ()
    assert "nothing in the loop writes memory" in both.why
    assert both.source == KERNELS.replace(
        "    for row in range(0, n_rows):\n",
        "    _tritune_hoisted_0 = tl.load(s_ptr, mask=(0 < n_rows))\n"
        "    _tritune_hoisted_1 = tl.load(b_ptr, mask=(0 < n_rows))\n"
        "    for row in range(0, n_rows):\n").replace(
        "s = tl.load(s_ptr)  # one", "s = _tritune_hoisted_0  # one").replace(
        "* s + tl.load(b_ptr)\n", "* s + _tritune_hoisted_1\n")
    path = kernel_file(tmp_path, both.source, "scale_bias_hoisted")
    assert loads_before_loop(ttgir(path, "scale_bias", BLOCK=64)) == 2
    x, s, b = torch.randn(7, 50), torch.randn(1), torch.randn(1)
    before, after = run_both(tmp_path, both.source, "scale_bias", [x, s, b, torch.zeros(50), 7, 50], BLOCK=64)
    assert torch.equal(before, after) and before.abs().sum() > 0


def test_a_row_of_weights_reloaded_every_row_is_hoisted_with_its_mask_and_other_kept(tmp_path):
    [one] = RULE.rewrites(parse("row_dot"))  # the activations follow r: one hoistable load
    assert one.params == {"load": 0}
    assert one.source == KERNELS.replace(
        "    for r in tl.range(pid, n_rows, 2):\n",
        "    _tritune_hoisted_0 = tl.load(w_ptr + cols, mask=(cols < K) & (pid < n_rows),\n"
        "                    other=0.0)\n"  # the continuation line as it was
        "    for r in tl.range(pid, n_rows, 2):\n").replace(
        "w = tl.load(w_ptr + cols, mask=cols < K,\n                    other=0.0)  # the same",
        "w = _tritune_hoisted_0  # the same")
    assert "scf.for" in ttgir(kernel_file(tmp_path, one.source, "row_dot_hoisted"), "row_dot", BLOCK=64)
    # 5 rows over 2 programs: program 0 reads rows 0, 2, 4 and program 1 rows 1, 3
    a, w = torch.randn(5, 40), torch.randn(40)
    before, after = run_both(tmp_path, one.source, "row_dot", [a, w, torch.zeros(2 * 64), 40, 5], BLOCK=64)
    assert torch.equal(before, after) and before.abs().sum() > 0


def test_a_store_through_another_pointer_blocks_unless_noalias_then_the_rewrite_assumes_it(tmp_path):
    with pytest.raises(NotRewritable, match=r"stores \(tl.store\(out_ptr .*without no-alias any store may write"):
        RULE.rewrites(parse("scale_rows"))
    [one] = RULE.rewrites(parse("scale_rows", noalias=True))
    assert one.assumes == (NOALIAS,) and one.name == "hoist-invariant-load[noalias](load=0)"
    assert "stores go through other pointer parameters (no-alias)" in one.why
    assert one.source == KERNELS.replace(
        "    for row in range(n_rows):\n",
        "    _tritune_hoisted_0 = tl.load(s_ptr, mask=(0 < n_rows))\n    for row in range(n_rows):\n").replace(
        "        s = tl.load(s_ptr)\n        x = tl.load(x_ptr + row",
        "        s = _tritune_hoisted_0\n        x = tl.load(x_ptr + row")
    # Triton's LICM leaves a load in a loop that stores; the rewrite puts it before the loop
    assert loads_before_loop(ttgir(kernel_file(tmp_path, KERNELS, "scale_rows"), "scale_rows", BLOCK=64)) == 0
    assert loads_before_loop(ttgir(kernel_file(tmp_path, one.source, "scale_rows_h"), "scale_rows", BLOCK=64)) == 1
    x, s = torch.randn(6, 30), torch.randn(1)
    before, after = run_both(tmp_path, one.source, "scale_rows", [x, s, torch.zeros(6, 30), 30, 6], BLOCK=32)
    assert torch.equal(before, after) and before.abs().sum() > 0


def test_trip_conditions_for_literal_constexpr_and_runtime_steps(tmp_path):
    text = RULE.apply(parse("steps"), {"load": [0, 1, 2, 3]}).source
    assert "    _tritune_hoisted_0 = tl.load(s_ptr + cols)\n    for i in range(3):\n" in text  # always runs
    assert "    _tritune_hoisted_1 = tl.load(s_ptr + 1, mask=(START < STOP))\n" in text
    assert "    _tritune_hoisted_2 = tl.load(s_ptr + 2, mask=(STEP < 0))\n    for i in range(8, 0, STEP):\n" in text
    assert ("    _tritune_hoisted_3 = tl.load(s_ptr + 3, "
            "mask=(((start < 0) & (STEP > 0)) | ((start > 0) & (STEP < 0))))\n"
            "    for i in range(start, 0, STEP):\n") in text
    for constexprs in (dict(START=0, STOP=2, STEP=-3), dict(START=2, STOP=2, STEP=1)):
        ttgir(kernel_file(tmp_path, text, "steps_hoisted"), "steps", BLOCK=16, **constexprs)  # compiles
    x, s = torch.randn(9), torch.randn(16)
    # the loops run 3, 2, 3 and 2 times; then only the first (8 > 0 with a positive step)
    for constexprs in (dict(START=0, STOP=2, STEP=-3), dict(START=2, STOP=2, STEP=1)):
        before, after = run_both(tmp_path, text, "steps", [x, s, torch.zeros(16), 5], BLOCK=16, **constexprs)
        assert torch.equal(before, after) and before.abs().sum() > 0


def test_a_helper_that_only_reads_does_not_block(tmp_path):
    [one] = RULE.rewrites(parse("pure_helper"))
    assert "_tritune_hoisted_0 = tl.load(x_ptr + cols, mask=(0 < n))" in one.source
    assert loads_before_loop(ttgir(kernel_file(tmp_path, one.source, "pure_helper_h"), "pure_helper", BLOCK=16)) >= 1
    x, s = torch.randn(16), torch.randn(1)
    before, after = run_both(tmp_path, one.source, "pure_helper", [x, s, torch.zeros(16), 3], BLOCK=16)
    assert torch.equal(before, after) and before.abs().sum() > 0


OFFSET_STORE = textwrap.dedent("""\
    import triton
    import triton.language as tl


    @triton.jit
    def offset_store(x_ptr, out_ptr, n, start):
        for i in range(n):
            tl.store(out_ptr + start + i, tl.load(x_ptr + start))
    """)


def test_stores_block_under_noalias_while_their_candidate_parameters_meet_the_loads():
    # x_ptr + start and out_ptr + start: as far as the source says, start could be the pointer of both
    with pytest.raises(NotRewritable, match=r"the loop stores through start too \(tl.store\(out_ptr \+ start"):
        RULE.rewrites(KernelSource.parse(OFFSET_STORE, "offset_store", noalias=True))
    launch = {"signature": {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "start": "i32"}}
    [one] = RULE.rewrites(KernelSource.parse(OFFSET_STORE, "offset_store", noalias=True, launch=launch))
    assert one.assumes == (NOALIAS,) and "tl.store(out_ptr + start + i, _tritune_hoisted_0)" in one.source
    # where a pointer goes through tl.where, its roots are both sides: none of them is the load's
    choose = OFFSET_STORE.replace("out_ptr + start + i", "tl.where(i > 2, out_ptr, x_ptr) + i")
    with pytest.raises(NotRewritable, match=r"the loop stores through x_ptr too"):
        RULE.rewrites(KernelSource.parse(choose, "offset_store", noalias=True, launch=launch))
    apart = choose.replace("tl.where(i > 2, out_ptr, x_ptr)", "tl.where(i > 2, out_ptr, out_ptr + 1)")
    assert RULE.rewrites(KernelSource.parse(apart, "offset_store", noalias=True, launch=launch))
    # a cast to an integer type keeps what it casts; a cast to a pointer type may point anywhere
    cast = OFFSET_STORE.replace("out_ptr + start + i", "out_ptr + (start + i).to(tl.int64)")
    assert RULE.rewrites(KernelSource.parse(cast, "offset_store", noalias=True, launch=launch))
    cast = OFFSET_STORE.replace("out_ptr + start + i", "(out_ptr + start + i).to(tl.pointer_type(tl.float32))")
    with pytest.raises(NotRewritable, match=r"the pointer of tl.store\(\(out_ptr .* goes through a value"):
        RULE.rewrites(KernelSource.parse(cast, "offset_store", noalias=True, launch=launch))


def test_zero_trip_loop_reads_nothing_and_the_unguarded_hoist_would(tmp_path):
    one = first("far_scale")
    assert "_tritune_hoisted_0 = tl.load(s_ptr + far, mask=(start > stop))\n" in one.source  # a negative step
    guarded = kernel_file(tmp_path, one.source, "far_guarded")
    # PLANTED: the same hoist without the trip-count mask reads s_ptr + 2**46 elements (an address
    # past the 48-bit address space): a fault, in its own process
    naive = kernel_file(tmp_path, one.source.replace(", mask=(start > stop))", ")"), "far_naive")
    script = textwrap.dedent(f'''\
        import importlib.util, os, sys
        os.environ["TRITON_INTERPRET"] = "1"
        import torch
        for path in {[str(guarded), str(naive)]!r}:
            spec = importlib.util.spec_from_file_location("far", path)
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            out = torch.full((16,), 7.0)
            module.far_scale[(1,)](torch.randn(64), torch.randn(1), out, 1 << 46, 2, 2, BLOCK=16)
            print(path, torch.equal(out, torch.zeros(16)), flush=True)
        ''')
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))  # no core file
    assert f"{guarded} True" in done.stdout, done.stderr[-2000:]
    assert str(naive) not in done.stdout and done.returncode != 0


def test_crlf_and_a_taken_name_are_kept():
    crlf = KERNELS.replace("\n", "\r\n")
    one = RULE.apply(KernelSource.parse(crlf, "scale_rows", noalias=True), {"load": 0})
    assert one.source == first("scale_rows", noalias=True).source.replace("\n", "\r\n")
    twice = KernelSource.parse(one.source, "scale_rows", noalias=True)  # the hoisted load is outside any loop now
    with pytest.raises(NotRewritable):
        RULE.rewrites(twice)
    taken = KERNELS.replace("cols = tl.arange(0, BLOCK)\n    for row in range(n_rows):",
                            "cols = tl.arange(0, BLOCK)\n    _tritune_hoisted_0 = 1\n    for row in range(n_rows):")
    assert taken != KERNELS
    assert "_tritune_hoisted_1 = tl.load(s_ptr" in RULE.rewrites(parse("scale_rows", taken, noalias=True))[0].source


def test_params_outside_the_hoistable_loads_are_refused():
    kernel = parse("scale_bias")
    for params in ({"load": 2}, {"load": []}, {"load": "all"}, {}):
        with pytest.raises(NotRewritable, match="2 hoistable loads"):
            RULE.apply(kernel, params)


# ------------------------------------------------------------------------- PLANTED ILLEGAL

@pytest.mark.parametrize("kernel, noalias, reason", [
    ("same_store", True, r"load s_ptr \(line 8\): the loop stores through s_ptr too"),
    ("same_store", False, r"without no-alias any store may write what it reads"),
    ("loop_variable", True, r"its arguments use i, assigned in the loop"),
    ("advanced", True, r"its arguments use ptrs, assigned in the loop"),
    ("updated_mask", True, r"its arguments use limit, assigned in the loop"),
    ("under_if", True, r"not at the top level of its loop's body"),
    ("conditional_expression", True, r"under a conditional expression"),
    ("helper_store", True, r"a call to bump \(which has a tl.store\)"),
    ("volatile", True, r"a volatile load"),
    ("fetch_again", True, r"cache modifier \"\.cv\""),
    ("atomic", True, r"the loop \(line \d+\) has tl.atomic_add"),
    ("gathered_store", True, r"under no-alias: the pointer of tl.store\(out_ptr \+ tl.load.* goes through a value"),
    ("runtime_step", True, r"a runtime step: its trip count is not known"),
    ("block_pointer", True, r"a block-pointer load: it takes no mask.*a block-pointer load \(boundary_check\)"),
])
def test_planted_illegal_loads_are_not_hoisted(kernel, noalias, reason):
    source = KernelSource.parse(ILLEGAL, kernel, noalias=noalias)
    with pytest.raises(NotRewritable, match=reason):
        RULE.rewrites(source)
    with pytest.raises(NotRewritable, match=reason):
        hoistable(source)
