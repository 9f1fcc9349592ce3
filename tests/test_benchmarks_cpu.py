"""What of benchmarks/ can be checked without a GPU: the seed-000 patterns fire (dry run), the
correctness gates reject wrong outputs, and the GPU scripts stop in one clear line on a CPU."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import _common  # noqa: E402
from conftest import kernel_hash  # noqa: E402
import inductor_passes  # noqa: E402  (no torch/triton work at import: safe here)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)


def test_dry_run_every_quick_pattern_fires():
    result = _run(str(BENCH / "seed000_passes.py"), "--dry-run", "--quick")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "13/13 cases as expected" in result.stdout
    assert "did not fire" not in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only failure path")
@pytest.mark.parametrize("script", ["seed000_passes.py", "inductor_passes.py"])
def test_gpu_run_stops_clearly_without_gpu(script, tmp_path):
    result = _run(str(BENCH / script), "--out", str(tmp_path))
    assert result.returncode != 0
    assert "no CUDA GPU here" in result.stderr
    assert "Traceback" not in result.stderr


def test_bitwise_gate_rejects_one_flipped_bit_and_unwritten_elements():
    base = torch.randn(1000)
    cand = base.clone()
    assert _common.bitwise_check([base], [cand])["ok"]
    cand.view(torch.int32)[17] ^= 1
    assert _common.bitwise_check([base], [cand])["mismatched_elements"] == 1
    holes = torch.empty(1000)
    _common.poison([holes])
    holes[:999] = base[:999]
    assert _common.bitwise_check([base], [holes])["unwritten"] == 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_poison_is_a_nan_that_arithmetic_does_not_produce(dtype):
    t = torch.empty(4, dtype=dtype)
    _common.poison([t])
    assert t.isnan().all() and _common.unwritten(t) == 4
    assert _common.unwritten(t * 1) == 0  # arithmetic quiets the NaN: a computed NaN is not a hole


def test_fast_math_gate_limits_and_parity():
    base = torch.randn(10000).abs() + 0.1
    assert _common.fast_math_check([base], [base * (1 + 1e-6)])["ok"]
    assert not _common.fast_math_check([base], [base * (1 + 2**-12)])["ok"]  # 2.4e-4 > 1e-4
    nan = base.clone()
    nan[3] = float("nan")
    assert _common.fast_math_check([base], [nan])["nan_mismatch"] == 1
    inf = base.clone()
    inf[5] = float("inf")
    assert _common.fast_math_check([base], [inf])["inf_mismatch"] == 1
    zero = base.clone()
    zero[0] = 0.0
    assert _common.fast_math_check([zero], [zero.clone()])["ok"]


def test_kernel_modules_are_found_and_classified():
    examples = BENCH.parent / "examples" / "inductor"
    found = inductor_passes.kernel_files(str(examples))
    kinds = sorted(inductor_passes.KERNEL_DEF.search(pathlib.Path(p).read_text()).group(2) for p in found)
    assert kinds == ["per", "per", "poi", "red"]


def test_apply_overhead_smoke_runs_every_case_and_applies_each_decision(tmp_path):
    """benchmarks/apply_overhead.py's flow on the CPU: its own store, every case timed in both
    modes, each decision applied, the JSON marked not meaningful."""
    import json
    import os

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(BENCH / "apply_overhead.py"), "--smoke", "--out", str(tmp_path)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads((tmp_path / "apply_overhead.json").read_text())
    assert report["meaningful"] is False and report["gpu"] and report["date"]
    assert "benchmarks/apply_overhead.py --smoke" in report["command"]
    cases = {"jit_no_decision", "jit_decision", "jit_decision_fresh", "autotune_decision", "inductor_decision"}
    assert set(report["us_per_launch"]) == cases
    for figures in report["us_per_launch"].values():
        assert set(figures["added"]) == {"host", "event"} and figures["on"]["host"] > 0
    assert report["applied"]["jit_no_decision"] == 0
    assert all(report["applied"][case] > 0 for case in cases - {"jit_no_decision"})


# ------------------------------------------------------------------------- sanitize_store.py

SANITIZER_OUTPUT = """========= COMPUTE-SANITIZER
========= Invalid __global__ write of size 4 bytes
=========     at scale_kernel+0x1f0
=========     by thread (64,0,0) in block (3,0,0)
=========     Address 0x7f0000000320 is out of bounds
=========
========= Invalid __global__ write of size 4 bytes
=========     at scale_kernel+0x1f0
========= ERROR SUMMARY: 2 errors
"""
KERNEL = """
import triton
import triton.language as tl


@triton.jit
def scale(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) * 3.0, mask=offs < n)
"""


def test_sanitize_store_reads_the_error_summary():
    import sanitize_store

    assert sanitize_store.error_count(SANITIZER_OUTPUT) == 2
    assert sanitize_store.first_error(SANITIZER_OUTPUT) == "Invalid __global__ write of size 4 bytes"
    clean = "========= COMPUTE-SANITIZER\n========= ERROR SUMMARY: 0 errors\n"
    assert sanitize_store.error_count(clean) == 0 and sanitize_store.first_error(clean) == ""
    assert sanitize_store.error_count("========= ERROR SUMMARY: 1 error\n") == 1
    assert sanitize_store.error_count("Traceback (most recent call last):\n") is None


def _capture_and_store(root: pathlib.Path):
    """A capture of one launch (built by hand: no source hash), and a store with a decision for it
    and one for a launch it lacks."""
    from tritune.capture.spec import ArgSpec, LaunchSpec, write_launches
    from tritune.replay import Variant
    from tritune.store import DecisionStore, key_for

    (root / "sources").mkdir(parents=True)
    (root / "sources" / "k.py").write_text(KERNEL)
    args = [ArgSpec("x_ptr", "tensor", shape=[100], stride=[1], dtype="float32"),
            ArgSpec("out_ptr", "tensor", shape=[100], stride=[1], dtype="float32", written=True),
            ArgSpec("n", "scalar", value=100, type="int"), ArgSpec("BLOCK", "constexpr")]
    spec = LaunchSpec(kernel="scale", kind="jit", module="k", source_file="", source="sources/k.py",
                      source_hash=kernel_hash(KERNEL, "scale"), args=args, constexprs={"BLOCK": 64}, options={}, grid=[2],
                      grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}]})
    other = LaunchSpec.from_json({**spec.to_json(), "args": [a.to_json() for a in args[:2]] + [
        {"name": "n", "kind": "scalar", "value": 3000, "type": "int"}, {"name": "BLOCK", "kind": "constexpr"}]})
    write_launches(root, [spec])
    target = {"gpu": "NVIDIA H100 80GB HBM3", "capability": 90, "triton_version": "3.6.0"}
    with DecisionStore(root / "decisions.db") as store:
        run = store.start_run({"test": True})
        for launch, variant in ((spec, Variant(name="b32", constexprs={"BLOCK": 32})),
                                (other, Variant(options={"num_warps": 2}))):
            key = key_for(launch, **target)
            cand = store.add_candidate(run, key, variant)
            store.finish_candidate(cand.id, "verified", verification={"ok": True}, timings={"median_ms": 1.0})
            store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)
    return root / "decisions.db"


def test_sanitize_store_matches_decisions_to_launches_and_runs_each_under_the_tool(tmp_path, monkeypatch):
    import sanitize_store

    store = _capture_and_store(tmp_path / "cap")
    rows = sorted(sanitize_store.plan(store, tmp_path / "cap"), key=lambda r: r["describe"])
    assert [(r["describe"], r["spec"] is not None) for r in rows] == [("BLOCK=32", True), ("num_warps=2", False)]
    # a stand-in for compute-sanitizer: runs the command after `--tool memcheck`, then reports
    fake = tmp_path / "fake-sanitizer"
    fake.write_text('#!/bin/sh\nshift 2\n"$@" || exit 3\necho "========= ERROR SUMMARY: ${ERRORS:-0} errors"\n')
    fake.chmod(0o755)
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the child replays on the CPU
    monkeypatch.setenv("PYTHONPATH", str(BENCH.parent / "src"))
    done = sanitize_store.sanitize(rows[0], tmp_path / "cap", str(fake), 120)
    assert (done["status"], done["errors"], done["first"]) == ("clean", 0, ""), done
    monkeypatch.setenv("ERRORS", "2")
    assert sanitize_store.sanitize(rows[0], tmp_path / "cap", str(fake), 120)["status"] == "errors"
    assert sanitize_store.sanitize(rows[1], tmp_path / "cap", str(fake), 120)["status"] == "no_launch"


@pytest.mark.parametrize("case, message", [
    ("no-store", "no decision store at"),
    ("no-capture", "is not a capture directory"),
    ("no-out", "--out is required"),
    ("bad-store", "sanitize_store.py: "),
])
def test_sanitize_store_refuses_bad_arguments_in_one_line(tmp_path, case, message):
    store = _capture_and_store(tmp_path / "cap")
    argv = {"no-store": ["--store", str(tmp_path / "none.db"), "--launches", str(tmp_path / "cap")],
            "no-capture": ["--store", str(store), "--launches", str(tmp_path)],
            "no-out": ["--store", str(store), "--launches", str(tmp_path / "cap")],
            "bad-store": ["--store", str(tmp_path / "cap" / "launches.jsonl"), "--launches", str(tmp_path / "cap")]}
    out = [] if case == "no-out" else ["--out", str(tmp_path / "r.json")]
    result = _run(str(BENCH / "sanitize_store.py"), *argv[case], *out)
    assert result.returncode == 2 and message in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    assert not (tmp_path / "r.json").exists()


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only failure path")
def test_sanitize_store_stops_clearly_without_gpu(tmp_path):
    store = _capture_and_store(tmp_path / "cap")
    result = _run(str(BENCH / "sanitize_store.py"), "--store", str(store), "--launches", str(tmp_path / "cap"),
                  "--out", str(tmp_path / "r.json"))
    assert result.returncode != 0 and "no CUDA GPU here" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "r.json").exists()


def test_guard_gpu_cases_end_as_expected_under_the_interpreter(tmp_path):
    """benchmarks/guard_gpu.py's cases (the GPU's proof) run on the CPU too: every planted bug
    rejected and every correct variant verified on all 10 seeds; its control store is usable."""
    import os

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(BENCH / "guard_gpu.py"), "--json", str(tmp_path / "g.json")], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10/10 cases as expected on every seed" in done.stdout
    control = subprocess.run([sys.executable, str(BENCH / "guard_gpu.py"), "--control", str(tmp_path / "ctl")],
                             env=env, capture_output=True, text=True, timeout=600)
    assert control.returncode == 0, control.stderr
    from tritune.store import DecisionStore

    with DecisionStore(tmp_path / "ctl" / "control.db") as store:
        assert [(d.key.kernel, d.variant.constexprs, d.usable) for d in store.decisions()] == \
            [("unmasked", {"BLOCK": 128}, True)]
