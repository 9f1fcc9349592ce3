"""The committed benchmark results read honestly: figures benchmarks/README.md quotes are the ones
their data files hold (rounded, not picked from an older file)."""

from __future__ import annotations

import json
import pathlib
import re

BENCH = pathlib.Path(__file__).resolve().parent.parent / "benchmarks"
RESULTS = BENCH / "results"
README = (BENCH / "README.md").read_text()


def _load(name: str):
    return json.loads((RESULTS / name).read_text())


def _quoted(text: str) -> None:
    """``text`` in benchmarks/README.md, its line breaks and indentation taken as one space."""
    flat = re.sub(r"\s+", " ", README)
    assert text in flat, f"benchmarks/README.md does not say: {text}"


def test_the_e2e_abab_spread_is_the_pairs_of_every_model_and_mode():
    ratios = [r for model in ("bert", "gpt2", "resnet50") for mode in _load(f"e2e/{model}.json")["modes"].values()
              for r in (mode.get("speedup") or {}).get("ratios", [])]
    assert len(ratios) == 3 * 2 * 8  # two tritune modes a model, 8 ABAB pairs each
    _quoted(f"spread from {min(ratios):.2f}x (bert's `tritune` row) to {max(ratios):.2f}x")


def test_resnet50s_decided_keys_range_is_its_optimize_json():
    decided = [k["speedup"] for k in _load("e2e/optimize/resnet50.json")["kernels"] if k["accepted"]]
    _quoted(f"15 decided, {min(decided):.2f}x-{max(decided):.2f}x each in `results/e2e/optimize/resnet50.json`")
    assert len(decided) == 15


def test_the_suites_matmul_is_its_suite_json():
    (matmul,) = [k for k in _load("optimize/suite.json")["kernels"] if k["kernel"] == "matmul_kernel"]
    _quoted(f"`matmul` {matmul['speedup']:.2f}x (`BLOCK_M` 64 -> 256; {matmul['speedup']:.4f} in `suite.json`)")


def test_the_coverage_table_gives_each_stopped_runs_own_deadline():
    for name, row in (("gpt2-resumed", "gpt2 train, second run (`gpt2-resumed.json`, new capture) | 55 |"),
                      ("gpt2-first", "gpt2 train, first run (`c80b001`, `gpt2-first.json`) | 55 |")):
        seconds = re.match(r"deadline: (\d+) s spent", _load(f"e2e/optimize/{name}.json")["stopped"]).group(1)
        _quoted(f"{row} deadline {seconds} s |")


def test_the_apply_overhead_block_spread_is_the_file_the_table_reads():
    blocks = _load("apply_overhead.json")["us_per_launch"]["jit_no_decision"]["samples"]["off"]["host"]
    assert len(blocks) == 10
    _quoted(f"{min(blocks):.1f}-{max(blocks):.1f} us over its 10 blocks in `apply_overhead.json`")
