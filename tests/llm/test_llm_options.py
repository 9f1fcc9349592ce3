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


def test_the_run_request_is_typed_from_the_command_line_to_the_loop(share_captured, tmp_path, monkeypatch):
    """--deadline-s, --llm and the store path reach the loop as the typed RunRequest's fields
    (one value the CLI builds, not settings bundled into a dict and passed on as **job)."""
    from pathlib import Path

    from click.testing import CliRunner

    import tritune.loop
    from tritune.cli import main
    from tritune.model.request import RunRequest
    from tritune.model.settings import LLMSettings, LoopSettings

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    got = {}

    class Stop(Exception):
        pass

    def optimize(root, request, **where):
        got.update(root=root, request=request, where=where)
        raise Stop

    monkeypatch.setattr(tritune.loop, "optimize", optimize)
    from tritune.capture.spec import read_launches

    kernel = read_launches(share_captured)[0].kernel
    store = tmp_path / "elsewhere.db"
    result = CliRunner().invoke(main, ["optimize", "--out", str(tmp_path / "out"), "--launches", str(share_captured),
                                       "--store", str(store), "--deadline-s", "30", "--llm", "http://127.0.0.1:9/v1",
                                       "--llm-model", "m", "--llm-dry-run", "--kernel", kernel, "--no-report",
                                       "--unsafe-no-jail"])  # a machine without the jail refuses --llm before
    assert isinstance(result.exception, Stop), result.output
    request = got["request"]
    assert isinstance(request, RunRequest) and set(got["where"]) <= {"devices", "lanes", "progress", "log"}
    assert request.deadline_s == 30.0 and request.store == store and isinstance(request.store, Path)
    assert request.out == tmp_path / "out" and request.kernels == (kernel,)
    assert isinstance(request.settings, LoopSettings) and isinstance(request.settings.llm, LLMSettings)
    assert (request.settings.llm.url, request.settings.llm.model) == ("http://127.0.0.1:9/v1", "m")
