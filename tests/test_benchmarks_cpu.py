"""What of benchmarks/ can be checked without a GPU: the seed-000 patterns fire (dry run), the
correctness gates reject wrong outputs, and the GPU scripts stop in one clear line on a CPU."""

from __future__ import annotations

import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
sys.path.insert(0, str(BENCH))

import _common  # noqa: E402
import inductor_passes  # noqa: E402  (no torch/triton work at import: safe here)


def _run(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], capture_output=True, text=True, timeout=600)


def test_dry_run_every_quick_pattern_fires():
    result = _run(str(BENCH / "seed000_passes.py"), "--dry-run", "--quick")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "13/13 cases as expected" in result.stdout
    assert "did not fire" not in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only failure path")
@pytest.mark.parametrize("script", ["seed000_passes.py", "inductor_passes.py"])
def test_gpu_run_stops_clearly_without_gpu(script, tmp_path):
    result = _run(str(BENCH / script), "--out", str(tmp_path))
    assert result.returncode != 0
    assert "no CUDA GPU here" in result.stderr
    assert "Traceback" not in result.stderr


def test_bitwise_gate_rejects_one_flipped_bit_and_unwritten_elements():
    base = torch.randn(1000)
    cand = base.clone()
    assert _common.bitwise_check([base], [cand])["ok"]
    cand.view(torch.int32)[17] ^= 1
    assert _common.bitwise_check([base], [cand])["mismatched_elements"] == 1
    holes = torch.empty(1000)
    _common.poison([holes])
    holes[:999] = base[:999]
    assert _common.bitwise_check([base], [holes])["unwritten"] == 1


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_poison_is_a_nan_that_arithmetic_does_not_produce(dtype):
    t = torch.empty(4, dtype=dtype)
    _common.poison([t])
    assert t.isnan().all() and _common.unwritten(t) == 4
    assert _common.unwritten(t * 1) == 0  # arithmetic quiets the NaN: a computed NaN is not a hole


def test_fast_math_gate_limits_and_parity():
    base = torch.randn(10000).abs() + 0.1
    assert _common.fast_math_check([base], [base * (1 + 1e-6)])["ok"]
    assert not _common.fast_math_check([base], [base * (1 + 2**-12)])["ok"]  # 2.4e-4 > 1e-4
    nan = base.clone()
    nan[3] = float("nan")
    assert _common.fast_math_check([base], [nan])["nan_mismatch"] == 1
    inf = base.clone()
    inf[5] = float("inf")
    assert _common.fast_math_check([base], [inf])["inf_mismatch"] == 1
    zero = base.clone()
    zero[0] = 0.0
    assert _common.fast_math_check([zero], [zero.clone()])["ok"]


def test_kernel_modules_are_found_and_classified():
    examples = BENCH.parent / "examples" / "inductor"
    found = inductor_passes.kernel_files(str(examples))
    kinds = sorted(inductor_passes.KERNEL_DEF.search(pathlib.Path(p).read_text()).group(2) for p in found)
    assert kinds == ["per", "per", "poi", "red"]
