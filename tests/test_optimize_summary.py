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
