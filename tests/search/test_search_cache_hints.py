"""Cache-hint variants: which loads get which eviction policy, byte-exact edits of the kernel's
file, TTIR that carries the policy, and replays that compute the same under the interpreter."""

from __future__ import annotations

import dataclasses
import shutil
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import kernel_hash

from tritune.analyze import discover
from tritune.analyze.compile import compile_kernel
from tritune.analyze.launch import infer_launch
from tritune.capture.spec import read_launches, write_launches
from tritune.model.launch import ArgSpec, LaunchSpec, SpecError
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.replay import Replay, make_args
from tritune.search import CacheHintProposer
from tritune.search.cache_hints import find_loads, rewrite

ROOT = Path(__file__).resolve().parents[2]
RED = ROOT / "examples" / "inductor" / "triton_red_fused_native_layer_norm_0.py"
RED_KERNEL = "triton_red_fused_native_layer_norm_0"
REPLAY_KERNELS = Path(__file__).parents[1] / "programs" / "replay_kernels.py"

# Several kernels in one file, one per reuse rule. The comment below is not ASCII on purpose: ast
# columns are UTF-8 byte offsets, and an edit computed in characters would land off by a few.
KERNELS = textwrap.dedent('''\
    import triton
    import triton.language as tl

    # ünïcode — before the kernels, so byte and character offsets differ below


    @triton.jit
    def scale_add(x_ptr, y_ptr, w_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        w = tl.load(w_ptr)  # one scale, read by every program
        x = tl.load(x_ptr + offs, mask=mask)
        y = tl.load(y_ptr + offs,
                    mask=mask,)
        tl.store(out_ptr + offs, w * x + y, mask=mask)


    @triton.jit
    def add_bias(x_ptr, b_ptr, out_ptr, n, N: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        col = i % N
        row = i // N
        x = tl.load(x_ptr + (col + N * row), mask=i < n, eviction_policy='evict_last')
        b = tl.load(b_ptr + col, mask=i < n)
        tl.store(out_ptr + i, x + b, mask=i < n)


    @triton.jit
    def row_dot(a_ptr, v_ptr, out_ptr, K, BLOCK: tl.constexpr):
        row = tl.program_id(0)
        cols = tl.arange(0, BLOCK)
        a_ptrs = a_ptr + row * K + cols
        acc = tl.zeros([BLOCK], tl.float32)
        for k in range(0, K, BLOCK):
            a = tl.load(a_ptrs, mask=cols + k < K, other=0.0)
            v = tl.load(v_ptr + row, eviction_policy="evict_first")
            c = tl.load(a_ptr + row * K + cols, mask=cols < K, other=0.0, cache_modifier=".cg")
            acc += a * v + c
            a_ptrs += BLOCK
        tl.store(out_ptr + row, tl.sum(acc, 0))


    @triton.jit
    def outer(a_ptr, b_ptr, out_ptr, N: tl.constexpr, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        j = tl.program_id(axis=1) * BLOCK + tl.arange(0, BLOCK)
        a = tl.load(a_ptr + i)
        b = tl.load(b_ptr + j)
        tl.store(out_ptr + i[:, None] * N + j[None, :], a[:, None] * b[None, :])


    @triton.jit
    def no_loads(out_ptr, BLOCK: tl.constexpr):
        tl.store(out_ptr + tl.arange(0, BLOCK), tl.zeros([BLOCK], tl.float32))
    ''')


def loads(name: str, source: str = KERNELS, **kw) -> dict[str, tuple[str, str]]:
    """pointer text -> (current policy, planned policy)."""
    return {load.pointer: (load.policy, load.plan) for load in find_loads(source, name, **kw)}


def kernel_file(tmp_path: Path, source: str = KERNELS, name: str = "hints.py") -> Path:
    path = tmp_path / name
    path.write_bytes(source.encode())
    return path


def ttir_loads(path: Path, kernel: str, **constexprs) -> list[str]:
    """The ``tt.load`` lines of ``kernel`` in ``path`` compiled for sm_90 on the CPU."""
    kernels, error = discover.discover_file(path)
    assert error is None, error
    [found] = [k for k in kernels if k.name == kernel]
    compiled = compile_kernel(found.fn, infer_launch(found, constexprs=constexprs or None), 90)
    return [line for line in compiled.ttir.splitlines() if "tt.load" in line]


# ------------------------------------------------------------------------------- which policy

def test_elementwise_loads_are_streamed_a_scale_every_program_reads_is_kept():
    assert loads("scale_add") == {"w_ptr": ("", "evict_last"), "x_ptr + offs": ("", "evict_first"),
                                  "y_ptr + offs": ("", "evict_first")}
    # with a single program nothing is shared between programs: the scale is streamed too
    assert loads("scale_add", grid=[1, 1, 1])["w_ptr"] == ("", "evict_first")


def test_a_grid_axis_missing_from_the_address_means_reuse_along_it():
    # a matmul's A tile is read by every program along axis 1, B along axis 0
    assert loads("outer") == {"a_ptr + i": ("", "evict_last"), "b_ptr + j": ("", "evict_last")}
    assert loads("outer", grid=[4, 4, 1]) == loads("outer")
    # an axis of one program shares nothing along it
    assert loads("outer", grid=[4, 1, 1]) == {"a_ptr + i": ("", "evict_first"), "b_ptr + j": ("", "evict_last")}
    [a, _] = find_loads(KERNELS, "outer", grid=[4, 4, 1])
    assert a.reused == "every program along grid axis 1 reads it (program_id(1) not in the address)"


def test_broadcast_by_modulo_is_reused_a_mod_div_pair_is_read_once():
    found = {load.pointer: load for load in find_loads(KERNELS, "add_bias")}
    assert found["b_ptr + col"].plan == "evict_last" and "%" in found["b_ptr + col"].reused
    assert found["x_ptr + (col + N * row)"].reused is None  # i % N with i // N: every element once
    assert found["x_ptr + (col + N * row)"].policy == "evict_last"  # the current hint, to be flipped


def test_loop_invariant_loads_are_reused_advanced_pointers_streamed_cache_modifiers_skipped():
    found = find_loads(KERNELS, "row_dot")
    assert [(load.pointer, load.plan) for load in found] == [
        ("a_ptrs", "evict_first"),  # advanced every iteration (a_ptrs += BLOCK)
        ("v_ptr + row", "evict_last"),  # the same address every iteration
        ("a_ptr + row * K + cols", "evict_last")]
    assert found[1].reused.startswith("read again every iteration")
    assert found[2].skip.startswith("a cache modifier")


def test_gathers_and_repeated_pointers_are_reused():
    source = REPLAY_KERNELS.read_text()
    assert loads("gather_kernel", source) == {"idx_ptr + offs": ("", "evict_first"),
                                              "src_ptr + index": ("", "evict_last")}
    red = find_loads(RED.read_text(), RED_KERNEL)  # Inductor's own hints, re-derived
    assert [(load.policy, load.plan) for load in red] == [("evict_last", "evict_last"), ("evict_first", "evict_first"),
                                                         ("evict_last", "evict_last"), ("evict_last", "evict_last")]
    assert red[0].reused == "loaded again later" and "no program id" in red[2].reused


# ---------------------------------------------------------------------------------- rewriting

def test_rewrite_of_a_real_inductor_file_touches_only_the_chosen_policy():
    original = RED.read_text()
    new = rewrite(original, RED_KERNEL, {1: "evict_last"})
    old_line = "tmp14 = tl.load(in_ptr0 + (r0_1 + 2048*x0), r0_mask, eviction_policy='evict_first', other=0.0)"
    assert original.count(old_line) == 1
    assert new == original.replace(old_line, old_line.replace("'evict_first'", "'evict_last'"))


def test_insertion_keeps_every_other_byte_and_non_ascii_text_before_it(tmp_path):
    new = rewrite(KERNELS, "scale_add", {1: "evict_first", 2: "evict_first"})
    assert new == KERNELS.replace("x = tl.load(x_ptr + offs, mask=mask)",
                                  'x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first")').replace(
        "mask=mask,)", 'mask=mask, eviction_policy="evict_first",)')
    crlf = KERNELS.replace("\n", "\r\n")
    assert rewrite(crlf, "scale_add", {1: "evict_first"}) == crlf.replace(
        "x = tl.load(x_ptr + offs, mask=mask)", 'x = tl.load(x_ptr + offs, mask=mask, eviction_policy="evict_first")')


def test_rewritten_file_compiles_with_the_policy_on_the_chosen_loads(tmp_path):
    assert all("evictionPolicy" not in line for line in ttir_loads(kernel_file(tmp_path), "scale_add"))
    path = kernel_file(tmp_path, rewrite(KERNELS, "scale_add", {0: "evict_last", 2: "evict_first"}), "hinted.py")
    w, x, y = ttir_loads(path, "scale_add")
    assert "evictionPolicy = evict_last" in w and "evictionPolicy" not in x and "evictionPolicy = evict_first" in y


def test_an_existing_policy_is_replaced_not_duplicated(tmp_path):
    with pytest.raises(SyntaxError):  # what appending a second keyword would do
        compile("tl.load(p, eviction_policy='evict_last', eviction_policy='evict_first')", "x", "exec")
    new = rewrite(KERNELS, "add_bias", {0: "evict_first"})
    assert new.count("eviction_policy") == KERNELS.count("eviction_policy")
    assert "mask=i < n, eviction_policy='evict_first')" in new  # the file's quote kept
    [x, _] = ttir_loads(kernel_file(tmp_path, new), "add_bias", N=64, BLOCK=128)
    assert "evictionPolicy = evict_first" in x and "evict_last" not in x
    positional = "@triton.jit\ndef k(p, q):\n    x = tl.load(p, None, None, (), '', '', 'evict_last')\n"
    assert rewrite(positional, "k", {0: "evict_first"}) == positional.replace("'evict_last'", "'evict_first'")


def test_real_inductor_kernel_flipped_compiles_with_the_flip(tmp_path):
    new = rewrite(RED.read_text(), RED_KERNEL, {0: "evict_first", 3: "evict_first"})
    lines = ttir_loads(kernel_file(tmp_path, new, RED.name), RED_KERNEL)
    policies = [line.split("evictionPolicy = ")[1].split()[0] for line in lines]
    assert policies == ["evict_first", "evict_first", "evict_last", "evict_first"]


def test_only_the_named_kernel_is_touched():
    scale_add = KERNELS[KERNELS.index("@triton.jit\ndef scale_add"):KERNELS.index("@triton.jit\ndef add_bias")]
    twice = KERNELS + "\n" + scale_add.replace("def scale_add", "def scale_add_copy")
    new = rewrite(twice, "scale_add", {1: "evict_first", 2: "evict_last"})
    tail = twice[twice.index("def scale_add_copy"):]
    assert new.endswith(tail) and [load.policy for load in find_loads(new, "scale_add_copy")] == ["", "", ""]
    assert [load.policy for load in find_loads(new, "scale_add")] == ["", "evict_first", "evict_last"]
    # the other kernels of the file are the same text
    assert new[new.index("@triton.jit\ndef add_bias"):] == twice[twice.index("@triton.jit\ndef add_bias"):]


def test_bad_requests_are_one_clear_line():
    with pytest.raises(ValueError, match="cannot take a hint: a cache modifier"):
        rewrite(KERNELS, "row_dot", {2: "evict_first"})
    with pytest.raises(ValueError, match="no load7"):
        rewrite(KERNELS, "row_dot", {7: "evict_first"})
    with pytest.raises(ValueError, match="not one of"):
        rewrite(KERNELS, "row_dot", {0: "evict_normal"})


def test_loads_that_cannot_take_a_hint_are_skipped():
    source = textwrap.dedent('''\
        @triton.jit
        def k(p, q, P: tl.constexpr, **kw):
            a = tl.load(p, volatile=True)
            b = tl.load(p, eviction_policy=P)
            c = tl.load(p, **kw)
            d = tl.load(p, cache_modifier="")
        ''')
    skips = [load.skip for load in find_loads(source, "k")]
    assert skips[:3] == ["a volatile load", "an eviction policy that is not a string literal",
                         "unpacked arguments (*args/**kwargs)"] and skips[3] is None


# ---------------------------------------------------------------------------------- proposals

def spec(kernel: str, source: str = "sources/hints.py", grid=(8,)) -> LaunchSpec:
    return LaunchSpec(kernel=kernel, kind="jit", module="hints", source_file="hints.py", source=source,
                      source_hash="0" * 64, args=[], constexprs={}, options={}, grid=list(grid))


@pytest.fixture
def capture(tmp_path) -> Path:
    (tmp_path / "sources").mkdir()
    kernel_file(tmp_path / "sources")
    return tmp_path


def names(variants) -> list[str]:
    return [v.name for v in variants]


def test_plan_first_then_its_changes_alone_then_the_opposites(capture):
    proposer = CacheHintProposer(capture)
    assert proposer.name == "cache-hints"
    proposed = proposer.propose(spec("scale_add"), [], limit=20)
    assert names(proposed) == [
        "cache hints: load0 evict_last, load1 evict_first, load2 evict_first",
        "cache hints: load0 evict_last", "cache hints: load1 evict_first", "cache hints: load2 evict_first",
        "cache hints: load0 evict_first", "cache hints: load1 evict_last", "cache hints: load2 evict_last"]
    assert all(v.source is not None and not (v.options or v.constexprs or v.passes) for v in proposed)
    assert proposed[1].source == rewrite(KERNELS, "scale_add", {0: "evict_last"})
    # a contradicted hint comes first among the single changes, and hinted loads are flipped first
    bias = names(proposer.propose(spec("add_bias"), [], limit=20))
    assert bias == ["cache hints: load0 evict_first, load1 evict_last", "cache hints: load0 evict_first",
                    "cache hints: load1 evict_last", "cache hints: load1 evict_first"]


def test_all_loads_evict_first_when_every_load_is_read_once(tmp_path):
    (tmp_path / "sources").mkdir()
    shutil.copy(REPLAY_KERNELS, tmp_path / "sources" / "replay_kernels.py")
    [first, *_] = CacheHintProposer(tmp_path).propose(spec("add_kernel", "sources/replay_kernels.py"), [], 1)
    assert first.name == "cache hints: load0 evict_first, load1 evict_first"
    assert first.knobs == ("evict:load0=evict_first", "evict:load1=evict_first")  # what the results say won


def test_limit_and_tried_variants(capture):
    proposer, s = CacheHintProposer(capture), spec("scale_add")
    first = proposer.propose(s, [], limit=2)
    assert len(first) == 2 and proposer.propose(s, [], limit=0) == []
    trials = [Trial(first[0], True, 1.0), Trial(first[1], False, None, "wrong_result")]
    again = proposer.propose(s, trials, limit=20)
    assert len(again) == 5 and not {v.key() for v in again} & {v.key() for v in first}
    renamed = [Trial(Variant(name="same text, other name", source=first[0].source), True, 1.0)]
    assert first[0].source not in {v.source for v in proposer.propose(s, renamed, limit=20)}


def test_kernels_without_loads_or_hintable_loads_get_nothing(capture):
    proposer = CacheHintProposer(capture)
    assert proposer.propose(spec("no_loads"), [], 8) == []
    assert proposer.propose(spec("not_in_the_file"), [], 8) == []
    assert "load2" not in " ".join(names(proposer.propose(spec("row_dot"), [], 20)))  # the .cg load
    with pytest.raises(SpecError, match="missing from the capture directory"):
        CacheHintProposer(capture).propose(spec("scale_add", "sources/gone.py"), [], 8)
    # without the capture directory: the program's own file, or a one-line error
    own = dataclasses.replace(spec("scale_add"), source_file=str(capture / "sources" / "hints.py"))
    assert names(CacheHintProposer().propose(own, [], 1)) == names(proposer.propose(spec("scale_add"), [], 1))
    with pytest.raises(SpecError, match=r"need the capture directory \(CacheHintProposer\(root\)\)"):
        CacheHintProposer().propose(spec("scale_add"), [], 8)


def test_inductor_hints_already_matching_the_plan_are_only_flipped(tmp_path):
    (tmp_path / "sources").mkdir()
    shutil.copy(RED, tmp_path / "sources" / RED.name)
    proposed = CacheHintProposer(tmp_path).propose(spec(RED_KERNEL, f"sources/{RED.name}"), [], 20)
    assert names(proposed) == ["cache hints: load0 evict_first", "cache hints: load1 evict_last",
                               "cache hints: load2 evict_first", "cache hints: load3 evict_first"]


# ------------------------------------------------------------------------------------- replay

def replay_spec(kernel: str, n: int = 1000, block: int = 128) -> LaunchSpec:
    tensors = [ArgSpec(name, "tensor", shape=[n], stride=[1], dtype="float32", device="cuda:0", written=written)
               for name, written in (("x_ptr", False), ("y_ptr", False), ("out_ptr", True))]
    if kernel == "gather_kernel":
        tensors = [ArgSpec("src_ptr", "tensor", shape=[n], stride=[1], dtype="float32", device="cuda:0"),
                   ArgSpec("idx_ptr", "tensor", shape=[n], stride=[1], dtype="int64", device="cuda:0",
                           values="range", low=0, high=n - 1),
                   ArgSpec("out_ptr", "tensor", shape=[n], stride=[1], dtype="float32", device="cuda:0", written=True)]
    return LaunchSpec(
        kernel=kernel, kind="jit", module="replay_kernels", source_file=str(REPLAY_KERNELS),
        source="sources/replay_kernels.py", source_hash=kernel_hash(REPLAY_KERNELS.read_text(), kernel),
        args=[*tensors, ArgSpec("n", "scalar", value=n, type="int"), ArgSpec("BLOCK", "constexpr")],
        constexprs={"BLOCK": block}, options={}, grid=[-(-n // block)],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}]})


@pytest.mark.parametrize("kernel", ["add_kernel", "gather_kernel"])
def test_every_variant_replays_to_the_same_result_under_the_interpreter(tmp_path, monkeypatch, kernel):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    (tmp_path / "sources").mkdir()
    shutil.copy(REPLAY_KERNELS, tmp_path / "sources" / "replay_kernels.py")
    write_launches(tmp_path, [replay_spec(kernel)])
    [captured] = read_launches(tmp_path)
    variants = CacheHintProposer(tmp_path).propose(captured, [], limit=8)
    assert len(variants) >= 3
    args = make_args(captured, tmp_path, seed=1)
    Replay(captured, root=tmp_path)(args)
    expected = args["out_ptr"].clone()
    for variant in variants:
        args["out_ptr"].fill_(float("nan"))
        replay = Replay(captured, variant, root=tmp_path)
        assert replay.fn.fn.__code__.co_filename != str(tmp_path / captured.source)  # the variant's text ran
        replay(args)
        assert torch.equal(args["out_ptr"], expected), variant.name
