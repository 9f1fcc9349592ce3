"""Issue 24's GPU benchmarks, the parts that run without a GPU: the per-key breakdown of an
optimize.json (``benchmarks/reach_summary.py``), the e2e driver's optimize command (tritune's
defaults), the far-off planted kernels' roofline arithmetic (``benchmarks/faroff.py``)."""

from __future__ import annotations

import copy
import json
import pathlib
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path[:0] = [str(BENCH), str(BENCH / "e2e")]

import reach_summary  # noqa: E402


def _candidate(time_ms=1.0, failure=None, verify_s=0.5, time_s=0.2):
    return {"variant": "v", "time_ms": time_ms, "failure": failure, "verify_s": verify_s, "time_s": time_s}


def _kernel(name, share, *, wall, first=None, idle=0.0, timed=None, cands=(), speedup=None, accepted=False,
            profile_s=0.1):
    split = {"profile_s": profile_s, "verify_s": 1.0, "time_s": 1.0, "idle_s": idle}
    if first is not None:
        split["to_first_s"] = first
    record = {"id": name, "kernel": name, "time_share": share, "baseline_ms": 1.0, "wall_s": wall,
              "budget_s": 20.0, "split": split, "candidates": list(cands), "speedup": speedup,
              "accepted": accepted, "decision": "BLOCK=64" if accepted else None, "profile_source": "timing+static"}
    if timed is not None:
        record["timed_candidates"] = timed
    return record


def _run_file() -> dict:
    """Four keys (50/30/15/5% of the time), one lane, a 100-s deadline with 8 s of fixed costs."""
    kernels = [_kernel("a", 0.5, wall=40.0, first=1.0, idle=3.0, timed=9, speedup=1.5, accepted=True),
               _kernel("b", 0.3, wall=30.0, first=2.0, timed=8, speedup=1.04, accepted=True),  # below 1.05
               _kernel("c", 0.15, wall=10.0, first=None, timed=0, profile_s=9.5),  # spent it all before one
               _kernel("d", 0.05, wall=12.0, first=4.0, timed=3)]
    timed = [{"id": k["id"], "kernel": k["kernel"], "time_share": k["time_share"], "baseline_ms": 1.0,
              "launches": 1} for k in kernels]
    timed.append({"id": "e", "kernel": "e", "baseline_ms": None, "failure": "timeout", "message": "no time"})
    return {"tritune_optimize": 2, "command": "--deadline-s 100 -- python3 x.py", "keys": 5, "coverage": 1.0,
            "settings": {"arbiter": {"threshold": 1.05}}, "timed": timed, "kernels": kernels,
            "fixed": {"start_s": 3.0, "baselines_s": 5.0, "total_s": 8.0}, "deadline_s": 100.0}


def test_breakdown_of_a_run_with_the_split():
    s = reach_summary.summarize_run(_run_file())
    assert s["keys_timed"] == 4 and s["keys_untimed"][0]["failure"] == "timeout"
    assert s["median_to_first_s"] == 2.0  # of a, b, d: c reached no candidate
    assert s["keys_without_timed_candidates"] == 1
    # top 90%: a, b, c (0.8 < 0.9, c crosses it); d is outside; a and b have >= 8 timed, c none
    assert (s["top90_keys"], s["top90_with_min_timed"]) == (3, 2)
    assert [d["kernel"] for d in s["decisions"]] == ["a"]  # b's 1.04x is under the threshold
    assert s["fixed_share_of_deadline"] == pytest.approx(0.08)
    # on candidates: a 40-1-3, b 30-2, c 0, d 12-4 = 72 of 8 + 92 s
    assert s["candidate_s"] == pytest.approx(72.0)
    assert s["candidate_share"] == pytest.approx(72.0 / 100.0)
    assert s["estimated"] == []
    assert s["timed_per_key"]["median"] == 5.5


def test_an_older_file_gives_what_its_records_hold():
    data = _run_file()
    for k in data["kernels"]:
        k.pop("split"), k.pop("timed_candidates")
    data["kernels"][0]["candidates"] = [_candidate(), _candidate(failure="mismatch"), _candidate(time_ms=None),
                                        dict(_candidate(), reused=True)]
    for name in ("fixed", "deadline_s"):
        data.pop(name)
    s = reach_summary.summarize_run(data)
    assert s["per_key"][0]["timed_candidates"] == 2  # timed, no failure (the reused one counts)
    assert s["median_to_first_s"] is None and s["fixed_share_of_deadline"] is None
    assert s["deadline_s"] == 100.0  # from the command
    assert s["per_key"][0]["candidate_s"] == pytest.approx(3 * 0.7)  # the reused one cost nothing here
    assert len(s["estimated"]) == 2


def test_the_tables_and_files(tmp_path):
    after = tmp_path / "after"
    after.mkdir()
    (after / "optimize.json").write_text(json.dumps(_run_file()))
    before = copy.deepcopy(_run_file())
    before["kernels"] = before["kernels"][:1]
    (tmp_path / "before.json").write_text(json.dumps(before))
    out, md = tmp_path / "reach.json", tmp_path / "reach.md"
    assert reach_summary.main([f"before={tmp_path / 'before.json'}", str(after), "--json", str(out),
                               "--markdown", str(md)]) == 0
    runs = json.loads(out.read_text())["runs"]
    assert list(runs) == ["before", "after"] and runs["before"]["keys_ran"] == 1
    table = md.read_text()
    assert "| after | 4 of 5 | 4 | 1 | 2.00 s | 6 | 2 of 3 | 100% | 1 (1.50x) | 8% | 72% |" in table
    assert "BLOCK=64 (1.500x)" in table


def test_not_an_optimize_file_is_one_line(tmp_path, capsys):
    bad = tmp_path / "x.json"
    bad.write_text("{}")
    with pytest.raises(SystemExit):
        reach_summary.main([str(bad)])
    assert "not a readable optimize.json" in capsys.readouterr().err


# ------------------------------------------------------------------------- e2e.py: tritune's defaults

def test_e2e_runs_tritune_with_its_defaults_unless_an_arm_asks(tmp_path):
    import e2e

    args = e2e.parse(["llama", "--state", str(tmp_path)])
    cmd = e2e.optimize_command(args, tmp_path / "opt", 200, "default")
    assert "--ncu" not in cmd and "--budget-s" not in cmd
    assert cmd[cmd.index("--deadline-s") + 1] == "200" and cmd[cmd.index("--") + 3] == "llama"
    arm = e2e.parse(["llama", "--optimize-args", "--ncu never", "--key-budget-s", "60"])
    cmd = e2e.optimize_command(arm, tmp_path / "opt", 200, "default")
    assert cmd[cmd.index("--budget-s") + 1] == "60" and "never" in cmd


def test_e2e_another_tritune_for_the_before_arm(tmp_path, capsys):
    import e2e

    with pytest.raises(SystemExit):
        e2e.parse(["llama", "--tritune-src", str(tmp_path)])
    assert "no tritune package there" in capsys.readouterr().err
    (tmp_path / "tritune").mkdir()
    (tmp_path / "tritune" / "__init__.py").write_text("")
    args = e2e.parse(["llama", "--tritune-src", str(tmp_path), "--state", str(tmp_path / "state")])
    env = e2e.Runner(args, tmp_path / "state")._env(tmp_path / "cache")
    assert env["PYTHONPATH"].split(":")[0] == str(tmp_path)


def test_llama_is_a_model_of_the_training_program():
    import train

    spec = train.MODELS["llama"]
    assert (spec.precision, spec.batch, train.LLAMA_TOKENS) == ("bf16", 8, 1024)
    assert train.LLAMA["hidden_size"] == 1024 and train.LLAMA["num_hidden_layers"] == 8


# ------------------------------------------------------------------------ faroff.py: planted kernels

@pytest.fixture(scope="module")
def faroff():
    import faroff as module  # its kernels are only launched in a process of their own, below

    return module


def test_faroff_program_runs_both_planted_kernels_and_checks_them(faroff):
    import os
    import subprocess

    assert faroff.PLANTED_BLOCK == 16 and faroff.ADD_N >= 64 << 20
    assert faroff.SOFTMAX_SHAPE[0] * faroff.SOFTMAX_SHAPE[1] >= 64 << 20
    # a process of its own: the interpreter must be on before triton.language's own jit functions
    # (tl.max, tl.sum) are made, which an import inside this test process is too late for
    result = subprocess.run([sys.executable, str(BENCH / "faroff.py"), "program", "--small", "--check", "--repeat", "1"],
                            capture_output=True, text=True, timeout=120, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.count(": ok") == 2


def test_faroff_check_catches_unwritten_and_wrong_outputs(faroff):
    import torch

    x = torch.randn(4, 64)
    expected = faroff.torch_softmax(x)
    assert faroff.check("softmax", expected.clone(), expected)["ok"]
    holed = expected.clone()
    holed[1, 3] = float("nan")
    assert faroff.check("softmax", holed, expected)["unwritten"] == 1
    off = expected * (1 + 1e-3)
    assert not faroff.check("softmax", off, expected)["ok"]
    a = torch.randn(10)
    assert not faroff.check("add", a + 1e-6, a)["ok"] and faroff.check("add", a.clone(), a)["ok"]


def test_faroff_roofline_is_minimum_bytes_over_copy_bandwidth(faroff):
    import torch

    args = (torch.empty(1000), torch.empty(1000))
    assert faroff.min_bytes(args) == 3 * 4000
    # 1.5 GB moved in 0.5 ms is 3000 GB/s: all of a 3000 GB/s copy, half of 6000
    assert faroff.roofline_fraction(1_500_000_000, 0.5, 3000.0) == pytest.approx(1.0)
    assert faroff.roofline_fraction(1_500_000_000, 0.5, 6000.0) == pytest.approx(0.5)
    line = faroff.summary({"add": {"roofline_before": 0.07, "roofline_after": 0.8, "decision": "BLOCK=1024",
                                   "timed_candidates": 9}}, {})
    assert "target 70%: met" in line["add"] and "not met" in line["softmax"]


def test_faroff_records_the_command_as_typed(faroff, tmp_path):
    cmd = [sys.executable, "-m", "tritune", "optimize", "--out", str(tmp_path / "faroff"), "--deadline-s", "40",
           "--", sys.executable, "benchmarks/faroff.py", "program"]
    assert faroff.portable(cmd, tmp_path) == \
        "tritune optimize --out $STATE/faroff --deadline-s 40 -- python3 benchmarks/faroff.py program"


def test_e2e_llama_single_call_plan_gives_the_whole_200_s_and_leaves_room_to_measure(tmp_path):
    """``--tasks optimize:default,measure:default --optimize-s 200 --limit-s 560``: optimize starts
    with --deadline-s 200 (capture not yet made), and the ABAB measurement still starts after an
    optimize call of 400 s (gpt2's capture + 240-s optimize took 400 s on an H100)."""
    import e2e
    import tasks as e2e_tasks

    args = e2e.parse(["llama", "--tasks", "optimize:default,measure:default", "--optimize-s", "200",
                      "--limit-s", "560", "--state", str(tmp_path)])
    runner = e2e.Runner(args, tmp_path)
    optimize, measure = e2e_tasks.Task("optimize", "default"), e2e_tasks.Task("measure", "default")
    left = args.limit_s - e2e_tasks.RESERVE_S
    assert runner.need(optimize, {}) <= left
    timeout = min(runner.cap(optimize), left) - e2e.GRACE_S
    assert e2e.optimize_deadline(args.optimize_s, timeout, runner._startup_s(optimize)) == 200
    assert runner.need(measure, {}) <= left - 400
    # a call too short for the whole 200 s gives what fits, never less than 15 s
    assert e2e.optimize_deadline(200, 300, 150) == 120 and e2e.optimize_deadline(200, 100, 150) == 15
