"""benchmarks/far_off.py's logic on the CPU: the rows it reports from an optimize.json and its target."""

from __future__ import annotations

import importlib.util
import pathlib

SCRIPT = pathlib.Path(__file__).resolve().parent.parent / "benchmarks" / "far_off.py"


def far_off():
    spec = importlib.util.spec_from_file_location("far_off", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_target_is_the_roofline_after_optimizing():
    module = far_off()
    candidates = [{"variant": f"BLOCK={b}"} for b in (1024, 256, 64, 16, 2048, 4096, 512)]
    optimize = {"kernels": [
        {"kernel": "add_kernel", "baseline_ms": 5.0, "best_ms": 0.5, "speedup": 10.0, "roofline_before": 0.07,
         "roofline_after": 0.72, "decision": "num_warps=4, BLOCK=2048", "candidates": candidates},
        {"kernel": "other", "baseline_ms": 1.0, "best_ms": 1.0, "speedup": 1.0, "roofline_before": 0.07,
         "roofline_after": 0.07, "decision": None, "candidates": []},
        {"kernel": "untimed", "roofline_after": None}]}
    rows = module.summarize(optimize)
    assert [r["met"] for r in rows] == [True, False, False]
    assert rows[0]["candidates"] == 7 and rows[0]["first"] == [c["variant"] for c in candidates[:6]]
    assert module.summarize({}) == []
