"""``tritune optimize``'s summary: what became of each kernel, said on the terminal."""

from __future__ import annotations

import shutil

from click.testing import CliRunner

from tritune.cli import main


def test_the_summary_says_why_a_kernel_failed(share_captured, tmp_path, monkeypatch):
    """A capture whose kernel file was edited since: each kernel's baseline is refused, and the
    terminal says why (it said "failed: error", the reason in report.md alone)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    capture = tmp_path / "capture"
    shutil.copytree(share_captured, capture)
    for source in (capture / "sources").glob("*.py"):
        source.write_text(source.read_text() + "# edited after the capture\n")
    result = CliRunner().invoke(main, ["optimize", "--out", str(tmp_path / "out"), "--launches", str(capture),
                                       "--max-candidates", "1", "--no-report"])
    assert result.exit_code == 1, result.output
    why = [line for line in result.stdout.splitlines() if " failed (error): " in line]
    assert why and len(why) == result.stdout.count("failed: error")  # one line for each failed kernel
    assert all("SpecError: " in line and "is not the file captured" in line for line in why), why


def one_kernel(out, capture):
    """``tritune optimize`` of one kernel of ``capture``, one candidate, no report."""
    return CliRunner().invoke(main, ["optimize", "--out", str(out), "--launches", str(capture),
                                     "--max-candidates", "1", "--max-kernels", "1", "--no-report"])


def test_a_full_disk_during_the_run_is_one_line(share_captured, tmp_path, monkeypatch):
    """The store's disk fills as the run records its first candidate: one line and exit 2, not
    the 86-line sqlite3.OperationalError traceback."""
    import sqlite3

    from tritune.store import connection

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    real = connection._Scrubbing.execute

    def execute(self, sql, parameters=(), /):
        if sql.lstrip().startswith("INSERT INTO candidates"):
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorname = "SQLITE_FULL"
            raise exc
        return real(self, sql, parameters)

    monkeypatch.setattr(connection._Scrubbing, "execute", execute)
    out = tmp_path / "out"
    result = one_kernel(out, share_captured)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"tritune optimize: {out / 'decisions.db'}: no room left on its disk "
                                          "(SQLite: database or disk is full); what was recorded before is kept: "
                                          "free some space and run the same command again to resume"]


def test_a_command_that_fails_is_refused_every_time(tmp_path, monkeypatch):
    """The first run refused it, and the second took the partial capture it left for a complete
    one and optimized it without a word."""
    import sys
    from pathlib import Path

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setenv("TRITUNE_HEAD_START", "off")  # no workers started beside the capture: nothing to run
    script = Path(__file__).parents[1] / "programs" / "capture_script.py"  # launches, then exits with argv[1]
    for _ in range(2):
        result = CliRunner().invoke(main, ["optimize", "--out", str(tmp_path / "out"), "--no-report", "--",
                                           sys.executable, str(script), "1"])
        assert result.exit_code == 2, result.output
        assert result.stderr.splitlines() == ["tritune optimize: the command exited with status 1; nothing to optimize"]
    assert not (tmp_path / "out" / "capture" / "launches.jsonl").exists()


def test_the_model_alone_unreached_is_one_line_and_a_failure(share_captured, tmp_path, monkeypatch):
    """``--families llm`` with an endpoint that refuses: nothing can be tried, and the run says so
    and exits 2 (it exited 0, its log saying the run went on "with the other families")."""
    from llm_server import Raw, ScriptedServer

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    with ScriptedServer([Raw(401, "invalid key")]) as server:
        result = CliRunner().invoke(main, ["optimize", "--out", str(tmp_path / "out"), "--launches",
                                           str(share_captured), "--max-kernels", "1", "--families", "llm",
                                           "--llm", server.url, "--llm-model", "m", "--unsafe-no-jail",
                                           "--no-report"])
    assert result.exit_code == 2, result.output
    last = result.stderr.splitlines()[-1]
    assert last.startswith("tritune optimize: --families llm, and the model could not be asked: ")
    assert last.endswith("; nothing was tried") and "401" in last
    assert "other families" not in result.output


def test_a_full_disk_as_the_results_are_written_is_one_line(share_captured, tmp_path, monkeypatch):
    """optimize.json's disk fills (the store's may be another): one line and exit 2, not a
    traceback; the next run resumes from the store. A full disk's error names no file (it comes
    from write), and the results are written to a temporary file first: the line names the file."""
    import errno
    import pathlib

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    real = pathlib.Path.write_text

    def write_text(self, *args, **kwargs):
        if self.name == "optimize.tmp":
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(pathlib.Path, "write_text", write_text)
    out = tmp_path / "out"
    result = one_kernel(out, share_captured)
    assert result.exit_code == 2, result.output
    assert result.stderr.splitlines() == [f"tritune optimize: {out / 'optimize.json'}: No space left on device; what "
                                          "was recorded before is kept: run the same command again to resume"]


def test_a_command_with_a_typo_starts_no_worker(tmp_path, monkeypatch):
    """``optimize -- pyhton3 ...`` or a script that is not there: one line and the shell's
    status, before the head start's workers begin (they started, then the capture noticed)."""
    from tritune.commands import optimize
    from tritune.loop import lanes

    started: list = []
    monkeypatch.setattr(optimize._HeadStart, "begin", lambda self, capture_dir: started.append(capture_dir))
    # off the interpreter, the lanes' devices are counted by a worker
    monkeypatch.setattr(lanes, "lane_devices", lambda *args, **kwargs: started.append("lane_devices"))
    for command, code, line in ((["pyhton3", "x.py"], 127, "tritune optimize: command not found: pyhton3"),
                                (["python3", str(tmp_path / "nope.py")], 2,
                                 f"tritune optimize: python3 cannot open the script {tmp_path / 'nope.py'}: no such file")):
        result = CliRunner().invoke(main, ["optimize", "--out", str(tmp_path / "out"), "--", *command])
        assert (result.exit_code, result.stderr.splitlines()) == (code, [line]), result.output
    assert started == [] and not (tmp_path / "out").exists()  # nothing written (troubleshooting.md says so)
