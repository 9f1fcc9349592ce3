"""The --llm options `tritune optimize` and `tritune generate` share: each mistake is one line."""

from __future__ import annotations

import subprocess
import sys

import pytest


@pytest.mark.parametrize("command", ["optimize", "generate"])
@pytest.mark.parametrize("options, message", [
    (["--llm-model", "m"], "--llm-model needs --llm URL"),
    (["--llm-dry-run"], "--llm-dry-run needs --llm URL"),
    (["--llm", "http://127.0.0.1:9/v1"], "--llm needs --llm-model NAME"),
    (["--llm", "http://127.0.0.1:9/v1", "--llm-model", "m", "--llm-price", "cheap"], "is not IN,OUT"),
    (["--llm", "http://127.0.0.1:9/v1", "--llm-model", "m", "--llm-price", "-1,2"], "prices cannot be negative"),
])
def test_llm_option_mistakes_are_one_line(tmp_path, command, options, message):
    launches = tmp_path / "capture"
    launches.mkdir()
    spec = tmp_path / "spec.py"
    spec.write_text("def reference(x):\n    return x\n\ndef inputs(device):\n    return []\n")
    where = ["--launches", str(launches)] if command == "optimize" else [str(spec)]
    done = subprocess.run([sys.executable, "-m", "tritune", command, "--out", str(tmp_path / "out"), *where, *options],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and message in lines[0], done.stderr
