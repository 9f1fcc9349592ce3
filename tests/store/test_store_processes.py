"""The decision store across processes: a process killed mid-transaction loses nothing that was
committed and its run resumes; four processes writing at once lose no rows and never fail with
"database is locked", nor do four processes of two lanes each (``optimize --workers``: a thread
per lane, each with its own connection) writing candidates, profiles and decisions; a forked
child gets its own connection.

The child processes run this file as a script (``python test_store_processes.py MODE ...``).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import sqlite3
import subprocess
import sys
import threading
import time

from tritune.model.key import DecisionKey
from tritune.store import DecisionStore

PASSED = {"ok": True}
WORKERS, PER_WORKER, SHARED = 4, 120, 10  # each worker: SHARED candidates all workers add, the rest its own


def key(i: int) -> DecisionKey:
    return DecisionKey("a" * 64, f"kernel{i % 3}", json.dumps({"i": i}), "NVIDIA H100 80GB HBM3", 90, "3.6.0")


def variant(n: int) -> dict:
    return {"name": f"v{n}", "options": {"num_warps": n}, "constexprs": {}, "passes": [], "fast_math": False,
            "source": None}


def run_script(*args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True, timeout=timeout)


# ------------------------------------------------------------------- killed mid-transaction

def child_killed(path: str) -> None:
    """Evaluate two candidates, start a third, then die inside the transaction recording it."""
    store = DecisionStore(path)
    run = store.start_run({"budget": 4}, "optimize --launches d")
    cands = [store.add_candidate(run, key(0), variant(n)) for n in (1, 2, 4, 8)]
    store.claim(cands[0].id, run)
    store.finish_candidate(cands[0].id, "verified", verification=PASSED, timings={"median_ms": 1.0})
    store.claim(cands[1].id, run)
    store.finish_candidate(cands[1].id, "rejected", failure={"kind": "compile_error", "message": "out of resources"})
    store.claim(cands[2].id, run)
    conn = store._db.connection()
    conn.set_trace_callback(lambda sql: os._exit(9) if sql.startswith("COMMIT") else None)
    store.finish_candidate(cands[2].id, "verified", verification=PASSED)  # dies before COMMIT runs
    os._exit(0)  # not reached


def test_killed_mid_transaction_loses_nothing_committed_and_resumes(tmp_path):
    path = tmp_path / "store.db"
    done = run_script("killed", str(path))
    assert done.returncode == 9, done.stderr
    with DecisionStore(path) as store:
        [run] = store.runs()
        assert run.status == "running"  # nobody closed it
        first, second, third, fourth = store.candidates(run_id=run.id)
        assert (first.status, first.timings) == ("verified", {"median_ms": 1.0})
        assert (second.status, second.failure_kind, second.message) == ("rejected", "compile_error", "out of resources")
        assert (third.status, third.verification) == ("running", None)  # the uncommitted finish is gone
        assert fourth.status == "pending"

        found = store.find_resumable({"budget": 4})
        assert found is not None and found.id == run.id  # its process is dead: resumable
        store.resume_run(run.id)
        assert [c.id for c in store.pending(run.id)] == [third.id, fourth.id]
        assert store.add_candidate(run.id, key(0), variant(1)).done  # evaluated before: not again
        assert store.candidate(third.id).attempts == 1
    assert sqlite3.connect(path).execute("PRAGMA integrity_check").fetchone() == ("ok",)


def child_hold(path: str) -> None:
    """Start a run and stay alive, so that it is live for the other process."""
    store = DecisionStore(path)
    run = store.start_run({"budget": 1})
    cand = store.add_candidate(run, key(0), variant(1))
    print(json.dumps([run, cand.id]), flush=True)
    sys.stdin.read()  # until the parent closes stdin


def test_a_live_run_is_not_taken_over(tmp_path):
    path = tmp_path / "store.db"
    child = subprocess.Popen([sys.executable, __file__, "hold", str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        run, cand_id = json.loads(child.stdout.readline())
        with DecisionStore(path) as store:
            assert store.find_resumable({"budget": 1}) is None
            mine = store.start_run({"budget": 1})
            seen = store.add_candidate(mine, key(0), variant(1))
            assert (seen.id, seen.run_id) == (cand_id, run)  # the live owner keeps it
            try:
                store.resume_run(run)
                raise AssertionError("resumed a live run")
            except Exception as exc:  # noqa: BLE001
                assert "still running" in str(exc)
    finally:
        child.stdin.close()
        child.wait(timeout=30)
    with DecisionStore(path) as store:
        adopted = store.add_candidate(mine, key(0), variant(1))
        assert (adopted.id, adopted.run_id, adopted.status) == (cand_id, mine, "pending")  # owner gone: taken over


# ------------------------------------------------------------------------- concurrent writers

def child_write(path: str, worker: str, start_at: str) -> None:
    worker_id = int(worker)
    store = DecisionStore(path)
    while time.time() < float(start_at):  # start together
        time.sleep(0.001)
    run = store.start_run({"worker": worker_id})
    seen = {}
    for j in range(PER_WORKER):
        n = j if j < SHARED else 1000 * (worker_id + 1) + j
        cand = store.add_candidate(run, key(n), variant(n))
        seen[f"{n}"] = cand.id
        if not cand.done and store.claim(cand.id, run) is not None:
            store.finish_candidate(cand.id, "verified", verification=PASSED, timings={"worker": worker_id})
        store.set_profile(key(n), {"worker": worker_id})
    store.finish_run(run)
    print(json.dumps(seen))


def write_together(mode: str, path, count: int, timeout: float = 120) -> list[str]:
    """``count`` children of ``mode`` (``child_MODE(path, index, start_at)``) writing to the store
    at ``path`` from the same instant; their outputs, after each exited 0 without "locked"."""
    DecisionStore(path).close()
    start_at = f"{time.time() + 1.5:.3f}"
    children = [subprocess.Popen([sys.executable, __file__, mode, str(path), str(w), start_at],
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for w in range(count)]
    results = [child.communicate(timeout=timeout) for child in children]
    for child, (out, err) in zip(children, results):
        assert child.returncode == 0 and "locked" not in err, err
    return [out for out, _ in results]


def test_concurrent_writers_lose_nothing(tmp_path):
    path = tmp_path / "store.db"
    seen = [json.loads(out) for out in write_together("write", path, WORKERS)]
    for n in map(str, range(SHARED)):  # a shared candidate is one row, whoever added it first
        assert len({ids[n] for ids in seen}) == 1
    with DecisionStore(path) as store:
        cands = store.candidates()
        assert len(cands) == SHARED + WORKERS * (PER_WORKER - SHARED)
        assert all(c.status == "verified" and c.attempts == 1 for c in cands)  # each evaluated exactly once
        assert [r.status for r in store.runs()] == ["finished"] * WORKERS
        body = store.export_json()
        assert len(body["profiles"]) == len(cands) and len(body["keys"]) == len(cands)


PROCESSES, LANES, KEYS, VARIANTS = 4, 2, 6, 3  # optimize processes, lanes each, keys per lane, candidates per key


def lane_key(process: int, lane: int, i: int) -> DecisionKey:
    return key(1000 * process + 100 * lane + i)


def child_lanes(path: str, process: str, start_at: str) -> None:
    """One optimize process: its run, and LANES threads writing their keys' candidates, profiles
    and decisions at once, each through its own connection."""
    index = int(process)
    with DecisionStore(path) as store:
        run = store.start_run({"process": index})

    def lane(number: int) -> None:
        with DecisionStore(path) as own:
            while time.time() < float(start_at):  # every lane of every process at once
                time.sleep(0.001)
            for i in range(KEYS):
                k = lane_key(index, number, i)
                for n in range(VARIANTS):
                    cand = own.add_candidate(run, k, variant(2 ** n))
                    assert own.claim(cand.id, run) is not None
                    own.finish_candidate(cand.id, "verified", verification=PASSED, timings={"time_ms": 1.0 / (n + 1)})
                own.set_profile(k, {"lane": number}, run_id=run)
                own.set_decision(k, variant(2 ** (VARIANTS - 1)), baseline_ms=1.0, best_ms=1.0 / VARIANTS, run_id=run)

    threads = [threading.Thread(target=lane, args=(n,)) for n in range(LANES)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    with DecisionStore(path) as store:
        store.finish_run(run)
    print("done")


def test_processes_of_several_lanes_write_candidates_and_decisions_at_once(tmp_path):
    path = tmp_path / "store.db"
    assert [out.strip() for out in write_together("lanes", path, PROCESSES, timeout=180)] == ["done"] * PROCESSES
    with DecisionStore(path) as store:
        cands = store.candidates()
        assert len(cands) == PROCESSES * LANES * KEYS * VARIANTS
        assert all(c.signed and c.status in ("verified", "accepted") and c.attempts == 1 for c in cands)
        keys = [lane_key(p, lane, i) for p in range(PROCESSES) for lane in range(LANES) for i in range(KEYS)]
        for k in keys:
            decision = store.decision_for(k)  # None unless its signature verifies
            assert decision is not None and decision.usable and decision.variant.options == {"num_warps": 4}
            assert store.profile_for(k) is not None
        assert len(store.decisions()) == len(keys)
        assert [r.status for r in store.runs()] == ["finished"] * PROCESSES


# ----------------------------------------------------------------------------------- fork

def _forked_add(store: DecisionStore, run: int, queue) -> None:
    queue.put(store.add_candidate(run, key(7), variant(7)).id)


def test_forked_child_uses_its_own_connection(tmp_path):
    with DecisionStore(tmp_path / "store.db") as store:
        run = store.start_run({})
        parent_conn = store._db.connection()
        context = multiprocessing.get_context("fork")
        queue = context.Queue()
        child = context.Process(target=_forked_add, args=(store, run, queue))
        child.start()
        child.join(timeout=60)
        assert child.exitcode == 0
        cand_id = queue.get(timeout=5)
        assert store._db.connection() is parent_conn  # the parent's connection still works
        assert store.add_candidate(run, key(7), variant(7)).id == cand_id


if __name__ == "__main__":
    modes = {"killed": child_killed, "write": child_write, "hold": child_hold, "lanes": child_lanes}
    modes[sys.argv[1]](*sys.argv[2:])
