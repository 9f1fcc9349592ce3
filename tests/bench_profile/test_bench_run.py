"""bench_spec under the interpreter (times marked not meaningful), a variant through it, the worker
payload round trip, and the GPU-side arithmetic of a result on synthetic timings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tritune.bench import run
from conftest import kernel_hash
from tritune.capture.spec import read_launches, write_launches
from tritune.model.launch import ArgSpec, LaunchSpec

KERNEL = (Path(__file__).parents[1] / "programs" / "replay_kernels.py").read_text()  # add_kernel, gather_kernel


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def add_spec(n: int = 1000, block: int = 128, count: int = 5) -> LaunchSpec:
    def tensor(name, written=False):
        return ArgSpec(name, "tensor", shape=[n], stride=[1], dtype="float32", device="cuda:0", written=written)

    return LaunchSpec(
        kernel="add_kernel", kind="jit", module="kernels", source_file="kernels.py", source="sources/kernels.py",
        source_hash=kernel_hash(KERNEL, "add_kernel"),
        args=[tensor("x_ptr"), tensor("y_ptr"), tensor("out_ptr", True), ArgSpec("n", "scalar", value=n, type="int"),
              ArgSpec("BLOCK", "constexpr")],
        constexprs={"BLOCK": block}, options={"num_warps": 4}, grid=[-(-n // block)], count=count,
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}]},
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "kernels.py").write_text(KERNEL)
    write_launches(tmp_path, [add_spec()])
    return tmp_path


def test_cpu_result_is_marked_not_meaningful_and_claims_no_bandwidth(root):
    [spec] = read_launches(root)
    result = run.bench_spec(spec, root)
    assert set(result) == set(run.RESULT_KEYS)
    assert result["meaningful"] is False and result["device"] == "cpu"
    assert result["median_ms"] > 0 and result["time_ms"] == result["median_ms"]
    assert result["total_ms"] == pytest.approx(result["median_ms"] * 5)
    assert result["bytes"] == 12_000 and result["bytes_source"] == "estimate"
    # No GPU numbers from CPU times: no GB/s, no roofline, no noise or graph claimed.
    for key in ("gbps", "roofline", "copy_gbps", "noise", "graph_ms", "floor_ms"):
        assert result[key] is None, key
    assert result["grid"] == [8, 1, 1] and result["failure"] is None


def test_a_variant_is_benchmarked_with_its_own_grid(root):
    from tritune.model.variant import Variant

    [spec] = read_launches(root)
    result = run.bench_spec(spec, root, Variant(name="wide", constexprs={"BLOCK": 512}))
    assert result["variant"] == "wide" and result["grid"] == [2, 1, 1]


def test_bench_job_takes_a_json_payload(root):
    from tritune.model.variant import Variant

    [spec] = read_launches(root)
    payload = json.loads(json.dumps({"spec": spec.to_json(), "root": str(root),
                                     "variant": Variant(name="v", constexprs={"BLOCK": 256}).to_json(),
                                     "methods": ["events"]}))
    result = run.bench_job(payload)
    assert result["id"] == spec.id and result["variant"] == "v" and result["grid"] == [4, 1, 1]
    assert result["methods"] == ["events"]
    json.dumps(result)  # goes back over the worker's pipe and into --json as it is


def test_unknown_methods_are_refused():
    assert run.check_methods(["graph", "median", "graph"]) == ("graph", "median")
    with pytest.raises(ValueError, match="unknown timing method.*'cuda_events'"):
        run.check_methods(["median", "cuda_events"])
    with pytest.raises(ValueError, match="none given"):
        run.check_methods([])


def test_gpu_result_arithmetic_on_synthetic_times():
    result = run.empty_result(add_spec(count=10))
    result.update(meaningful=True, bytes=3_000_000, copy_gbps=3000.0, median_ms=0.002, p50_ms=0.0025,
                  graph_ms=0.0015)
    done = run._finish(result)
    assert done["time_ms"] == 0.002  # the do_bench median is the headline
    assert done["total_ms"] == pytest.approx(0.02)
    assert done["gbps"] == pytest.approx(1500.0)
    assert done["roofline"] == pytest.approx(0.5)
    assert done["floor_ms"] == pytest.approx(0.001)
    only_graph = run.empty_result(add_spec())
    only_graph.update(meaningful=True, bytes=3_000_000, copy_gbps=None, graph_ms=0.004)
    done = run._finish(only_graph)
    assert done["time_ms"] == 0.004 and done["gbps"] == pytest.approx(750.0) and done["roofline"] is None


def test_a_screening_time_takes_one_median_the_baseline_two(monkeypatch):
    medians = []
    monkeypatch.setattr(run.timing, "do_bench_median", lambda launch: medians.append(1) or 2.0)
    monkeypatch.setattr(run.timing, "graph_time", lambda launch: {"graph_ms": 1.0, "method": "graph",
                                                                  "fallback": None, "launches": 9})
    once = run._gpu_times(lambda: None, ("median", "graph"), medians=1)
    assert medians == [1] and once["median_ms"] == 2.0 and "noise" not in once and once["graph_ms"] == 1.0
    twice = run._gpu_times(lambda: None, ("median",))
    assert len(medians) == 3 and twice["median2_ms"] == 2.0 and twice["noise"] == 0.0
    budgets = []
    monkeypatch.setattr(run.timing, "do_bench_median", lambda launch, **budget: budgets.append(budget) or 2.0)
    run._gpu_times(lambda: None, ("median",), medians=1, bench_ms=(10, 40))  # the ranking's shorter do_bench
    assert budgets == [{"warmup": 10, "rep": 40}]
