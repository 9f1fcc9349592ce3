"""Capture of plain, autotuned and heuristics launches under the interpreter, into a directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
import triton

from conftest import import_interpreted
from tritune.capture import _jit_shim, jit_launch, recorder
from tritune.capture._jit_shim import Launch
from tritune.capture.recorder import capture
from tritune.capture.spec import read_launches, source_hash

KERNELS = Path(__file__).parents[1] / "programs" / "capture_kernels.py"


@pytest.fixture(scope="module")
def k():
    """capture_kernels decorated under TRITON_INTERPRET=1: InterpretedFunctions that run on the CPU."""
    module = import_interpreted(KERNELS, "capture_kernels")
    assert type(module.add_kernel).__name__ == "InterpretedFunction"
    return module


def only(directory: Path, kernel: str | None = None):
    specs = [s for s in read_launches(directory) if kernel is None or s.kernel == kernel]
    assert len(specs) == 1, [s.id for s in specs]
    return specs[0]


def test_plain_kernel(k, tmp_path):
    base = torch.randn(40)
    x = base[3:33]  # a view: offset 3, storage larger than the view
    out = torch.empty(30)
    with capture(tmp_path):
        k.add_kernel[(triton.cdiv(30, 16),)](x, None, 1, out, 30, 2.0, BLOCK=16)
    assert torch.equal(out, x * 2.0)
    spec = only(tmp_path)
    assert (spec.kernel, spec.kind, spec.module) == ("add_kernel", "jit", "capture_kernels")
    assert spec.source_file == str(KERNELS)
    assert (tmp_path / spec.source).read_bytes() == KERNELS.read_bytes()
    assert spec.source_hash == source_hash(_src(k.add_kernel))
    assert [a.kind for a in spec.args] == ["tensor", "none", "scalar", "tensor", "scalar", "scalar", "constexpr"]
    x_arg, out_arg = spec.arg("x_ptr"), spec.arg("out_ptr")
    assert (x_arg.shape, x_arg.stride, x_arg.dtype, x_arg.device) == ([30], [1], "float32", "cpu")
    assert (x_arg.storage_offset, x_arg.storage_size) == (3, 40)
    assert (x_arg.written, out_arg.written, spec.writes_from) == (False, True, "ttir")
    assert (spec.arg("one").value, spec.arg("one").type) == (1, "int")
    assert (spec.arg("scale").value, spec.arg("scale").type) == (2.0, "float")
    assert spec.constexprs == {"BLOCK": 16} and spec.options == {}
    assert spec.grid == [2, 1, 1] and spec.count == 1
    assert spec.grid_rule["dims"][0] == {"numel": "n", "block": "BLOCK"}
    assert spec.grid_rule["dims"][1:] == [{"const": 1}, {"const": 1}]


def _src(fn) -> str:
    from triton.runtime.jit import JITFunction

    return JITFunction(fn.fn).src


def test_identical_launches_are_counted_once(k, tmp_path):
    x, out = torch.randn(30), torch.empty(30)
    with capture(tmp_path) as rec:
        for _ in range(3):
            k.add_kernel[(2,)](x, None, 1, out, 30, 2.0, BLOCK=16)
        k.add_kernel[(2,)](x, None, 1, out, 30, 3.0, BLOCK=16)  # another scalar: another launch
        k.add_kernel[(1,)](x[:10], None, 1, out, 10, 2.0, BLOCK=16)  # another shape
        assert rec.total == 5
    specs = read_launches(tmp_path)
    assert sorted(s.count for s in specs) == [1, 1, 3]


def test_default_constexpr_is_recorded(k, tmp_path):
    x = torch.zeros(10)
    with capture(tmp_path):
        k.inplace_kernel[(1,)](x, 10)
    spec = only(tmp_path)
    assert spec.constexprs == {"BLOCK": 32}
    assert spec.arg("x_ptr").written and torch.equal(x, torch.ones(10))


def test_autotuned_kernel_records_the_chosen_config_not_the_trials(k, tmp_path):
    x, out = torch.randn(50), torch.empty(50)
    with capture(tmp_path):
        k.tuned_kernel[lambda meta: (triton.cdiv(50, meta["BLOCK"]),)](x, out, 50)
    assert torch.equal(out, x * 2)
    spec = only(tmp_path)  # the two timing trials are not launches of the program
    best = k.tuned_kernel.best_config
    assert best.kwargs == {"BLOCK": 32}  # fake_bench makes the later config faster
    assert spec.kind == "autotune" and spec.count == 1
    assert spec.constexprs == {"BLOCK": 32}
    assert spec.options["num_warps"] == 8 and spec.options["num_stages"] == best.num_stages
    assert spec.extra["autotune"]["config"]["BLOCK"] == 32
    assert [c["BLOCK"] for c in spec.extra["autotune"]["configs"]] == [16, 32]
    assert spec.grid == [2, 1, 1]
    assert spec.grid_rule == {"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}, {"const": 1}, {"const": 1}],
                              "from": "probe", "tiles": True}


def test_heuristics_kernel(k, tmp_path):
    x, out = torch.randn(20), torch.empty(20)
    with capture(tmp_path):
        k.heuristic_kernel[(1,)](x, out, 20)
    spec = only(tmp_path)
    assert spec.kind == "heuristics" and spec.constexprs == {"BLOCK": 32}
    assert spec.extra["heuristics"] == ["BLOCK"]
    assert spec.arg("out_ptr").written and not spec.arg("x_ptr").written


def test_two_dimensional_grid_rule(k, tmp_path):
    x, out = torch.randn(5, 40), torch.empty(5, 40)
    grid = lambda meta: (triton.cdiv(5, meta["BLOCK_M"]), triton.cdiv(40, meta["BLOCK_N"]))  # noqa: E731
    with capture(tmp_path):
        k.tile_kernel[grid](x, out, 5, 40, BLOCK_M=2, BLOCK_N=16)
    assert torch.equal(out, x)
    spec = only(tmp_path)
    assert spec.grid == [3, 3, 1]
    assert spec.grid_rule["dims"][:2] == [{"numel": "M", "block": "BLOCK_M"}, {"numel": "N", "block": "BLOCK_N"}]


def test_index_tensors_keep_their_values(k, tmp_path):
    src = torch.randn(64)
    storage = torch.randint(0, 64, (40,))
    idx = storage[4:24]  # the kernel may read the view's storage: saved from its offset on
    out = torch.empty(20)
    with capture(tmp_path):
        k.gather_kernel[(1,)](src, idx, out, 20, BLOCK=32)
    spec = only(tmp_path)
    arg = spec.arg("idx_ptr")
    assert arg.values == "saved" and arg.dtype == "int64"
    saved = torch.load(tmp_path / arg.data)
    assert torch.equal(saved, storage[4:arg.storage_size])
    assert spec.arg("src_ptr").values == "random" and spec.arg("out_ptr").values == "random"


def test_large_index_tensors_record_their_range(k, tmp_path, monkeypatch):
    monkeypatch.setattr(recorder, "SAVE_LIMIT_BYTES", 64)
    idx = torch.tensor([5, 3, 60, 7] * 5)
    with capture(tmp_path):
        k.gather_kernel[(1,)](torch.randn(64), idx, torch.empty(20), 20, BLOCK=32)
    arg = only(tmp_path).arg("idx_ptr")
    assert (arg.values, arg.low, arg.high) == ("range", 3, 60)
    assert not (tmp_path / "tensors").exists()


def test_helper_calls_and_observed_fallback(k, tmp_path, monkeypatch):
    x, out = torch.randn(8), torch.empty(8)
    with capture(tmp_path / "a"):
        k.helper_kernel[(1,)](x, out, 8, BLOCK=8)
    assert only(tmp_path / "a").writes_from == "ttir"

    def no_compiler(*args, **kwargs):
        raise RuntimeError("planted: the TTIR cannot be built")

    monkeypatch.setattr(jit_launch, "compile_ttir", no_compiler)
    with capture(tmp_path / "b"):
        k.helper_kernel[(1,)](x, torch.empty(8), 8, BLOCK=8)
    spec = only(tmp_path / "b")
    assert spec.writes_from == "observed"
    assert spec.arg("out_ptr").written and not spec.arg("x_ptr").written


def test_round_trip(k, tmp_path):
    x, out = torch.randn(30), torch.empty(30)
    with capture(tmp_path, merge=False) as rec:
        k.add_kernel[(2,)](x, None, 1, out, 30, 2.0, BLOCK=16)
        k.gather_kernel[(1,)](torch.randn(64), torch.arange(20), torch.empty(20), 20, BLOCK=32)
        k.tuned_kernel[lambda meta: (triton.cdiv(50, meta["BLOCK"]),)](torch.randn(50), torch.empty(50), 50)
    recorded = [s.to_json() for s in rec.specs.values()]
    recorder.finalize(tmp_path)
    assert [s.to_json() for s in read_launches(tmp_path)] == recorded
    assert json.loads((tmp_path / "launches.jsonl").read_text().split("\n")[0])["tritune_launches"] == 1


class _Compiled:
    """What JITFunction.run returns on a GPU, as far as capture reads it."""

    def __init__(self, ttir: str):
        self.asm = {"ttir": ttir}


def test_gpu_path_reads_the_returned_kernels_ttir(k, tmp_path):
    # On a GPU the shim sees a JITFunction and the run returns a CompiledKernel: capture takes the
    # written arguments from its TTIR and fills the CUDA backend's default options.
    from triton.runtime.jit import JITFunction

    from tritune.capture.writes import compile_ttir

    fn = JITFunction(k.add_kernel.fn)
    sig = {"x_ptr": "*fp32", "none_ptr": "constexpr", "one": "constexpr", "out_ptr": "*fp32",
           "n": "i32", "scale": "fp32", "BLOCK": "constexpr"}
    ttir = compile_ttir(fn, sig, {"none_ptr": None, "one": 1, "BLOCK": 16}, {})
    rec = recorder.Recorder(tmp_path)
    listener = jit_launch.JitListener(rec)
    x, out = torch.randn(30), torch.empty(30)
    launch = Launch(fn, (x, None, 1, out, 30, 2.0), {"BLOCK": 16, "num_warps": 2}, (2,), ())
    listener(launch)(_Compiled(ttir))
    assert listener(launch) is None  # the same launch again: counted on the hot path
    spec = next(iter(rec.specs.values()))
    assert spec.options == {"num_warps": 2, "num_stages": 3}
    assert spec.writes_from == "ttir" and [a.name for a in spec.written] == ["out_ptr"]
    assert rec.total == 2


def test_unsupported_argument_is_reported_not_raised(k, tmp_path, capfd, monkeypatch):
    monkeypatch.setattr(_jit_shim, "_reported", set())
    x = torch.zeros(10)

    class Odd:  # not a tensor, scalar or None
        pass

    with capture(tmp_path):
        with pytest.raises(Exception):
            k.inplace_kernel[(1,)](Odd(), 10)  # the kernel itself fails; capture only reports
        k.inplace_kernel[(1,)](x, 10)
    assert "kernel inplace_kernel not recorded" in capfd.readouterr().err
    assert only(tmp_path).arg("x_ptr").shape == [10]



def test_writes_come_from_ttir_after_the_interpreter_ran_language_helpers(tmp_path):
    # tl.max is itself a jit function; interpreting it leaves triton.language patched, which once
    # broke every later TTIR compile (writes then fell back to observation, and observation
    # misses an output that already holds the values the kernel writes). A fresh process, since
    # triton.language's own jit functions are interpreted only if TRITON_INTERPRET=1 was set
    # before triton was imported.
    script = f"""
import importlib.util, torch
from tritune.capture.recorder import capture
spec = importlib.util.spec_from_file_location("capture_kernels", {str(KERNELS)!r})
k = importlib.util.module_from_spec(spec); spec.loader.exec_module(k)
x, out = torch.randn(8), torch.empty(1)
k.row_max_kernel[(1,)](x, out, 8, BLOCK=8)  # out now holds the max: unchanged by the next run
with capture({str(tmp_path)!r}):
    k.row_max_kernel[(1,)](x, out, 8, BLOCK=8)
    k.inplace_kernel[(1,)](torch.randn(8), 8)
"""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    reduce, inplace = only(tmp_path, "row_max_kernel"), only(tmp_path, "inplace_kernel")
    assert (reduce.writes_from, inplace.writes_from) == ("ttir", "ttir")
    assert reduce.arg("out_ptr").written and not reduce.arg("x_ptr").written
    assert inplace.arg("x_ptr").written


def test_which_tensor_arguments_overlap_is_recorded(k, tmp_path):
    """An in-place call (one buffer as input and output) and a call on two buffers: the proposers
    offer no-alias variants only for the second (``aliasing``)."""
    x = torch.randn(30)
    with capture(tmp_path / "in_place"):
        k.add_kernel[(2,)](x, None, 1, x, 30, 2.0, BLOCK=16)
    with capture(tmp_path / "apart"):
        k.add_kernel[(2,)](x, None, 1, torch.empty(30), 30, 2.0, BLOCK=16)
    assert only(tmp_path / "in_place").extra["overlapping"] == [["x_ptr", "out_ptr"]]
    assert only(tmp_path / "apart").extra["overlapping"] == []
