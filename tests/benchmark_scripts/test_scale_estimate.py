"""benchmarks/scale_estimate.py, the counting behind docs/scale.md: kernels, sources and keys per
model, cross-model sharing, throughput and GPU arithmetic, store bytes and a store written by
several processes. No GPU; the committed results pin the figures docs/scale.md quotes."""

from __future__ import annotations

import json
import pathlib
import sqlite3
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import scale_estimate as se  # noqa: E402

from tritune.model.key import DecisionKey
from tritune.store import DecisionStore  # noqa: E402
from tritune.store.keys import specialization_json  # noqa: E402


def record(model, kernel, module, gb=1.0, mode="train"):
    return {"model": model, "mode": mode, "kernel": kernel, "file": f"$CACHE/tmpx/ab/{module}.py", "kernel_num_gb": gb}


RECORDS = [
    record("a", "triton_poi_fused_add_0", "c1"),
    record("a", "triton_per_fused_sum_1", "c2"),
    record("a", "triton_poi_fused_0", "c3", gb=2.0),
    record("a", "triton_poi_fused_mul_2", "c7", gb=5.0),
    record("b", "triton_per_fused_sum_1", "c2"),  # the same module: one kernel text in two models
    record("b", "triton_poi_fused_0", "c4", gb=3.0),  # same name, other file, other bytes
    record("b", "triton_poi_fused_mul_2", "c8", gb=5.0),  # same name, other file, same bytes
    record("a", "triton_poi_fused_add_0", "c1", mode="infer"),  # infer is a model of its own here
]


def test_harvest_counts_kernels_modules_and_names_per_model_and_mode():
    rows = {(r["model"], r["mode"]): r for r in se.harvest_counts(RECORDS)}
    assert rows[("a", "train")] == {"model": "a", "mode": "train", "kernels": 4, "modules": 4, "names": 4}
    assert rows[("b", "train")]["kernels"] == 3 and rows[("a", "infer")]["modules"] == 1


def test_cross_model_finds_shared_files_not_shared_names():
    found = se.cross_model(RECORDS)
    assert found["kernels"] == 8 and found["distinct_modules"] == 6
    assert found["shared_modules"] == ["c1.py", "c2.py"]  # c1: a train and a infer
    assert found["shared_names"] == 4  # add_0, sum_1, fused_0, mul_2
    assert found["shared_names_other_file"] == 2  # fused_0 and mul_2
    assert found["shared_names_other_bytes"] == 1  # only fused_0 moves other bytes


def timed(kernel, sha, launches, ms):
    return {"kernel": kernel, "key_sha": sha, "launches": launches, "baseline_ms": ms}


def test_capture_counts_of_a_timed_list():
    result = {"keys": 5, "timed": [
        timed("k_native_dropout_3", "s1", 10, 1.0), timed("k_native_dropout_3", "s2", 10, 1.0),
        timed("k_native_dropout_3", "s3", 5, 1.0), timed("k_to_copy_1", "s4", 1, 0.5), timed("k_sum_2", "s5", 1, 0.5)]}
    found = se.capture_counts(result)
    assert (found["keys"], found["launches"], found["names"]) == (5, 27, 3)
    assert found["multi"] == {"k_native_dropout_3": 3}
    assert found["dropout_extra"] == 2
    assert found["cover_keys"] == 3  # 10 + 10 + 5 of 26 ms hold 96%


def test_capture_counts_of_a_sampled_run_gives_the_key_count_only():
    found = se.capture_counts({"keys": 174, "kernels": [{"kernel": "k", "key_sha": "s"}]})
    assert found["keys"] == 174 and found["names"] is None and found["cover_keys"] is None


@pytest.mark.parametrize("times, cover, n", [([5, 3, 1, 1], 0.8, 2), ([5, 3, 1, 1], 0.95, 4), ([1, 3, 5, 1], 0.5, 1),
                                             ([2, 2], 1.0, 2)])
def test_keys_to_cover_takes_the_costliest_first(times, cover, n):
    assert se.keys_to_cover(times, cover) == n


def test_shared_keys_counts_keys_under_two_models():
    assert se.shared_keys({"a": {"x", "y"}, "b": {"y", "z"}, "c": {"y"}}) == {"y": 3}
    assert se.shared_keys({"a": {"x"}, "b": {"z"}}) == {}


@pytest.mark.parametrize("values, classes", [
    # 0: i32D/0, 1: "1", 2: i32/2, 3-4: i32/4, 5-8: i32/8, 9-15: i32/16, 16: i32D/16,
    # 17-31: i32/32, 32: i32D/32, 33-36: i32/64
    (range(37), 10),
    ([1], 1), ([16, 32], 2), ([17, 31], 1), ([3, 4], 1), ([4, 5], 2)])
def test_int_key_classes_follow_the_keys_int_descriptor(values, classes):
    assert se.int_key_classes(values) == classes


def test_zoo_estimate_arithmetic():
    zoo = se.zoo_estimate({"a": 40, "b": 60, "c": 200}, 100, 0.01)
    assert (zoo["mean"], zoo["median"], zoo["keys_seen"]) == (100, 60, 300)
    assert zoo["zoo_mean"] == pytest.approx(9900) and zoo["zoo_median"] == pytest.approx(5940)


def test_throughput_counts_only_candidates_evaluated_in_the_run():
    cand = {"share_s": 0.5, "seconds": 1.0}
    result = {"started": "2026-11-23T10:00:00+00:00", "finished": "2026-11-23T10:01:40+00:00", "jobs": 16,
              "settings": {"budget_s": 10.0, "max_candidates": 16},
              "kernels": [{"wall_s": 30.0, "accepted": True,
                           "candidates": [cand, dict(cand, failure="timeout"), dict(cand, reused=True)]},
                          {"wall_s": 50.0, "accepted": False, "candidates": [dict(cand, share_s=0.1, failure="timeout")]}]}
    t = se.throughput(result)
    assert (t["keys"], t["candidates"], t["decisions"], t["run_s"], t["loop_s"]) == (2, 3, 1, 100.0, 80.0)
    assert t["s_per_key"] == 40.0 and t["candidates_per_s"] == pytest.approx(3 / 80)
    assert t["median_share_s"] == 0.5 and t["failures"] == {"timeout": 2}


def test_gpus_needed_rounds_up_whole_gpus():
    assert se.gpus_needed(10_000, 3.96, extra_s=10_600) == {"gpu_hours": pytest.approx(50_200 / 3600), "gpus": 2}
    assert se.gpus_needed(4320, 10.0)["gpus"] == 1  # exactly one night
    assert se.gpus_needed(4321, 10.0)["gpus"] == 2
    assert se.gpus_needed(0, 10.0)["gpus"] == 1


def test_overnight_and_capture_seconds():
    e2e = {"tasks": {"optimize:default": {"seconds": 400.0}}}
    result = {"started": "2026-11-23T10:00:00+00:00", "finished": "2026-11-23T10:04:54+00:00", "kernels": []}
    assert se.capture_seconds(e2e, "optimize:default", result) == 106.0
    rows = se.overnight([("p", 10.0)], [4320, 8640], 0.0, 100)
    assert [(r["keys"], r["gpus"]) for r in rows] == [(4320, 1), (8640, 2)]


def make_store(path):
    spec = specialization_json([["x", "T", "float32", [8], 1], ["y", "T", "float32", [8], 1], ["n", "I", "i32", 8]], {})
    key = DecisionKey("a" * 64, "kern", spec, "NVIDIA H100 80GB HBM3", 90, "3.6.0")
    with DecisionStore(path) as store:
        run = store.start_run({"s": 1}, "test")
        for n in (1, 2, 4):
            cand = store.add_candidate(run, key, {"name": f"w{n}", "options": {"num_warps": n}, "constexprs": {},
                                                  "passes": [], "fast_math": False, "source": None})
            store.claim(cand.id, run)
            store.finish_candidate(cand.id, "verified", verification={"ok": True, "checks": [{"name": "x"}] * n},
                                   timings={"median_ms": 1.0})
        store.finish_run(run)


def test_store_bytes_counts_rows_and_tensors(tmp_path):
    path = tmp_path / "s.db"
    make_store(path)
    found = se.store_bytes(path)
    assert found["tables"]["candidates"]["rows"] == 3 and found["tables"]["keys"]["rows"] == 1
    assert found["tables"]["candidates"]["data"] > 0 and found["tables"]["decisions"]["per_row"] is None
    assert found["check_bytes"] == {"checks": 7, "mean": len('{"name": "x"}')}
    assert found["tensors_per_key"] == [{"kernel": "kern", "tensors": 2, "candidates": 3,
                                         "mean_bytes": pytest.approx(found["tables"]["candidates"]["data"] / 3)}]


def test_writers_at_once_lose_nothing(tmp_path):
    path = tmp_path / "w.db"
    found = se.write_rate(path, writers=3, per_writer=4)
    assert found["commits"] == 3 * (1 + 3 * 4)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT count(*), sum(status = 'verified') FROM candidates").fetchone() == (12, 12)
    assert conn.execute("SELECT count(*) FROM runs").fetchone() == (3,)
    assert conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)


def test_the_committed_results_give_the_figures_docs_scale_quotes():
    found = se.collect()
    harvest = {(h["model"], h["mode"]): h for h in found["harvest"]}
    assert harvest[("coat_lite_mini", "train")] == {"model": "coat_lite_mini", "mode": "train", "kernels": 241,
                                                    "modules": 241, "names": 241}
    cross = found["cross_model"]
    assert (cross["kernels"], cross["distinct_modules"], len(cross["shared_modules"])) == (463, 461, 2)
    bert, gpt2 = found["captures"]["bert"], found["captures"]["gpt2"]
    assert (bert["launches"], bert["keys"], bert["names"], bert["dropout_extra"]) == (1266, 55, 41, 11)
    assert (gpt2["keys"], gpt2["names"], gpt2["cover_keys"]) == (55, 44, 38)
    assert found["shared_keys"] == 0
    assert found["zoo"]["keys_seen"] == 826 and round(found["zoo"]["zoo_mean"]) == 11749
    run = found["runs"]["e2e/optimize/gpt2.json"]
    assert (run["keys"], run["candidates"], run["run_s"]) == (38, 255, 294.0)
    assert round(found["capture_s"]) == 106
    plans = {(o["plan"], o["keys"]): o["gpus"] for o in found["overnight"]}
    assert plans[("bound: --budget-s 10", 10_000)] == 3


def test_the_script_prints_its_tables(tmp_path, capsys):
    assert se.main(["--json", str(tmp_path / "s.json")]) == 0
    out = capsys.readouterr().out
    assert "| bert | train | 40 | 40 | 40 |" in out and "## One night (12 h)" in out
    assert json.loads((tmp_path / "s.json").read_text())["zoo"]["keys_seen"] == 826


def test_a_missing_store_is_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as exc:
        se.main(["--store", str(tmp_path / "none.db")])
    assert exc.value.code == 2
    assert "none.db: no such decision store" in capsys.readouterr().err


def test_triton_cache_bytes_of_one_compiled_variant(tmp_path):
    found = se.triton_cache_bytes(tmp_path / "cache", probe=se.CACHE_PROBE[:1], warps=(4,))
    assert found["variants"] == 2  # two block sizes, one warp count
    assert 0 < found["min"] <= found["mean"] <= found["max"]
    assert any(p.suffix == ".cubin" for p in (tmp_path / "cache").rglob("*"))
