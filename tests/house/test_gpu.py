"""``tritune.gpu``: without a GPU, the commands that launch kernels run them under Triton's
interpreter by themselves, and say so in one line."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritune import config, gpu
from tritune.capture.spec import read_launches
from tritune.cli import main

SCRIPT = Path(__file__).parents[1] / "programs" / "capture_script.py"
PRESENT = gpu.present  # the real one: conftest stands a GPU in for every test
CPU_BUILD = """from typing import Optional

__version__ = '2.13.0+cpu'
debug = False
cuda: Optional[str] = None
hip: Optional[str] = None
"""


@pytest.fixture
def no_gpu(monkeypatch):
    """This machine as one without a GPU, TRITON_INTERPRET unset (as a newcomer's shell)."""
    monkeypatch.setattr(gpu, "present", lambda: False)
    monkeypatch.delenv(config.ENV_INTERPRET, raising=False)


@pytest.mark.parametrize("text, build", [
    (CPU_BUILD, None),
    (CPU_BUILD.replace("cuda: Optional[str] = None", "cuda: Optional[str] = '12.8'"), "cuda"),
    (CPU_BUILD.replace("hip: Optional[str] = None", "hip: Optional[str] = '6.3.42131'"), "hip"),
    ("cuda = some_function()\n", "cuda"),  # not a literal: a GPU is looked for
    ("not python (", None),
])
def test_what_torch_was_built_for(text, build):
    assert gpu.build_of(text) == build


def test_no_visible_device_is_no_gpu(monkeypatch):
    monkeypatch.setenv(config.ENV_VISIBLE_DEVICES, "")
    PRESENT.cache_clear()
    try:
        assert PRESENT() is False
    finally:
        PRESENT.cache_clear()


def test_without_a_gpu_the_block_runs_interpreted_and_says_so_as_a_worker_starts(no_gpu):
    """The line comes as the first process that may launch a kernel starts (a worker here), once:
    a command refused on its inputs before that says only why."""
    from tritune.worker import Worker

    said = []
    with gpu.interpreted_without_gpu(said.append):
        assert config.interpreting() and os.environ[config.ENV_INTERPRET] == "1"  # children inherit it
        assert said == []
        with Worker(60.0) as worker:
            assert worker.start().ok
        gpu.announce()
    assert said == ["no GPU found: running under Triton's interpreter (TRITON_INTERPRET=1)"]
    assert config.ENV_INTERPRET not in os.environ  # as it was once the command ends
    gpu.announce()
    assert len(said) == 1


def test_a_users_choice_is_left_alone(no_gpu, monkeypatch):
    monkeypatch.setenv(config.ENV_INTERPRET, "0")
    said = []
    with pytest.raises(gpu.NoGPU):
        with gpu.interpreted_without_gpu(said.append):
            pass
    assert said == ["no GPU found, and TRITON_INTERPRET=0 keeps Triton's interpreter off: "
                    "set TRITON_INTERPRET=1 to run the kernels on the CPU"]
    monkeypatch.setattr(gpu, "present", lambda: True)  # a GPU: nothing said, nothing set
    with gpu.interpreted_without_gpu(said.append):
        assert not config.interpreting()
    assert len(said) == 1


def test_capture_without_a_gpu_runs_under_the_interpreter(tmp_path, no_gpu):
    """The program (which picks the CPU only under TRITON_INTERPRET=1) is captured, with one line
    saying why, instead of Triton's "0 active drivers" traceback."""
    out = tmp_path / "cap"
    result = CliRunner().invoke(main, ["capture", "--out", str(out), "--", sys.executable, str(SCRIPT), "0"])
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == ["tritune capture: " + gpu.RUNNING]
    assert sum(s.count for s in read_launches(out)) == 5
    assert config.ENV_INTERPRET not in os.environ


def test_a_command_refused_before_it_starts_anything_says_only_why(tmp_path, no_gpu):
    result = CliRunner().invoke(main, ["run", "--strict", "--store", str(tmp_path / "none.db"), "--", "true"])
    assert result.exit_code == 2 and result.output.splitlines() == [
        f"tritune run: nothing applied, the program was not run (--strict): no decision store at {tmp_path / 'none.db'}"]


@pytest.mark.parametrize("command", ["capture", "bench", "optimize", "run", "generate", "store import"])
def test_every_command_that_launches_kernels_asks(tmp_path, no_gpu, monkeypatch, command):
    """Each command that launches kernels goes through ``gpu.interpreted_without_gpu``: with the
    interpreter turned off by the user, it stops at once with the line saying to turn it on."""
    monkeypatch.setenv(config.ENV_INTERPRET, "0")
    (tmp_path / "cap").mkdir()
    (tmp_path / "spec.py").write_text("")
    cap, out, spec = str(tmp_path / "cap"), str(tmp_path / "out"), str(tmp_path / "spec.py")
    args = {"capture": ["capture", "--out", out, "--", "true"],
            "bench": ["bench", cap],
            "optimize": ["optimize", "--out", out, "--launches", cap],
            "run": ["run", "--store", str(tmp_path / "s.db"), "--", "true"],
            "generate": ["generate", spec, "--out", out],
            "store import": ["store", "import", str(tmp_path / "a.db"), "--into", str(tmp_path / "b.db"),
                             "--launches", cap]}[command]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [f"tritune {command}: no GPU found, and TRITON_INTERPRET=0 keeps Triton's "
                                          "interpreter off: set TRITON_INTERPRET=1 to run the kernels on the CPU"]
    assert not (tmp_path / "out").exists()
