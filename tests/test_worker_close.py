"""Closing many workers together (``close_workers``, ``Evaluator.close``, ``close_lanes``) and a
lane's verify workers started beside its timing worker (``LocalLane.start``). One after another,
a lane's 17 workers took ~8 s to close on a GPU (benchmarks/results/lanes): these tests check
the structure (every child asked before any is waited for; lanes closed at once), and one bound
that only closing one after another could miss by far. Jobs: tests/worker_jobs.py."""

from __future__ import annotations

import threading
import time

import pytest

from tritune.loop import lanes as lanes_module
from tritune.loop.evaluate import Evaluator
from tritune.loop.lanes import LaneDied, LocalLane, close_lanes
from tritune.worker import Worker, close_workers
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
    assert time.monotonic() - begin < 3.5
    assert not any(alive(pid) for pid in pids)


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
    monkeypatch.setattr(lane.evaluator, "start_verifiers", lambda: lane.starts.extend(start()) or lane.starts)
    yield lane
    lane.close()


def test_lane_start_starts_its_verifiers_beside_the_timing_worker(bare_lane, monkeypatch):
    monkeypatch.setattr(lanes_module, "TARGET_JOB", f"{JOBS}:echo")
    evaluator, verifiers = bare_lane.evaluator, bare_lane.evaluator.verifiers
    call, seen = evaluator.call, []
    monkeypatch.setattr(evaluator, "call", lambda *a, **k: seen.append([v.pid for v in verifiers]) or call(*a, **k))
    for v in verifiers:  # slower to start than the timing worker
        monkeypatch.setattr(v, "start", lambda start=v.start: time.sleep(1.0) or start())
    assert bare_lane.start()["got"] == {}
    assert len(bare_lane.starts) == len(verifiers) == 2 and all(f.result().ok for f in bare_lane.starts)
    assert len(seen) == 1 and None not in seen[0]  # the target job ran once every verifier had started
    assert all(v.pid is not None and v.starts == 1 for v in verifiers) and evaluator.worker.starts == 1
    for v in verifiers:  # a call uses the child started for it, as the ranking's first build does
        assert bare_lane.evaluator._call(v, f"{JOBS}:pid", None).value == v.pid
    assert all(v.starts == 1 for v in verifiers)


def test_a_lane_that_cannot_start_stops_its_verifiers(bare_lane, monkeypatch):
    monkeypatch.setattr(lanes_module, "TARGET_JOB", f"{JOBS}:raise_value_error")
    before = set(pool._LIVE)
    with pytest.raises(LaneDied, match="cannot tell which GPU"):
        bare_lane.start()
    assert len(bare_lane.starts) == 2 and all(future.done() for future in bare_lane.starts)
    assert set(pool._LIVE) <= before  # no child of the lane is left running
    for v in bare_lane.evaluator.verifiers:
        with pytest.raises(RuntimeError, match="closed"):
            v.call(f"{JOBS}:pid")
