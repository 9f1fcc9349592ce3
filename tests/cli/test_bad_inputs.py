"""Every bad input a new user can give: one line naming the problem, exit status 2, no traceback,
nothing written. Each case runs the real command in process (click's CliRunner) and stops before
any worker starts, so the file stays fast. docs/troubleshooting.md's table lists the same cases."""

from __future__ import annotations

import contextlib
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritune.capture.spec import write_launches
from tritune.cli import main
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.store import SCHEMA_VERSION, DecisionStore

AS_ROOT = hasattr(os, "geteuid") and os.geteuid() == 0


def invoke(*args) -> str:
    """The one line the command printed; asserts exit 2, no traceback and nothing else."""
    result = CliRunner().invoke(main, [str(a) for a in args])
    return _one_line(result.exit_code, isinstance(result.exception, SystemExit), repr(result.exception),
                     result.output)


def _one_line(exit_code: int, system_exit: bool, exception: str, output: str) -> str:
    assert exit_code == 2, output
    assert system_exit, exception  # not an uncaught error
    lines = output.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in output, output
    return lines[0]


# Root reads and writes whatever the mode bits say, through CAP_DAC_OVERRIDE and
# CAP_DAC_READ_SEARCH; without its capabilities it is held by the owner's bits like any user (every
# file here is root's own). CI runs as root: the worker jail's drop, in a process of its own.
BOUND_BY_MODES = """
import json, sys
from tritune.worker.jail import drop_capabilities
drop_capabilities()  # raises (JailError) unless every capability is gone
from click.testing import CliRunner
from tritune.cli import main
result = CliRunner().invoke(main, sys.argv[1:])
print(json.dumps([result.exit_code, isinstance(result.exception, SystemExit), repr(result.exception),
                  result.output]))
"""


def invoke_bound_by_modes(*args) -> str:
    """``invoke`` where the permission bits bind: as root, in a process without capabilities."""
    if not AS_ROOT:
        return invoke(*args)
    done = subprocess.run([sys.executable, "-c", BOUND_BY_MODES, *[str(a) for a in args]], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return _one_line(*json.loads(done.stdout.strip().splitlines()[-1]))


def listing(folder: Path) -> dict[str, bytes | None]:
    """Every path under ``folder`` with its bytes (None for a directory): 'nothing written'."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


@pytest.fixture
def capture(tmp_path) -> Path:
    spec = LaunchSpec(kernel="add_kernel", kind="jit", module="prog", source_file="prog.py",
                      source="sources/prog.py", source_hash="ab" * 32,
                      args=[ArgSpec("x_ptr", "tensor", shape=[8], stride=[1], dtype="float32", device="cpu"),
                            ArgSpec("BLOCK", "constexpr")],
                      constexprs={"BLOCK": 8}, options={"num_warps": 1}, grid=[1])
    write_launches(tmp_path / "cap", [spec])
    return tmp_path / "cap"


@pytest.fixture
def a_file(tmp_path) -> Path:
    path = tmp_path / "notes.txt"
    path.write_text("a regular file\n")
    return path


# ------------------------------------------------------------------------------- the store

def _not_sqlite(path: Path) -> None:
    path.write_text("name,time\nsoftmax,1.0\n")


def _truncated(path: Path) -> None:
    with DecisionStore(path) as store:
        store.start_run({"x": 1})
    path.write_bytes(path.read_bytes()[:8192])  # the tables' pages are gone


def _newer(path: Path) -> None:
    DecisionStore(path).close()
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:  # closed: no -wal/-shm left
        conn.execute("UPDATE schema_version SET version = 99")


def _foreign(path: Path) -> None:
    with contextlib.closing(sqlite3.connect(path)) as conn, conn:
        conn.execute("CREATE TABLE users (name TEXT)")


@pytest.mark.parametrize("make, message", [
    (_not_sqlite, "store.db: not an SQLite file, so not a tritune decision store"),
    (_truncated, "store.db: a damaged or truncated SQLite file"),
    (_newer, f"store.db: written by store schema version 99, this tritune reads up to {SCHEMA_VERSION}: upgrade tritune"),
    (_foreign, "store.db: an SQLite file without tritune's tables (it has users)"),
], ids=["not-sqlite", "truncated", "newer-schema", "foreign-sqlite"])
def test_optimize_refuses_a_bad_store_before_any_work(tmp_path, capture, make, message):
    store = tmp_path / "stores" / "store.db"
    store.parent.mkdir()
    make(store)
    before = listing(store.parent)
    line = invoke("optimize", "--out", tmp_path / "out", "--launches", capture, "--store", store)
    assert line.startswith("tritune optimize: ") and message in line
    assert listing(store.parent) == before  # not switched to WAL, no -wal/-shm left
    assert not (tmp_path / "out").exists()


def test_a_store_under_a_regular_file(tmp_path, capture, a_file):
    line = invoke("optimize", "--out", tmp_path / "out", "--launches", capture, "--store", a_file / "d.db")
    assert f"no store can be made at {a_file / 'd.db'}" in line and "exists and is not a directory" in line
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("store_mode, folder_mode, message", [
    (0o444, 0o755, "store.db: read-only or unreadable: tritune writes its decisions there"),
    (0o644, 0o555, "store.db: read-only folder: SQLite writes store.db-wal and -shm beside the store"),
    (0o444, 0o555, "store.db: read-only or unreadable: tritune writes its decisions there"),
], ids=["store", "folder", "both"])
def test_a_read_only_store(tmp_path, capture, store_mode, folder_mode, message):
    folder = tmp_path / "shared"
    folder.mkdir()
    DecisionStore(folder / "store.db").close()
    before = listing(folder)
    os.chmod(folder / "store.db", store_mode)
    os.chmod(folder, folder_mode)
    try:
        line = invoke_bound_by_modes("optimize", "--out", tmp_path / "out", "--launches", capture,
                                     "--store", folder / "store.db")
    finally:
        os.chmod(folder, 0o755)
    assert line.startswith("tritune optimize: ") and message in line
    assert listing(folder) == before  # no -wal/-shm beside it
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------- launches.jsonl

def _cut(capture: Path) -> None:
    path = capture / "launches.jsonl"
    path.write_bytes(path.read_bytes()[:-20])


def _binary(capture: Path) -> None:
    (capture / "launches.jsonl").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR\xff\xfe")


def _other_version(capture: Path) -> None:
    path = capture / "launches.jsonl"
    lines = path.read_text().splitlines(keepends=True)
    path.write_text('{"tritune_launches": 99}\n' + "".join(lines[1:]))


def _directory_in_place(capture: Path) -> None:
    (capture / "launches.jsonl").unlink()
    (capture / "launches.jsonl").mkdir()


def _empty_directory(capture: Path) -> None:
    (capture / "launches.jsonl").unlink()
    for path in sorted(capture.rglob("*"), reverse=True):
        path.rmdir() if path.is_dir() else path.unlink()


LAUNCH_CASES = [
    (_cut, "launches.jsonl:2: last line does not end in a newline: the file is truncated"),
    (_binary, "launches.jsonl:1: not UTF-8 text (byte 0)"),
    (_other_version, "launches.jsonl:1: written by spec version 99, this tritune reads version 1: upgrade tritune"),
    (_directory_in_place, "launches.jsonl: cannot read it: Is a directory"),
    (_empty_directory, "cap: an empty directory, not a `tritune capture` directory"),
]
LAUNCH_IDS = ["truncated", "binary", "other-version", "unreadable", "empty-directory"]


@pytest.mark.parametrize("command", ["optimize", "bench"])
@pytest.mark.parametrize("make, message", LAUNCH_CASES, ids=LAUNCH_IDS)
def test_a_bad_capture_is_one_line(tmp_path, capture, command, make, message):
    make(capture)
    if command == "optimize":
        line = invoke("optimize", "--out", tmp_path / "out", "--launches", capture)
    else:
        line = invoke("bench", capture)
    assert line.startswith(f"tritune {command}: ") and message in line
    assert not (tmp_path / "out").exists()


def test_an_unreadable_launches_file(tmp_path, capture):
    os.chmod(capture / "launches.jsonl", 0)
    try:
        line = invoke_bound_by_modes("bench", capture)
    finally:
        os.chmod(capture / "launches.jsonl", 0o644)
    assert "launches.jsonl: cannot read it: Permission denied" in line


# ------------------------------------------------------------------ options and the command

@pytest.mark.parametrize("args", [
    ["optimize", "--out", "{tmp}/out", "--launches", "{cap}", "--job", "2"],
    ["optimize", "--out", "{tmp}/out", "--job", "2", "--", sys.executable, "-c", "pass"],
    ["capture", "--out", "{tmp}/out", "--job", "2", "--", sys.executable, "-c", "pass"],
    ["run", "--store", "{tmp}/out/decisions.db", "--job", "2", "--", sys.executable, "-c", "pass"],
], ids=["optimize-launches", "optimize-command", "capture", "run"])
def test_an_unknown_option_before_the_command_is_named(tmp_path, capture, args):
    line = invoke(*[a.format(tmp=tmp_path, cap=capture) for a in args])
    assert line.startswith(f"tritune {args[0]}: no such option: --job")
    assert not (tmp_path / "out").exists()


def test_options_after_the_command_are_the_command_s(tmp_path):
    from tritune.commands.capture import capture

    for args in (["--", "python", "-u", "x.py", "--job", "2"], ["python", "-u", "x.py", "--job", "2"]):
        context = capture.make_context("capture", ["--out", str(tmp_path / "c"), *args])
        assert context.params["command"] == ("python", "-u", "x.py", "--job", "2")


# ---------------------------------------------------------------------------- --out

@pytest.mark.parametrize("command", [
    ["optimize", "--launches", "{cap}"],
    ["capture", "--", sys.executable, "-c", "pass"],
    ["harvest", "--model", "bert"],
])
def test_an_out_directory_that_cannot_be_made(tmp_path, capture, a_file, command):
    args = [a.format(cap=capture) for a in command]
    line = invoke(args[0], "--out", a_file / "out", *args[1:])
    assert f"{a_file / 'out'}: cannot be created, {a_file} is a file" in line
    assert line.startswith(f"tritune {args[0]}: Invalid value for '--out'")
    assert a_file.read_text() == "a regular file\n"


def test_a_read_only_out_directory(tmp_path, capture):
    (tmp_path / "ro").mkdir(mode=0o555)
    try:
        line = invoke_bound_by_modes("optimize", "--out", tmp_path / "ro" / "out", "--launches", capture)
    finally:
        os.chmod(tmp_path / "ro", 0o755)
    assert "cannot write into" in line and "Permission denied" in line
    assert list((tmp_path / "ro").iterdir()) == []


# ----------------------------------------------------------------------- other inputs

@pytest.mark.parametrize("args, message", [
    (["optimize", "--out", "{tmp}/out", "--launches", "{tmp}/nope"], "Directory '{tmp}/nope' does not exist"),
    (["optimize", "--out", "{tmp}/out", "--inductor-dir", "{tmp}/nope"], "Directory '{tmp}/nope' does not exist"),
    (["optimize", "--out", "{tmp}/out", "--launches", "{cap}", "--kernel", "nothing"],
     "cap: no launch of kernel nothing"),
    (["optimize", "--out", "{tmp}/out"], "give exactly one of -- COMMAND, --launches DIR, --inductor-dir DIR"),
    (["bench", "{tmp}/nope"], "{tmp}/nope: no such file"),
    (["report", "{tmp}/nope"], "no such file: {tmp}/nope"),
], ids=["launches-missing", "inductor-dir-missing", "no-such-kernel", "no-input", "bench-missing", "report-missing"])
def test_missing_paths_and_names(tmp_path, capture, args, message):
    line = invoke(*[a.format(tmp=tmp_path, cap=capture) for a in args])
    assert message.format(tmp=tmp_path) in line and line.startswith(f"tritune {args[0]}: ")
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------ --workers, --devices

def two_gpus() -> list[dict]:
    return [{"name": "NVIDIA H100 80GB HBM3", "capability": 90}] * 2


@pytest.mark.parametrize("interpreter, args, line", [
    (True, ["--workers", "0"], "tritune optimize: Invalid value for '--workers': 0 is not in the range x>=1 "
                               "(try 'tritune optimize --help')"),
    (True, ["--devices", "0"], "tritune optimize: --devices picks GPUs, and under TRITON_INTERPRET=1 there are "
                               "none: --workers N runs N interpreter lanes"),
    (True, ["--devices", "a,b"], "tritune optimize: Invalid value for '--devices': 'a,b' is not GPU indices "
                                 "separated by commas (e.g. 0,2,3) (try 'tritune optimize --help')"),
    (False, ["--devices", "0,5"], "tritune optimize: --devices 5: no such GPU; this host shows 2 GPU(s) (0, 1)"),
    (False, ["--workers", "4"], "tritune optimize: --workers 4: this host shows 2 GPU(s) (0, 1), and a lane is one "
                                "GPU (TRITON_INTERPRET=1 runs interpreter lanes)"),
    (False, ["--workers", "2", "--devices", "1"], "tritune optimize: --workers 2 is more than the 1 GPU(s) "
                                                  "--devices names"),
], ids=["workers-0", "devices-interpreted", "devices-not-numbers", "device-missing", "workers-past-gpus",
        "workers-past-devices"])
def test_bad_workers_and_devices(monkeypatch, tmp_path, capture, interpreter, args, line):
    """On a host planted with two GPUs (the count a worker reports), or under the interpreter."""
    from tritune.loop import lanes

    if interpreter:
        monkeypatch.setenv("TRITON_INTERPRET", "1")
    else:
        monkeypatch.delenv("TRITON_INTERPRET", raising=False)
        monkeypatch.setattr(lanes, "visible_gpus", two_gpus)
    assert invoke("optimize", "--out", tmp_path / "out", "--launches", capture, *args) == line
    assert not (tmp_path / "out").exists()


# ------------------------------------------------------------------------------- --ray

@pytest.mark.parametrize("args, line", [
    (["--ray", "auto"], "tritune optimize: --ray needs Ray, which is not installed here: pip install 'tritune[ray]'"),
    (["--ray", "local", "--devices", "0"], "tritune optimize: --ray takes the cluster's GPUs, and --devices picks "
                                           "GPUs of this host: give --workers N for N of the cluster's"),
    (["--ray", "local", "--llm", "http://127.0.0.1:9/v1", "--llm-model", "m"],
     "tritune optimize: --ray cannot run --llm: the model's session and its key stay on this host "
     "(run --llm without --ray)"),
], ids=["no-ray", "devices", "llm"])
def test_bad_ray(monkeypatch, tmp_path, capture, args, line):
    """As if Ray were not installed (``import ray`` fails), whether or not it is: no cluster is
    reached, nothing is written."""
    monkeypatch.setitem(sys.modules, "ray", None)
    assert invoke("optimize", "--out", tmp_path / "out", "--launches", capture, *args) == line
    assert not (tmp_path / "out").exists()


# ---------------------------------------------------------------------------- harvest

def _cuda() -> bool:
    import torch

    return torch.cuda.is_available()


@pytest.mark.skipif(_cuda(), reason="checks the refusal on a CPU-only machine")
def test_harvest_force_on_a_cpu_keeps_the_capture(tmp_path, capture):
    (capture / "modules").mkdir()
    (capture / "modules" / "k.py").write_text("# a kernel module\n")
    before = listing(tmp_path)
    line = invoke("harvest", "--model", "bert", "--out", capture, "--force")
    assert line.startswith("tritune harvest: no CUDA GPU here")
    assert listing(tmp_path) == before  # the capture as it was, no temporary directory beside it
    assert json.loads((capture / "launches.jsonl").read_text().splitlines()[0])["tritune_launches"] == 1


def _options(command, path=()):
    """``(command path, option)`` for every option of ``command`` and its subcommands."""
    import click

    for param in command.params:
        yield path, param
    if isinstance(command, click.Group):
        for name, sub in command.commands.items():
            yield from _options(sub, (*path, name))


def test_every_float_option_takes_finite_numbers_only():
    """One type for every float option (``commands.checks.Finite``): a new option that takes
    ``click.FloatRange`` or ``float`` would take ``nan`` and ``1e309`` again."""
    import click

    from tritune.commands.checks import Finite

    floats = [(" ".join(path), p.name, p.type) for path, p in _options(main)
              if isinstance(p.type, click.types.FloatParamType)]
    assert len(floats) >= 10  # analyze, bench, generate, optimize, rewrites, store import
    assert [(command, name) for command, name, kind in floats if not isinstance(kind, Finite)] == []


@pytest.mark.parametrize("args, option", [
    (["optimize", "--out", "{tmp}/out", "--launches", "{tmp}", "--budget-s", "nan"], "--budget-s"),
    (["optimize", "--out", "{tmp}/out", "--launches", "{tmp}", "--budget-s", "1e309"], "--budget-s"),
    (["optimize", "--out", "{tmp}/out", "--launches", "{tmp}", "--deadline-s", "inf"], "--deadline-s"),
    (["optimize", "--out", "{tmp}/out", "--launches", "{tmp}", "--cover", "nan"], "--cover"),
    (["optimize", "--out", "{tmp}/out", "--launches", "{tmp}", "--threshold", "nan"], "--threshold"),
    (["generate", "{tmp}/spec.py", "--out", "{tmp}/out", "--budget-s", "nan"], "--budget-s"),
    (["analyze", "{tmp}", "--timeout", "inf"], "--timeout"),
    (["bench", "{tmp}", "--timeout", "nan"], "--timeout"),
])
def test_a_number_that_is_not_finite_is_refused(tmp_path, args, option):
    (tmp_path / "spec.py").write_text("")
    value = args[-1]
    line = invoke(*(a.format(tmp=tmp_path) for a in args))
    assert f"Invalid value for '{option}'" in line and f"{value!r} is not a finite number" in line
    assert not (tmp_path / "out").exists()


def test_a_price_that_is_not_finite_is_refused(tmp_path):
    line = invoke("optimize", "--out", tmp_path / "out", "--launches", tmp_path, "--llm", "http://127.0.0.1:9/v1",
                  "--llm-model", "m", "--llm-price", "nan,1")
    assert "is not IN,OUT" in line


def test_generate_says_a_spec_is_missing_at_once_and_makes_nothing(tmp_path):
    """Checked as the arguments are read, before torch is imported (it took 10-12 s), and before
    --out is made (it was left empty)."""
    line = invoke("generate", tmp_path / "nope.py", "--out", tmp_path / "out")
    assert line == (f"tritune generate: Invalid value for 'SPEC': File '{tmp_path / 'nope.py'}' does not exist "
                    "(try 'tritune generate --help')")
    assert sorted(tmp_path.iterdir()) == []


def test_generate_leaves_no_folder_for_a_spec_it_refuses(tmp_path):
    (tmp_path / "spec.py").write_text("name = 'empty'\n")
    line = invoke("generate", tmp_path / "spec.py", "--out", tmp_path / "out")
    assert line == f"tritune generate: {tmp_path / 'spec.py'}: defines no reference(*tensors) function"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["spec.py"]
