"""A lane worker's Triton self-hash, taken in a thread while torch imports (``worker.triton_hash``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from tritune.loop.evaluate import PRELOAD
from tritune.loop.lanes import HASH_MODULE, READY_MODULE

PROBE = """
import json, sys, threading
import tritune.worker.triton_hash as h
started = [t.name for t in threading.enumerate()]
import torch  # the main thread's import, beside the hash
h.wait()
from triton.runtime.cache import triton_key
print(json.dumps({"thread": "tritune-triton-hash" in started, "cached": triton_key.cache_info().currsize}))
"""


def _probe(interpret: bool) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    if interpret:
        env["TRITON_INTERPRET"] = "1"
    done = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_the_hash_is_taken_in_a_thread_before_the_worker_is_ready():
    # after wait(), Triton's cached key is there: the worker's first compile does not hash
    assert _probe(interpret=False) == {"thread": True, "cached": 1}


def test_under_the_interpreter_nothing_is_hashed():
    assert _probe(interpret=True) == {"thread": False, "cached": 0}


def test_a_lane_worker_preloads_it_first_and_waits_for_it_last(tmp_path):
    from tritune.loop.lanes import LocalLane

    lane = LocalLane(None, tmp_path)  # its workers are made, not started
    try:
        preload = lane.evaluator.worker.preload
    finally:
        lane.close()
    assert preload[0] == HASH_MODULE and preload[-1] == READY_MODULE and set(PRELOAD) <= set(preload)
