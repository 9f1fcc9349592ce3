"""Closing many workers together (``close_workers``, ``Evaluator.close``, ``close_lanes``) and a
lane's verify workers started beside its timing worker (``LocalLane.start``). One after another,
a lane's 17 workers took ~8 s to close on a GPU (benchmarks/results/lanes): these tests check
the structure (every child asked before any is waited for; lanes closed at once), and one bound
that only closing one after another could miss by far. Jobs: tests/worker_jobs.py."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest

from tritune.loop import jobs as jobs_module
from tritune.loop import lanes as lanes_module
from tritune.loop.evaluate import Evaluator
from tritune.loop.lanes import LaneDied, LocalLane, close_lanes
from tritune.worker import Worker, close_workers, jail
from tritune.worker import pool

from test_worker import alive

JOBS = "worker_jobs"


@pytest.fixture
def events(monkeypatch) -> list[tuple[str, int]]:
    """("ask", pid) as a child is asked to stop, ("wait", pid) as it is waited for."""
    found: list[tuple[str, int]] = []
    ask, wait = pool._Child.ask_stop, pool._Child.wait_exit

    def ask_stop(child):
        found.append(("ask", child.proc.pid))
        ask(child)

    def wait_exit(child, timeout_s=pool._STOP_WAIT_S):
        found.append(("wait", child.proc.pid))
        return wait(child, timeout_s)

    monkeypatch.setattr(pool._Child, "ask_stop", ask_stop)
    monkeypatch.setattr(pool._Child, "wait_exit", wait_exit)
    return found


def asked_before_any_wait(events: list[tuple[str, int]], pids: list[int]) -> bool:
    asked = [i for i, (what, _) in enumerate(events) if what == "ask"]
    waited = [i for i, (what, _) in enumerate(events) if what == "wait"]
    return sorted(pid for what, pid in events if what == "ask") == sorted(pids) and max(asked) < min(waited)


def test_close_workers_asks_every_child_before_waiting_for_any(events):
    workers = [Worker(timeout_s=30) for _ in range(3)]
    pids = [w.call(f"{JOBS}:pid").value for w in workers]
    children = [w._child for w in workers]
    close_workers([*workers, workers[0]])  # a worker named twice is closed once
    assert asked_before_any_wait(events, pids)
    for pid, child in zip(pids, children):
        assert not alive(pid)
        assert not child.log_path.exists() and not child.cwd.exists() and child not in pool._LIVE
    for w in workers:
        with pytest.raises(RuntimeError, match="closed"):
            w.call(f"{JOBS}:pid")
    count = len(events)
    close_workers(workers)  # closing again: nothing to do
    workers[1].close()
    assert len(events) == count


def test_children_slow_to_exit_are_waited_for_together():
    """Each child takes 1 s to exit once asked: one after another, 5 of them took 5 s or more."""
    workers = [Worker(timeout_s=30) for _ in range(5)]
    pids = [w.call(f"{JOBS}:exit_slowly", 1.0).value for w in workers]
    begin = time.monotonic()
    close_workers(workers)
    assert 1.0 <= time.monotonic() - begin < 3.5  # at least 1 s: their exit functions ran
    assert not any(alive(pid) for pid in pids)


def test_a_stopped_child_runs_its_exit_functions(tmp_path):
    """A child asked to stop skips the interpreter's teardown, not what its jobs registered to run at
    exit: an unjailed worker's replay makes its variant folder in the user's temporary folder and
    removes it then."""
    marker = tmp_path / "ran"
    worker = Worker(timeout_s=30)
    pid = worker.call(f"{JOBS}:at_exit_writes", str(marker)).value
    worker.close()
    assert not alive(pid)
    assert marker.read_text() == "exit functions ran"


def test_evaluator_close_stops_its_workers_together(tmp_path, events):
    evaluator = Evaluator(tmp_path, jobs=3, worker=Worker(30))
    workers = [evaluator.worker, *evaluator.verifiers]
    assert all(w.start().ok for w in workers)
    pids = [w.pid for w in workers]
    evaluator.close()
    assert asked_before_any_wait(events, pids)
    assert not any(alive(pid) for pid in pids)
    evaluator.close()  # again: nothing to do


class Closing:
    """A lane whose ``close`` returns only once every other lane's ``close`` runs too."""

    def __init__(self, together: threading.Barrier, error: Exception | None = None) -> None:
        self.together, self.error, self.closed = together, error, False

    def close(self) -> None:
        self.together.wait(timeout=30)  # closed one after another: broken after 30 s
        self.closed = True
        if self.error is not None:
            raise self.error


def test_close_lanes_closes_them_at_once_and_raises_an_error_after_all():
    together = threading.Barrier(3)
    lanes = [Closing(together), Closing(together, RuntimeError("lane 1 failed to close")), Closing(together)]
    with pytest.raises(RuntimeError, match="lane 1 failed"):
        close_lanes(lanes)
    assert all(lane.closed for lane in lanes)
    close_lanes([])


@pytest.fixture
def bare_lane(tmp_path, monkeypatch):
    """A lane of this host with two verify workers that preload nothing, and ``start_verifiers``'
    futures (``.starts``) kept."""
    monkeypatch.setattr(lanes_module, "PRELOAD", ())
    monkeypatch.setattr(lanes_module, "READY_MODULE", "json")
    lane = LocalLane(None, tmp_path, jobs=2)
    start = lane.evaluator.start_verifiers
    lane.starts = []
    monkeypatch.setattr(lane.evaluator, "start_verifiers",
                        lambda first=None: lane.starts.extend(start(first)) or lane.starts)
    yield lane
    lane.close()


def test_lane_start_starts_its_verifiers_beside_the_timing_worker(bare_lane, monkeypatch):
    monkeypatch.setattr(jobs_module, "TARGET_JOB", f"{JOBS}:target")
    evaluator, verifiers = bare_lane.evaluator, bare_lane.evaluator.verifiers
    call, seen = evaluator.call, []
    monkeypatch.setattr(evaluator, "call", lambda *a, **k: seen.append([v.pid for v in verifiers]) or call(*a, **k))
    for v in verifiers:  # slower to start than the timing worker
        monkeypatch.setattr(v, "start", lambda start=v.start: time.sleep(1.0) or start())
    assert bare_lane.start().triton_version == "test"
    assert len(bare_lane.starts) == len(verifiers) == 2 and all(f.result().ok for f in bare_lane.starts)
    assert len(seen) == 1 and None not in seen[0]  # the target job ran once every verifier had started
    assert all(v.pid is not None and v.starts == 1 for v in verifiers) and evaluator.worker.starts == 1
    for v in verifiers:  # a call uses the child started for it, as the ranking's first build does
        assert bare_lane.evaluator._call(v, f"{JOBS}:pid", None).value == v.pid
    assert all(v.starts == 1 for v in verifiers)


def test_a_lane_waits_for_its_first_verifiers_and_the_rest_join_when_started(tmp_path, monkeypatch):
    """``FIRST_VERIFIERS`` start beside the timing worker and the target job waits for them; the
    others start after the target job, and none is handed work (the idle ones) before its start
    is done."""
    monkeypatch.setattr(lanes_module, "PRELOAD", ())
    monkeypatch.setattr(lanes_module, "READY_MODULE", "json")
    monkeypatch.setattr(lanes_module, "FIRST_VERIFIERS", 1)
    monkeypatch.setattr(jobs_module, "TARGET_JOB", f"{JOBS}:target")
    lane = LocalLane(None, tmp_path, jobs=3)
    evaluator, verifiers = lane.evaluator, lane.evaluator.verifiers
    try:
        call, seen = evaluator.call, []

        def at_target(*args, **kwargs):
            seen.append(([v.pid for v in verifiers], list(evaluator._idle.queue)))
            return call(*args, **kwargs)

        monkeypatch.setattr(evaluator, "call", at_target)
        gate = threading.Event()
        for v in verifiers[1:]:  # the late ones: held until the test lets them start
            monkeypatch.setattr(v, "start", lambda start=v.start: gate.wait(10) and start())
        assert lane.start().triton_version == "test"
        [(pids, idle)] = seen
        assert pids[0] is not None and pids[1:] == [None, None]  # only the first had started
        assert idle == [verifiers[0]]  # and only it could be handed work
        assert list(evaluator._idle.queue) == [verifiers[0]]  # the rest still starting: not idle
        gate.set()
        deadline = time.monotonic() + 30
        while evaluator._idle.qsize() < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert {id(v) for v in evaluator._idle.queue} == {id(v) for v in verifiers}
        assert evaluator._idle.queue[-1] is verifiers[0]  # the warm one is still taken first (last in, first out)
        assert all(v.pid is not None and v.starts == 1 for v in verifiers)
    finally:
        lane.close()


def test_a_lane_that_cannot_start_stops_its_verifiers(bare_lane, monkeypatch):
    monkeypatch.setattr(jobs_module, "TARGET_JOB", f"{JOBS}:raise_value_error")
    before = set(pool._LIVE)
    with pytest.raises(LaneDied, match="cannot tell which GPU"):
        bare_lane.start()
    assert len(bare_lane.starts) == 2 and all(future.done() for future in bare_lane.starts)
    assert set(pool._LIVE) <= before  # no child of the lane is left running
    for v in bare_lane.evaluator.verifiers:
        with pytest.raises(RuntimeError, match="closed"):
            v.call(f"{JOBS}:pid")


def test_a_jailed_lanes_workers_share_one_cache_removed_at_close(tmp_path):
    """A jailed lane's timing and verify workers are given one Triton cache (``SharedCache``: a
    launch the ranking built in a verify worker is loaded, not built again, by the timing
    worker), made for the lane and removed when it closes; an unjailed lane's workers have none
    (they use the user's cache, as the user's own program does). Nothing is started."""
    jailed = LocalLane(None, tmp_path, jobs=3, jail=jail.Policy())
    caches = {w.cache for w in [jailed.evaluator.worker, *jailed.evaluator.verifiers]}
    assert len(caches) == 1 and None not in caches
    [cache] = caches
    assert Path(cache).is_dir() and Path(cache).name.startswith(pool.CACHE_PREFIX)
    other = LocalLane(None, tmp_path, jobs=2, jail=jail.Policy())
    assert other.evaluator.worker.cache != cache  # each lane its own: lanes are not one trust domain
    jailed.close()
    other.close()
    assert not Path(cache).exists() and not Path(other.evaluator.worker.cache).exists()
    plain = LocalLane(None, tmp_path, jobs=2)
    assert {w.cache for w in [plain.evaluator.worker, *plain.evaluator.verifiers]} == {None}
    plain.close()


def test_closing_does_not_wait_for_verifiers_still_starting(tmp_path, monkeypatch):
    """A verify worker still starting when the lane closes (``start_rest``: a library's imports
    take seconds) is killed, not waited for; nothing of it is left running."""
    monkeypatch.setattr(lanes_module, "PRELOAD", ())
    monkeypatch.setattr(lanes_module, "READY_MODULE", "json")
    monkeypatch.setattr(lanes_module, "FIRST_VERIFIERS", 1)
    monkeypatch.setattr(jobs_module, "TARGET_JOB", f"{JOBS}:target")
    lane = LocalLane(None, tmp_path, jobs=3)
    for v in lane.evaluator.verifiers[1:]:
        v.warm = ("slow_start",)  # tests/slow_start.py: sleeps at import
    before = set(pool._LIVE)
    lane.start()
    deadline = time.monotonic() + 30
    while not all(v.starting for v in lane.evaluator.verifiers[1:]) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert all(v.starting for v in lane.evaluator.verifiers[1:])
    begin = time.monotonic()
    lane.close()
    assert time.monotonic() - begin < 10  # the import sleeps 60 s
    assert set(pool._LIVE) <= before
    assert not any(v.starting for v in lane.evaluator.verifiers)


def test_leaving_a_round_does_not_kill_a_late_verifier_s_start(tmp_path, monkeypatch):
    """``_abandon`` (a round left early) kills what the round's calls run, not a late verify
    worker's start (``start_rest``), which would then pay its cold start inside a candidate."""
    monkeypatch.setattr(lanes_module, "PRELOAD", ())
    monkeypatch.setattr(lanes_module, "READY_MODULE", "json")
    monkeypatch.setattr(lanes_module, "FIRST_VERIFIERS", 1)
    monkeypatch.setattr(jobs_module, "TARGET_JOB", f"{JOBS}:target")
    lane = LocalLane(None, tmp_path, jobs=2)
    late = lane.evaluator.verifiers[1]
    late.warm = ("slow_start",)
    try:
        lane.start()
        deadline = time.monotonic() + 30
        while not late.starting and time.monotonic() < deadline:
            time.sleep(0.02)
        assert late.starting and late.busy
        lane.evaluator._abandon([])
        time.sleep(0.3)
        assert late.starting  # its start goes on
    finally:
        lane.close()
    assert not late.starting


def test_a_shared_cache_left_by_a_killed_process_is_removed_by_the_next(tmp_path):
    dead = tmp_path / f"{pool.CACHE_PREFIX}999999999-abc"  # no such process
    alive = tmp_path / f"{pool.CACHE_PREFIX}{os.getpid()}-abc"
    other = tmp_path / "tritune-worker-cwd-999999999"  # not a cache: left alone
    for folder in (dead, alive, other):
        (folder / "x").mkdir(parents=True)
    made = pool.process_folder(pool.CACHE_PREFIX, tmp_path)
    assert not dead.exists() and alive.exists() and other.exists()
    assert made.parent == tmp_path and made.name.startswith(f"{pool.CACHE_PREFIX}{os.getpid()}-")
