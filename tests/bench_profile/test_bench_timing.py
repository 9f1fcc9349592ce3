"""The timing statistics on synthetic times (no GPU), the copy-bandwidth cache, and the import
contract benchmarks/_common.py relies on (tritune.bench loads neither torch nor Triton)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tritune.bench import timing

BENCH = Path(__file__).resolve().parents[2] / "benchmarks"


def test_percentiles_interpolate_between_ranks_like_numpy():
    values = list(range(1, 101))  # 1..100
    assert timing.percentile(values, 50) == pytest.approx(50.5)
    assert timing.percentile(values, 95) == pytest.approx(95.05)
    assert timing.percentile(values, 0) == 1 and timing.percentile(values, 100) == 100
    assert timing.percentile([7.0], 95) == 7.0
    assert timing.percentile([3.0, 1.0, 2.0], 50) == 2.0  # order of the input does not matter


def test_percentile_rejects_nothing_and_out_of_range():
    with pytest.raises(ValueError, match="no values"):
        timing.percentile([], 50)
    with pytest.raises(ValueError, match="outside"):
        timing.percentile([1.0], 101)


def test_summary_of_a_skewed_list_separates_mean_p50_and_p95():
    times = [1.0] * 90 + [10.0] * 10  # a tenth of the runs hit a slow path
    stats = timing.summarize(times)
    assert stats["runs"] == 100
    assert stats["mean_ms"] == pytest.approx(1.9)
    assert stats["p50_ms"] == 1.0
    assert stats["p95_ms"] == 10.0
    assert (stats["min_ms"], stats["max_ms"]) == (1.0, 10.0)


def test_relative_spread_is_symmetric_and_relative_to_the_faster():
    assert timing.relative_spread(1.0, 1.1) == pytest.approx(0.1)
    assert timing.relative_spread(1.1, 1.0) == pytest.approx(0.1)
    assert timing.relative_spread(2.0, 2.0) == 0.0
    assert timing.relative_spread(0.0, 1.0) == float("inf")


def test_ratio_summary_is_the_mean_of_per_run_ratios_not_the_ratio_of_means():
    base, cand = [2.0, 4.0], [1.0, 4.0]  # ratios 2 and 1: mean 1.5 (ratio of means would be 1.2)
    summary = timing.ratio_summary(base, cand)
    assert summary["speedup_mean50"] == pytest.approx(1.5)
    assert (summary["base_mean_ms"], summary["cand_mean_ms"]) == (3.0, 2.5)
    assert (summary["ratio_min"], summary["ratio_max"]) == (1.0, 2.0)
    with pytest.raises(ValueError, match="equally many"):
        timing.ratio_summary([1.0], [1.0, 2.0])


def test_rotation_only_for_working_sets_below_l2():
    l2 = 50 * 2**20
    assert timing.rotation_count(l2, l2) == 1
    assert timing.rotation_count(10 * l2, l2) == 1
    assert timing.rotation_count(l2 // 2, l2) == 6  # 3 x L2 of input sets
    assert timing.rotation_count(1, l2) == 8  # capped


def test_copy_bandwidth_comes_from_the_disk_cache_keyed_by_gpu_name(tmp_path, monkeypatch):
    torch = pytest.importorskip("torch")
    monkeypatch.setattr(timing, "_COPY_GBPS", {})
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index=None: "Fake GPU")
    monkeypatch.setattr(torch.cuda, "current_device", lambda: 0)
    cache = tmp_path / "bandwidth.json"
    cache.write_text(json.dumps({"Other GPU": 1.0, "Fake GPU": 2950.0}))
    assert timing.copy_bandwidth_gbps(cache_file=cache) == 2950.0
    cache.unlink()  # now served from the per-process cache, still without measuring
    assert timing.copy_bandwidth_gbps("cuda:0") == 2950.0


def test_a_damaged_bandwidth_cache_is_ignored(tmp_path):
    cache = tmp_path / "bandwidth.json"
    cache.write_text("{not json")
    assert timing._read_cache(cache) == {}
    timing._write_cache(cache, {"Fake GPU": 1.5})
    assert timing._read_cache(cache) == {"Fake GPU": 1.5}


def test_importing_tritune_bench_loads_neither_torch_nor_triton():
    # benchmarks/_common.py re-exports the timing helpers before bootstrap() sets Triton's cache.
    code = ("import sys, tritune.bench; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('torch', 'triton')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_benchmarks_common_times_with_the_library():
    sys.path.insert(0, str(BENCH))
    try:
        import _common
    finally:
        sys.path.remove(str(BENCH))
    for name in ("do_bench_median", "paired_ratio", "copy_bandwidth_gbps", "rotation_count"):
        assert getattr(_common, name) is getattr(timing, name)
    with pytest.raises(AttributeError):
        _common.no_such_helper
