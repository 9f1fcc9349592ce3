"""tritune.analyze.pointers: which parameters are pointers, read from use, and what they point to."""

import json
import types
from pathlib import Path

import pytest
import triton
import triton.language as tl
from click.testing import CliRunner

from tritune.analyze.discover import discover_file
from tritune.analyze.launch import infer_launch
from tritune.analyze.pointers import infer_pointers
from tritune.cli import main

TABLE1 = Path(__file__).resolve().parents[1] / "data" / "table1_plain_names.py"


# -- which parameters are pointers -------------------------------------------------------------

@triton.jit
def add(X, Y, OUT, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    tl.store(OUT + offs, tl.load(X + offs, mask=mask) + tl.load(Y + offs, mask=mask), mask=mask)


@triton.jit
def reversed_row(X, OUT, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    x = tl.load(N - 1 - offs + X, mask=offs < N)  # index written first: offs < N rules N out
    tl.store(OUT + offs, x, mask=offs < N)


@triton.jit
def store_scalar(OUT, X, I):
    tl.store(OUT + I, X)  # X is a value, I an offset: neither is a pointer


@triton.jit
def offset_param(X, OUT, start, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)  # start reaches both pointer sums, second to the pointer
    tl.store(OUT + offs, tl.load(X + offs))


@triton.jit
def offset_first(X, start, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    tl.store(offs + X, 1.0)  # pointer written last: the leftmost rule picks start (documented)


@triton.jit
def offset_first_settled(X, start, BLOCK: tl.constexpr):
    offs = start + tl.arange(0, BLOCK)
    tl.store(offs + X, tl.load(X))  # tl.load(X) makes X a pointer: the sum is settled


@triton.jit
def locals_and_loops(A, B, C, K, stride, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a_ptrs, b_ptrs = A + offs[:, None], tl.multiple_of(B + offs, 16)
    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    for k in range(0, K, BLOCK):
        acc += tl.load(a_ptrs) * tl.load(b_ptrs)[None, :]
        a_ptrs += BLOCK * stride
        b_ptrs = b_ptrs + BLOCK
    tl.store(C + offs[:, None] * stride + offs[None, :], acc)


@triton.jit
def reassigned_param(X, OUT, stride, BLOCK: tl.constexpr):
    X += tl.program_id(0) * stride
    tl.store(OUT + tl.arange(0, BLOCK), tl.load(X + tl.arange(0, BLOCK)))


@triton.jit
def block_pointers(A, OUT, M, N, stride, BLOCK: tl.constexpr):
    block = tl.make_block_ptr(base=A, shape=(M, N), strides=(stride, 1), offsets=(0, 0),
                              block_shape=(BLOCK, BLOCK), order=(1, 0))
    acc = tl.zeros([BLOCK, BLOCK], dtype=tl.float32)
    for _ in range(0, N, BLOCK):
        acc += tl.load(block, boundary_check=(0, 1))
        block = tl.advance(block, (0, BLOCK))
    out = tl.make_block_ptr(OUT, (M, N), (stride, 1), (0, 0), (BLOCK, BLOCK), (1, 0))
    tl.store(out, acc, boundary_check=(0, 1))


@triton.jit
def atomics(SUM, LOCK, FLAGS, X):
    while tl.atomic_cas(LOCK, 0, 1) == 1:
        pass
    tl.atomic_add(SUM, X)  # X is the value added, not a pointer
    tl.atomic_or(FLAGS, 1)
    tl.atomic_xchg(LOCK, 0)


@triton.jit
def _gather_row(W, IDS, row, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    return tl.load(W + tl.load(IDS + row) * n + offs, mask=offs < n, other=0)  # IDS holds offsets


@triton.jit
def calls_helper(IDS, W, OUT, N, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    tl.store(OUT + row * N + tl.arange(0, BLOCK), _gather_row(W, IDS, row, N, BLOCK))


@pytest.mark.parametrize("kernel, pointers", [
    (add, ["X", "Y", "OUT"]),
    (reversed_row, ["X", "OUT"]),
    (store_scalar, ["OUT"]),
    (offset_param, ["X", "OUT"]),
    (offset_first, ["start"]),
    (offset_first_settled, ["X"]),
    (locals_and_loops, ["A", "B", "C"]),
    (reassigned_param, ["X", "OUT"]),
    (block_pointers, ["A", "OUT"]),
    (atomics, ["SUM", "LOCK", "FLAGS"]),
    (calls_helper, ["IDS", "W", "OUT"]),
])
def test_pointers_from_use(kernel, pointers):
    assert sorted(infer_pointers(kernel)) == sorted(pointers)


def test_declared_types_settle_an_ambiguous_sum():
    # --signature start=i32 (or --constexpr start=...) leaves X as the only candidate
    assert sorted(infer_pointers(offset_first, known={"start": "i32"})) == ["X"]
    assert sorted(infer_pointers(offset_first, known={"start": "constexpr"})) == ["X"]
    assert sorted(infer_pointers(offset_first, known={"X": "*fp16"})) == ["X"]


def test_unreadable_source_falls_back_to_names():
    assert infer_pointers(types.SimpleNamespace(src="def broken(:", params=[])) == {}


# -- element types -----------------------------------------------------------------------------

@triton.jit
def element_signals(ZERO, F, INF, H, CONVERTED, SAME, MIXED, N, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    mask = offs < N
    i = tl.load(ZERO + offs, mask=mask, other=0)  # Triton casts other to any element type: no signal
    f = tl.load(F + offs, mask=mask, other=0.0)
    g = tl.load(INF + offs, mask=mask, other=-float("inf"))
    half = (i + f + g).to(tl.float16)
    tl.store(H + offs, half)
    c = tl.load(CONVERTED + offs).to(tl.float16)  # converts what was loaded: says nothing of CONVERTED
    tl.store(SAME + offs, c.to(SAME.dtype.element_ty))  # names no type
    tl.store(MIXED + offs, tl.load(MIXED + offs, other=-1.0).to(tl.bfloat16))  # fp32 and bf16: unknown


@triton.jit
def gathers(IDX, IDX_CONVERTED, W, OUT, stride, BLOCK: tl.constexpr):
    row = tl.program_id(0)
    cols = tl.arange(0, BLOCK)
    idx = tl.load(IDX + row)
    other = tl.load(IDX_CONVERTED + row).to(tl.int64)  # may have been floats
    tl.store(OUT + row * stride + cols, tl.load(W + idx * stride + cols) + tl.load(W + other * stride + cols))


def test_element_types_from_what_the_kernel_names():
    assert infer_pointers(element_signals) == {
        "ZERO": "*fp32", "F": "*fp32", "INF": "*fp32", "H": "*fp16", "CONVERTED": "*fp32",
        "SAME": "*fp32", "MIXED": "*fp32"}


def test_element_types_of_gathers_atomics_and_helpers():
    assert infer_pointers(gathers) == {"IDX": "*i32", "IDX_CONVERTED": "*fp32", "W": "*fp32", "OUT": "*fp32"}
    assert infer_pointers(atomics) == {"SUM": "*fp32", "LOCK": "*i32", "FLAGS": "*i32"}
    # the helper's gather names IDS; its other=0 says nothing of W
    assert infer_pointers(calls_helper) == {"IDS": "*i32", "W": "*fp32", "OUT": "*fp32"}


# -- through launch and the CLI ----------------------------------------------------------------

@pytest.fixture(scope="module")
def table1():
    [kernel], error = discover_file(TABLE1)
    assert error is None
    return kernel


def test_launch_uses_inferred_pointers_and_given_types_win(table1):
    launch = infer_launch(table1, constexprs={"R": 128})
    assert launch.signature == {"X": "*fp32", "SUM": "*fp32", "OUT": "*fp32", "N": "i32", "R": "constexpr"}
    assert launch.attrs == {(0,): [["tt.divisibility", 16]], (1,): [["tt.divisibility", 16]],
                            (2,): [["tt.divisibility", 16]]}
    given = infer_launch(table1, constexprs={"R": 128}, signature={"X": "*fp16"})
    assert given.signature["X"] == "*fp16" and given.signature["SUM"] == "*fp32"


def test_table1_plain_names_merges_load_and_reduce_from_the_cli():
    result = CliRunner().invoke(main, ["analyze", str(TABLE1), "--constexpr", "R=128", "--json"])
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)
    assert record["error"] is None
    assert record["ttir_ops"]["tt.load"] == 2 and record["ttir_ops"]["tt.reduce"] == 2
    assert record["rewrites"]["merge-redundant-loads"] == 1
    assert record["rewrites"]["merge-redundant-reduces"] == 1


EXP_OF_OTHER_ZERO = """import triton
import triton.language as tl


@triton.jit
def exp_kernel(X, OUT, N, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < N
    x = tl.load(X + offs, mask=mask, other=0)
    tl.store(OUT + offs, tl.exp(x), mask=mask)
"""


def test_a_float_kernel_loading_with_other_zero_compiles_without_a_signature(tmp_path):
    # other=0 once made X *i32, and tl.exp refused the int32 it loaded
    (tmp_path / "exp_other_zero.py").write_text(EXP_OF_OTHER_ZERO)
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "exp_other_zero.py"), "--json"])
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)
    assert record["error"] is None
    assert record["ttir_ops"]["tt.load"] == 1
