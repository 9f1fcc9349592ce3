"""``--jobs``: candidates verified by several workers at once, timed by one, decide exactly what one
worker decides. On the CPU (interpreter), with scripted times, as tests/test_loop.py runs the loop."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
from test_loop import SETTINGS, Planted, block_speed, captured, source_of  # noqa: F401 - captured: a fixture

from tritune.loop import optimize
from tritune.loop.evaluate import Evaluator
from tritune.loop.families import Family
from tritune.replay import Variant
from tritune.store import DecisionStore
from tritune.worker import Worker

INTERPRET = {"TRITON_INTERPRET": "1"}


@pytest.fixture(scope="module")
def timer():
    with Worker(120.0, env=INTERPRET, preload=("torch", "triton")) as w:
        yield w


@pytest.fixture(scope="module")
def verifiers():
    workers = [Worker(120.0, env=INTERPRET, preload=("torch", "triton")) for _ in range(2)]
    yield workers
    for w in workers:
        w.close()


def run(captured, out, timer, verifiers=None, retime=block_speed, settings=SETTINGS, **kwargs):  # noqa: F811
    evaluator = Evaluator(captured, retime=retime, worker=timer, verifiers=verifiers)
    return optimize(captured, out, settings=settings, evaluator=evaluator, **kwargs)


def outcome(results):
    """What was decided, candidate by candidate: everything but the seconds."""
    timing = {"seconds", "verify_s", "time_s", "wait_s", "share_s"}
    [kernel] = results.kernels
    return ([{k: v for k, v in c.items() if k not in timing} for c in kernel.candidates],
            kernel.decision, kernel.speedup, kernel.finish, kernel.rounds)


def test_two_jobs_decide_exactly_what_one_does(captured, tmp_path, timer, verifiers):  # noqa: F811
    one = run(captured, tmp_path / "one", timer)
    two = run(captured, tmp_path / "two", timer, verifiers)
    assert outcome(one) == outcome(two)
    assert two.kernels[0].accepted and len(two.kernels[0].candidates) == SETTINGS.max_candidates
    assert one.jobs == 1 and two.jobs == 2
    assert all(w.pid is not None for w in verifiers)  # both verified (3 candidates a round, 2 workers)
    rows = []
    for results in (one, two):
        with DecisionStore(results.store) as store:
            [decision] = store.decisions()
            rows.append(sorted((c.variant.describe(), c.status) for c in store.candidates()))
        assert decision.variant.describe() == results.kernels[0].decision
    assert rows[0] == rows[1]
    for c in two.kernels[0].candidates:  # the wall-time split the report's medians come from
        assert c["verify_s"] > 0 and c["time_s"] > 0 and c["wait_s"] >= 0 and c["share_s"] > 0
        assert c["verify_s"] + c["time_s"] + c["wait_s"] == pytest.approx(c["seconds"], abs=1e-6)


def test_a_candidate_that_kills_its_worker_in_a_parallel_round_is_survived(captured, tmp_path, timer,  # noqa: F811
                                                                           verifiers):
    crash = Variant(name="crash", source=source_of(captured) + "\nimport os\nos._exit(7)\n")
    good = Variant(name="block 256", constexprs={"BLOCK": 256})
    slower = Variant(name="block 128", constexprs={"BLOCK": 128})
    families = lambda spec: [Family("planted", Planted([crash, good, slower]), lambda v: "tolerance")]  # noqa: E731
    results = run(captured, tmp_path, timer, verifiers, families=families)
    [kernel] = results.kernels
    assert [(c["variant"], c["status"], c["failure"]) for c in kernel.candidates] == [
        ("crash", "rejected", "crash"), ("block 256", "accepted", None), ("block 128", "verified", None)]
    with DecisionStore(tmp_path / "decisions.db") as store:
        [crashed] = store.rejected(store.keys()[0])
        assert crashed.failure_kind == "crash" and "7" in crashed.message


def test_ctrl_c_in_a_parallel_round_resumes_with_any_jobs(captured, tmp_path, timer, verifiers):  # noqa: F811
    calls = []

    def interrupting(spec, variant, ms):
        calls.append(variant.describe())
        # the ranking's baseline (one median), the loop's own (noise, graph), one candidate, then
        # Ctrl-C while the round's others run
        if len(calls) == 4:
            raise KeyboardInterrupt
        return block_speed(spec, variant, ms)

    with pytest.raises(KeyboardInterrupt):
        run(captured, tmp_path, timer, verifiers, retime=interrupting, settings=dataclasses.replace(SETTINGS, jobs=2))
    with DecisionStore(tmp_path / "decisions.db") as store:
        [first] = store.runs()
        assert first.status == "interrupted"
        done_before = [c.variant.describe() for c in store.candidates() if c.done]
        assert {c.status for c in store.candidates() if not c.done} == {"pending"}  # none left claimed
    assert len(done_before) == 1
    resumed = run(captured, tmp_path, timer)  # one job now: the same run goes on
    [kernel] = resumed.kernels
    assert resumed.run_id == first.id and kernel.accepted
    assert [c["variant"] for c in kernel.candidates if c["reused"]] == done_before


def test_optimize_command_with_jobs_under_the_interpreter(captured, tmp_path):  # noqa: F811
    done = subprocess.run([sys.executable, "-m", "tritune", "optimize", "--out", str(tmp_path), "--launches",
                           str(captured), "--jobs", "2", "--max-candidates", "2", "--no-report"],
                          env={**os.environ, **INTERPRET}, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    results = json.loads((tmp_path / "optimize.json").read_text())
    assert results["jobs"] == 2 and "jobs" not in results["settings"]
    [kernel] = results["kernels"]
    # both built and verified; one may reach confirmation on CPU wall time, which the arbiter refuses
    assert len(kernel["candidates"]) == 2 and not kernel["accepted"]
    assert all(c["verify_s"] > 0 and c["failure"] in (None, "not_meaningful") for c in kernel["candidates"])
