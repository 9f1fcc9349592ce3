"""``tritune capture``: a real program under the interpreter, end to end, and every bad input."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import tritune
from tritune import boot, config
from tritune.capture.spec import VERSION, read_launches
from tritune.commands.capture import capture

SCRIPT = Path(__file__).parents[1] / "programs" / "capture_script.py"
SRC = str(Path(tritune.__file__).resolve().parents[1])  # the tritune under test, for the children


def invoke(*args: str):
    return CliRunner().invoke(capture, list(args), catch_exceptions=False)


@pytest.fixture
def interpret(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_end_to_end_with_a_forked_child(tmp_path, interpret):
    out = tmp_path / "cap"
    result = invoke("--out", str(out), "--", sys.executable, str(SCRIPT), "0", "fork")
    assert result.exit_code == 0, result.output
    assert "3 distinct launches (6 launches) of 3 kernels" in result.output
    specs = {s.kernel: s for s in read_launches(out)}
    assert specs["add_kernel"].count == 4 and specs["inplace_kernel"].count == 1  # from the child
    assert specs["gather_kernel"].arg("idx_ptr").values == "saved"
    assert (out / specs["add_kernel"].source).exists()
    assert not (out / "parts").exists()


def test_failing_command_still_merges_and_passes_its_status_on(tmp_path, interpret):
    out = tmp_path / "cap"
    result = invoke("--out", str(out), "--", sys.executable, str(SCRIPT), "3")
    assert result.exit_code == 3
    assert "the command exited with status 3" in result.output
    assert sum(s.count for s in read_launches(out)) == 5
    # an existing capture is refused, replaced with --force, added to with --append
    refused = invoke("--out", str(out), "--", sys.executable, "-c", "pass")
    assert refused.exit_code == 2 and "already holds a capture" in refused.output
    assert invoke("--out", str(out), "--force", "--append", "--", "true").exit_code == 2
    appended = invoke("--out", str(out), "--append", "--", sys.executable, str(SCRIPT), "0")
    assert appended.exit_code == 0 and "(10 launches) of 2 kernels" in appended.output
    assert "(5 of them added now)" in appended.output
    before = (out / "launches.jsonl").read_bytes()
    nothing_new = invoke("--out", str(out), "--append", "--", sys.executable, "-c", "pass")
    assert nothing_new.exit_code == 1 and nothing_new.output.splitlines() == [  # not the old table, as if new
        f"tritune capture: no Triton launches captured from: {sys.executable} -c pass; {out} keeps its 10 launches"]
    assert (out / "launches.jsonl").read_bytes() == before
    before = (out / "launches.jsonl").read_bytes()
    nothing = invoke("--out", str(out), "--force", "--", sys.executable, "-c", "pass")
    assert nothing.exit_code == 1 and nothing.output.splitlines() == [
        f"tritune capture: no Triton launches captured from: {sys.executable} -c pass; {out} keeps its previous capture"]
    assert (out / "launches.jsonl").read_bytes() == before
    replaced = invoke("--out", str(out), "--force", "--", sys.executable, str(SCRIPT), "0")
    assert replaced.exit_code == 0 and "(5 launches)" in replaced.output
    assert sum(s.count for s in read_launches(out)) == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap"]  # no folder left beside it


def _capture_files(out: Path) -> dict[str, bytes]:
    return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("command, status, line", [
    (["pyhton3", str(SCRIPT), "0"], 127, "tritune capture: command not found: pyhton3"),
    ([sys.executable, "-u", "no_such_script.py"], 2,
     f"tritune capture: {sys.executable} cannot open the script no_such_script.py: no such file"),
    ([sys.executable, str(SCRIPT), "3"], 3, "tritune capture: the command exited with status 3; {out} keeps its "
                                            "previous capture"),
])
def test_force_keeps_the_capture_when_the_command_fails(tmp_path, interpret, command, status, line):
    """--force replaces a capture only with a complete one: a typo in the command or the script's
    path is found before anything is touched, and a command that fails leaves the old capture."""
    out = tmp_path / "cap"
    assert invoke("--out", str(out), "--", sys.executable, str(SCRIPT), "0", "fork").exit_code == 0
    before = _capture_files(out)
    result = invoke("--out", str(out), "--force", "--", *command)
    assert result.exit_code == status
    assert result.output.splitlines()[-1] == line.format(out=out)
    assert _capture_files(out) == before and sum(s.count for s in read_launches(out)) == 6
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cap"]


def test_a_missing_script_writes_nothing(tmp_path):
    result = invoke("--out", str(tmp_path / "cap"), "--", sys.executable, str(tmp_path / "typo.py"))
    assert result.exit_code == 2 and result.output.count("\n") == 1
    assert not (tmp_path / "cap").exists()


@pytest.mark.parametrize("command, script", [
    (["python3", "x.py", "--small"], "x.py"),
    (["/usr/bin/python3.11", "-u", "-W", "ignore", "-X", "dev", "x.py"], "x.py"),
    (["python", "-Werror", "-uB", "x.py"], "x.py"),
    (["python", "--check-hash-based-pycs", "always", "--", "x.py"], "x.py"),
    (["python3", "-m", "pytest", "x.py"], None),
    (["python3", "-uc", "print(1)"], None),
    (["python3", "-"], "-"),
    (["python3"], None),
    (["bash", "x.py"], None),
])
def test_the_script_a_python_command_runs(command, script):
    assert boot._script(command) == script


def test_program_without_launches(tmp_path):
    result = invoke("--out", str(tmp_path / "cap"), "--", sys.executable, "-c", "print('hi')")
    assert result.exit_code == 1
    assert "no Triton launches captured from:" in result.output


def test_missing_and_unknown_commands(tmp_path):
    missing = invoke("--out", str(tmp_path / "a"))
    assert missing.exit_code == 2 and "no command given" in missing.output
    unknown = invoke("--out", str(tmp_path / "b"), "--", "tritune-no-such-command")
    assert unknown.exit_code == 127 and "command not found: tritune-no-such-command" in unknown.output
    (tmp_path / "file").write_text("")
    not_dir = invoke("--out", str(tmp_path / "file"), "--", "true")
    assert not_dir.exit_code == 2 and "is not a directory" in not_dir.output  # a usage error: --out


def test_bootstrap_chains_the_environments_sitecustomize(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "sitecustomize.py").write_text("import builtins\nbuiltins.THEIRS_RAN = True\n")
    env = boot.boot_env({config.ENV_CAPTURE_DIR: str(tmp_path / "cap")},
                        {"PYTHONPATH": os.pathsep.join([str(theirs), SRC]), "PATH": "/usr/bin:/bin"})
    assert env["PYTHONPATH"].split(os.pathsep) == [str(boot.BOOT_DIR), str(theirs), SRC]
    code = ("import builtins, sys; "
            "print(getattr(builtins, 'THEIRS_RAN', False), 'tritune.capture.recorder' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["True", "True"], done.stderr


def test_a_run_inside_a_capture_keeps_both_and_the_boot_folder_once(tmp_path):
    outer = boot.boot_env({config.ENV_CAPTURE_DIR: str(tmp_path / "cap")}, {"PYTHONPATH": SRC})
    inner = boot.boot_env({config.ENV_STORE: str(tmp_path / "s.db")}, outer)
    assert inner["PYTHONPATH"].split(os.pathsep) == [str(boot.BOOT_DIR), SRC]
    assert config.capture_dir(inner) == str(tmp_path / "cap") and config.store_path(inner) == str(tmp_path / "s.db")


def _bad_launches(kind: str) -> bytes:
    header = b'{"tritune_launches": %d}\n' % VERSION
    return {"truncated": header + b'{"kernel": "k"',
            "binary": b"\x89PNG\r\n\x1a\n\xff\xfe\n",
            "other-version": b'{"tritune_launches": 999}\n',
            "not-launches": b'{"hello": 1}\n'}[kind]


@pytest.mark.parametrize("kind, message", [
    ("truncated", "last line does not end in a newline"),
    ("binary", "not UTF-8 text"),
    ("other-version", "written by spec version 999"),
    ("not-launches", "no tritune_launches header"),
])
def test_append_to_an_unusable_capture_fails_before_running_the_program(tmp_path, kind, message):
    out = tmp_path / "cap"
    out.mkdir()
    (out / "launches.jsonl").write_bytes(_bad_launches(kind))
    ran = tmp_path / "ran"
    result = invoke("--out", str(out), "--append", "--", sys.executable, "-c", f"open({str(ran)!r}, 'w')")
    assert result.exit_code == 2, result.output
    assert result.output.count("\n") == 1 and result.output.startswith("tritune capture: cannot append: ")
    assert message in result.output
    assert not ran.exists()  # the program did not run
    assert (out / "launches.jsonl").read_bytes() == _bad_launches(kind)


def test_a_program_lists_its_imports_only_when_asked(tmp_path, monkeypatch):
    """``run(imports=FOLDER)``: each of its processes writes the files it imported there at exit
    (what a capture's bytecode fill reads); not otherwise, also where the environment asks (a
    capture inside a capture)."""
    from tritune.capture import program

    code = "import json, subprocess, sys; subprocess.run([sys.executable, '-c', 'import csv'], check=True)"
    lists = tmp_path / "lists"
    lists.mkdir()
    program.run([sys.executable, "-c", code], tmp_path / "asked", imports=lists)
    written = sorted(lists.glob("*.txt"))
    assert len(written) == 2  # the program and its child
    listed = [set(p.read_text().splitlines()) for p in written]
    import csv
    import json

    assert any(json.__file__ in files for files in listed) and any(csv.__file__ in files for files in listed)
    inherited = tmp_path / "inherited"
    inherited.mkdir()
    monkeypatch.setenv(config.ENV_CAPTURE_IMPORTS, str(inherited))
    program.run([sys.executable, "-c", code], tmp_path / "not", imports=None)
    assert not any(inherited.iterdir())


def test_a_program_of_many_processes_writes_a_bounded_number_of_lists(tmp_path, monkeypatch):
    """Each process lists its imports at exit (a data loader's spawned workers, every epoch): once
    the folder holds ``MAX_IMPORT_LISTS``, no process adds one."""
    from tritune.capture import program, recorder

    lists = tmp_path / "lists"
    lists.mkdir()
    for n in range(recorder.MAX_IMPORT_LISTS - 1):
        (lists / f"planted-{n}.txt").write_text("")
    code = "import subprocess, sys; subprocess.run([sys.executable, '-c', 'import csv'], check=True)"
    program.run([sys.executable, "-c", code], tmp_path / "cap", imports=lists)
    assert len(list(lists.iterdir())) == recorder.MAX_IMPORT_LISTS  # the child's, then not its parent's



def test_force_where_nothing_can_be_made_beside_the_capture_is_one_line(tmp_path, interpret, monkeypatch):
    from tritune.capture import program

    out = tmp_path / "cap"
    assert invoke("--out", str(out), "--", sys.executable, str(SCRIPT), "0").exit_code == 0
    before = _capture_files(out)

    def refused(*args, **kwargs):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr(program.tempfile, "mkdtemp", refused)
    result = invoke("--out", str(out), "--force", "--", sys.executable, str(SCRIPT), "0")
    assert result.exit_code == 2 and result.output.splitlines() == [
        f"tritune capture: --force captures beside {out} and replaces it at the end, and {tmp_path} takes no new "
        "folder: Permission denied"]
    assert _capture_files(out) == before


def test_the_folder_of_the_script_a_python_command_runs(tmp_path, monkeypatch):
    """Where a head start's workers may read from their start (``commands.optimize._HeadStart``)."""
    (tmp_path / "progs").mkdir()
    (tmp_path / "progs" / "x.py").write_text("")
    monkeypatch.chdir(tmp_path)
    assert boot.script_folder(["python3", "progs/x.py", "--small"]) == str(tmp_path / "progs")
    assert boot.script_folder(["python3", "progs/missing.py"]) is None
    assert boot.script_folder(["python3", "-m", "progs.x"]) is None and boot.script_folder(["bash", "x.py"]) is None
