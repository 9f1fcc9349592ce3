"""Shared helpers: TTIR fixtures written by hand, so each test states exactly the IR it means."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritune.ir import ModuleView, parse_module

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
