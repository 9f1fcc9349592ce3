"""``benchmarks/prior_summary.py``, the table of ``benchmarks/prior_gpu.sh``, on the CPU: it reads
what the loop records (``prior`` per candidate)."""

from __future__ import annotations

import pathlib
import sys

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCH))

import prior_summary  # noqa: E402


def test_the_summary_says_which_candidates_came_from_the_store():
    optimize = {"kernels": [{"kernel": "add_kernel", "decision": "BLOCK=1024", "speedup": 3.5, "wall_s": 12.0,
                             "roofline_before": 0.07, "roofline_after": 0.8,
                             "candidates": [{"variant": "BLOCK=1024", "prior": True},
                                            {"variant": "BLOCK=2048", "prior": False}, {"variant": "BLOCK=512"}]}]}
    [row] = prior_summary.arm_row("seeded", optimize)
    assert (row["first"], row["first_prior"], row["from_prior"], row["candidates"]) == ("BLOCK=1024", True, 1, 3)
    text = prior_summary.table([row])
    assert "| seeded | add_kernel | BLOCK=1024 | True | 1 | 3 | BLOCK=1024 | 3.5 | 0.07 | 0.8 | 12 |" in text
    assert prior_summary.arm_row("empty", {"kernels": [{"kernel": "k", "candidates": []}]})[0]["first"] is None
