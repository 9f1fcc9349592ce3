"""What of benchmarks/ can be checked without a GPU: the seed-000 patterns fire (dry run), the
correctness gates reject wrong outputs, and the GPU scripts stop in one clear line on a CPU."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
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


def test_enable_check_json_names_its_run(monkeypatch):
    """enable_check.json used to hold the GPU and versions only: no date, no command."""
    import enable_check

    monkeypatch.setattr(sys, "argv", [str(BENCH / "enable_check.py"), "--store", "s/decisions.db", "--json", "e.json"])
    body = enable_check.results_file([{"case": "vector_add"}])
    assert body["rows"] == [{"case": "vector_add"}] and body["date"] == body["environment"]["utc"]
    assert body["command"] == "PYTHONPATH=src python3 benchmarks/enable_check.py --store s/decisions.db --json e.json"
    assert {"gpu", "torch", "triton", "git"} <= set(body["environment"])


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
    # on and off give the same bits (the interpreter's Inductor example runs in place: not checked)
    assert report["same_output"] == {**dict.fromkeys(cases - {"inductor_decision"}, True), "inductor_decision": None}


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
    from tritune.capture.spec import write_launches
    from tritune.model.launch import ArgSpec, LaunchSpec
    from tritune.model.target import Target
    from tritune.model.variant import Variant
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
    target = Target("NVIDIA H100 80GB HBM3", 90, "3.6.0")
    with DecisionStore(root / "decisions.db") as store:
        run = store.start_run({"test": True})
        for launch, variant in ((spec, Variant(name="b32", constexprs={"BLOCK": 32})),
                                (other, Variant(options={"num_warps": 2}))):
            key = key_for(launch, target)
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


def test_guard_gpu_refuses_no_seeds():
    """``--seeds 0`` would verify nothing and print every case as expected on every seed."""
    done = subprocess.run([sys.executable, str(BENCH / "guard_gpu.py"), "--seeds", "0"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "--seeds: must be at least 1, not 0" in done.stderr, done.stdout + done.stderr


def test_guard_gpu_cases_end_as_expected_under_the_interpreter(tmp_path):
    """benchmarks/guard_gpu.py's cases (the GPU's proof) run on the CPU too: every planted bug
    rejected and every correct variant verified on each seed (3 here, 10 on the GPU); its control
    store is usable."""
    import os

    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(BENCH / "guard_gpu.py"), "--json", str(tmp_path / "g.json"),
                           "--seeds", "3"], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "10/10 cases as expected on every seed" in done.stdout
    cases = json.loads((tmp_path / "g.json").read_text())["cases"]
    assert [(case["runs"], case["as_expected"]) for case in cases] == [(3, 3)] * 10
    control = subprocess.run([sys.executable, str(BENCH / "guard_gpu.py"), "--control", str(tmp_path / "ctl")],
                             env=env, capture_output=True, text=True, timeout=600)
    assert control.returncode == 0, control.stderr
    from tritune.store import DecisionStore

    with DecisionStore(tmp_path / "ctl" / "control.db") as store:
        assert [(d.key.kernel, d.variant.constexprs, d.usable) for d in store.decisions()] == \
            [("unmasked", {"BLOCK": 128}, True)]


# ------------------------------------------------------------------- e2e.py (issue 11, section 5)
# The GPU driver's pure parts: statistics, the ABAB order, the bookkeeping across calls, the
# killing of a task past its limit, the results file and the table; the measurement workers run
# for real on a tiny CPU model (eager: no compile), so the file the table reads has a real shape.

import json  # noqa: E402
import os  # noqa: E402

sys.path.insert(0, str(BENCH / "e2e"))
import measure as e2e_measure  # noqa: E402
import tasks as e2e_tasks  # noqa: E402


def test_e2e_block_statistics_and_pair_verdicts():
    summary = e2e_measure.block_summary([10.0, 12.0, 11.0])
    assert summary["step_ms"] == 11.0 and summary["noise"] == pytest.approx(2 / 22)
    assert e2e_measure.paired([2.0, 2.2], [1.0, 2.0])["verdict"] == "faster"
    assert e2e_measure.paired([1.0, 2.0], [2.0, 2.1])["verdict"] == "slower"
    mixed = e2e_measure.paired([1.0, 1.0, 1.0], [0.9, 1.1, 0.95])
    assert mixed["verdict"] == "within noise" and mixed["speedup"] == pytest.approx(1 / 0.95)
    assert mixed["range"] == [pytest.approx(1 / 1.1), pytest.approx(1 / 0.9)]


class _FakeGPU:
    """A step whose cost depends on the side active (A: 2 ms, B: 1 ms), on a fake clock."""

    def __init__(self):
        self.now, self.side, self.log, self.syncs = 0.0, None, [], 0

    def enter(self, side):
        return lambda: setattr(self, "side", side)

    def step(self, index):
        self.log.append((self.side, index))
        self.now += {"A": 2e-3, "B": 1e-3}[self.side]

    def sync(self):
        self.syncs += 1


def test_e2e_interleave_is_abab_with_untimed_warmup_and_a_running_data_index():
    gpu = _FakeGPU()
    stepper = e2e_measure.Stepper(gpu.step, gpu.sync, clock=lambda: gpu.now)
    sides = [e2e_measure.Side("A", gpu.enter("A")), e2e_measure.Side("B", gpu.enter("B"))]
    times = stepper.interleave(sides, pairs=5, steps=3, warmup_steps=2)
    assert times == {"A": [pytest.approx(2.0)] * 5, "B": [pytest.approx(1.0)] * 5}
    order = [side for side, _ in gpu.log]
    assert order == (["A"] * 5 + ["B"] * 5) * 6  # one untimed round, then 5 pairs: 2 warm-up + 3 timed steps
    assert [index for _, index in gpu.log] == list(range(60)) and gpu.syncs == 2 * 12
    assert e2e_measure.paired(times["A"], times["B"])["speedup"] == pytest.approx(2.0)


def test_e2e_kernel_time_counts_triton_kernels_per_step_and_says_where_time_goes():
    events = [("triton_poi_fused_add_0", 300.0), ("triton_per_fused_softmax_1", 600.0), ("sm90_xmma_gemm", 900.0),
              ("triton_poi_fused_add_0", 300.0), ("Memcpy HtoD", 300.0)]
    summary = e2e_measure.kernel_summary(events, steps=3)
    assert summary["kernel_ms"] == pytest.approx(0.4) and summary["gpu_ms"] == pytest.approx(0.8)
    assert [t["kernel"] for t in summary["top"]] == ["triton_poi_fused_add_0", "triton_per_fused_softmax_1"]
    cpu = e2e_measure.bound(step_ms=10.0, gpu_ms=5.0, kernel_ms=5.0)
    assert cpu["cpu_bound"] and "CPU-bound" in cpu["note"] and "busy 50%" in cpu["note"]
    assert "at most 1.048x on the step" in cpu["note"]  # Amdahl: 1 / (0.5 + 0.5 / 1.1)
    assert not e2e_measure.bound(step_ms=10.0, gpu_ms=9.5, kernel_ms=2.0)["cpu_bound"]


def test_e2e_loss_check_tolerance_by_precision_and_measured_spread():
    off = [10.0, 9.0, 8.0]
    check = e2e_measure.loss_check
    assert check(off, off, off, "fp32")["ok"]
    assert check(off, [10.0, 9.0, 8.01], off, "bf16")["ok"]         # 1.25e-3 <= 2e-3
    assert not check(off, [10.0, 9.0, 8.01], off, "fp32")["ok"]     # 1.25e-3 > 1e-4
    noisy = check(off, [10.0, 9.0, 8.01], [10.0, 9.0, 8.004], "fp32")
    assert noisy["ok"] and noisy["tolerance"] == pytest.approx(4 * 0.004 / 8)
    assert not check(off, [10.0, float("nan"), 8.0], off, "bf16")["ok"]


class _FakeRunner:
    """Durations and outcomes by task name; advances the shared fake clock."""

    def __init__(self, clock, plan):
        self.clock, self.plan, self.started = clock, plan, []

    def need(self, task, entry):
        return {"optimize": 255, "modes": 150}.get(task.stage, 180) if task.mode != "max_autotune" else 390

    def cap(self, task):
        return float("inf") if task.stage == "optimize" else 400

    def run(self, task, entry, timeout):
        self.started.append(task.name)
        status, seconds = self.plan[task.name].pop(0)
        self.clock[0] += seconds
        return e2e_tasks.Outcome(status, seconds, fields={"optimize_s": entry.get("optimize_s", 0) + seconds}
                                 if task.stage == "optimize" else {"result": {"ok": True}})


def test_e2e_tasks_run_in_order_within_the_limit_and_resume_across_calls(tmp_path):
    clock = [0.0]
    plan = {"modes:default": [("done", 150)], "modes:coordinate_descent": [("done", 240)],
            "optimize:default": [("partial", 450), ("done", 100)], "measure:default": [("done", 180)],
            "optimize:coordinate_descent": [("failed", 30), ("failed", 30)], "modes:max_autotune": [("skipped", 400)]}
    path = tmp_path / "m" / "progress.json"

    def call():
        runner = _FakeRunner(clock, plan)
        progress = e2e_tasks.Progress(path, "m")  # read back from disk: a new device call
        e2e_tasks.run_tasks(e2e_tasks.ORDER, progress, runner, limit_s=540, clock=lambda: clock[0], log=lambda _: None)
        return runner.started, progress.data["tasks"]

    started, tasks = call()
    assert started == ["modes:default", "modes:coordinate_descent"]  # 390 s spent; optimize needs 255 of 130 left
    assert "needs ~255 s" in tasks["optimize:default"]["note"] and tasks["measure:default"]["note"] == \
        "waits for optimize:default"
    assert call()[0] == ["optimize:default"]                           # 450 s: nothing else fits after it
    started, tasks = call()
    assert started == ["optimize:default", "measure:default"]          # 280 s: optimize cd needs 255 of 240
    assert tasks["optimize:default"]["optimize_s"] == 550 and tasks["measure:default"]["status"] == "done"
    started, tasks = call()
    assert started == ["optimize:coordinate_descent", "modes:max_autotune"]
    assert tasks["optimize:coordinate_descent"]["failures"] == 1 and tasks["modes:max_autotune"]["status"] == "skipped"
    started, tasks = call()
    assert started == ["optimize:coordinate_descent"]
    assert tasks["measure:coordinate_descent"]["status"] == "skipped"  # its optimize failed twice: final
    assert all(e2e_tasks.is_final(entry) for entry in tasks.values())
    assert call()[0] == []


def test_e2e_task_past_its_limit_is_killed_and_told_apart(tmp_path, monkeypatch):
    """A compile past max_autotune's cap is 'skipped'; a task cut by the call's limit is 'cut' (runs
    again, asking for more time); tritune optimize gets SIGINT and time to save first."""
    import e2e

    monkeypatch.setattr(e2e, "AFTER_COMPILE_S", 0)
    args = e2e.parse(["tiny", "--state", str(tmp_path), "--autotune-cap-s", "1"])
    runner = e2e.Runner(args, tmp_path)
    out = tmp_path / "w.json"
    slow = [sys.executable, "-c", f"import pathlib, time; pathlib.Path({str(out.with_suffix('.phase'))!r})"
                                  ".write_text('compile'); time.sleep(60)"]
    task = e2e_tasks.Task("modes", "max_autotune")
    skipped = runner._worker(task, slow, out, tmp_path, runner.cap(task))
    assert (skipped.status, skipped.note) == ("skipped", "compile exceeded 1 s") and skipped.seconds < 10
    cut = runner._worker(task, slow, out, tmp_path, 0.5)
    assert cut.status == "cut" and cut.note.startswith("cut at the call's limit after")
    assert runner.need(task, {"cut_after_s": 100.0}) == 160  # next time it asks for what it ran plus a minute
    saved = tmp_path / "saved"
    polite = [sys.executable, "-c", "try:\n    import time\n    time.sleep(60)\nexcept KeyboardInterrupt:\n"
                                    f"    open({str(saved)!r}, 'w').close()\n    raise SystemExit(130)"]
    rc, seconds, killed = e2e.run_process(polite, dict(os.environ), 2.0, tmp_path / "log", interrupt=True)
    assert (rc, killed, saved.exists()) == (130, True, True) and seconds < 10


def test_e2e_optimize_call_outcomes():
    import e2e
    from tritune.model.results import RunResults

    def status(rc, killed, run, spent=100.0):
        return e2e.optimize_outcome(rc, killed, run, spent, 240.0, 10.0, {}, "Error: capture failed").status

    stopped = RunResults(stopped="deadline: 200 s spent, 9 kernels left; run the same command again to go on")
    assert status(0, False, RunResults(finished="2026-11-23T10:00:00")) == "done"
    assert status(0, False, stopped) == "partial" and status(1, False, stopped) == "partial"
    assert status(0, False, stopped, spent=240.0) == "done"           # the budget is spent, summed over calls
    assert status(130, True, None) == "partial"                       # interrupted while capturing: resumes
    failed = e2e.optimize_outcome(2, False, None, 10.0, 240.0, 10.0, {}, "Error: capture failed")
    assert (failed.status, failed.note) == ("failed", "exit 2: Error: capture failed")


def _optimize_json(kernels, timed):
    from tritune.model.results import RunResults

    return RunResults.from_json({"tritune_optimize": 2, "keys": 4, "finished": "now", "timed": timed,
                                 "kernels": kernels, "settings": {"threshold": 1.05}})


def test_e2e_coverage_is_the_runs_share_of_kernel_time_else_keys_decided():
    from summary import coverage

    timed = [{"key_sha": k, "kernel": k, "launches": 1, "baseline_ms": ms} for k, ms in
             (("a", 2.0), ("b", 1.0), ("c", 0.5), ("d", 0.5))]
    kernels = [{"kernel": "a", "key_sha": "a", "baseline_ms": 2.0, "time_share": 0.5, "decision": "num_warps=2",
                "accepted": True, "speedup": 1.25},
               {"kernel": "b", "key_sha": "b", "baseline_ms": 1.0, "time_share": 0.25}]
    cover = coverage(_optimize_json(kernels, timed))
    assert (cover["share"], cover["optimized"], cover["decided"], cover["improved"]) == (0.75, 2, 1, 1)
    assert cover["expected_gain"] == pytest.approx(0.5 * (1 - 1 / 1.25)) and cover["program_ms"] == 4.0
    old = coverage(_optimize_json([{**k, "time_share": None} for k in kernels], []))
    assert old["share"] == 0.25 and old["of"].startswith("keys")


def _worker_json(tmp_path, kind, *extra):
    """measure.py as the driver runs it, in this process (the tiny model compiles nothing)."""
    out = tmp_path / f"{kind}.json"
    assert e2e_measure.main([kind, "tiny", "--mode", "eager", "--device", "cpu", "--json", str(out), "--blocks", "3",
                             "--block-steps", "2", "--pairs", "5", "--loss-steps", "4", "--profile-steps", "1",
                             *extra]) == 0
    assert (tmp_path / f"{kind}.phase").read_text() == "done"
    return json.loads(out.read_text())


def test_e2e_results_file_from_real_worker_output_and_its_table(tmp_path):
    """measure.py's two workers on a tiny CPU model, their outputs in the bookkeeping as the driver
    keeps them, the results file's shape, and e2e_table.py's rendering of it."""
    import e2e
    import e2e_table
    from tritune.store import DecisionStore

    DecisionStore(tmp_path / "d.db").close()
    modes, abab = _worker_json(tmp_path, "modes"), _worker_json(tmp_path, "abab", "--store", str(tmp_path / "d.db"))
    assert abab["loss_check"]["ok"] and abab["off"]["loss"] == abab["on"]["loss"] == modes["loss"]
    assert len(abab["paired"]["ratios"]) == 5 and abab["applier"]["applied"] == 0
    optimize = _optimize_json([{"kernel": "a", "key_sha": "a", "baseline_ms": 2.0, "time_share": 0.75}],
                              [{"key_sha": "a", "kernel": "a", "launches": 1, "baseline_ms": 2.0}])
    progress = e2e_tasks.Progress(tmp_path / "tiny" / "progress.json", "tiny")
    progress.data["calls"].append({"command": "PYTHONPATH=src python3 benchmarks/e2e.py tiny", "date": "d"})
    for task in e2e_tasks.ORDER:
        entry = progress.entry(task)
        entry["status"] = "done"
        if task.stage == "modes":
            entry["result"] = modes
        elif task.stage == "measure":
            entry["result"] = abab
        else:
            entry.update(optimize_s=240.0, coverage=e2e.coverage(optimize))
    result = json.loads(json.dumps(e2e.assemble(progress)))
    assert {"gpu", "date", "command", "model", "modes", "coverage", "cpu_bound", "goals"} <= set(result)
    assert set(result["modes"]) == {"default", "coordinate_descent", "max_autotune", "tritune",
                                    "coordinate_descent+tritune"}
    for name, row in result["modes"].items():
        cost = "optimize_s" if name.endswith("tritune") else "compile_s"
        assert row["step_ms"] > 0 and row["noise"] is not None and row["kernel_ms"] == 0 and row[cost] is not None
        assert len(row["loss"]) == 4, name
    assert result["coverage"]["default"]["share"] == 0.75 and result["missing"] == []
    assert result["goals"]["losses_equal_within_tolerance"] is True and "CPU-bound" in result["cpu_bound"]
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "tiny.json").write_text(json.dumps(result))
    text = e2e_table.render(result)
    # the verdict as measured: 5 pairs of the same code are all faster or all slower one run in 16
    assert text.count("\n| ") == 6 and "| tritune | " in text and f"({abab['paired']['verdict']}, 5 pairs" in text
    assert "equal: max rel. diff 0.0e+00" in text and "covered 75% of kernel time" in text


@pytest.mark.parametrize("argv, message", [
    (["nomodel"], "e2e.py: unknown model 'nomodel'"),
    (["bert", "--redo", "modes:nothing"], "e2e.py: modes:nothing: not a task"),
    (["bert", "--tasks", "measure:default,nope"], "e2e.py: nope: not a task"),
    (["bert", "--restore", "missing.tgz"], "e2e.py: --restore missing.tgz: no such archive"),
])
def test_e2e_refuses_bad_arguments_in_one_line(argv, message, tmp_path):
    result = _run(str(BENCH / "e2e.py"), *argv, "--state", str(tmp_path / "s"), "--out", str(tmp_path / "o"))
    assert result.returncode == 2 and result.stderr.startswith(message), result.stderr
    assert result.stderr.count("\n") == 1 and not (tmp_path / "s").exists()


def _e2e_result(date, done, model="tiny"):
    """A results file in e2e.py's shape where the tasks in ``done`` ran (their modes step 10 ms)."""
    import summary

    tasks = {t.name: {"status": "done" if t.name in done else "pending"} for t in e2e_tasks.ORDER}
    mode_task = {**{m: f"modes:{m}" for m in e2e_tasks.COMPILE_MODES},
                 **{label: f"measure:{m}" for m, label in e2e_tasks.TUNED.items()}}
    modes = {label: {**dict.fromkeys(summary.MODE_FIELDS), "status": "not run yet",
                     **({"step_ms": 10.0, "gpu_ms": 5.0, "kernel_ms": 2.0, "gpu_busy": 0.5, "source": date}
                        if name in done else {})} for label, name in mode_task.items()}
    coverage = {m: ({"share": 0.5, "from": date, "optimized": 1, "keys": 2, "decided": 1, "of": "kernel time"}
                    if f"optimize:{m}" in done else None) for m in e2e_tasks.TUNED}
    return {"date": date, "model": {"name": model}, "command": [f"call {date}"], "modes": modes,
            "coverage": coverage, "tasks": tasks}


def test_e2e_merge_takes_each_mode_from_the_file_whose_task_ran(tmp_path):
    """Two sessions' results of one model (their states not kept): each mode, coverage and task comes
    from the file where it ran, says its date, and the goals and what is missing are derived again."""
    import e2e_table
    import summary

    old = _e2e_result("2026-01-01", {"modes:default", "optimize:default", "measure:default"})
    new = _e2e_result("2026-02-02", {"modes:coordinate_descent", "optimize:coordinate_descent",
                                     "measure:coordinate_descent"})
    for first, second in ((old, new), (new, old)):  # the order given does not matter: dates decide
        merged = summary.merge(first, second)
        assert {mode: row["measured"] for mode, row in merged["modes"].items()} == {
            "default": "2026-01-01", "tritune": "2026-01-01", "coordinate_descent": "2026-02-02",
            "coordinate_descent+tritune": "2026-02-02", "max_autotune": "2026-01-01"}
        assert merged["modes"]["default"]["source"] == "2026-01-01"
        assert merged["modes"]["coordinate_descent"]["source"] == "2026-02-02"
        assert {mode: cover["from"] for mode, cover in merged["coverage"].items()} == {
            "default": "2026-01-01", "coordinate_descent": "2026-02-02"}
        assert merged["missing"] == ["modes:max_autotune"] and merged["date"] == "2026-02-02"
        assert merged["command"] == ["call 2026-01-01", "call 2026-02-02"]
        assert merged["merged_from"] == ["2026-01-01", "2026-02-02"]
        assert merged["goals"]["tritune_at_least_coordinate_descent"] is True  # 10 ms each, from two files
    assert "default, tritune on 2026-01-01; coordinate_descent, coordinate_descent+tritune on 2026-02-02" in \
        e2e_table.render(summary.merge(old, new))
    with pytest.raises(ValueError, match="cannot merge"):
        summary.merge(old, _e2e_result("2026-03-03", set(), model="other"))
    (tmp_path / "a.json").write_text(json.dumps(old))
    (tmp_path / "b.json").write_text(json.dumps(_e2e_result("2026-03-03", set(), model="other")))
    result = _run(str(BENCH / "e2e_table.py"), "--merge", str(tmp_path / "a.json"), str(tmp_path / "b.json"),
                  str(tmp_path / "out.json"))
    assert result.returncode == 2 and result.stderr.startswith("e2e_table.py: cannot merge")
    assert result.stderr.count("\n") == 1 and not (tmp_path / "out.json").exists()


def test_e2e_table_without_results_says_so_in_one_line(tmp_path):
    result = _run(str(BENCH / "e2e_table.py"), str(tmp_path))
    assert result.returncode == 2 and result.stderr == f"e2e_table.py: no results in {tmp_path}\n"


def test_e2e_train_snapshot_restores_weights_optimizer_and_rng():
    import train

    trainer = train.Trainer("tiny", "eager", device="cpu")
    snap = trainer.snapshot()
    first = [float(trainer.step(i)) for i in range(4)] + [float(torch.rand(1))]
    trainer.restore(snap)
    assert [float(trainer.step(i)) for i in range(4)] + [float(torch.rand(1))] == first


def test_candidate_time_takes_the_costliest_kernels_and_medians_of_fresh_candidates(tmp_path, monkeypatch):
    import candidate_time

    ranking = tmp_path / "optimize.json"
    ranking.write_text(json.dumps({"timed": [{"id": "a", "time_share": 0.1}, {"id": "b", "time_share": 0.5},
                                             {"id": "c", "time_share": None}, {"id": "d", "time_share": 0.3}]}))
    import types

    from tritune.capture import spec as spec_module

    capture = tmp_path / "capture"
    monkeypatch.setattr(spec_module, "read_launches",
                        lambda root: [types.SimpleNamespace(id=i) for i in "xybd"] if root == capture else [])
    assert candidate_time.top_kernels(ranking, capture, 2) == ["b", "d"]
    assert candidate_time.top_kernels(ranking, capture, 5) == ["b", "d"]  # "a" is not in this capture
    assert candidate_time.top_kernels(None, capture, 2) == ["x", "y"]  # no ranking: the first
    cand = lambda share, seconds, reused=False: {"share_s": share, "seconds": seconds, "verify_s": seconds / 2,  # noqa: E731
                                                 "time_s": 0.1, "reused": reused}
    results = {"kernels": [{"kernel": "k1", "wall_s": 4.0, "candidates": [cand(1.0, 2.0), cand(3.0, 6.0)]},
                           {"kernel": "k2", "wall_s": 8.0, "candidates": [cand(2.0, 4.0), cand(9.0, 9.0, True)]},
                           {"kernel": "k3", "wall_s": 0.0, "candidates": []}]}
    summary = candidate_time.summarize(4, results, 20.0, "cmd")
    assert summary["candidates"] == 3 and summary["kernels"] == 2  # the reused one and k3 are not counted
    assert summary["median_share_s"] == 2.0 and summary["median_candidate_s"] == 4.0
    assert summary["median_kernel_s"] == 6.0 and summary["median_verify_s"] == 2.0


@pytest.mark.parametrize("argv, message", [(["--launches", "nowhere"], "not a capture"),
                                           (["--jobs", "1,x"], "not a comma-separated list")])
def test_candidate_time_refuses_bad_arguments_in_one_line(argv, message, tmp_path):
    capture = tmp_path / "capture"
    capture.mkdir()
    (capture / "launches.jsonl").write_text("")
    if "--launches" not in argv:
        argv = ["--launches", str(capture), *argv]
    result = _run(str(BENCH / "candidate_time.py"), *argv, "--out", str(tmp_path / "out"))
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_rewrites_summary_counts_wins_per_rule_and_kernels_only_the_rewrites_improved(tmp_path):
    knobs = json.loads((BENCH / "results" / "e2e" / "optimize" / "gpt2.json").read_text())
    rewrites = json.loads(json.dumps(knobs))
    loser = next(k for k in rewrites["kernels"] if k.get("baseline_ms") and not k.get("accepted"))
    loser.update(accepted=True, speedup=1.6, best_ms=loser["baseline_ms"] / 1.6,
                 won_by=["pipeline-loop(loop=0, num_stages=3)", "BLOCK"], decision="pipeline-loop(...) + BLOCK=64")
    (tmp_path / "knobs.json").write_text(json.dumps(knobs))
    (tmp_path / "rewrites.json").write_text(json.dumps(rewrites))
    result = _run(str(BENCH / "rewrites_summary.py"), str(tmp_path / "knobs.json"), str(tmp_path / "rewrites.json"),
                  "--json", str(tmp_path / "out.json"))
    assert result.returncode == 0, result.stderr
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["rewrites"]["wins_per_rule"] == {"pipeline-loop": 1} and out["knobs"]["wins_per_rule"] == {}
    assert out["only_with_rewrites"] == [loser["kernel"]]
    assert out["rewrites"]["improved"] == out["knobs"]["improved"] + 1
    assert "| knobs + source rewrites |" in result.stdout
    bad = _run(str(BENCH / "rewrites_summary.py"), str(tmp_path / "missing.json"), str(tmp_path / "rewrites.json"))
    assert bad.returncode == 2 and "not an optimize.json" in bad.stderr and "Traceback" not in bad.stderr


def test_fixed_costs_summary_reads_the_split_of_an_optimize_json():
    import fixed_costs

    body = {"deadline_s": 40.0, "wall_s": 40.0, "fixed": {"total_s": 3.0}, "fixed_share": 0.075,
            "candidate_share": 0.85,
            "timed": [{"kernel": "a", "baseline_ms": 1.0}, {"kernel": "b", "baseline_ms": 2.0},
                      {"kernel": "c", "baseline_ms": None, "failure": "untimed", "message": "lane died"}],
            "kernels": [{"kernel": "a", "split": {"to_first_s": 1.0, "profile_s": 0.1}, "timed_candidates": 9,
                         "accepted": True, "speedup": 2.0},
                        {"kernel": "b", "split": {"to_first_s": 3.0}, "timed_candidates": 4, "speedup": 1.0},
                        {"kernel": "old", "split": {}}]}
    got = fixed_costs.summarize(body)
    assert (got["keys"], got["reached"], got["improved"]) == (3, 3, 1)
    assert got["to_first_median_s"] == 2.0 and got["to_first_max_s"] == 3.0
    assert got["untimed"] == [{"kernel": "c", "failure": "untimed", "message": "lane died"}]
    assert [k["timed_candidates"] for k in got["kernels"]] == [9, 4, 0]
