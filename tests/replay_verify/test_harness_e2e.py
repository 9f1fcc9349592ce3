"""The issue's "done when", on the CPU: capture a user's program, then bench every kernel of it,
then verify each captured launch against itself and catch a planted wrong variant of one."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritune.capture.spec import read_launches

PROGRAM = Path(__file__).resolve().parents[2] / "examples" / "user_program.py"
KERNELS = {"add_kernel", "softmax_kernel", "layernorm_kernel", "scale_inplace_kernel", "gather_rows_kernel"}


def tritune(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    return subprocess.run([sys.executable, "-m", "tritune", *args], env=env, capture_output=True, text=True,
                          timeout=300)


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("capture") / "demo"
    done = tritune("capture", "--out", str(out), "--", sys.executable, str(PROGRAM), "--small")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "6 distinct launches (7 launches) of 5 kernels" in done.stdout
    assert f"ran 7 launches of {len(KERNELS)} kernels" in done.stdout  # the program says what capture found
    return out


def test_capture_records_every_kernel_of_the_program(captured):
    specs = read_launches(captured)
    assert {s.kernel for s in specs} == KERNELS and sum(s.count for s in specs) == 7
    by_kernel = {s.kernel: s for s in specs}
    assert by_kernel["softmax_kernel"].kind == "autotune" and by_kernel["scale_inplace_kernel"].kind == "heuristics"
    assert [a.name for a in by_kernel["scale_inplace_kernel"].written] == ["x_ptr"]
    assert by_kernel["gather_rows_kernel"].arg("index_ptr").values == "saved"
    assert all(s.writes_from == "ttir" and s.written for s in specs)


def test_bench_times_every_launch_and_says_cpu_times_mean_nothing(captured):
    done = tritune("bench", str(captured), "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    rows = json.loads(done.stdout)
    assert {r["kernel"] for r in rows} == KERNELS and len(rows) == 6
    assert all(r["failure"] is None and r["time_ms"] > 0 and r["meaningful"] is False for r in rows)
    table = tritune("bench", str(captured))
    assert "NOT meaningful" in table.stdout and "gather_rows_kernel" in table.stdout


def test_every_captured_launch_verifies_against_itself_and_a_wrong_one_fails(captured):
    script = f"""
import json
from tritune.capture.spec import read_launches
from tritune.model.variant import Variant
from tritune.verify import verify
root = {str(captured)!r}
specs = read_launches(root)
ok = [verify(s, Variant(), root, mode="bitwise").ok for s in specs]
gather = next(s for s in specs if s.kernel == "gather_rows_kernel")
text = open(root + "/" + gather.source).read()
wrong = text.replace(".to(tl.int64)", ".to(tl.int64) // 2")
assert wrong != text
bad = verify(gather, Variant(name="wrong row", source=wrong), root)
print(json.dumps({{"ok": ok, "bad": bad.ok, "message": bad.message}}))
"""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"] == [True] * 6
    assert result["bad"] is False and "out_ptr" in result["message"]
