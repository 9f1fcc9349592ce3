"""Lanes (``tritune optimize --workers N``): keys handed out in rank order to whichever lane is
free, on the CPU. Real lanes run interpreter workers with scripted times (``Evaluator.retime``),
so that ``--workers 2`` must decide exactly what ``--workers 1`` does; planted lanes (no workers)
make the scheduling itself deterministic: cover, deadline budgets, a lane that dies, a mixed host.
The store's many writers: ``tests/store/test_store_processes.py``."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import triton

from tritune.loop import optimize
from tritune.loop.evaluate import Evaluator
from tritune.loop.lanes import Device, LaneDied, LaneError, LanePool, LocalLane, lane_devices
from tritune.model.request import RunRequest
from tritune.model.results import KernelResult, RunResults
from tritune.model.settings import ArbiterSettings, LoopSettings
from tritune.model.target import Target
from tritune.model.variant import Variant
from tritune.report import summarize
from tritune.store import DecisionStore
from tritune.worker import Worker

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"
SETTINGS = LoopSettings(arbiter=ArbiterSettings(require_meaningful=False), max_candidates=3, per_round=3)
MS_PER_PROGRAM = 0.01
GRIDS = (32, 12, 4, 2)  # the four launches' programs (BLOCK=64): 2000, 750, 250, 75 elements
SHARES = tuple(g / sum(GRIDS) for g in GRIDS)  # rank order


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("lanes") / "capture"
    env = {**os.environ, "TRITON_INTERPRET": "1",
           "PYTHONPATH": os.pathsep.join([str(PROGRAMS), os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tritune", "capture", "--out", str(out), "--", sys.executable,
                           str(PROGRAMS / "share_program.py"), "75", "250", "750", "2000"], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def interpreter_worker() -> Worker:
    return Worker(120.0, env={"TRITON_INTERPRET": "1"}, preload=("torch", "triton"))


@pytest.fixture(scope="module")
def workers():
    found = [interpreter_worker() for _ in range(2)]
    yield found
    for worker in found:
        worker.close()


def by_grid(spec, variant, measured_ms):
    """Scripted: time grows with the launch's size, and a bigger BLOCK is faster."""
    return spec.grid[0] * MS_PER_PROGRAM * 64 / variant.constexprs.get("BLOCK", spec.constexprs["BLOCK"])


def real_lanes(root, workers, retime=by_grid):
    return [LocalLane(None, root, index=i, evaluator=Evaluator(root, retime=retime, worker=w))
            for i, w in enumerate(workers)]


def decisions_of(path: Path) -> dict[str, str]:
    with DecisionStore(path) as store:
        return {d.key.sha: d.variant.describe() for d in store.decisions()}


# ------------------------------------------------------------------------ N lanes == 1 lane

@pytest.fixture(scope="module")
def one_and_two(captured, workers, tmp_path_factory):
    """The same capture optimized on one real lane, then on two: (results, out) of each."""
    runs = []
    for count in (1, 2):
        out = tmp_path_factory.mktemp(f"lanes{count}")
        results = optimize(captured, RunRequest(out, settings=SETTINGS, cover=1.0),
                           lanes=real_lanes(captured, workers[:count]))
        runs.append((results, out))
    return runs


def test_two_lanes_decide_what_one_lane_decides_in_rank_order(one_and_two):
    (one, one_out), (two, two_out) = one_and_two
    assert len(one.kernels) == len(GRIDS) == len(two.kernels)
    ranked = [t.key_sha for t in one.timed]
    assert [k.key_sha for k in one.kernels] == ranked == [k.key_sha for k in two.kernels]  # rank order, not finish
    assert [t.time_share for t in two.timed] == pytest.approx(list(SHARES))
    for a, b in zip(one.kernels, two.kernels):
        assert (a.decision, a.accepted, a.speedup, a.baseline_ms) == (b.decision, b.accepted, b.speedup, b.baseline_ms)
        assert [c.variant for c in a.candidates] == [c.variant for c in b.candidates]
    assert any(k.accepted for k in two.kernels)
    assert decisions_of(one_out / "decisions.db") == decisions_of(two_out / "decisions.db") != {}
    # the report's figures too, all but the wall times and the lanes
    first, second = summarize(one), summarize(two)
    for summary in (first, second):
        del summary["wall_s"], summary["lanes"]
    assert first == second
    on_disk = RunResults.load(two_out)
    assert [k.key_sha for k in on_disk.kernels] == ranked and on_disk.finished is not None


def test_each_lane_has_its_line_and_their_kernels_add_up(one_and_two):
    (one, _), (two, two_out) = one_and_two
    assert [lane.name for lane in one.lanes] == ["interpreter:0"] and one.lanes[0].kernels == len(GRIDS)
    names = [lane.name for lane in two.lanes]
    assert names == ["interpreter:0", "interpreter:1"]
    assert sum(lane.kernels for lane in two.lanes) == len(two.kernels)
    assert all(lane.kernels >= 1 and lane.busy_s > 0 and lane.died is None for lane in two.lanes)
    assert {k.lane for k in two.kernels} == set(names) and all(lane.gpu == "interpreter" for lane in two.lanes)
    assert RunResults.load(two_out).lanes == two.lanes
    lines = [json.loads(line) for line in (two_out / "kernels.jsonl").read_text().splitlines()]
    assert sorted(line["result"]["key_sha"] for line in lines) == sorted(k.key_sha for k in two.kernels)


def test_the_report_and_the_summary_show_the_lanes_when_there_are_several(one_and_two, tmp_path):
    pytest.importorskip("matplotlib")
    from tritune.commands.optimize import lane_lines
    from tritune.report import write_report

    (one, _), (two, _) = one_and_two
    assert lane_lines(one) == []
    lines = lane_lines(two)
    assert len(lines) == 2 and lines[0].startswith("lane interpreter:0 (interpreter): ") and "s idle" in lines[0]
    text = write_report(two, tmp_path / "two")["markdown"].read_text()
    assert "## Lanes" in text and "interpreter:1" in text
    assert "## Lanes" not in write_report(one, tmp_path / "one")["markdown"].read_text()


# --------------------------------------------------------------------------- planted lanes

class Planted:
    """A lane without workers: the interpreter's target, scripted baselines, and a result per key
    made up at once (``run(job, lane)`` may replace it). Records the jobs it got."""

    def __init__(self, index: int, gpu: str = "interpreter", run=None) -> None:
        self.name = f"planted:{index}"
        self._target = Target(gpu, 0, triton.__version__)
        self.run = run
        self.jobs: list = []
        self.started = False

    @property
    def gpu(self) -> str:
        return self._target.gpu

    @property
    def target(self) -> Target | None:
        return self._target if self.started else None

    def start(self, prebuild=()) -> Target:
        self.started = True
        return self._target

    def baselines(self, specs, log=None):
        return {s.id: ({"time_ms": by_grid(s, Variant(), 0.0), "methods": ["median"]}, None) for s in specs}

    def run_key(self, job) -> KernelResult:
        self.jobs.append(job)
        if self.run is not None:
            return self.run(job, self)
        return made_up(job)

    def interrupt(self) -> None:
        pass

    def close(self) -> None:
        pass


def made_up(job, ran: bool = True) -> KernelResult:
    base = by_grid(job.spec, Variant(), 0.0)
    return KernelResult(id=job.spec.id, kernel=job.spec.kernel, key_sha=job.key.sha, launches=job.spec.count,
                        baseline_ms=base if ran else None, best_ms=base if ran else None, speedup=1.0 if ran else None,
                        failure=None if ran else "compile_error", wall_s=0.0)


def planted_run(captured, out, lanes, **kwargs) -> RunResults:
    kwargs.setdefault("cover", 1.0)
    return optimize(captured, RunRequest(out, settings=SETTINGS, **_request_fields(kwargs)), lanes=lanes, **kwargs)


def test_no_key_is_handed_out_once_the_running_keys_hold_the_cover(captured, tmp_path):
    first, second = Planted(0), Planted(1)
    results = planted_run(captured, tmp_path, [first, second], cover=0.6)  # the costliest key alone holds 64%
    assert [len(first.jobs), len(second.jobs)] == [1, 0]  # the second lane waited: the first key's share was claimed
    [kernel] = results.kernels
    assert kernel.time_share == pytest.approx(SHARES[0])
    assert results.stopped.startswith("cover: the 1 kernels optimized hold 64.0%") and "3 kernels left" in results.stopped
    assert results.finished is not None and [lane.kernels for lane in results.lanes] == [1, 0]


def test_a_key_that_ends_without_running_gives_its_share_back(captured, tmp_path):
    def fail_first(job, lane):
        return made_up(job, ran=job.spec.grid[0] != GRIDS[0])

    first, second = Planted(0, run=fail_first), Planted(1, run=fail_first)
    results = planted_run(captured, tmp_path, [first, second], cover=0.3)
    # the costliest key failed: its 64% came back, and the next keys were handed out until 30% ran
    assert [k.time_share for k in results.kernels] == pytest.approx(list(SHARES[:3]))
    assert not results.kernels[0].ran and results.coverage == pytest.approx(SHARES[1] + SHARES[2])
    assert results.stopped.startswith("cover: the 3 kernels optimized") and "1 kernels left" in results.stopped


def test_the_parents_warm_imports_end_before_the_first_key(captured, tmp_path, monkeypatch):
    """The keys' proposals import Inductor's heuristics in this process: the thread warming them
    is joined first (two threads importing torch's modules at once may see one half made)."""
    from tritune.loop import session

    order: list[str] = []

    class Warm:
        def join(self) -> None:
            if not order:
                time.sleep(0.2)  # still importing when the ranking ends
            order.append("joined")

    def run(job, lane):
        order.append("key")
        return made_up(job)

    monkeypatch.setattr(session, "_warm_parent", lambda specs: Warm())
    results = planted_run(captured, tmp_path, [Planted(0, run=run)])
    assert order[:2] == ["joined", "key"] and order.count("key") == len(GRIDS)
    # the wait is a fixed cost before the first key, and named (not the first key's time to its first candidate)
    assert 0.2 <= results.fixed["warm_s"] <= results.fixed["total_s"]


def test_budgets_with_two_lanes_share_the_deadline_over_both(captured, tmp_path):
    first, second = Planted(0), Planted(1)
    results = planted_run(captured, tmp_path, [first, second], deadline_s=600.0, floor_s=5.0)
    [key0], [key1] = first.jobs[:1], second.jobs[:1]  # handed out together, one to each lane
    # two lanes: the costliest key may use all that is left; the next one its share of twice that
    assert 590 < key0.budget_s <= 600 and key1.budget_s == pytest.approx(2 * SHARES[1] * 600, rel=0.02)
    assert [k.budget_s for k in results.kernels[:2]] == [key0.budget_s, key1.budget_s]
    assert results.stopped is None and len(results.kernels) == len(GRIDS)


def test_the_deadline_stops_handing_out_keys_and_the_run_resumes(captured, tmp_path):
    def slow(job, lane):
        time.sleep(1.5)  # past the deadline: the keys running finish, no other starts
        return made_up(job)

    first, second = Planted(0, run=slow), Planted(1, run=slow)
    results = planted_run(captured, tmp_path, [first, second], deadline_s=1.0, floor_s=0.1)
    assert [len(first.jobs), len(second.jobs)] == [1, 1]
    assert len(results.kernels) == 2 and results.stopped.startswith("deadline: 1 s spent, 2 kernels left")
    assert results.finished is None
    with DecisionStore(tmp_path / "decisions.db") as store:
        [run] = store.runs()
        assert run.status == "interrupted"
    lanes = [Planted(0), Planted(1)]
    again = planted_run(captured, tmp_path, lanes)
    assert again.run_id == run.id and len(again.kernels) == len(GRIDS) and again.stopped is None
    assert sorted(j.key.sha for lane in lanes for j in lane.jobs) == sorted(k.key_sha for k in again.kernels[2:])
    assert [k.lane for k in again.kernels[:2]] == ["planted:0", "planted:1"]  # as kernels.jsonl keeps them


def test_a_lane_that_dies_gives_its_key_to_the_other_and_the_run_says_so(captured, tmp_path):
    def die(job, lane):
        raise LaneDied("its GPU fell off the bus")

    lines = []
    dying, healthy = Planted(0, run=die), Planted(1)
    results = planted_run(captured, tmp_path, [dying, healthy], log=lines.append)
    assert len(dying.jobs) == 1 and len(healthy.jobs) == len(GRIDS)
    assert [k.lane for k in results.kernels] == ["planted:1"] * len(GRIDS) and results.stopped is None
    assert results.kernels[0].key_sha == dying.jobs[0].key.sha  # the key it held, done by the other
    [said] = [line for line in lines if "died" in line]
    assert said.startswith("tritune optimize: lane planted:0 (interpreter) died: its GPU fell off the bus; ")
    assert "goes back to the queue (1 lane(s) of interpreter left)" in said
    dead, alive = RunResults.load(tmp_path).lanes
    assert (dead.died, dead.kernels, alive.died, alive.kernels) == ("its GPU fell off the bus", 0, None, len(GRIDS))


def test_when_every_lane_died_the_run_stops_resumable(captured, tmp_path):
    def die(job, lane):
        raise LaneDied("gone")

    results = planted_run(captured, tmp_path, [Planted(0, run=die), Planted(1, run=die)], log=lambda line: None)
    assert results.kernels == [] and results.stopped.startswith("lanes: every lane of interpreter died (gone; gone)")
    assert results.finished is None


def test_a_mixed_host_optimizes_each_key_once_per_kind_of_gpu(captured, tmp_path):
    lanes = [Planted(0, gpu="GPU A"), Planted(1, gpu="GPU B"), Planted(2, gpu="GPU A")]
    results = planted_run(captured, tmp_path, lanes)
    assert [t["gpu"] for t in results.targets] == ["GPU A", "GPU B"] and results.target["gpu"] == "GPU A"
    assert [k.gpu for k in results.kernels] == ["GPU A"] * 4 + ["GPU B"] * 4  # each kind in rank order
    by_lane = {lane.name: {j.key.gpu_name for j in lane.jobs} for lane in lanes}
    assert by_lane == {"planted:0": {"GPU A"}, "planted:1": {"GPU B"}, "planted:2": {"GPU A"}}
    assert len({k.key_sha for k in results.kernels}) == 8 and len(lanes[1].jobs) == 4
    assert results.coverage == pytest.approx(1.0) and results.kinds == 2  # the mean over the kinds
    assert sorted(p.name for p in tmp_path.glob("baselines.*.json")) == ["baselines.GPU-A-sm0.json",
                                                                        "baselines.GPU-B-sm0.json"]
    from tritune.report.document import header_items

    assert header_items(results, summarize(results))[0].startswith("GPU: GPU A, GPU B (each key on each)")


def test_an_error_in_a_lane_stops_the_run_and_interrupts_the_others(captured, tmp_path):
    interrupted = threading.Event()

    def broken(job, lane):
        raise ValueError("a bug in the lane")

    def waiting(job, lane):
        interrupted.wait(30)
        return made_up(job)

    bad, slow = Planted(0, run=broken), Planted(1, run=waiting)
    slow.interrupt = interrupted.set
    with pytest.raises(ValueError, match="a bug in the lane"):
        planted_run(captured, tmp_path, [bad, slow])
    assert interrupted.is_set()
    with DecisionStore(tmp_path / "decisions.db") as store:
        assert [r.status for r in store.runs()] == ["interrupted"]


def test_after_an_error_the_lanes_threads_are_waited_for_once_not_each_in_turn(captured, tmp_path, monkeypatch):
    """Lanes that do not stop when interrupted (an LLM request in flight) are waited for
    ``JOIN_S`` in all, not ``JOIN_S`` each: Ctrl-C on 8 such lanes took 4 minutes."""
    from tritune.loop import lanes as module

    monkeypatch.setattr(module, "JOIN_S", 1.0)
    release = threading.Event()

    def broken(job, lane):
        time.sleep(0.2)  # the other lanes are on their keys
        raise ValueError("a bug in the lane")

    def deaf(job, lane):
        release.wait(30)  # interrupted, it goes on
        return made_up(job)

    try:
        begin = time.monotonic()
        with pytest.raises(ValueError, match="a bug in the lane"):
            planted_run(captured, tmp_path, [Planted(0, run=broken), Planted(1, run=deaf), Planted(2, run=deaf),
                                             Planted(3, run=deaf)])
        waited = time.monotonic() - begin
    finally:
        release.set()
    assert waited < 2.5  # 1 s for the three of them, not 3 s


# ----------------------------------------------------- a real lane whose worker is killed

def test_a_lane_whose_worker_is_killed_and_cannot_start_again_hands_its_key_over(captured, workers, tmp_path):
    doomed = interpreter_worker()
    killed: list[str] = []

    def kill_after_first_candidate(spec, variant, ms):
        if not variant.is_baseline and not killed:  # in a key: the worker dies, and its GPU with it
            killed.append(spec.id)
            doomed.preload = ("tritune_no_such_module_the_gpu_is_gone",)
            os.kill(doomed.pid, signal.SIGKILL)
        return by_grid(spec, variant, ms)

    lines: list[str] = []
    lanes = [LocalLane(None, captured, index=0, evaluator=Evaluator(captured, retime=kill_after_first_candidate,
                                                                    worker=doomed)),
             LocalLane(None, captured, index=1, evaluator=Evaluator(captured, retime=by_grid, worker=workers[1]))]
    try:
        results = optimize(captured, RunRequest(tmp_path, settings=SETTINGS, cover=1.0), lanes=lanes, log=lines.append)
    finally:
        doomed.close()
    assert killed and len(results.kernels) == len(GRIDS) and results.stopped is None
    dead, alive = results.lanes
    assert "cannot be started again" in dead.died and "tritune_no_such_module" in dead.died and alive.died is None
    assert any(line.startswith("tritune optimize: lane interpreter:0 (interpreter) died: a worker cannot be "
                               "started again") for line in lines)
    held = next(k for k in results.kernels if k.id == killed[0])
    assert held.lane == "interpreter:1"  # the key it was on, done by the other lane
    with DecisionStore(tmp_path / "decisions.db") as store:
        cands = store.candidates()
        assert cands and all(c.status != "running" for c in cands)
        assert all(c.failure_kind != "crash" for c in cands)  # the kill was the lane's, not a candidate's


def test_ctrl_c_interrupts_every_lane_records_no_crash_and_the_run_resumes(captured, workers, tmp_path):
    import _thread

    fired: list[str] = []

    def interrupting(spec, variant, ms):
        if not variant.is_baseline and not fired:  # Ctrl-C, while both lanes are on a key
            fired.append(spec.id)
            _thread.interrupt_main()
        return by_grid(spec, variant, ms)

    lanes = real_lanes(captured, workers, retime=interrupting)
    with pytest.raises(KeyboardInterrupt):
        optimize(captured, RunRequest(tmp_path, settings=SETTINGS, cover=1.0), lanes=lanes)
    assert fired
    with DecisionStore(tmp_path / "decisions.db") as store:
        [run] = store.runs()
        assert run.status == "interrupted"
        cands = store.candidates()
        assert all(c.status != "running" for c in cands) and all(c.failure_kind != "crash" for c in cands)
        done_before = {c.id for c in cands if c.done}
    again = optimize(captured, RunRequest(tmp_path, settings=SETTINGS, cover=1.0), lanes=real_lanes(captured, workers))
    assert again.run_id == run.id and len(again.kernels) == len(GRIDS) and again.finished is not None
    reused = sum(c.reused for k in again.kernels for c in k.candidates)
    assert reused >= len(done_before) > 0


def test_interrupt_runs_nothing_more_not_even_a_call_waiting_for_the_worker(tmp_path):
    """``Evaluator.interrupt`` (Ctrl-C, from the caller's thread) kills what runs; a call that was
    waiting for the same worker (``--jobs``: the verify threads queue on the timing worker) must not
    start a fresh child for its job once the running one is killed: it raises ``Interrupted``."""
    from tritune.loop.evaluate import Interrupted

    worker = Worker(30.0)
    evaluator = Evaluator(tmp_path, worker=worker)
    raised: list[type] = []

    def call(job: str) -> None:
        try:
            evaluator.call(job, None)
        except BaseException as exc:  # noqa: BLE001 - what the lane's thread would see
            raised.append(type(exc))

    try:
        assert worker.start().ok
        running = threading.Thread(target=call, args=("worker_jobs:hang",))
        running.start()
        while not worker.busy:
            time.sleep(0.01)
        waiting = threading.Thread(target=call, args=("worker_jobs:echo",))
        waiting.start()
        time.sleep(0.5)  # it waits for the worker the hanging job holds
        starts = worker.starts
        evaluator.interrupt()
        running.join(30)
        waiting.join(30)
        assert raised == [Interrupted, Interrupted] and worker.starts == starts  # no child made after Ctrl-C
    finally:
        worker.close()


# ----------------------------------------------------------------- which GPUs, the CLI

def two_gpus():
    return [{"name": "NVIDIA H100 80GB HBM3", "capability": 90}] * 2


def test_lane_devices_one_per_gpu_or_as_picked(monkeypatch):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES", raising=False)
    assert lane_devices(gpus=two_gpus) == [Device(0, "0"), Device(1, "1")]
    assert lane_devices(1, gpus=two_gpus) == [Device(0, None)]  # one lane: as before lanes
    assert lane_devices(devices=[1], gpus=two_gpus) == [Device(1, "1")]
    assert lane_devices(1, devices=[1, 0], gpus=two_gpus) == [Device(1, "1")]
    assert lane_devices(gpus=lambda: []) == [Device(0, None)]
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,GPU-abc")
    assert lane_devices(devices=[1], gpus=two_gpus) == [Device(1, "GPU-abc")]  # counted within the visible ones
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    assert lane_devices(gpus=two_gpus) == [Device(0, None)]
    assert lane_devices(3) == [Device(0, None), Device(1, None), Device(2, None)]


@pytest.mark.parametrize("workers, devices, message", [
    (0, None, "--workers must be at least 1, not 0"),
    (3, None, "--workers 3: this host shows 2 GPU(s) (0, 1), and a lane is one GPU"),
    (None, [0, 2], "--devices 2: no such GPU; this host shows 2 GPU(s) (0, 1)"),
    (3, [0, 1], "--workers 3 is more than the 2 GPU(s) --devices names"),
    (None, [1, 1], "--devices 1,1: a GPU is named twice"),
])
def test_lane_devices_refuse_what_the_host_cannot_meet(monkeypatch, workers, devices, message):
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)
    with pytest.raises(LaneError) as caught:
        lane_devices(workers, devices, gpus=two_gpus)
    assert str(caught.value).startswith(message)


def test_a_key_a_lane_returns_no_timing_for_is_listed_untimed_and_the_chunk_keeps_the_others(captured, tmp_path):
    class DropsOne(Planted):
        def baselines(self, specs, log=None):
            found = super().baselines(specs, log)
            del found[specs[0].id]
            return found

    results = planted_run(captured, tmp_path, [DropsOne(0)])
    assert len(results.timed) == 4 and [t.failure for t in results.timed] == [None, None, None, "untimed"]
    assert results.timed[-1].message == "the ranking returned no timing for it"


def test_the_pool_needs_a_lane():
    with pytest.raises(ValueError):
        LanePool([])


def test_a_mixed_host_goes_on_when_every_lane_of_one_kind_dies_in_the_ranking(captured, tmp_path):
    """The ranking: GPU B's one lane dies timing its baselines. GPU A's keys are optimized, the run
    says GPU B's were not (resumable); only when every kind's lanes died does the run stop there."""
    class DiesRanking(Planted):
        def baselines(self, specs, log=None):
            raise LaneDied("its GPU fell off the bus")

    lines = []
    lanes = [Planted(0, gpu="GPU A"), DiesRanking(1, gpu="GPU B")]
    results = planted_run(captured, tmp_path / "mixed", lanes, log=lines.append)
    assert [k.gpu for k in results.kernels] == ["GPU A"] * 4 and lanes[1].jobs == []
    assert results.stopped.startswith("lanes: every lane of GPU B died (its GPU fell off the bus); 4 kernels left")
    assert results.finished is None  # resumable: GPU B's keys wait for the next run
    assert any(line.startswith("tritune optimize: every lane of GPU B died while timing the baselines") for line in lines)
    # every key is in optimize.json's timed list, GPU B's untimed with why
    untimed = [t for t in results.timed if t.gpu == "GPU B"]
    assert len(results.timed) == 8 and [t.failure for t in untimed] == ["untimed"] * 4
    assert all("every lane of GPU B died before it was timed (its GPU fell off the bus)" in t.message for t in untimed)
    from tritune.loop.session import OptimizeError

    with pytest.raises(OptimizeError, match=r"every lane died while timing the baselines \(GPU A: its GPU fell "
                                            r"off the bus; GPU B: its GPU fell off the bus\); run the same"):
        planted_run(captured, tmp_path / "all", [DiesRanking(0, gpu="GPU A"), DiesRanking(1, gpu="GPU B")],
                    log=lambda line: None)


# ----------------------------------------- a key's full baseline, timed as its candidates build

RANKING = {"time_ms": 5.0, "methods": ["median"]}  # the ranking's one median (``RANK_METHODS``)
WAIT_S = 5.0  # a planted step waits this long for the other: a serial loop fails, never hangs


class BaselineEvaluator(Evaluator):
    """Full baselines of 1 + grid ms, each call kept (with whether the candidates had been asked
    for by then); a candidate timed at ``candidate_ms``. The full timing waits for the candidates
    to be asked for, and they wait for it: a loop that timed it before submitting them records
    ``asked`` False, after WAIT_S. ``failing``: the spec ids whose full timing fails."""

    def __init__(self, failing=(), candidate_ms=3.0):
        super().__init__(".", worker=object())
        self.calls, self.failing, self.candidate_ms = [], set(failing), candidate_ms
        self.asked, self.timed = threading.Event(), threading.Event()

    def baseline(self, spec):
        from tritune.worker.failures import Failure

        self.calls.append(("baseline", spec.id, self.asked.wait(WAIT_S)))
        self.timed.set()
        if spec.id in self.failing:
            return None, Failure("crash", "planted")
        return {"time_ms": 1.0 + spec.grid[0], "noise": 0.01, "roofline": 0.5, "methods": ["median", "graph"]}, None

    def profile(self, spec, timing, variant=None, budget_s=None):
        self.calls.append(("profile", spec.id, timing["time_ms"]))
        return {"source": "timing+static", "note": "planted"}

    def candidates(self, spec, items, verify_timeout_s=None):
        from tritune.loop.evaluate import Evaluated
        from tritune.model.trial import Trial

        self.calls.append(("candidates", spec.id))
        self.asked.set()
        self.timed.wait(WAIT_S)
        for variant, _ in items:
            yield Evaluated(Trial(variant, ok=True, time_ms=self.candidate_ms), verification={"ok": True},
                            timing={"time_ms": self.candidate_ms})

    def judge(self, *args, **kwargs):
        self.calls.append(("judge",))
        raise AssertionError("judged against the ranking's median")


class OneCandidate:
    """Proposes one variant, once; ``none``: nothing."""

    name = "planted"

    def __init__(self, none=False):
        self.none = none

    def propose(self, spec, trials, limit):
        variant = Variant(name="planted", options={"num_warps": 2})
        return [] if trials or self.none else [variant]


def _baseline_jobs(tmp_path):
    from tritune.loop.lanes import KeyJob
    from tritune.model.launch import LaunchSpec
    from tritune.store import key_for

    specs = [LaunchSpec(kernel=f"k{g}", kind="jit", module="m", source_file="k.py", source="sources/k.py",
                        source_hash=str(g), args=[], constexprs={}, options={}, grid=[g, 1, 1]) for g in (1, 2, 3)]
    store = tmp_path / "decisions.db"
    with DecisionStore(store) as db:
        run_id = db.start_run({}, "test")

    def job(spec, baseline=(RANKING, None), none=False):
        from tritune.loop.families import Family

        return KeyJob(spec, key_for(spec, Target("GPU", 90, triton.__version__)),
                      settings=LoopSettings(budget_s=5.0), run_id=run_id, store_path=str(store), root=".",
                      baseline=baseline, families=[Family("planted", OneCandidate(none), lambda v: "tolerance")])
    return specs, job


def test_a_key_starts_from_the_rankings_median_and_is_judged_against_its_full_baseline(tmp_path):
    specs, job = _baseline_jobs(tmp_path)
    evaluator = BaselineEvaluator(candidate_ms=3.0)
    lane = LocalLane(None, ".", evaluator=evaluator)
    try:
        result = lane.run_key(job(specs[1]))
    finally:
        lane.close()
    # profiled on the ranking's 5 ms; the full baseline (3 ms) timed once, as the candidate built
    assert evaluator.calls == [("profile", specs[1].id, 5.0), ("candidates", specs[1].id),
                               ("baseline", specs[1].id, True)]
    # the candidate (3 ms) beats the ranking's 5 ms but not the full 3 ms: never judged
    assert result.baseline_ms == 3.0 and result.speedup == 1.0 and result.roofline_before == 0.5
    assert result.timed_candidates == 1 and result.split["to_first_s"] < WAIT_S
    assert result.candidates[0].speedup == 1.0  # its record re-based on the full baseline too


def test_a_round_whose_candidates_were_all_evaluated_before_is_judged_against_the_full_baseline(tmp_path):
    """The same key again on the same store (a resumed run, another lane after one died): its
    candidate comes from the store, nothing goes out to build, and the full baseline is timed
    before the round is judged, not left at the ranking's median."""
    specs, job = _baseline_jobs(tmp_path)
    evaluator = BaselineEvaluator(candidate_ms=3.0)
    lane = LocalLane(None, ".", evaluator=evaluator)
    try:
        lane.run_key(job(specs[1]))
        evaluator.calls.clear()
        again = lane.run_key(job(specs[1]))
    finally:
        lane.close()
    assert ("candidates", specs[1].id) not in evaluator.calls  # reused from the store
    assert ("baseline", specs[1].id, True) in evaluator.calls and ("judge",) not in evaluator.calls
    assert again.baseline_ms == 3.0 and again.speedup == 1.0


def test_a_key_at_its_roofline_by_the_rankings_median_is_checked_on_its_full_baseline(tmp_path):
    specs, job = _baseline_jobs(tmp_path)
    evaluator = BaselineEvaluator(candidate_ms=100.0)  # full baselines at 50% of the roofline
    evaluator.asked.set()
    evaluator.timed.set()
    lane = LocalLane(None, ".", evaluator=evaluator)
    try:
        checked = lane.run_key(job(specs[1], baseline=({"time_ms": 5.0, "roofline": 0.95, "methods": ["median"]},
                                                       None)))
        full = lane.run_key(job(specs[2], baseline=({"time_ms": 4.0, "roofline": 0.95,
                                                     "methods": ["median", "graph"]}, None)))
    finally:
        lane.close()
    assert checked.roofline_before == 0.5 and checked.timed_candidates == 1  # searched after all
    assert full.finish == "roofline" and full.timed_candidates == 0  # a full timing's verdict stands
    assert [c[1] for c in evaluator.calls if c[0] == "baseline"] == [specs[1].id]


def test_a_full_baseline_that_fails_is_the_keys_failure(tmp_path):
    specs, job = _baseline_jobs(tmp_path)
    evaluator = BaselineEvaluator(failing={specs[0].id})
    lane = LocalLane(None, ".", evaluator=evaluator)
    try:
        result = lane.run_key(job(specs[0]))
    finally:
        lane.close()
    assert result.failure == "crash" and result.message == "baseline could not be timed: planted"
    assert len(result.candidates) == 1 and ("judge",) not in evaluator.calls
    assert result.baseline_ms is None and result.roofline_before is None  # not the ranking's median


def test_what_the_session_knows_is_not_timed_again(tmp_path):
    """A full timing (a resumed run's) or a failure is the loop's start; a key that submits no
    candidate keeps the ranking's median; given nothing, the loop times its baseline first."""
    from tritune.worker.failures import Failure

    specs, job = _baseline_jobs(tmp_path)
    evaluator = BaselineEvaluator(candidate_ms=100.0)  # slower than every baseline: never judged
    evaluator.asked.set()  # nothing waits: these loops time their baseline first, or not at all
    evaluator.timed.set()
    lane = LocalLane(None, ".", evaluator=evaluator)
    try:
        full = lane.run_key(job(specs[0], baseline=({"time_ms": 7.0, "methods": ["median", "graph"]}, None)))
        failed = lane.run_key(job(specs[0], baseline=(None, Failure("compile_error", "planted"))))
        idle = lane.run_key(job(specs[2], none=True))
        assert [c for c in evaluator.calls if c[0] == "baseline"] == []
        own = lane.run_key(job(specs[1], baseline=None))
        calls = list(evaluator.calls)
        timeless = lane.run_key(job(specs[0], baseline=({"methods": ["median"]}, None)))  # a median with no time
    finally:
        lane.close()
    assert full.baseline_ms == 7.0 and failed.failure == "compile_error" and idle.baseline_ms == 5.0
    assert own.baseline_ms == 3.0 and timeless.baseline_ms == 2.0
    assert calls[-3:] == [("baseline", specs[1].id, True), ("profile", specs[1].id, 3.0), ("candidates", specs[1].id)]
    assert evaluator.calls[len(calls)] == ("baseline", specs[0].id, True)  # timed first, as with none


def _request_fields(kwargs: dict) -> dict:
    """The ``RunRequest`` fields among a helper's keyword arguments, taken out of them."""
    return {name: kwargs.pop(name) for name in list(kwargs) if name in RunRequest.__dataclass_fields__}
