"""Guard regions in verification, under the interpreter: writes outside a tensor are caught in its
margins, reads outside it get NaN poison, a baseline that writes outside is reported as such and
``optimize`` decides nothing for it. Every planted bug is rejected on each of 10 seeds."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import kernel_hash  # noqa: E402
from tritune.capture.spec import write_launches  # noqa: E402
from tritune.model.failures import BASELINE_OUT_OF_BOUNDS  # noqa: E402
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.model.request import RunRequest
from tritune.model.settings import ArbiterSettings  # noqa: E402
from tritune.model.variant import Variant
from tritune.replay import make_args  # noqa: E402
from tritune.replay import guard  # noqa: E402
from tritune.verify import WRONG_RESULT, verify  # noqa: E402
from tritune.verify.compare import _BY_SIZE, _INT8, _SIGNALLING_NAN  # noqa: E402

SOURCE = (Path(__file__).resolve().parents[1] / "programs" / "guarded.py").read_text()
SEEDS = range(10)
pytestmark = pytest.mark.filterwarnings("ignore:invalid value encountered:RuntimeWarning")  # planted NaN reads


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def spec_of(root, kernel: str, n: int, block: int = 64, dtype: str = "float32") -> LaunchSpec:
    """A launch of ``kernel`` (x_ptr, out_ptr, n, BLOCK) built by hand, hashed as capture would."""
    return launch(root, kernel, [n], dtype, [ArgSpec("n", "scalar", value=n, type="int")], {"BLOCK": block},
                  [("n", "BLOCK")])


def tiles_spec(root, m: int, cols: int, block_m: int = 32, block_n: int = 256) -> LaunchSpec:
    """A launch of ``tiles`` over an ``m`` x ``cols`` fp32 matrix, rows ``cols`` elements apart."""
    scalars = [ArgSpec(name, "scalar", value=value, type="int") for name, value in
               (("m", m), ("n", cols), ("stride", cols))]
    return launch(root, "tiles", [m, cols], "float32", scalars, {"BLOCK_M": block_m, "BLOCK_N": block_n},
                  [("m", "BLOCK_M"), ("n", "BLOCK_N")])


def launch(root, kernel: str, shape: list[int], dtype: str, scalars: list, constexprs: dict,
           dims: list[tuple[str, str]]) -> LaunchSpec:
    """x_ptr and out_ptr (contiguous, of ``shape``), the ``scalars``, then the ``constexprs``; one
    grid dimension per (numel, block) of ``dims``."""
    (root / "sources").mkdir(exist_ok=True)
    (root / "sources" / "guarded.py").write_text(SOURCE)
    stride = [math.prod(shape[i + 1:]) for i in range(len(shape))]
    args = [ArgSpec("x_ptr", "tensor", shape=shape, stride=stride, dtype=dtype),
            ArgSpec("out_ptr", "tensor", shape=shape, stride=stride, dtype=dtype, written=True),
            *scalars, *(ArgSpec(name, "constexpr") for name in constexprs)]
    values = {a.name: a.value for a in scalars}
    return LaunchSpec(kernel=kernel, kind="jit", module="guarded", source_file="", source="sources/guarded.py",
                      source_hash=kernel_hash(SOURCE, kernel), args=args, constexprs=constexprs, options={},
                      grid=[-(-values[numel] // constexprs[block]) for numel, block in dims],
                      grid_rule={"kind": "cdiv", "dims": [{"numel": numel, "block": block} for numel, block in dims]})


def edit(old: str, new: str) -> Variant:
    assert SOURCE.count(old) == 1, old
    return Variant(name="planted", source=SOURCE.replace(old, new))


def rejected(spec, variant, root) -> list:
    """The result on each of 10 seeds (one input set each)."""
    return [verify(spec, variant, root, input_sets=1, seed=s) for s in SEEDS]


# ----------------------------------------------------------------------------- the buffers

@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64", "int8", "int32", "bool",
                                   "float8_e4m3fn"])
def test_guarded_keeps_layout_values_and_alignment_and_fills_margins(dtype):
    base = torch.arange(40).to(getattr(torch, dtype))
    view = base.as_strided((3, 4), (8, 2), 5)
    margin = guard.margin_elements(base.element_size())
    inside = guard.guarded(view, margin, tag=3)
    assert guard.storage_elements(view) == 40  # a view's whole storage, which guarded copies
    assert inside.shape == view.shape and inside.stride() == view.stride()
    assert inside.storage_offset() == margin + 5 and torch.equal(inside.float(), view.float())
    assert margin * base.element_size() % guard.MIN_MARGIN_BYTES == 0  # the pointer's alignment is kept
    assert guard.breach("t", inside, guard.Guard(margin, 40, 3)) is None
    if dtype != "float8_e4m3fn":  # its one NaN leaves no room for a tag
        assert guard.breach("t", inside, guard.Guard(margin, 40, 4)) is not None  # each tensor its own pattern
    flat = inside.as_strided((margin * 2 + 40,), (1,), 0)
    if base.dtype.is_floating_point:
        assert flat[:margin].float().isnan().all() and flat[margin + 40:].float().isnan().all()
    words = guard._words(flat)[0]  # bits, as a kernel's store leaves them
    words[margin - 3] = words[margin + 1]  # 3 before the start
    words[margin + 40 + 7] = words[margin + 1]  # the 8th past the end
    words[margin + 40 + 9] = words[margin + 1]
    assert guard.breach("t", inside, guard.Guard(margin, 40, 3)) == guard.Breach("t", "before", 1, 3)
    words[margin - 3] = words[0]
    found = guard.breach("t", inside, guard.Guard(margin, 40, 3))
    assert found == guard.Breach("t", "after", 2, 8)
    assert found.describe() == "t: 2 guard element(s) changed past the end of its storage, the nearest 8 " \
                               "element(s) past it"


def test_margin_patterns_are_signalling_nans_unlike_the_output_poison():
    quiet = {"float16": 0x0200, "bfloat16": 0x0040, "float32": 0x00400000, "float64": 0x0008000000000000}
    for name, (_, first, second) in _SIGNALLING_NAN.items():
        dtype = getattr(torch, name)
        for tag in range(16):
            word = guard.word(dtype, tag)
            assert word not in (first, second) and not word & quiet[name], (name, tag)
            t = torch.empty(1, dtype=dtype)
            guard._words(t)[0].fill_(word)
            assert t.isnan().all() and not guard._words(t * 1.0)[0].eq(word).any()  # arithmetic quiets it
    for size, (_, first, second) in [*_BY_SIZE.items(), (1, _INT8)]:
        bits = (1 << 8 * size) - 1
        for tag in range(16):
            word = guard.word({1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[size], tag)
            assert word & bits not in (first & bits, second & bits)


def test_margin_is_64_kib_or_one_block_of_strides_up_to_the_cap_and_only_block_sizes_count():
    assert guard.margin_elements(4) == 16384 and guard.margin_elements(2, 1024) == 32768
    assert guard.margin_elements(4, 1 << 15) == 1 << 15  # 128 KiB: one block of fp32
    assert guard.margin_elements(8, (3 << 13) + 1) * 8 == 256 * 1024  # rounded up to 64 KiB steps
    assert guard.margin_elements(2, 128, 4096) == 128 * 4096  # 128 rows of 4096 fp16: 1 MiB
    assert guard.margin_elements(4, 128, 3000) * 4 == 1536 * 1024  # 1.46 MiB rounded up to 64 KiB steps
    assert guard.margin_elements(4, 1024, 1 << 20) * 4 == guard.MAX_MARGIN_BYTES == 64 << 20  # 4 GiB: capped
    assert guard.margin_elements(2, 1, 1 << 30) * 2 == guard.MAX_MARGIN_BYTES  # one huge tensor's worth too
    assert guard.MAX_MARGIN_BYTES % guard.MIN_MARGIN_BYTES == 0  # the cap keeps the alignment
    assert guard.largest_block({"BLOCK": 128, "VALUE": 0x7ADBEEF5, "EVEN": True}, {"BLOCK": 512, "K": 3}) == 512


# --------------------------------------------------------------------------- planted bugs

def test_store_mask_removed_writes_past_the_end(tmp_path):
    spec = spec_of(tmp_path, "scale", 200)
    planted = edit("tl.store(out_ptr + offs, x * 3.0, mask=mask)", "tl.store(out_ptr + offs, x * 3.0)")
    for result in rejected(spec, planted, tmp_path):
        assert not result.ok and result.failure == WRONG_RESULT
        assert result.out_of_bounds == {"tensor": "out_ptr", "side": "after", "changed": 56, "nearest": 1,
                                        "run": "candidate", "input_set": result.input_sets[0]}
        assert "candidate writes outside out_ptr: 56 guard element(s) changed past the end" in result.message


def test_write_before_the_start(tmp_path):
    spec = spec_of(tmp_path, "scale", 200)
    planted = edit("tl.store(out_ptr + offs, x * 3.0, mask=mask)", "tl.store(out_ptr + offs - 2, x * 3.0, mask=mask)")
    for result in rejected(spec, planted, tmp_path):
        assert not result.ok and result.failure == WRONG_RESULT
        assert result.out_of_bounds["side"] == "before" and result.out_of_bounds["nearest"] == 1
        assert "out_ptr: 2 guard element(s) changed before the start of its storage" in result.message


def test_unmasked_load_reads_nan_poison_into_the_tail(tmp_path):
    n = 200
    spec = spec_of(tmp_path, "neighbours", n)
    assert verify(spec, Variant(constexprs={"BLOCK": 32}), tmp_path).ok
    planted = edit("mask=offs + 1 < n, other=0.0)", "mask=mask)")
    for result in rejected(spec, planted, tmp_path):
        assert not result.ok and result.failure == WRONG_RESULT and result.out_of_bounds is None
        worst = result.worst
        assert worst.name == "out_ptr" and worst.worst.index == (n - 1,) and worst.worst.reason == "nan"
        assert worst.bad == 1


def test_unmasked_kernel_with_a_larger_block_config_is_rejected(tmp_path):
    spec = spec_of(tmp_path, "unmasked", 192)  # 3 blocks of 64: the kernel's assumption holds
    assert verify(spec, Variant(constexprs={"BLOCK": 32}), tmp_path).ok  # 192 % 32 == 0: correct
    for result in rejected(spec, Variant(constexprs={"BLOCK": 128}), tmp_path):  # 2 blocks of 128
        assert not result.ok and result.failure == WRONG_RESULT
        assert result.out_of_bounds["tensor"] == "out_ptr" and result.out_of_bounds["changed"] == 64


def test_2d_store_without_its_row_mask_overruns_by_rows_and_is_caught(tmp_path):
    # 50 rows in tiles of 32: the last tile's rows 50..63 are 14 rows of 2048 fp32 (112 KiB) past
    # the end, beyond a 64 KiB margin; the margin is one block of strides, so they land in it
    m, cols = 50, 2048
    spec = tiles_spec(tmp_path, m, cols)
    margins = {name: g.margin for name, g in guard.layout(spec).items()}
    assert margins["out_ptr"] >= 256 * cols > 14 * cols > guard.margin_elements(4, 256)  # (the old 1-D rule)
    assert verify(spec, Variant(constexprs={"BLOCK_M": 16, "BLOCK_N": 512}), tmp_path).ok  # the correct kernel
    planted = edit("x * 3.0, mask=rows & cols)", "x * 3.0, mask=cols)")
    for result in rejected(spec, planted, tmp_path):
        assert not result.ok and result.failure == WRONG_RESULT
        assert result.out_of_bounds == {"tensor": "out_ptr", "side": "after", "changed": 14 * cols, "nearest": 1,
                                        "run": "candidate", "input_set": result.input_sets[0]}


def test_correct_candidates_pass_with_guards(tmp_path):
    for kernel in ("scale", "neighbours"):
        spec = spec_of(tmp_path, kernel, 1000, dtype="float16")
        for variant in (Variant(constexprs={"BLOCK": 256}), Variant(options={"num_warps": 2})):
            result = verify(spec, variant, tmp_path)
            assert result.ok and result.out_of_bounds is None, result.message


def test_a_baseline_that_writes_outside_is_reported_as_such(tmp_path):
    spec = spec_of(tmp_path, "unmasked", 200)  # 200 % 64 != 0: the captured launch itself overruns
    result = verify(spec, Variant(constexprs={"BLOCK": 8}), tmp_path)
    assert not result.ok and result.failure == BASELINE_OUT_OF_BOUNDS and result.checks == []
    assert result.out_of_bounds == {"tensor": "out_ptr", "side": "after", "changed": 56, "nearest": 1,
                                    "run": "baseline", "input_set": 0}
    assert result.message.startswith("baseline_out_of_bounds on input set 0: the baseline itself writes outside "
                                     "out_ptr: 56 guard element(s) changed past the end")
    assert result.to_json()["out_of_bounds"]["run"] == "baseline"


def test_make_args_guards_every_tensor_with_its_own_tag(tmp_path):
    spec = spec_of(tmp_path, "scale", 200, block=1 << 15)
    args = make_args(spec, tmp_path)
    margin = 1 << 15  # one block of fp32 is 128 KiB, more than the minimum
    for tag, name in enumerate(("x_ptr", "out_ptr")):
        t = args[name]
        assert t.storage_offset() == margin and t.untyped_storage().nbytes() == (2 * margin + 200) * 4
        assert guard.breach(name, t, guard.Guard(margin, 200, tag)) is None
    assert make_args(spec, tmp_path, block=0)["x_ptr"].storage_offset() == 16384
    bare = make_args(spec, tmp_path, margins=False)["x_ptr"]  # for compute-sanitizer
    assert bare.storage_offset() == 0 and bare.untyped_storage().nbytes() == 200 * 4


# ---------------------------------------------------------------------------------- optimize

def test_optimize_decides_nothing_for_a_baseline_that_writes_outside(tmp_path):
    from tritune.loop import optimize
    from tritune.loop.evaluate import Evaluator
    from tritune.loop.families import Family
    from tritune.model.settings import LoopSettings
    from tritune.store import DecisionStore
    from tritune.worker import Worker

    class Fixed:
        name = "fixed"

        def propose(self, spec, trials, limit):
            return [Variant(constexprs={"BLOCK": 8})] if not trials else []

    capture = tmp_path / "capture"
    capture.mkdir()
    write_launches(capture, [spec_of(capture, "unmasked", 200)])
    settings = LoopSettings(arbiter=ArbiterSettings(require_meaningful=False), max_candidates=3, per_round=1)
    lines = []
    with Worker(120.0, env={"TRITON_INTERPRET": "1"}, preload=("torch", "triton")) as worker:
        evaluator = Evaluator(capture, retime=lambda spec, variant, ms: 1.0 if variant.is_baseline else 0.1,
                              worker=worker)
        results = optimize(capture, RunRequest(tmp_path / "out", settings=settings), evaluator=evaluator, log=lines.append, families=lambda spec: [Family("fixed", Fixed(), lambda v: "tolerance")])
    [kernel] = results.kernels
    assert kernel.failure == BASELINE_OUT_OF_BOUNDS and not kernel.accepted and kernel.decision is None
    assert "the baseline itself writes outside out_ptr" in kernel.message
    assert any("unmasked: not optimized: baseline_out_of_bounds" in line for line in lines)
    with DecisionStore(tmp_path / "out" / "decisions.db") as store:
        assert store.decisions() == []
