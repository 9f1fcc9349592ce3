"""Verification of variants through the replay API, under the interpreter: correct variants pass,
planted wrong ones are caught with the right worst element."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from conftest import kernel_hash  # noqa: E402
from tritune.model.launch import ArgSpec, LaunchSpec  # noqa: E402
from tritune.model.variant import Variant  # noqa: E402
from tritune.verify import WRONG_RESULT, verify, verify_job  # noqa: E402
from tritune.verify import check as check_module  # noqa: E402
from tritune.verify.compare import _BY_SIZE  # noqa: E402
from tritune.verify.tolerances import NONDETERMINISM_RUNS  # noqa: E402

KERNELS = Path(__file__).parents[1] / "programs" / "verify" / "kernels.py"
SOURCE = KERNELS.read_text()


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    torch.manual_seed(0)  # NoisyReplay's noise


def vec(name, n, dtype="float32", **kw) -> ArgSpec:
    return ArgSpec(name, "tensor", shape=[n], stride=[1], dtype=dtype, device="cuda:0", **kw)


def scalar(name, value) -> ArgSpec:
    return ArgSpec(name, "scalar", value=value, type="int")


def spec_of(root: Path, kernel: str, args: list[ArgSpec], n: int, block: int = 128, **constexprs) -> LaunchSpec:
    (root / "sources").mkdir(exist_ok=True)
    shutil.copy(KERNELS, root / "sources" / "kernels.py")
    return LaunchSpec(
        kernel=kernel, kind="jit", module="kernels", source_file=str(KERNELS), source="sources/kernels.py",
        source_hash=kernel_hash(SOURCE, kernel), args=[*args, ArgSpec("BLOCK", "constexpr")], constexprs={**constexprs, "BLOCK": block},
        options={"num_warps": 4}, grid=[-(-n // block)],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}]})


def axpy(root, n):
    return spec_of(root, "axpy", [vec("x_ptr", n), vec("y_ptr", n), vec("out_ptr", n, written=True),
                                  scalar("n", n)], n)


def edit(old: str, new: str, source: str = SOURCE) -> Variant:
    """A variant whose source replaces ``old`` (which must occur exactly once) by ``new``."""
    assert source.count(old) == 1, old
    return Variant(name="planted", source=source.replace(old, new))


AXPY_MASK = "    mask = offs < n\n    x = tl.load(x_ptr + offs, mask=mask)\n    y ="
AXPY_OUT = "    out = 2.0 * x + y\n"


# ------------------------------------------------------------------------------ correct variants

@pytest.mark.parametrize("n", [1000, 1023])
def test_baseline_and_correct_variants_pass(tmp_path, n):
    spec = axpy(tmp_path, n)
    for variant in (Variant(), Variant(constexprs={"BLOCK": 64}), Variant(options={"num_warps": 2}),
                    Variant(constexprs={"BLOCK": 512})):
        result = verify(spec, variant, tmp_path)
        assert result.ok and result.failure is None, result.message
        assert result.input_sets == [0, 1, 2] and not result.nondeterministic and result.in_out == []
        assert len(result.checks) == (3 + 3) * 3  # every input set and transformed draw, every tensor argument
        assert [(d["name"], d["transformed"], d["skipped"]) for d in result.draws] == \
            [(name, ["x_ptr", "y_ptr"], None) for name in ("x1e3", "x1e-3", "negated")]
        assert result.message.startswith("ok (tolerance, 3 input sets + x1e3/x1e-3/negated")


# ---------------------------------------------------------------------------- planted wrong ones

@pytest.mark.parametrize("n", [1000, 1023])
def test_skipped_tail_block_is_caught_at_the_first_tail_element(tmp_path, n):
    spec = axpy(tmp_path, n)
    tail = edit(AXPY_MASK, AXPY_MASK.replace("offs < n", "offs < n // BLOCK * BLOCK"))
    result = verify(spec, tail, tmp_path)
    assert not result.ok and result.failure == WRONG_RESULT
    worst = result.worst
    assert worst.name == "out_ptr" and worst.worst.index == (896,) and worst.worst.reason == "unwritten"
    assert worst.unwritten == n - 896 and worst.bad == n - 896
    assert result.message.startswith("wrong_result on input set 0: out_ptr[896]: baseline ")
    assert "candidate unwritten" in result.message


def test_wrong_only_at_odd_sizes(tmp_path):
    odd = edit(AXPY_OUT, AXPY_OUT + "    out = tl.where((offs == n - 1) & (n % 2 == 1), out + 1.0, out)\n")
    assert verify(axpy(tmp_path, 1000), odd, tmp_path).ok
    result = verify(axpy(tmp_path, 1023), odd, tmp_path)
    assert not result.ok and result.worst.worst.index == (1022,) and result.worst.bad == 1
    w = result.worst.worst
    assert w.cand == pytest.approx(w.base + 1.0) and w.reason == "value"
    assert f"out_ptr[1022]: baseline {w.base:.9g}, candidate {w.cand:.9g}" in result.message


def test_nan_at_one_element(tmp_path):
    nan = edit(AXPY_OUT, AXPY_OUT + "    out = tl.where(offs == 517, float('nan'), out)\n")
    for mode in ("tolerance", "fast_math", "bitwise"):
        result = verify(axpy(tmp_path, 1000), nan, tmp_path, mode=mode)
        assert not result.ok and result.worst.worst.index == (517,), mode
        assert result.worst.nan_mismatch == 1 and result.worst.worst.reason == "nan"


def test_inf_where_the_baseline_is_finite(tmp_path):
    inf = edit(AXPY_OUT, AXPY_OUT + "    out = tl.where(offs == 5, float('inf'), out)\n")
    result = verify(axpy(tmp_path, 1000), inf, tmp_path, mode="fast_math")
    assert not result.ok and result.worst.worst.index == (5,) and result.worst.inf_mismatch == 1


def test_fast_math_variant_passes_fast_math_and_fails_bitwise(tmp_path):
    n = 1000
    spec = spec_of(tmp_path, "ratio", [vec("x_ptr", n), vec("y_ptr", n), vec("out_ptr", n, written=True),
                                       scalar("n", n)], n)
    reciprocal = edit("x / y, mask=mask)", "x * (1.0 / y), mask=mask)")  # a / b -> a * (1 / b)
    assert verify(spec, reciprocal, tmp_path, mode="fast_math").ok
    assert verify(spec, reciprocal, tmp_path, mode="tolerance").ok
    bitwise = verify(spec, reciprocal, tmp_path, mode="bitwise")
    assert not bitwise.ok and bitwise.worst.worst.reason == "bits" and bitwise.worst.max_rel_err < 1e-6
    too_loose = edit("x / y, mask=mask)", "x / y * 1.001, mask=mask)")
    assert not verify(spec, too_loose, tmp_path, mode="fast_math").ok


def test_second_output_never_stored(tmp_path):
    n = 1023
    spec = spec_of(tmp_path, "two_outputs", [vec("x_ptr", n), vec("plus_ptr", n, written=True),
                                             vec("square_ptr", n, written=True), scalar("n", n)], n)
    assert verify(spec, Variant(constexprs={"BLOCK": 256}), tmp_path).ok
    forgot = edit("    tl.store(square_ptr + offs, x * x, mask=mask)\n", "")
    result = verify(spec, forgot, tmp_path)
    assert not result.ok and result.worst.name == "square_ptr" and result.worst.worst.index == (0,)
    assert result.worst.unwritten == n
    assert all(c.ok for c in result.checks if c.name == "plus_ptr")


def test_in_out_kernel_is_not_poisoned_and_an_off_by_one_is_caught(tmp_path):
    n = 1000
    spec = spec_of(tmp_path, "accumulate", [vec("x_ptr", n), vec("acc_ptr", n, written=True),
                                            scalar("n", n)], n)
    result = verify(spec, Variant(constexprs={"BLOCK": 256}), tmp_path)
    assert result.ok and result.in_out == ["acc_ptr"]
    acc = [c for c in result.checks if c.name == "acc_ptr"]
    assert all(not c.poisoned and c.nan_mismatch == 0 for c in acc)
    off_by_one = edit("acc = tl.load(acc_ptr + offs, mask=mask)", "acc = tl.load(acc_ptr + offs, mask=offs < n - 1)")
    result = verify(spec, off_by_one, tmp_path)
    assert not result.ok and result.worst.name == "acc_ptr" and result.worst.worst.index == (n - 1,)
    assert result.worst.bad == 1


def test_two_dim_strided_output_reports_a_multi_dim_index(tmp_path):
    m, cols, padded = 37, 129, 131
    args = [ArgSpec("x_ptr", "tensor", shape=[m, cols], stride=[cols, 1], dtype="float16"),
            ArgSpec("out_ptr", "tensor", shape=[m, cols], stride=[padded, 1], dtype="float16", written=True),
            scalar("M", m), scalar("N", cols), scalar("stride_x", cols), scalar("stride_out", padded)]
    spec = spec_of(tmp_path, "scale_rows", args, m)
    spec.args[-1] = ArgSpec("BLOCK_N", "constexpr")  # this kernel's block is BLOCK_N; one program per row
    spec.constexprs, spec.grid, spec.grid_rule = {"BLOCK_N": 256}, [m, 1, 1], None
    assert verify(spec, Variant(options={"num_warps": 1}), tmp_path).ok
    short = edit("    mask = cols < N\n    x = tl.load(x_ptr + row * stride_x",
                 "    mask = cols < N - (row == 36)\n    x = tl.load(x_ptr + row * stride_x")
    result = verify(spec, short, tmp_path)
    assert not result.ok and result.worst.worst.index == (36, 128) and result.worst.bad == 1


def test_integer_output_unwritten_even_where_the_baseline_writes_the_sentinel(tmp_path):
    n = 1000
    sentinel = _BY_SIZE[4][1]
    spec = spec_of(tmp_path, "fill", [vec("out_ptr", n, dtype="int32", written=True), scalar("n", n),
                                      ArgSpec("VALUE", "constexpr")], n, VALUE=sentinel)
    assert verify(spec, Variant(constexprs={"BLOCK": 256}), tmp_path).ok
    tail = edit("    mask = offs < n\n    tl.store(out_ptr + offs, tl.full(",
                "    mask = offs < n - 1\n    tl.store(out_ptr + offs, tl.full(")
    result = verify(spec, tail, tmp_path, input_sets=1)
    assert not result.ok and result.worst.worst.index == (n - 1,) and result.worst.unwritten == 1


def test_integer_output_off_by_one_value(tmp_path):
    n = 1023
    spec = spec_of(tmp_path, "quantize", [vec("x_ptr", n), vec("q_ptr", n, dtype="int32", written=True),
                                          scalar("n", n)], n)
    assert verify(spec, Variant(constexprs={"BLOCK": 64}), tmp_path).ok
    wrong = edit("(x * 10.0).to(tl.int32)", "(x * 10.0).to(tl.int32) + (offs == 700)")
    result = verify(spec, wrong, tmp_path)
    assert not result.ok and result.worst.worst.index == (700,)
    assert result.worst.worst.cand == result.worst.worst.base + 1


def test_written_tensor_with_ranged_values_is_never_poisoned(tmp_path):
    n = 1000
    spec = spec_of(tmp_path, "quantize", [vec("x_ptr", n), vec("q_ptr", n, dtype="int32", written=True,
                                                              values="range", low=0, high=5), scalar("n", n)], n)
    result = verify(spec, Variant(constexprs={"BLOCK": 64}), tmp_path, input_sets=1)
    assert result.ok and result.in_out == ["q_ptr"]
    assert not [c for c in result.checks if c.name == "q_ptr"][0].poisoned
    wrong = edit("(x * 10.0).to(tl.int32)", "(x * 10.0).to(tl.int32) + (offs == 700)")
    assert verify(spec, wrong, tmp_path, input_sets=1).worst.worst.index == (700,)


def test_partial_writes_by_design_pass_and_extra_or_missing_writes_fail(tmp_path):
    n = 1001
    spec = spec_of(tmp_path, "even_only", [vec("x_ptr", n), vec("out_ptr", n, written=True), scalar("n", n)], n)
    result = verify(spec, Variant(constexprs={"BLOCK": 32}), tmp_path)
    assert result.ok and result.in_out == []
    assert all(c.both_unwritten == 500 for c in result.checks if c.name == "out_ptr")
    every = edit("mask = (offs < n) & (offs % 2 == 0)", "mask = offs < n")
    result = verify(spec, every, tmp_path)
    assert not result.ok and result.worst.worst.index == (1,) and result.worst.worst.reason == "extra_write"
    fewer = edit("mask = (offs < n) & (offs % 2 == 0)", "mask = (offs < n - 1) & (offs % 2 == 0)")
    result = verify(spec, fewer, tmp_path)
    assert not result.ok and result.worst.worst.index == (1000,) and result.worst.worst.reason == "unwritten"


def test_a_write_into_a_read_only_argument_fails(tmp_path):
    stray = edit(AXPY_OUT, AXPY_OUT + "    tl.store(x_ptr + offs, x, mask=mask & (offs == 3))\n"
                 "    tl.store(x_ptr + 3, 0.0)\n")
    result = verify(axpy(tmp_path, 1000), stray, tmp_path, input_sets=1)
    assert not result.ok and result.worst.name == "x_ptr" and result.worst.worst.index == (3,)


# ---------------------------------------------------------------------------------- atomics

def test_atomic_kernel_is_in_out_and_deterministic_under_the_interpreter(tmp_path):
    n = 1000
    spec = spec_of(tmp_path, "total", [vec("x_ptr", n), vec("total_ptr", 1, written=True), scalar("n", n)], n)
    result = verify(spec, Variant(constexprs={"BLOCK": 256}), tmp_path)
    assert result.ok and result.in_out == ["total_ptr"] and not result.nondeterministic, result.message
    wrong = edit("tl.atomic_add(total_ptr + offs * 0, x, mask=mask)",
                 "tl.atomic_add(total_ptr + offs * 0, x, mask=offs < n - 1)")
    assert not verify(spec, wrong, tmp_path).ok


class NoisyReplay(check_module.Replay):
    """The baseline of an atomic reduction on a GPU: each run adds a little order noise."""

    noise = 1e-3
    baseline_runs = 0

    def __call__(self, args):
        super().__call__(args)
        if self.variant.is_baseline:
            NoisyReplay.baseline_runs += 1
            out = args["total_ptr"]
            out += torch.randn(out.shape) * self.noise


def test_nondeterministic_baseline_widens_the_tolerance_from_its_spread(tmp_path, monkeypatch):
    monkeypatch.setattr(check_module, "Replay", NoisyReplay)
    monkeypatch.setattr(NoisyReplay, "baseline_runs", 0)
    n = 1000
    spec = spec_of(tmp_path, "total", [vec("x_ptr", n), vec("total_ptr", 1, written=True), scalar("n", n)], n)
    result = verify(spec, Variant(constexprs={"BLOCK": 256}), tmp_path)
    assert result.ok and result.nondeterministic and 0 < result.spread["total_ptr"] < 0.01, result.message
    assert "nondeterministic" in result.message
    # 2 to find in-out tensors, then per input set and per transformed draw
    assert NoisyReplay.baseline_runs == 2 + (3 + 3) * NONDETERMINISM_RUNS
    tol = result.checks[0].tolerance
    assert tol.atol > 1e-5 and "nondeterministic" in tol.reason
    wrong = edit("tl.atomic_add(total_ptr + offs * 0, x, mask=mask)",
                 "tl.atomic_add(total_ptr + offs * 0, x + 0.01, mask=mask)")  # off by 10: not noise
    result = verify(spec, wrong, tmp_path)
    assert not result.ok and result.nondeterministic and result.worst.name == "total_ptr"


# ------------------------------------------------------------------------------- worker job

def test_verify_job_round_trips_through_json(tmp_path):
    spec = axpy(tmp_path, 1000)
    tail = edit(AXPY_MASK, AXPY_MASK.replace("offs < n", "offs < n // BLOCK * BLOCK"))
    payload = {"spec": spec.to_json(), "variant": tail.to_json(), "root": str(tmp_path), "mode": "bitwise",
               "input_sets": 1}
    body = json.loads(json.dumps(verify_job(json.loads(json.dumps(payload)))))
    assert body["ok"] is False and body["failure"] == WRONG_RESULT and body["mode"] == "bitwise"
    assert body["worst"]["output"] == "out_ptr" and body["worst"]["index"] == [896]
    assert body["input_sets"] == [0]
    ok = verify_job({**payload, "variant": Variant(options={"num_warps": 2}).to_json()})
    assert ok["ok"] is True and ok["failure"] is None


def test_unknown_mode_fails_before_running(tmp_path):
    with pytest.raises(ValueError, match="unknown verification mode"):
        verify(axpy(tmp_path, 10), Variant(), tmp_path, mode="roughly")


def test_verify_job_in_an_isolated_worker(tmp_path):
    from tritune.worker import run_isolated

    spec = axpy(tmp_path, 1023)
    tail = edit(AXPY_MASK, AXPY_MASK.replace("offs < n", "offs < n // BLOCK * BLOCK"))
    payload = {"spec": spec.to_json(), "variant": tail.to_json(), "root": str(tmp_path), "input_sets": 1}
    outcome = run_isolated("tritune.verify:verify_job", payload, timeout_s=120, env={"TRITON_INTERPRET": "1"})
    assert outcome.ok, outcome.failure
    assert outcome.value["failure"] == WRONG_RESULT and outcome.value["worst"]["index"] == [896]
