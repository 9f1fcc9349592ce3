"""Which arguments a kernel writes: traced in TTIR compiled for sm_90 on the CPU, or observed."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from conftest import PTR, ttir
from tritune.capture.writes import Snapshot, WritesError, compile_ttir, from_ttir, ttir_params

KERNELS = Path(__file__).parents[1] / "programs" / "capture_kernels.py"


@pytest.fixture(scope="module")
def kernels(tmp_path_factory):
    """capture_kernels imported plainly: JITFunctions, compiled here without a GPU."""
    with pytest.MonkeyPatch.context() as mp:
        mp.delenv("TRITON_INTERPRET", raising=False)
        spec = importlib.util.spec_from_file_location("capture_kernels_jit", KERNELS)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    return module


def written(fn, signature: dict, constexprs: dict | None = None) -> set[str]:
    """Compile ``fn`` with ``signature`` (constexprs marked "constexpr") and trace its writes."""
    constexprs = constexprs or {}
    names, types = list(signature), list(signature.values())
    text = compile_ttir(fn, signature, constexprs, {})
    pointers = [n for n, t in signature.items() if t.startswith("*")]
    return set(from_ttir(text, ttir_params(names, types), pointers).names)


def test_out_of_place_with_none_and_one_specialized_away(kernels):
    # none_ptr (None) and one (== 1) are not TTIR arguments: out_ptr is the TTIR's 2nd argument.
    sig = {"x_ptr": "*fp32", "none_ptr": "constexpr", "one": "constexpr", "out_ptr": "*fp32",
           "n": "i32", "scale": "fp32", "BLOCK": "constexpr"}
    assert written(kernels.add_kernel, sig, {"none_ptr": None, "one": 1, "BLOCK": 32}) == {"out_ptr"}


def test_ttir_params_drop_constexprs_in_order():
    assert ttir_params(["a", "b", "c", "d"], ["*fp32", "constexpr", "i32", "constexpr"]) == ["a", "c"]


def test_positions_matter_a_wrong_mapping_is_caught(kernels):
    sig = {"x_ptr": "*fp32", "none_ptr": "constexpr", "one": "constexpr", "out_ptr": "*fp32",
           "n": "i32", "scale": "fp32", "BLOCK": "constexpr"}
    text = compile_ttir(kernels.add_kernel, sig, {"none_ptr": None, "one": 1, "BLOCK": 32}, {})
    # naming the TTIR arguments by parameter position (ignoring the specialized ones) is wrong
    naive = ["x_ptr", "none_ptr", "one", "out_ptr", "n"]
    with pytest.raises(WritesError, match="3 non-constexpr|5 non-constexpr"):
        from_ttir(text, naive, ["x_ptr", "out_ptr"])


def test_in_place(kernels):
    sig = {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    assert written(kernels.inplace_kernel, sig, {"BLOCK": 32}) == {"x_ptr"}


def test_atomics(kernels):
    sig = {"x_ptr": "*fp32", "total_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    assert written(kernels.atomic_kernel, sig, {"BLOCK": 32}) == {"total_ptr"}
    sig = {"lock_ptr": "*i32", "x_ptr": "*i32", "out_ptr": "*i32"}
    assert written(kernels.cas_kernel, sig) == {"lock_ptr", "out_ptr"}


def test_pointers_carried_through_a_loop(kernels):
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "rows": "i32", "cols": "i32", "BLOCK": "constexpr"}
    text = compile_ttir(kernels.loop_kernel, sig, {"BLOCK": 32}, {})
    assert "scf.for" in text and "tt.addptr" in text
    assert written(kernels.loop_kernel, sig, {"BLOCK": 32}) == {"out_ptr"}


def test_block_pointers_advanced_in_a_loop(kernels):
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "rows": "i32", "BLOCK": "constexpr"}
    # (Triton rewrites block pointers into addptr chains before the TTIR is done)
    assert written(kernels.block_ptr_kernel, sig, {"BLOCK": 32}) == {"out_ptr"}


def test_select_of_pointers_marks_both(kernels):
    sig = {"a_ptr": "*fp32", "b_ptr": "*fp32", "x_ptr": "*fp32", "flag": "i32", "BLOCK": "constexpr"}
    assert written(kernels.select_kernel, sig, {"BLOCK": 32}) == {"a_ptr", "b_ptr"}


def test_calls_into_helpers_are_inlined(kernels):
    sig = {"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}
    assert written(kernels.helper_kernel, sig, {"BLOCK": 32}) == {"out_ptr"}


def test_unknown_use_is_conservative_but_loads_stay_inputs():
    # %arg0's pointer goes through ptr_to_int (not followed): unsure, counted as written;
    # %arg1 is only loaded: never counted as written.
    body = f"""
    %i = tt.ptr_to_int %arg0 : !tt.ptr<f32> -> i64
    %v = tt.load %q : {PTR}"""
    writes = from_ttir(ttir(body), ["a", "b"], ["a", "b"])
    assert writes.unsure == {"a"} and writes.written == set() and writes.source == "ttir-conservative"
    assert writes.names == {"a"}


def test_storing_a_pointer_as_data_is_unsure():
    text = """module {
  tt.func public @k(%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<!tt.ptr<f32>>) attributes {noinline = false} {
    tt.store %arg1, %arg0 : !tt.ptr<!tt.ptr<f32>>
    tt.return
  }
}
"""
    writes = from_ttir(text, ["a", "table"], ["a", "table"])
    assert writes.written == {"table"} and writes.unsure == {"a"}


def test_argument_count_mismatch_is_an_error():
    with pytest.raises(WritesError, match="2 arguments, the launch 3"):
        from_ttir(ttir(""), ["a", "b", "c"], ["a"])


def test_snapshot_sees_changes_and_ignores_nan_in_place():
    a = torch.tensor([1.0, float("nan")])
    b = torch.tensor([1, 2])
    snap = Snapshot({"a": a, "b": b})
    assert snap.changed() == set()
    b[0] = 5
    assert snap.changed() == {"b"}


def test_reads_are_the_pointers_that_reach_loads(kernels):
    def traced(fn, signature, constexprs):
        names, types = list(signature), list(signature.values())
        text = compile_ttir(fn, signature, constexprs, {})
        return from_ttir(text, ttir_params(names, types), [n for n, t in signature.items() if t.startswith("*")])

    inplace = traced(kernels.inplace_kernel, {"x_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 32})
    assert inplace.read == {"x_ptr"} and inplace.written == {"x_ptr"}  # read and written: in-out
    gather = traced(kernels.gather_kernel, {"src_ptr": "*fp32", "idx_ptr": "*i64", "out_ptr": "*fp32",
                                            "n": "i32", "BLOCK": "constexpr"}, {"BLOCK": 32})
    assert gather.read == {"src_ptr", "idx_ptr"} and gather.written == {"out_ptr"}
