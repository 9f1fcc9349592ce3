"""A run's lanes started while its program is captured (``loop.lanes.HeadStart``,
``tritune optimize -- COMMAND``): the lanes' workers import torch and Triton beside the program,
and the run takes them only where its own jail would be theirs (``jail.same_reach``)."""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from tritune import config
from tritune.capture import recorder
from tritune.capture.recorder import PARTS
from tritune.capture.spec import file_hash, read_launches, write_launches
from tritune.loop import lanes
from tritune.loop.evaluate import PRELOAD
from tritune.loop.lanes import FIRST_VERIFIERS, HASH_MODULE, READY_MODULE, Device, HeadStart, LocalLane, close_lanes
from tritune.model.settings import LoopSettings
from tritune.replay.warm import kernel_imports
from tritune.worker import jail
from tritune.worker.jail import Policy, same_reach

PROGRAMS = Path(__file__).resolve().parents[1] / "programs"


@pytest.fixture(scope="module")
def captured(share_captured) -> Path:
    return share_captured


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


def test_same_reach_resolves_links(tmp_path):
    (tmp_path / "real").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "real")
    assert same_reach(Policy(read=(str(tmp_path / "link"),)), Policy(read=(str(tmp_path / "real"),)))
    assert not same_reach(Policy(read=(str(tmp_path / "link" / ".." / "other"),)), Policy(read=(str(tmp_path / "real"),)))


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
    said = []
    monkeypatch.setattr(jail, "say", said.append)
    for policy, handed in cases:
        late["policy"] = policy
        head = HeadStart(capture, LoopSettings(jobs=1), [Device(0, None)])
        [lane] = head._lanes
        got = head.lanes(capture)
        try:
            assert (got == [lane]) is handed, policy
            assert lane.evaluator.worker._closed is not handed
            assert bool(said) is not handed and (handed or "not used" in said.pop())
        finally:
            close_lanes(got or [])
    late["policy"] = early
    head = HeadStart(capture, LoopSettings(jobs=1), [Device(0, None)])
    [lane] = head._lanes
    assert head.lanes(tmp_path / "another") is None and lane.evaluator.worker._closed  # another capture's run


def test_a_head_started_lane_runs_on_the_workers_it_started_before_the_capture(captured, tmp_path, monkeypatch):
    """The workers start with torch and Triton alone (no GPU brought up while the program runs);
    once the capture is there, the same processes import its libraries and bring the GPU up, and
    a worker started later (a verify worker past the first ones, a restart) has all of it from
    its start."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    capture = tmp_path / "capture"
    head = HeadStart(capture, LoopSettings(jobs=FIRST_VERIFIERS + 1), [Device(0, None)])
    [lane] = head._lanes
    try:
        concurrent.futures.wait(lane._heading)
        worker = lane.evaluator.worker
        started = [worker, *lane.evaluator.verifiers[:FIRST_VERIFIERS]]
        late = lane.evaluator.verifiers[FIRST_VERIFIERS]
        pids = {w.pid for w in started}
        assert None not in pids and late.pid is None
        assert worker.preload == (HASH_MODULE, *PRELOAD) and worker.warm == ()
        assert not worker.call("worker_jobs:imported", [READY_MODULE]).value["modules"][READY_MODULE]
        shutil.copytree(captured, capture, dirs_exist_ok=True)  # the program captured meanwhile
        warm = kernel_imports(capture)
        assert warm  # the kernel file's imports: torch, Triton, the program's module
        [got] = head.lanes(capture)
        assert got is lane and lane.start().gpu
        for w in [*started, late]:
            done = w.call("worker_jobs:imported", [READY_MODULE, *warm])
            assert done.ok and all(done.value["modules"].values()), done
            assert (done.value["pid"] in pids) is (w is not late)
            assert w.preload == (HASH_MODULE, *PRELOAD, READY_MODULE) and w.warm == warm
        worker.restart()
        fresh = worker.call("worker_jobs:imported", [READY_MODULE, *warm]).value
        assert fresh["pid"] not in pids and all(fresh["modules"].values())
    finally:
        head.close()
        close_lanes([lane])


def test_the_workers_import_the_kernel_files_libraries_while_the_program_still_runs(captured, tmp_path, monkeypatch):
    """A launch a capture's process recorded (its part file) is enough: its kernel file's imports
    reach the head-started workers before the capture ends."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(lanes, "WATCH_S", 0.2)
    capture = tmp_path / "capture"
    head = HeadStart(capture, LoopSettings(jobs=1), [Device(0, None)])
    [lane] = head._lanes
    try:
        spec = read_launches(captured)[0]
        source = "import colorsys\n" + (captured / spec.source).read_text()
        (capture / "sources").mkdir(parents=True)
        (capture / "sources" / "planted.py").write_text(source)
        planted = dataclasses.replace(spec, source="sources/planted.py", file_hash=file_hash(source.encode()))
        (capture / PARTS).mkdir()
        part = capture / PARTS / "1234-a.jsonl"
        part.write_text(json.dumps({"spec": planted.to_json()}) + "\n" + '{"spec": {"kern')  # a torn last line
        worker = lane.evaluator.worker
        deadline = time.monotonic() + 60
        while not worker.call("worker_jobs:imported", ["colorsys"]).value["modules"]["colorsys"]:
            assert time.monotonic() < deadline, "the recorded launch's imports never reached the worker"
            time.sleep(0.2)
        assert "colorsys" in worker.warm
    finally:
        head.close()
        close_lanes([lane])


def test_a_capture_under_way_is_read_as_it_grows_and_with_care(captured, tmp_path, monkeypatch):
    """``Recorded``: the part files the program's processes write are read a whole line at a
    time, each byte once; lines that are no launch record, links, FIFOs and what exceeds the limit
    are left alone, and nothing raises."""
    spec = read_launches(captured)[0]
    parts = tmp_path / PARTS
    parts.mkdir()
    line = json.dumps({"spec": spec.to_json()})
    other = json.dumps({"spec": {**spec.to_json(), "source": "sources/other.py"}})
    (parts / "1-a.jsonl").write_text(line + "\n" + '{"spec": {"source": "sources/torn')  # a torn last line
    (parts / "2-b.jsonl").write_text("not json\n5\nnull\n{\"spec\": 5}\n[1]\n" + json.dumps({"counts": {"x": 1}})
                                     + "\n")
    (parts / "3-c.jsonl").write_bytes(b"\xff\xfe\n")
    (parts / "4-link.jsonl").symlink_to(tmp_path / "elsewhere.jsonl")
    (tmp_path / "elsewhere.jsonl").write_text(other + "\n")
    os.mkfifo(parts / "5-fifo.jsonl")
    recording = recorder.Recorded(tmp_path)
    assert recording.look() and list(recording.sources) == [spec.source]
    assert not recording.look()  # nothing new
    with (parts / "1-a.jsonl").open("a") as f:
        f.write('.py"}}\n' + other + "\n")  # the torn line finished, one more
    assert recording.look() and list(recording.sources) == [spec.source, "sources/torn.py", "sources/other.py"]
    monkeypatch.setattr(recorder, "MAX_PART_BYTES", len(line) // 2)
    small = recorder.Recorded(tmp_path)
    assert not small.look() and not small.sources  # a line longer than the limit: nothing read
    assert not recorder.Recorded(tmp_path / "none").look()


def test_program_folders_leave_out_only_the_files_inductor_wrote(captured, tmp_path):
    """Inductor's generated kernel files (``c<hash>.py``) import nothing beside them; a program's
    own kernel that Inductor's heuristics launch may, and keeps its folder in the jail."""
    spec = read_launches(captured)[0]
    generated, mine, plain = tmp_path / "inductor" / "ab", tmp_path / "mine", tmp_path / "plain"
    for folder in (generated, mine, plain):
        folder.mkdir(parents=True)
    specs = [dataclasses.replace(spec, kind="inductor", grid=[1, 1, 1], source_file=str(generated / ("c" + "a1" * 26 + ".py"))),
             dataclasses.replace(spec, kind="inductor", grid=[2, 1, 1], source_file=str(mine / "kernels.py")),
             dataclasses.replace(spec, grid=[3, 1, 1], source_file=str(plain / "k.py"))]
    write_launches(tmp_path, specs)
    assert jail.program_folders(tmp_path) == sorted([str(mine), str(plain)])


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


def test_a_head_lanes_jail_reads_the_bytecode_folder_from_its_start(tmp_path, monkeypatch):
    """Its workers start before the capture has filled the folder, and cannot be granted it once
    they run: a head lane's jail reads it from the start (not yet in use), a lane made after the
    capture only where it is usable."""
    from tritune.worker import bytecode

    capture, folder = tmp_path / "capture", tmp_path / "bytecode"
    capture.mkdir()
    folder.mkdir()
    monkeypatch.setattr(bytecode, "prefix", lambda environ=None: folder)
    policy = jail.policy(capture)
    made = {head: LocalLane(None, capture, jail=policy, head=head) for head in (True, False)}
    try:
        reads = {head: lane.evaluator.worker.jail.read for head, lane in made.items()}
        assert os.path.realpath(folder) in reads[True] and os.path.realpath(folder) not in reads[False]
        assert all(config.ENV_PYCACHE_PREFIX not in lane.evaluator.worker.env for lane in made.values())
    finally:
        close_lanes(list(made.values()))


def test_the_final_settings_come_after_every_warm_up(tmp_path, monkeypatch):
    """``_finish_head`` ends the warm-ups first: one queued behind a running import must not put a
    part of the capture's libraries back over the whole."""
    capture = tmp_path / "capture"
    capture.mkdir()
    lane = LocalLane(None, capture, jobs=2, head=True)  # made, not started
    calls: list = []
    guard = {id(w): threading.Lock() for w in lane.evaluator.workers}

    def extend(worker, **settings):
        with guard[id(worker)]:  # a worker's calls one at a time, as its lock makes them
            calls.append((id(worker), settings))
            if "preload" not in settings:
                time.sleep(0.2)

    for worker in lane.evaluator.workers:
        monkeypatch.setattr(worker, "extend", functools.partial(extend, worker))
    try:
        for modules in (("a",), ("a", "b"), ("a", "b", "c")):
            lane.warm_up(modules)
        lane._finish_head()
        for worker in lane.evaluator.workers:
            mine = [settings for wid, settings in calls if wid == id(worker)]
            assert "preload" in mine[-1] and all("preload" not in c for c in mine[:-1]), mine
        assert not lane._head
        lane.warm_up(("late",))  # after the start: nothing
        assert not any(settings.get("warm") == ("late",) for _, settings in calls)
    finally:
        close_lanes([lane])


def test_a_head_start_that_cannot_begin_is_one_line_and_the_run_goes_on(tmp_path, capsys):
    from tritune.commands.optimize import _HeadStart

    blocked = tmp_path / "capture"
    blocked.write_text("a file where the capture's folder would be")
    head = _HeadStart(LoopSettings(jobs=1), [Device(0, None)])
    head.begin(blocked)
    assert head.lanes(blocked) is None
    head.close()
    err = capsys.readouterr().err
    assert "the workers start after the capture" in err and "Traceback" not in err


def test_the_scripts_folder_is_in_the_head_lanes_jail_from_their_start(tmp_path, monkeypatch):
    """``optimize -- python3 DIR/script.py``: its workers may read DIR from their start, so a
    program whose kernels lie beside its script gets the head-started lanes (the main job's
    ``examples/user_program.py`` restarted them before, and said so)."""
    from tritune.commands.optimize import _HeadStart

    monkeypatch.setattr(LocalLane, "head_start", lambda self: None)  # made, not started
    asked = []
    monkeypatch.setattr(jail, "for_workers", lambda capture_dir, *, program_dirs=None, **_: asked.append(program_dirs))
    script = tmp_path / "progs" / "x.py"
    script.parent.mkdir()
    script.write_text("")
    head = _HeadStart(LoopSettings(jobs=1), [Device(0, None)], ["python3", str(script), "--small"])
    head.begin(tmp_path / "capture")
    try:
        assert asked == [(str(script.parent),)]
    finally:
        head.close()
    asked.clear()
    bare = _HeadStart(LoopSettings(jobs=1), [Device(0, None)], ["python3", "-m", "progs.x"])
    bare.begin(tmp_path / "capture2")
    bare.close()
    assert asked == [()]
