"""``benchmarks/lanes_gpu.py`` (issue 15's multi-GPU evidence) on the CPU: the table and the
decision comparison from synthetic optimize.json files, the resume rule, the --limit-s skips, and
one real run of ``--workers-list 1,2`` on a tiny capture under TRITON_INTERPRET=1."""

from __future__ import annotations

import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from tritune.model.results import CandidateLine, KernelResult, LaneLine, RunResults

REPO = pathlib.Path(__file__).resolve().parents[2]
BENCH = REPO / "benchmarks"
PROGRAM = pathlib.Path(__file__).resolve().parents[1] / "programs" / "loop_program.py"
sys.path.insert(0, str(BENCH))

import lanes_gpu  # noqa: E402  (no GPU work at import)

GPU = {"gpu": "NVIDIA H100 80GB HBM3", "capability": 90, "triton_version": "3.6.0"}


def kernel(name: str, decision: str | None = None, speedup: float = 1.0, best: float | None = None) -> KernelResult:
    """A kernel the loop ran on: decided (``decision`` at ``speedup``) or not (its best candidate ``best``)."""
    candidates = [CandidateLine(variant="BLOCK=32", status="rejected", speedup=best)] if best else []
    return KernelResult(id=f"{name}-0", kernel=name, key_sha=f"sha-{name}", baseline_ms=1.0, best_ms=1.0 / speedup,
                        speedup=speedup, accepted=decision is not None, decision=decision, candidates=candidates)


def write_run(root: pathlib.Path, workers: int, kernels: list[KernelResult], wall_s: float | None,
              finished: bool = True, budget_s: float = 10.0, launches: str = "/corpus") -> pathlib.Path:
    folder = root / f"workers-{workers}"
    folder.mkdir(parents=True, exist_ok=True)
    lanes = [LaneLine(name=f"cuda:{i}", gpu=GPU["gpu"], kernels=len(kernels) // workers, busy_s=40.0, idle_s=2.0)
             for i in range(workers)]
    RunResults(command="--launches /corpus", started="2026-11-26T10:00:00+00:00",
               finished="2026-11-26T10:01:30+00:00" if finished else None, target=GPU,
               settings={"budget_s": budget_s, "max_candidates": 12, "arbiter": {"threshold": 1.05}},
               meaningful=True, launches=launches, keys=len(kernels), planned=len(kernels), jobs=16,
               lanes=lanes, kernels=kernels).write(folder / "optimize.json")
    if wall_s is not None:
        (folder / lanes_gpu.RUN_INFO).write_text(json.dumps({"workers": workers, "wall_s": wall_s, "rc": 0,
                                                             "cut": False, "command": f"tritune optimize -w {workers}"}))
    return folder


def synthetic(root: pathlib.Path) -> None:
    """Three runs of four kernels: same, equivalent (2) / differs (4), edge, never decided."""
    write_run(root, 1, [kernel("a", "BLOCK=128", 1.40), kernel("b", "BLOCK=128", 1.30),
                        kernel("c", "num_warps=8", 1.06), kernel("d", best=1.01)], wall_s=100.0)
    write_run(root, 2, [kernel("a", "BLOCK=128", 1.38), kernel("b", "BLOCK=256", 1.25),
                        kernel("c", best=1.04), kernel("d", best=1.02)], wall_s=52.0)
    write_run(root, 4, [kernel("a", "BLOCK=128", 1.41), kernel("b", "BLOCK=256", 1.60),
                        kernel("c", "num_warps=8", 1.07), kernel("d")], wall_s=30.0)


# ------------------------------------------------------------------------ table and comparison

def test_table_rebuilt_from_optimize_json_files(tmp_path):
    synthetic(tmp_path)
    assert lanes_gpu.main(["--table", str(tmp_path)]) == 0
    summary = json.loads((tmp_path / "lanes.json").read_text())
    rows = {r["workers"]: r for r in summary["rows"]}
    assert [r["optimized"] for r in rows.values()] == [4, 4, 4]
    assert rows[1]["kernels_per_min"] == pytest.approx(4 / 100 * 60)
    assert rows[2]["throughput_vs_1"] == pytest.approx(100 / 52)
    assert rows[4]["throughput_vs_1"] == pytest.approx(100 / 30)
    assert rows[2]["decided"] == 2 and len(rows[4]["lanes"]) == 4
    goals = {g["workers"]: g for g in summary["goals"]}
    assert goals[2]["met"] is True and goals[4]["met"] is False  # 1.92x >= 1.8x; 3.33x < 3.4x
    two, four = summary["comparisons"]["2"], summary["comparisons"]["4"]
    assert two["optimized_same"] and not two["decided_same"] and two["decided_only_in_base"] == ["c"]
    assert two["verdicts"] == {"same": 2, "equivalent": 1, "edge": 1, "differs": 0}
    assert two["agree_within_noise"] and not two["identical"]
    assert four["decided_same"] and four["verdicts"] == {"same": 3, "equivalent": 0, "edge": 0, "differs": 1}
    assert not four["agree_within_noise"]
    md = (tmp_path / "lanes.md").read_text()
    assert "2 GPUs, >= 1.8x throughput over one: met (1.92x)" in md
    assert "4 GPUs, >= 3.4x throughput over one: NOT met (3.33x)" in md
    assert "| 4 | cuda:3 | NVIDIA H100 80GB HBM3 | 1 | 40 | 2 | - |" in md
    assert "| b | BLOCK=128 (1.30x) | BLOCK=256 (1.25x) | BLOCK=256 (1.60x) | 2: equivalent; 4: differs |" in md
    assert "GPU: NVIDIA H100 80GB HBM3; triton 3.6.0; date 2026-11-26" in md
    assert "Table rebuilt by: `PYTHONPATH=src python3 benchmarks/lanes_gpu.py --table" in md
    # the copies in OUT carry the runs, and the table rebuilds from them alone
    copies = tmp_path / "copies"
    copies.mkdir()
    for n in (1, 2, 4):
        shutil.copy(tmp_path / f"workers-{n}.json", copies)
        assert json.loads((copies / f"workers-{n}.json").read_text())["lanes_bench"]["wall_s"] > 0
    assert lanes_gpu.main(["--table", str(copies)]) == 0
    again = json.loads((copies / "lanes.json").read_text())
    assert again["rows"] == summary["rows"] and again["goals"] == summary["goals"]


def test_judge_says_how_two_decisions_compare():
    judge = lanes_gpu.judge
    assert judge(kernel("k", "BLOCK=64", 1.3), kernel("k", "BLOCK=64", 1.1), 1.05)[0] == "same"
    assert judge(kernel("k", best=1.2), kernel("k"), 1.05)[0] == "same"
    assert judge(kernel("k", "BLOCK=64", 1.30), kernel("k", "BLOCK=32", 1.20), 1.05)[0] == "equivalent"
    assert judge(kernel("k", "BLOCK=64", 1.30), kernel("k", "BLOCK=32", 1.50), 1.05)[0] == "differs"
    assert judge(kernel("k", "BLOCK=64", 1.08), kernel("k", best=1.02), 1.05)[0] == "edge"
    assert judge(kernel("k", best=1.02), kernel("k", "BLOCK=64", 1.08), 1.05)[0] == "edge"
    assert judge(kernel("k", "BLOCK=64", 1.50), kernel("k", best=1.02), 1.05)[0] == "differs"
    assert judge(kernel("k", "BLOCK=64", 1.50), kernel("k"), 1.05)[0] == "differs"  # nothing timed


def test_runs_missing_and_unfinished_say_so(tmp_path):
    write_run(tmp_path, 1, [kernel("a")], wall_s=100.0)
    write_run(tmp_path, 2, [kernel("a")], wall_s=70.0, finished=False)
    assert lanes_gpu.main(["--table", str(tmp_path), "--workers-list", "1,2,4"]) == 0
    summary = json.loads((tmp_path / "lanes.json").read_text())
    rows = {r["workers"]: r for r in summary["rows"]}
    assert rows[2]["state"] == "unfinished" and rows[2].get("throughput_vs_1") is None
    assert rows[4]["state"] == "missing" and summary["comparisons"] == {}
    assert all(g["met"] is None for g in summary["goals"])
    assert "not checked (not measured)" in (tmp_path / "lanes.md").read_text()


# ---------------------------------------------------------------------- resume and --limit-s

def test_resume_rule(tmp_path):
    expect = {"launches": str(pathlib.Path("/corpus").resolve()), "budget_s": 10.0, "max_candidates": 12}
    assert lanes_gpu.run_state(tmp_path / "workers-1", expect)[0] == "missing"
    write_run(tmp_path, 1, [kernel("a")], wall_s=100.0)
    assert lanes_gpu.run_state(tmp_path / "workers-1", expect)[0] == "finished"
    assert lanes_gpu.next_step(1, "finished", {}, 0.0)[0] == "done"  # even with no time left
    write_run(tmp_path, 2, [kernel("a")], wall_s=70.0, finished=False)
    assert lanes_gpu.run_state(tmp_path / "workers-2", expect)[0] == "unfinished"
    write_run(tmp_path, 4, [kernel("a")], wall_s=30.0, budget_s=20.0)
    state, why = lanes_gpu.run_state(tmp_path / "workers-4", expect)
    assert state == "stale" and "budget_s 20.0" in why
    write_run(tmp_path, 3, [kernel("a")], wall_s=30.0, launches="/another")
    assert lanes_gpu.run_state(tmp_path / "workers-3", expect)[0] == "stale"
    (tmp_path / "workers-5").mkdir()
    assert lanes_gpu.run_state(tmp_path / "workers-5", expect)[0] == "unfinished"
    (tmp_path / "workers-5" / "optimize.json").write_text("{not json")
    assert lanes_gpu.run_state(tmp_path / "workers-5", expect)[0] == "unfinished"


def test_limit_skips_runs_that_would_not_fit():
    step = lanes_gpu.next_step
    # from one lane's 200 s, two lanes at 80% of linear: 125 s
    assert lanes_gpu.predict_s(2, {1: 200.0}) == (125.0, 1)
    action, why = step(2, "missing", {1: 200.0}, left_s=90.0)
    assert action == "skip" and "predicted 125 s from workers-1's 200 s" in why and "90 s left" in why
    assert step(2, "unfinished", {1: 200.0}, left_s=130.0)[0] == "run"
    # the nearest finished run is the reference; from more lanes, linear is the upper bound
    assert lanes_gpu.predict_s(4, {1: 200.0, 2: 110.0}) == (pytest.approx(68.75), 2)
    assert lanes_gpu.predict_s(1, {4: 50.0}) == (200.0, 4)
    assert step(4, "missing", {1: 200.0}, left_s=1000.0, gpus=2) == ("skip", "this host shows 2 GPU(s)")
    # nothing to predict from: it starts if there is room for a start at all
    assert step(1, "missing", {}, left_s=300.0)[0] == "run"
    assert step(1, "missing", {}, left_s=lanes_gpu.MIN_START_S - 1)[0] == "skip"


def test_workers_list_errors_are_one_line():
    assert lanes_gpu.parse_workers("1, 2,4") == [1, 2, 4]
    for bad in ("1,x", "0,2", "2,2", ""):
        with pytest.raises(SystemExit, match="--workers-list"):
            lanes_gpu.parse_workers(bad)


def test_gpu_names_and_the_gpus_a_run_may_use(monkeypatch):
    lines = ["GPU 0: NVIDIA H100 80GB HBM3 (UUID: GPU-1)", "GPU 1: NVIDIA H100 80GB HBM3 (UUID: GPU-2)",
             "GPU 2: NVIDIA H100 (capability 90, from torch)"]
    assert [lanes_gpu.gpu_name(line) for line in lines] == ["NVIDIA H100 80GB HBM3"] * 2 + ["NVIDIA H100"]
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert lanes_gpu.usable_gpus(lines) == 3
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "0,2")
    assert lanes_gpu.usable_gpus(lines) == 2


@pytest.mark.skipif(shutil.which("nvidia-smi") is not None, reason="checks the GPU-less failure path")
def test_no_gpu_is_one_line(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, str(BENCH / "lanes_gpu.py"), "--out", str(tmp_path / "out"),
                           "--work", str(tmp_path / "work")], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode != 0 and "no NVIDIA GPU here" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "work").exists()


# ------------------------------------------------------------------------- end to end, interpreter

def test_interpreter_lanes_end_to_end(tmp_path):
    """--workers-list 1,2 on loop_program's capture: both runs finish, agree, land in OUT; a second
    call reruns nothing and skips a third N that cannot fit its --limit-s. About 15 s on 2 cores."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(REPO / "src")}
    corpus = tmp_path / "capture"
    done = subprocess.run([sys.executable, "-m", "tritune", "capture", "--out", str(corpus), "--", sys.executable,
                           str(PROGRAM)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    base = [sys.executable, str(BENCH / "lanes_gpu.py"), "--work", str(tmp_path / "work"), "--corpus", str(corpus),
            "--budget-s", "5", "--max-candidates", "4"]
    done = subprocess.run([*base, "--out", str(tmp_path / "out"), "--workers-list", "1,2"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    out = tmp_path / "out"
    assert sorted(p.name for p in out.iterdir()) == ["lanes.json", "lanes.log", "lanes.md", "workers-1.json",
                                                     "workers-2.json"]
    summary = json.loads((out / "lanes.json").read_text())
    rows = {r["workers"]: r for r in summary["rows"]}
    assert rows[1]["state"] == rows[2]["state"] == "finished"
    assert rows[1]["optimized"] == rows[2]["optimized"] == 1 and rows[1]["gpu"] == "interpreter"
    assert [lane["name"] for lane in rows[2]["lanes"]] == ["interpreter:0", "interpreter:1"]
    assert summary["comparisons"]["2"]["identical"]
    assert {g["workers"]: g["met"] for g in summary["goals"]} == {2: None, 4: None}  # not meaningful
    first = (tmp_path / "work" / "workers-1" / lanes_gpu.RUN_INFO).read_text()
    assert json.loads(first)["command"].startswith("python3 -m tritune optimize --launches $CORPUS --out "
                                                    "$WORK/workers-1 --workers 1 --budget-s 5")
    # again, with a third N and no time: nothing reruns, N=3 is skipped and says why
    done = subprocess.run([*base, "--out", str(tmp_path / "out2"), "--workers-list", "1,2,3", "--limit-s", "11"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "workers-1: done" in done.stdout and "workers-2: done" in done.stdout
    assert "workers-3: skip: predicted" in done.stdout
    assert (tmp_path / "work" / "workers-1" / lanes_gpu.RUN_INFO).read_text() == first
    rows = {r["workers"]: r for r in json.loads((tmp_path / "out2" / "lanes.json").read_text())["rows"]}
    assert rows[3]["state"] == "skipped" and rows[1]["wall_s"] == json.loads(first)["wall_s"]
