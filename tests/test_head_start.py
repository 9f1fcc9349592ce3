"""A run's lanes started while its program is captured (``loop.lanes.HeadStart``,
``tritune optimize -- COMMAND``): the lanes' workers import torch and Triton beside the program,
and the run takes them only where its own jail would be theirs (``jail.same_reach``)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tritune import config
from tritune.loop import LoopSettings
from tritune.loop.lanes import READY_MODULE, Device, HeadStart, LocalLane, close_lanes
from tritune.replay.warm import kernel_imports
from tritune.worker import jail
from tritune.worker.jail import Policy, same_reach

PROGRAMS = Path(__file__).resolve().parent / "programs"


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("head") / "capture"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(PROGRAMS),
                                                                                  os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tritune", "capture", "--out", str(out), "--", sys.executable,
                           str(PROGRAMS / "share_program.py")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def test_same_reach_is_what_the_workers_can_reach_not_how_the_folders_are_listed():
    a = Policy(read=("/opt/x",))
    assert same_reach(None, None) and not same_reach(None, a) and not same_reach(a, None)
    assert same_reach(a, Policy(read=("/opt/x/sub", "/opt/x")))  # a folder inside one it reads: no more
    assert not same_reach(a, Policy(read=("/opt/x", "/opt/y")))  # more
    assert not same_reach(Policy(read=("/opt/x", "/opt/y")), a)  # less
    assert not same_reach(a, Policy(read=("/opt/x/sub",)))  # a part of it
    assert not same_reach(Policy(read=("/opt/xy",)), Policy(read=("/opt/x",)))  # a name's prefix is no parent
    for other in (dataclasses.replace(a, read_write=("/tmp/w",)), dataclasses.replace(a, devices=("/dev/nvidia0",)),
                  dataclasses.replace(a, locks=("/tmp/l",)), dataclasses.replace(a, seccomp=False),
                  dataclasses.replace(a, landlock=False), dataclasses.replace(a, caps=False)):
        assert not same_reach(a, other) and not same_reach(other, a)


def test_head_lanes_are_handed_over_only_where_the_captures_own_jail_is_theirs(tmp_path, monkeypatch):
    """The jail is decided before the capture names its kernel files' folders: lanes whose
    workers would reach more, or less, than the run's own are closed, never handed over."""
    monkeypatch.setattr(LocalLane, "head_start", lambda self: None)  # made, not started
    early = Policy(read=(str(tmp_path),))
    late: dict = {}

    def for_workers(capture_dir, *, untrusted, unsafe_no_jail=False, program_dirs=None, **_):
        return early if program_dirs == () else late["policy"]  # before the capture: no program folder

    monkeypatch.setattr(jail, "for_workers", for_workers)
    capture = tmp_path / "capture"
    cases = [(Policy(read=(str(tmp_path), "/a/program/folder")), False),  # the capture asks for more
             (Policy(read=(str(capture),)), False),  # for less
             (dataclasses.replace(early, seccomp=False), False),
             (Policy(read=(str(tmp_path), str(capture))), True)]  # the same: inside what they read
    for policy, handed in cases:
        late["policy"] = policy
        head = HeadStart(capture, LoopSettings(jobs=1), [Device(0, None)])
        [lane] = head._lanes
        got = head.lanes(capture)
        try:
            assert (got == [lane]) is handed, policy
            assert lane.evaluator.worker._closed is not handed
        finally:
            close_lanes(got or [])
    late["policy"] = early
    head = HeadStart(capture, LoopSettings(jobs=1), [Device(0, None)])
    [lane] = head._lanes
    assert head.lanes(tmp_path / "another") is None and lane.evaluator.worker._closed  # another capture's run


def test_a_head_started_lane_runs_on_the_workers_it_started_before_the_capture(captured, tmp_path, monkeypatch):
    """The workers start with torch and Triton alone (no GPU brought up while the program runs);
    once the capture is there, the same processes import its libraries and bring the GPU up, and
    a worker started later has all of it from its start."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    capture = tmp_path / "capture"
    head = HeadStart(capture, LoopSettings(jobs=2), [Device(0, None)])
    [lane] = head._lanes
    try:
        concurrent.futures.wait(lane._heading)
        worker = lane.evaluator.worker
        pids = {w.pid for w in lane.evaluator.verifiers} | {worker.pid}
        assert None not in pids and READY_MODULE not in worker.preload and worker.warm == ()
        shutil.copytree(captured, capture, dirs_exist_ok=True)  # the program captured meanwhile
        warm = kernel_imports(capture)
        assert warm  # the kernel file's imports: torch, Triton, the program's module
        [got] = head.lanes(capture)
        assert got is lane and lane.start()["gpu"]
        for w in {id(w): w for w in [worker, *lane.evaluator.verifiers]}.values():
            done = w.call("worker_jobs:imported", [READY_MODULE, *warm])
            assert done.ok and done.value["pid"] in pids and all(done.value["modules"].values()), done
            assert READY_MODULE in w.preload and w.warm == warm
        worker.restart()
        fresh = worker.call("worker_jobs:imported", [READY_MODULE, *warm]).value
        assert fresh["pid"] not in pids and all(fresh["modules"].values())
    finally:
        head.close()
        close_lanes([lane])


def test_optimize_records_how_long_its_lanes_had_been_starting_and_the_switch_turns_it_off(captured, tmp_path):
    """``tritune optimize -- COMMAND``: ``fixed.head_s`` says how long before the run its lanes
    began to start; ``TRITUNE_HEAD_START=off`` starts them after the capture, as before."""
    found = {}
    for arm, value in (("on", None), ("off", "off")):
        env = {**os.environ, "TRITON_INTERPRET": "1", config.ENV_HEAD_START: value,
               "PYTHONPATH": os.pathsep.join([str(PROGRAMS), os.environ.get("PYTHONPATH", "")])}
        env = {k: v for k, v in env.items() if v is not None}
        out = tmp_path / arm
        done = subprocess.run([sys.executable, "-m", "tritune", "optimize", "--out", str(out), "--max-candidates",
                               "1", "--max-kernels", "1", "--no-report", "--", sys.executable,
                               str(PROGRAMS / "share_program.py")], env=env, capture_output=True, text=True,
                              timeout=600, cwd=PROGRAMS.parent.parent)
        assert done.returncode in (0, 1), done.stdout + done.stderr
        found[arm] = json.loads((out / "optimize.json").read_text())["fixed"]
    assert found["on"]["head_s"] > 0 and "head_s" not in found["off"]


def test_the_switch_reads_off_values():
    assert config.head_start({}) and config.head_start({config.ENV_HEAD_START: "1"})
    for off in ("off", "0", "no", "False"):
        assert not config.head_start({config.ENV_HEAD_START: off})
