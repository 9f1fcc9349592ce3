"""A worker's reply is read without running anything it names (``tritune.worker.replies``): the
parent unpickles what a worker that runs untrusted code wrote (finding F4 of issue 23)."""

from __future__ import annotations

import pickle
import time

import pytest

from tritune.model.failures import CRASH
from tritune.worker import Worker, replies
from tritune.worker.failures import Failure


@pytest.fixture(scope="module")
def worker():
    with Worker(timeout_s=30) as w:
        yield w


def test_a_reply_whose_pickle_calls_os_system_is_refused_and_nothing_runs(worker, tmp_path):
    evidence = tmp_path / "ran"
    first = worker.pid
    outcome = worker.call("worker_jobs:reply_that_runs_code", str(evidence))
    assert not outcome.ok and outcome.failure.kind == CRASH
    assert "posix.system" in outcome.failure.message and "bad reply" in outcome.failure.message
    time.sleep(0.2)
    assert not evidence.exists()
    again = worker.call("worker_jobs:echo", 1)  # a fresh child: the one that lied was killed
    assert again.ok and again.value["got"] == 1 and worker.pid != first


def test_a_failure_written_raw_on_the_pipe_with_a_reduction_is_refused(worker, tmp_path):
    evidence = tmp_path / "ran"
    outcome = worker.call("worker_jobs:failure_that_runs_code", str(evidence))
    assert not outcome.ok and outcome.failure.kind == CRASH and "bad reply" in outcome.failure.message
    time.sleep(0.2)
    assert not evidence.exists()


def test_a_reply_larger_than_the_bound_is_refused(worker, monkeypatch):
    monkeypatch.setattr(replies, "MAX_REPLY_BYTES", 4096)
    outcome = worker.call("worker_jobs:huge_reply", 10_000)
    assert not outcome.ok and outcome.failure.kind == CRASH and "larger than" in outcome.failure.message
    assert worker.call("worker_jobs:huge_reply", 100).value == b"x" * 100


def test_plain_values_and_failures_load():
    value = ({"a": [1, 2.5, None, True], "b": (b"x", bytearray(b"y"), {1}, frozenset({2}), 1j)}, "s")
    for protocol in range(3, pickle.HIGHEST_PROTOCOL + 1):  # what ForkingPickler writes
        assert replies.loads(pickle.dumps(value, protocol)) == value
    failure = Failure("error", "m", "d")
    assert replies.loads(pickle.dumps(("failed", failure, 0.5))) == ("failed", failure, 0.5)


@pytest.mark.parametrize("thing", [pickle.loads, Failure.from_json, type("X", (), {})])
def test_anything_else_a_pickle_names_is_refused(thing):
    data = pickle.dumps(thing) if not isinstance(thing, type) else b"c__main__\nX\n."
    with pytest.raises(replies.BadReply, match="may not hold"):
        replies.loads(data)


def test_a_malformed_failure_is_refused():
    bad = Failure.__new__(Failure)
    object.__setattr__(bad, "kind", "nonsense")
    object.__setattr__(bad, "message", "m")
    object.__setattr__(bad, "detail", "d")
    data = pickle.dumps(("failed", bad, 0.0))
    import multiprocessing

    a, b = multiprocessing.Pipe(duplex=False)
    b.send_bytes(data)
    with pytest.raises(replies.BadReply, match="malformed Failure"):
        replies.load(a, "ok", "failed", length=3)


def test_a_jobs_plain_values_of_other_classes_arrive_as_plain_values(worker):
    outcome = worker.call("worker_jobs:numpy_scalar")
    assert outcome.ok and outcome.value == 1.5 and type(outcome.value) is float
