"""``benchmarks/fidelity.py`` on the CPU: a tiny capture made under the interpreter, with a dtype
kernel that replays, a launch whose kernel file was changed after capture (replay refuses it)
and a launch capture could not record: each is counted and named in the table."""

from __future__ import annotations

import json
import pathlib
import sys

import pytest
import torch
import triton.language as tl

from conftest import import_interpreted
from tritune.capture.recorder import capture

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import fidelity  # noqa: E402

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def cast_kernel(x_ptr, out_ptr, n, OUT_DTYPE: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, (tl.load(x_ptr + offs, mask=mask) * 2).to(OUT_DTYPE), mask=mask)
'''


@pytest.fixture
def tiny(tmp_path, monkeypatch):
    """Two captured launches (one of them in a file changed since) and one skipped launch."""
    for name in ("fid_good", "fid_changed"):
        (tmp_path / f"{name}.py").write_text(KERNELS)
    good = import_interpreted(tmp_path / "fid_good.py", "fid_good")
    changed = import_interpreted(tmp_path / "fid_changed.py", "fid_changed")
    cap = tmp_path / "cap"
    x = torch.randn(40)
    with capture(cap):
        good.cast_kernel[(1,)](x, torch.empty(40, dtype=torch.float16), 40, tl.float16, BLOCK=64)
        changed.cast_kernel[(1,)](x, torch.empty(40), 40, tl.float32, BLOCK=64)
        with pytest.raises(Exception):  # skipped (an object constexpr); then the kernel itself fails
            good.cast_kernel[(1,)](x, torch.empty(40), 40, object(), BLOCK=64)
    copy = next(p for p in (cap / "sources").iterdir() if "fid_changed" in p.name)
    copy.write_text(copy.read_text() + "\n# changed after capture\n")
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    return cap


def test_every_launch_is_replayed_timed_or_named_with_why(tiny):
    from tritune.commands.bench import _in_process

    found = fidelity.corpus("tiny", tiny, _in_process)
    assert (found["captured"], found["replayed"], found["timed"], found["failed"]) == (2, 1, 1, 1)
    assert (found["skipped_records"], found["skipped_launches"]) == (1, 1)
    assert found["replayed_pct"] == pytest.approx(100 / 3)
    by_kernel = {r["id"]: r for r in found["rows"]}
    failed = next(r for r in by_kernel.values() if r["failure"])
    assert failed["stage"] == "replay" and failed["failure"] == "error"
    assert "is not the file captured" in failed["message"]
    assert found["failure_kinds"] == {"replay: error": 1}
    table = fidelity.markdown({"corpora": [found], "command": "x"})
    assert "| tiny | 2 | 1 (1) | 1 | 1 | 1 | 0 | 33.3% | replay: error x1 |" in table
    assert f"- `cast_kernel` ({failed['id']}): replay error: " in table
    assert "- `cast_kernel`: not captured (unsupported, 1 launch(es)): constexpr 'OUT_DTYPE' is a builtins.object" \
        in table


def test_the_command_writes_json_and_markdown_and_fails_unless_everything_replayed(tiny, tmp_path):
    out, md = tmp_path / "f.json", tmp_path / "f.md"
    code = fidelity.main([f"tiny={tiny}", "--out", str(out), "--md", str(md), "--no-isolate", "--no-time",
                          "--limit-s", "600"])
    assert code == 1
    report = json.loads(out.read_text())
    (found,) = report["corpora"]
    assert (found["name"], found["replayed"], found["timed"]) == ("tiny", 1, 0)
    assert report["command"].startswith("PYTHONPATH=src python3 benchmarks/fidelity.py tiny=")
    assert md.read_text().startswith("# Replay fidelity")


def test_a_launch_past_the_limit_is_counted_not_run(tiny):
    from tritune.commands.bench import _in_process

    found = fidelity.corpus("tiny", tiny, _in_process, deadline=0.0)
    assert (found["not_run"], found["replayed"], found["failed"]) == (2, 0, 0)


def test_several_corpora_get_a_total_row_and_generic_folders_are_named_by_their_corpus(tiny, tmp_path):
    from tritune.commands.bench import _in_process

    found = fidelity.corpus("tiny", tiny, _in_process, time_it=False)
    table = fidelity.markdown({"corpora": [found, {**found, "name": "again"}], "command": "x"})
    assert "| **all** | 4 | 2 (2) | 2 | 0 | 2 | 0 | 33.3% | replay: error x2 |" in table
    assert fidelity.parse_corpus(str(tmp_path / "rms_norm" / "opt" / "capture"))[0] == "rms_norm"
    assert fidelity.parse_corpus(f"suite={tmp_path}") == ("suite", tmp_path)
