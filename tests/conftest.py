"""Shared helpers: TTIR fixtures written by hand, so each test states exactly the IR it means."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tritune.ir import ModuleView, parse_module

# Stores are signed with a per-user secret under TRITUNE_HOME: the tests (and the programs they
# start, which inherit the environment) get a home of their own, never the developer's ~/.tritune.
os.environ["TRITUNE_HOME"] = tempfile.mkdtemp(prefix="tritune-home-")
# Bytecode for jailed workers (``tritune.worker.bytecode``), where used: never the developer's ~/.cache.
os.environ["TRITUNE_BYTECODE"] = tempfile.mkdtemp(prefix="tritune-bytecode-")


@pytest.fixture(autouse=True)
def _interpreter_only_where_asked(monkeypatch):
    """A test runs kernels under Triton's interpreter where it sets TRITON_INTERPRET=1 itself: the
    commands it invokes here do not switch to it because this machine has no GPU (``tritune.gpu``;
    tests/house/test_gpu.py tests the switch), so what a test sees is the same on every machine."""
    from tritune import gpu

    monkeypatch.setattr(gpu, "present", lambda: True)


PTR = "tensor<128x!tt.ptr<f32>>"
F32 = "tensor<128xf32>"


def ttir(body: str, args: str = "%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<f32>") -> str:
    """A module with one kernel ``@k``. ``body`` may use ``%offs`` (0..127), ``%p`` (pointers
    into %arg0) and ``%q`` (pointers into %arg1), defined here."""
    prologue = f"""
    %offs = tt.make_range {{end = 128 : i32, start = 0 : i32}} : tensor<128xi32>
    %p0 = tt.splat %arg0 : !tt.ptr<f32> -> {PTR}
    %p = tt.addptr %p0, %offs : {PTR}, tensor<128xi32>
    %q0 = tt.splat %arg1 : !tt.ptr<f32> -> {PTR}
    %q = tt.addptr %q0, %offs : {PTR}, tensor<128xi32>"""
    return f"""module {{
  tt.func public @k({args}) attributes {{noinline = false}} {{{prologue}
{body}
    tt.return
  }}
}}
"""


def op_names(module) -> list[str]:
    return [op.name for op in ModuleView.build(module).ops]


def count(module, name: str) -> int:
    return op_names(module).count(name)


@pytest.fixture
def parse():
    return parse_module


def import_interpreted(path, name: str):
    """Import the kernel file ``path`` as module ``name`` with TRITON_INTERPRET=1 at decoration
    time: its kernels are InterpretedFunctions that run on the CPU."""
    import importlib.util

    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("TRITON_INTERPRET", "1")
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


INDUCTOR_POI = Path(__file__).resolve().parent.parent / "examples" / "inductor" / "triton_poi_fused_add_gelu_mul_0.py"


@pytest.fixture
def small_inductor_poi(tmp_path) -> Path:
    """The example Inductor pointwise kernel at a small size, with libdevice.erf spelled
    tl.math.erf: the interpreter has no libdevice (its generic stubs return None), and a real
    model's kernel at full size is slow."""
    source = INDUCTOR_POI.read_text()
    for old, new in (("1024000", "4096"), ("(1024, 1000), (1000, 1)", "(4, 1024), (1024, 1)"),
                     ("libdevice.erf(tmp4)", "tl.math.erf(tmp4)"), ("'x': 1048576", "'x': 4096")):
        assert old in source
        source = source.replace(old, new)
    kernel = tmp_path / INDUCTOR_POI.name
    kernel.write_text(source)
    return kernel


_HASHES: dict[tuple[str, str], str] = {}


def kernel_hash(text: str, name: str) -> str:
    """The ``source_hash`` capture records for kernel ``name`` defined in the file ``text`` (replay
    refuses a capture whose kernel does not hash to it)."""
    import importlib.util
    import sys

    from tritune.capture.spec import source_hash

    found = _HASHES.get((text, name))
    if found is None:
        path = Path(tempfile.mkdtemp(prefix="tritune-hash-")) / f"hashed_{len(_HASHES)}.py"
        path.write_text(text)
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module  # dataclasses and the like look their module up
        spec.loader.exec_module(module)
        fn = getattr(module, name, None)
        if fn is None:  # a test of a kernel the file lacks: any hash, replay fails before using it
            return "0" * 64
        while hasattr(fn, "fn"):  # down to the Python function, through any wrapper
            fn = fn.fn
        from triton.runtime.jit import JITFunction

        found = _HASHES[(text, name)] = source_hash(JITFunction(fn).src)
    return found


@pytest.fixture(scope="session")
def share_captured(tmp_path_factory) -> Path:
    """``tests/programs/share_program.py`` captured under the interpreter (read it, do not change it)."""
    programs = Path(__file__).resolve().parent / "programs"
    out = tmp_path_factory.mktemp("share") / "capture"
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": os.pathsep.join([str(programs),
                                                                                  os.environ.get("PYTHONPATH", "")])}
    done = subprocess.run([sys.executable, "-m", "tritune", "capture", "--out", str(out), "--", sys.executable,
                           str(programs / "share_program.py")], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out
