"""Which block tiles which grid dimension (``capture.grid_blocks``), and what capture, the search's
space and the applier make of it: a block that arithmetic matches by coincidence is no knob."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
import triton

from conftest import import_interpreted
from tritune import apply
from tritune.apply.grid import recompute
from tritune.capture import _jit_shim, grid_rule
from tritune.capture.grid_blocks import tiles
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches
from tritune.model.variant import Variant
from tritune.search import space
from tritune.search.proposers import variant_of
from tritune.store import DecisionStore, current_target, key_for

KERNELS = Path(__file__).parents[1] / "programs" / "grid_kernels.py"

ADD = """
@triton.jit
def add(x, y, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(axis=0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    tl.store(out + offs, tl.load(x + offs, mask=offs < n) + tl.load(y + offs, mask=offs < n), mask=offs < n)
"""

DECODE = """
def decode(Q, K, Out, stride_qbs, stride_qh, stride_kbs, BLOCK_DMODEL: tl.constexpr, BLOCK_N: tl.constexpr):
    cur_batch = tl.program_id(0)
    cur_head = tl.program_id(1)
    offs_d = tl.arange(0, BLOCK_DMODEL)
    q = tl.load(Q + cur_batch * stride_qbs + cur_head * stride_qh + offs_d)
    for start in range(0, 64, BLOCK_N):
        k = tl.load(K + (start + tl.arange(0, BLOCK_N))[:, None] * stride_kbs + offs_d[None, :])
    tl.store(Out + cur_batch * stride_qbs + cur_head * stride_qh + offs_d, q)
"""

CAST = """
def copy(x, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0).to(tl.int64)
    start = BLOCK * (pid // 1)
    src = tl.make_block_ptr(x, (n,), (1,), (start,), (BLOCK,), (0,))
    tl.store(out + start + tl.arange(0, BLOCK), tl.load(src))
"""

GROUPED = """
def mm(a, c, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    pid = tl.program_id(0)
    pid_m = pid // tl.cdiv(N, BLOCK_N)
    pid_n = pid % tl.cdiv(N, BLOCK_N)
    block = tl.make_block_ptr(a, (M, N), (N, 1), (pid_m * BLOCK_M, pid_n * BLOCK_N), (BLOCK_M, BLOCK_N), (1, 0))
    tl.store(c + pid_m * BLOCK_M + tl.arange(0, BLOCK_M), tl.sum(tl.load(block), axis=1))
"""

SCALES = """
def dequant(x, s, y, M, N, BLOCK_SIZE: tl.constexpr):
    pid_m = tl.program_id(axis=0)
    pid_n = tl.program_id(axis=1)
    offs_m = pid_m * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    offs_n = pid_n * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    offs = offs_m[:, None] * N + offs_n[None, :]
    scale = tl.load(s + pid_m * tl.cdiv(N, BLOCK_SIZE) + pid_n)
    tl.store(y + offs, tl.load(x + offs) * scale)
"""

LOOPED = """
def looped(x, out, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    base = pid * BLOCK
    for i in range(4):
        tl.store(out + base + i, tl.load(x + base + i))
        base = pid
"""


def test_a_block_the_program_index_is_scaled_by_tiles_its_dimension():
    assert tiles(ADD, ["BLOCK"]) == {(0, "BLOCK")}
    # through a cast and a division, the block on the left, into a block pointer's offsets
    assert tiles(CAST, ["BLOCK"]) == {(0, "BLOCK")}
    # one dimension for two blocks (grouped tiles): neither block alone tiles it
    assert tiles(GROUPED, ["BLOCK_M", "BLOCK_N"]) == set()


def test_an_index_that_reaches_memory_unscaled_tiles_nothing():
    # a head a program (a stride, no block), one scale a quantization block, one sum a program
    assert tiles(DECODE, ["BLOCK_DMODEL", "BLOCK_N"]) == set()
    assert tiles(SCALES, ["BLOCK_SIZE"]) == set()
    # a loop hands the unscaled index to the next iteration's pointer
    assert tiles(LOOPED, ["BLOCK"]) == set()


STALE = """
def k(x, out, n, stride, BLOCK: tl.constexpr):
    i = tl.program_id(0)
    offs = i * BLOCK + tl.arange(0, BLOCK)
    acc = tl.load(x + offs)
    for j in range(4):
        i = j * stride
        acc += tl.load(x + i + offs)
    off = tl.program_id(0)
    off *= BLOCK
    if n > 0:
        off = off + 1
        tl.store(out + off + tl.arange(0, BLOCK), acc)
"""


def test_a_name_is_followed_statement_by_statement():
    # ``i`` is reassigned inside the loop before its use there; ``off *= BLOCK`` scales
    assert tiles(STALE, ["BLOCK"]) == {(0, "BLOCK")}


def test_a_source_that_cannot_tell_gives_none():
    helper = "def k(x, BLOCK: tl.constexpr):\n    pid = _pid()\n    tl.store(x + pid * BLOCK, 1)\n"
    assert tiles(helper, ["BLOCK"]) is None  # the index comes from a helper: nothing to follow
    deep = "def k(x, BLOCK: tl.constexpr):\n    pid = tl.program_id(0)\n    tl.store(x + pid * BLOCK + " + \
        " + ".join(["1"] * 3000) + ", 1)\n"
    assert tiles(deep, ["BLOCK"]) is None  # too deep to walk: as unreadable, never an error
    assert tiles(None, ["BLOCK"]) is None
    assert tiles("def broken(:", ["BLOCK"]) is None
    axis = "def k(x, BLOCK: tl.constexpr):\n    d = 0\n    tl.store(x + tl.program_id(d) * BLOCK, 1)\n"
    assert tiles(axis, ["BLOCK"]) is None
    # named among several functions: the one asked for
    two = ADD + DECODE
    assert tiles(two, ["BLOCK_DMODEL"], kernel="decode") == set()
    assert tiles(two, ["BLOCK"], kernel="add") == {(0, "BLOCK")}


def test_arithmetic_explains_a_dimension_only_by_a_block_that_tiles_it():
    # decode attention over (batch, heads): heads == cdiv(stride_qbs, BLOCK_DMODEL) by coincidence
    grid, constexprs, scalars = [4, 32, 1], {"BLOCK_DMODEL": 128, "BLOCK_N": 64}, {"stride_qbs": 4096, "stride_qh": 128}
    legacy, _ = grid_rule.infer(grid, 2, None, {}, constexprs, scalars)
    assert legacy["dims"][1] == {"numel": "stride_qbs", "block": "BLOCK_DMODEL"}
    assert grid_rule.infer(grid, 2, None, {}, constexprs, scalars, tiles=set()) == (None, [])
    # a square transpose: the second dimension is its second block's, not the first's
    square, blocks, sizes = [4, 4, 1], {"BLOCK_M": 32, "BLOCK_N": 32}, {"M": 128, "N": 128}
    legacy, _ = grid_rule.infer(square, 2, None, {}, blocks, sizes)
    assert [d["block"] for d in legacy["dims"][:2]] == ["BLOCK_M", "BLOCK_M"]
    assert "tiles" not in legacy
    rule, _ = grid_rule.infer(square, 2, None, {}, blocks, sizes, tiles={(0, "BLOCK_M"), (1, "BLOCK_N")})
    assert [d["block"] for d in rule["dims"][:2]] == ["BLOCK_M", "BLOCK_N"] and rule["tiles"] is True


def test_a_probed_block_that_does_not_tile_is_unexplained():
    def grid_fn(meta):
        return (triton.cdiv(meta["n"], meta["BLOCK"]),)

    rule, unexplained = grid_rule.infer([4, 1, 1], 1, grid_fn, {"n": 100, "BLOCK": 32}, {"BLOCK": 32}, {"n": 100},
                                        tiles=set())
    assert (rule, unexplained) == (None, ["BLOCK"])


@pytest.fixture(scope="module")
def g():
    return import_interpreted(KERNELS, "grid_kernels")


def _spec(directory: Path, kernel: str):
    (spec,) = [s for s in read_launches(directory) if s.kernel == kernel]
    return spec


def _blocks(spec) -> list[str]:
    return [k.name for k in space.knobs(spec) if k.kind == "constexpr"]


def test_capture_makes_no_knob_of_a_block_that_does_not_tile(g, tmp_path):
    batch, heads, dim = 2, 4, 16
    q = torch.randn(batch, heads, dim)
    out = torch.empty_like(q)
    x = torch.randn(100)
    first = torch.empty(triton.cdiv(100, 32))
    with capture(tmp_path):
        # heads == cdiv(q.stride(0), BLOCK_D): 64 / 16
        g.per_head_kernel[(batch, heads)](q, out, q.stride(0), q.stride(1), BLOCK_D=dim)
        g.block_first_kernel[(triton.cdiv(100, 32),)](x, first, 100, BLOCK=32)
    assert torch.equal(out, q * 2)
    assert torch.equal(first, x[::32])
    head = _spec(tmp_path, "per_head_kernel")
    assert head.grid_rule is None and _blocks(head) == []
    firsts = _spec(tmp_path, "block_first_kernel")
    assert firsts.grid_rule is None and _blocks(firsts) == []


def test_capture_places_each_block_on_the_dimension_it_tiles(g, tmp_path):
    x = torch.randn(64, 64)
    y = torch.empty(64, 64)
    with capture(tmp_path):
        g.transpose_kernel[(triton.cdiv(64, 16), triton.cdiv(64, 16))](x, y, 64, 64, BLOCK_M=16, BLOCK_N=16)
    assert torch.equal(y, x.T)
    spec = _spec(tmp_path, "transpose_kernel")
    # (M or N, equal here, explains the second: the applier infers it again from each live launch)
    assert [d["block"] for d in spec.grid_rule["dims"][:2]] == ["BLOCK_M", "BLOCK_N"]
    assert _blocks(spec) == ["BLOCK_M", "BLOCK_N"] and spec.grid_rule["tiles"] is True
    # a variant changing a block is verified on this rule, and says so
    assert variant_of(spec, {"BLOCK_N": 32}).tiled and not variant_of(spec, {"num_warps": 8}).tiled


def test_each_decision_is_applied_on_the_rule_it_was_verified_on():
    before, sizes = {"BLOCK_M": 32, "BLOCK_N": 32}, {"M": 128, "N": 128}
    square = {(0, "BLOCK_M"), (1, "BLOCK_N")}
    # verified on the source's rule: each block its own dimension
    assert recompute((4, 4), before, {"BLOCK_M": 64}, sizes, square) == (2, 4)
    assert recompute((4, 4), before, {"BLOCK_N": 64}, sizes, square) == (4, 2)
    # stored before capture read the source: the grid arithmetic alone gave it then
    assert recompute((4, 4), before, {"BLOCK_M": 64}, sizes) == (2, 2)
    # a block that tiles nothing leaves the grid as the program gave it
    assert recompute((4, 32), {"BLOCK_DMODEL": 128}, {"BLOCK_DMODEL": 256}, {"stride_qbs": 4096}, set()) == (4, 32)


def _decide(store, spec, variant):
    key = key_for(spec, current_target("cpu"))
    run = store.start_run({"test": True})
    candidate = store.add_candidate(run, key, variant)
    store.finish_candidate(candidate.id, "verified", verification={"ok": True, "mode": "bitwise"},
                           timings={"median_ms": 1.0})
    store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)


@pytest.mark.parametrize("tiled, changes, grid", [(True, {"BLOCK_N": 32}, (4, 2)), (False, {"BLOCK_M": 8}, (8, 8))],
                         ids=["verified-on-the-source-rule", "stored-before"])
def test_the_applier_launches_the_grid_the_decision_was_verified_on(g, tmp_path, tiled, changes, grid):
    x = torch.randn(64, 64)
    with capture(tmp_path / "capture"):
        g.transpose_kernel[(4, 4)](x, torch.empty(64, 64), 64, 64, BLOCK_M=16, BLOCK_N=16)
    spec = _spec(tmp_path / "capture", "transpose_kernel")
    variant = Variant(name="decided", constexprs=changes, tiled=tiled)
    launched = []

    def spy(launch, run):
        launched.append(tuple(launch.grid))
        return run(launch)

    with DecisionStore(tmp_path / "decisions.db") as store:
        _decide(store, spec, variant)
        apply.enable(store, device="cpu")
        _jit_shim.install_around(spy)
        try:
            y = torch.empty(64, 64)
            g.transpose_kernel[(4, 4)](x, y, 64, 64, BLOCK_M=16, BLOCK_N=16)
        finally:
            _jit_shim.uninstall_around(spy)
            apply.disable()
    assert torch.equal(y, x.T)
    assert launched == [grid]
