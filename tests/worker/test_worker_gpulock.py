"""The GPU lock of ``tritune optimize --jobs``: readers share, a writer is alone, a waiting writer
goes first, and a holder that dies frees it. ``flock`` conflicts between open files, so separate
``GpuLock`` objects in this process stand for separate processes; one test uses a real one."""

from __future__ import annotations

import subprocess
import sys
import threading
import time

import pytest

from tritune.worker.gpulock import GpuLock

HOLDER = """
import sys
from tritune.worker.gpulock import GpuLock
lock = GpuLock(sys.argv[1])
lock.acquire(sys.argv[2] == "exclusive")
print("held", flush=True)
sys.stdin.read()
"""


def locks(tmp_path, n):
    return [GpuLock(tmp_path / "gpu-test.lock") for _ in range(n)]


def test_readers_share_and_a_writer_is_alone(tmp_path):
    first, second, writer = locks(tmp_path, 3)
    assert first.acquire(False, blocking=False) and second.acquire(False, blocking=False)
    assert not writer.acquire(True, blocking=False)
    first.release()
    assert not writer.acquire(True, blocking=False)  # one reader is enough to keep it out
    second.release()
    assert writer.acquire(True, blocking=False) and writer.mode == "exclusive"
    assert not first.acquire(False, blocking=False) and not second.acquire(True, blocking=False)
    writer.release()
    assert first.acquire(False, blocking=False) and first.mode == "shared"
    with pytest.raises(RuntimeError, match="re-entrant"):
        first.acquire(False)


def test_a_writer_refused_leaves_the_gate_open(tmp_path):
    reader, writer, late = locks(tmp_path, 3)
    reader.acquire(False)
    assert not writer.acquire(True, blocking=False) and writer.mode is None
    assert late.acquire(False, blocking=False)  # not kept out by the writer that gave up
    reader.release()
    late.release()
    assert writer.acquire(True, blocking=False)


def test_a_waiting_writer_stops_new_readers_then_runs(tmp_path):
    reader, writer, late = locks(tmp_path, 3)
    reader.acquire(False)
    waiting = threading.Thread(target=writer.acquire, args=(True,), daemon=True)  # a failure must not hang pytest
    waiting.start()
    deadline = time.monotonic() + 10
    while late.acquire(False, blocking=False):  # until the writer holds the gate
        late.release()
        assert time.monotonic() < deadline, "the writer never reached the gate"
        time.sleep(0.01)
    assert writer.mode is None  # still waiting for the reader inside
    reader.release()
    waiting.join(10)
    assert writer.mode == "exclusive"
    writer.release()
    assert late.acquire(False, blocking=False)


@pytest.mark.parametrize("mode", ["shared", "exclusive"])
def test_another_process_holds_it_until_it_dies(tmp_path, mode):
    path = tmp_path / "gpu-test.lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(path), mode], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        probe = GpuLock(path)
        assert probe.acquire(False, blocking=False) is (mode == "shared")
        probe.release()
        assert not probe.acquire(True, blocking=False)
        holder.kill()  # a crashed or killed holder: the kernel drops its lock with its files
        holder.wait(10)
        assert probe.acquire(True, blocking=False)
        probe.close()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
