"""``--jobs``: candidates verified by several workers at once, timed by one, decide exactly what one
worker decides. On the CPU (interpreter), with scripted times, as tests/loop/test_loop.py runs the loop."""

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
from tritune.model.request import RunRequest
from tritune.model.variant import Variant
from tritune.store import DecisionStore
from tritune.worker import Worker

# a source a rule of tritune's made: the allowlist (``allowlist.sandbox``) refuses this planted code in any
# other source; marked so, it tests what this file tests, behind the allowlist
RULED = {"rule": "pipeline-loop", "exact": "tolerance", "params": {}}

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
    return optimize(captured, RunRequest(out, settings=settings, **_request_fields(kwargs)), evaluator=evaluator, **kwargs)


def outcome(results):
    """What was decided, candidate by candidate: everything but the seconds."""
    timing = {"seconds", "verify_s", "time_s", "wait_s", "share_s"}
    [kernel] = results.kernels
    return ([{k: v for k, v in c.to_json().items() if k not in timing} for c in kernel.candidates],
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
        assert c.verify_s > 0 and c.time_s > 0 and c.wait_s >= 0 and c.share_s > 0
        assert c.verify_s + c.time_s + c.wait_s == pytest.approx(c.seconds, abs=1e-6)


class Scripted:
    """Stands for a Worker, for ``Evaluator.candidates`` alone: verifies ``a`` only once ``b`` has
    been verified (so the round's results come back out of order), ``b`` computes a wrong result;
    times ``a`` at 1 ms and ``c`` at 3 ms."""

    timeout_s, busy, env, preload = 60.0, False, None, ()

    def __init__(self, events: dict, timed: list):
        self.events, self.timed = events, timed

    def call(self, job, payload, **_):
        from tritune.loop import jobs
        from tritune.worker import Outcome

        name = payload["variant"]["name"]
        if job == jobs.TIME_JOB:
            self.timed.append(name)
            return Outcome(True, {"timing": {"time_ms": {"a": 1.0, "c": 3.0}[name]}, "lock_wait_s": 0.0}, seconds=0.1)
        if name == "a":
            assert self.events["b"].wait(30), "b was never verified"
        ok = name != "b"
        self.events[name].set()
        verification = {"ok": ok, "failure": None if ok else "wrong_result", "message": ""}
        return Outcome(True, {"verification": verification, "lock_wait_s": 0.0}, seconds=0.1)

    def close(self):
        pass


def test_a_round_s_results_come_back_in_the_order_given_each_with_its_own_candidate(captured):  # noqa: F811
    """Two verifiers: ``b`` is verified before ``a``; the round still yields a, b, c, each with its
    own verification and time, and only verified candidates are timed."""
    import threading

    from tritune.capture.spec import read_launches

    (spec,) = read_launches(captured)
    events, timed = {name: threading.Event() for name in "abc"}, []
    evaluator = Evaluator(captured, worker=Scripted(events, timed),
                          verifiers=[Scripted(events, timed), Scripted(events, timed)])
    try:
        found = list(evaluator.candidates(spec, [(Variant(name=name), "tolerance") for name in "abc"]))
    finally:
        evaluator.close()
    assert [(e.trial.variant.name, e.trial.ok, e.trial.time_ms, e.trial.failure) for e in found] == [
        ("a", True, 1.0, None), ("b", False, None, "wrong_result"), ("c", True, 3.0, None)]
    assert sorted(timed) == ["a", "c"]


def test_timing_jobs_hold_the_gpu_alone(captured, monkeypatch):  # noqa: F811
    """While a candidate or a baseline is timed, no other process can take the GPU lock, not even
    shared (a verification); a candidate's inputs are made holding it shared."""
    from tritune.capture.spec import read_launches
    from tritune.config import gpu_lock_path
    from tritune.loop import jobs
    from tritune.worker.gpulock import GpuLock

    (spec,) = read_launches(captured)
    probe, seen = GpuLock(gpu_lock_path(jobs._gpu_name("cpu"))), []

    def others_may(what):  # (what, another process could verify, another could time)
        found = [what]
        for exclusive in (False, True):
            found.append(probe.acquire(exclusive, blocking=False))
            probe.release()
        seen.append(tuple(found))

    class Built:
        def __init__(self, *args, **kwargs):
            pass

        def compile(self):
            others_may("compile")

    def bench(*args, **kwargs):
        others_may("bench")
        return {"time_ms": 1.0}

    monkeypatch.setattr(jobs, "Replay", Built)
    monkeypatch.setattr(jobs, "bench_spec", bench)
    monkeypatch.setattr(jobs, "device_of", lambda spec, device=None: "cpu")
    body = {"spec": spec.to_json(), "root": str(captured), "variant": Variant().to_json()}
    assert jobs.time_job(body)["timing"] == {"time_ms": 1.0}
    assert jobs.baselines_job({"specs": [spec.to_json()], "root": str(captured)})["timings"][0][1] == {"time_ms": 1.0}
    probe.close()
    assert seen == [("compile", True, False), ("bench", False, False), ("bench", False, False)]


def test_a_candidate_that_kills_its_worker_in_a_parallel_round_is_survived(captured, tmp_path, timer,  # noqa: F811
                                                                           verifiers):
    crash = Variant(name="crash", source=source_of(captured) + "\nimport os\nos._exit(7)\n", rewrite=RULED)
    good = Variant(name="block 256", constexprs={"BLOCK": 256})
    slower = Variant(name="block 128", constexprs={"BLOCK": 128})
    families = lambda spec: [Family("planted", Planted([crash, good, slower]), lambda v: "tolerance")]  # noqa: E731
    results = run(captured, tmp_path, timer, verifiers, families=families)
    [kernel] = results.kernels
    assert [(c.variant, c.status, c.failure) for c in kernel.candidates] == [
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
    assert [c.variant for c in kernel.candidates if c.reused] == done_before


def test_optimize_command_with_jobs_under_the_interpreter(captured, tmp_path):  # noqa: F811
    from tritune.resources import bound_jobs

    if bound_jobs(2, round_most=2).jobs < 2:
        pytest.skip("this machine bounds --jobs 2 to 1 (one usable core, or under 3 GiB free)")
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


def test_a_round_takes_the_workers_that_ran_last(captured):  # noqa: F811
    """One candidate a round on four verify workers: every round gets the same (warm) worker, not
    the one idle longest."""
    from tritune.capture.spec import read_launches
    from tritune.worker.failures import Failure
    from tritune.worker.pool import Outcome

    class Stub:
        timeout_s = 60.0
        pid = 1  # its process lives on (Evaluator starts a worker whose process ended again)

        def __init__(self, name, used):
            self.name, self.used = name, used

        def call(self, target, payload, **limit):
            self.used.append(self.name)
            return Outcome(ok=False, failure=Failure("compile_error", "planted"), seconds=0.0)

        def close(self):
            pass

    used: list[str] = []
    stubs = [Stub(n, used) for n in "abcd"]
    evaluator = Evaluator(captured, worker=stubs[0], verifiers=stubs)
    spec = read_launches(captured)[0]
    try:
        for block in (128, 256, 512):
            [done] = evaluator.candidates(spec, [(Variant(constexprs={"BLOCK": block}), "tolerance")])
            assert done.trial.failure == "compile_error"
        [a, b] = evaluator.candidates(spec, [(Variant(constexprs={"BLOCK": 16}), "tolerance"),
                                             (Variant(constexprs={"BLOCK": 32}), "tolerance")])
    finally:
        evaluator.close()
    assert len(set(used[:3])) == 1 and used[0] in used[3:]  # the warm one again, and one more beside it


def _request_fields(kwargs: dict) -> dict:
    """The ``RunRequest`` fields among a helper's keyword arguments, taken out of them."""
    return {name: kwargs.pop(name) for name in list(kwargs) if name in RunRequest.__dataclass_fields__}


def test_the_target_is_asked_in_one_place_and_each_caller_says_it_its_way():
    """``jobs.ask_target``: the optimize session stops on a worker that cannot tell its GPU, the
    generate LLM prompt goes on without GPU facts; a GPU's answer reaches both."""
    from types import SimpleNamespace

    from tritune.generate import llm as generate_llm
    from tritune.loop import session
    from tritune.loop.jobs import TARGET_JOB, TargetUnknown, ask_target
    from tritune.model.target import Target
    from tritune.worker.failures import Failure
    from tritune.worker.pool import Outcome

    h200 = Target("NVIDIA H200", 90, "3.6.0", copy_gbps=3900.0, meaningful=True)
    asked: list[str] = []

    def worker(outcome):
        return SimpleNamespace(call=lambda job, payload: asked.append(job) or outcome)

    lost = worker(Outcome(False, failure=Failure("crash", "the worker died")))
    with pytest.raises(TargetUnknown, match="^cannot tell which GPU this is: crash: the worker died$"):
        ask_target(lost.call)
    with pytest.raises(session.OptimizeError, match="cannot tell which GPU this is: crash"):
        session.machine(lost)
    assert generate_llm._gpu(lost, "cuda") is None
    found = worker(Outcome(True, value=h200.to_json()))
    assert session.machine(found) == generate_llm._gpu(found, "cuda") == h200
    assert set(asked) == {TARGET_JOB}
