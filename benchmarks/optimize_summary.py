"""Issue 5's figures from the committed optimize results (``results/optimize/*.json``): no GPU.

Per model (Inductor kernels harvested from a training step, a seeded sample of each model's
decision keys) and for the hand-written suite: kernels improved >= 1.05x over the captured
launch (Inductor's own choice for the models), geomean speedup over all optimized kernels (1.0
for not improved), mean speedup on success (TritonForge's two figures), the sum of kernel times
before and after against the roofline floor, and the optimizer's wall time per kernel. Wall time
counts only kernels whose candidates were all evaluated in the run that wrote the file (a resumed
run reuses earlier candidates and takes seconds); the suite's first run is in suite_kernels.jsonl.
Writes ``results/optimize/summary.md`` and a combined report over the five models.

    PYTHONPATH=src python3 benchmarks/optimize_summary.py
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent / "results" / "optimize"
MODELS = ("bert", "coat_lite_mini", "convit_base", "botnet26t_256", "beit_base_patch16_224")


def fresh_walls(kernels: list[dict]) -> list[float]:
    return [k["wall_s"] for k in kernels if k.get("baseline_ms") and not any(c.get("reused") for c in k["candidates"])]


def row(name: str, results: dict, walls: list[float]) -> str:
    from tritune.report import summarize

    s = summarize(results)
    roof = s["roofline"]
    wall = f"{statistics.median(walls):.1f} s (n={len(walls)})" if walls else "-"
    keys = results.get("keys") or len(results["kernels"])
    return (f"| {name} | {keys} | {s['optimized']} | {s['improved']} ({100 * s['success_rate']:.0f}%) | "
            f"{s['geomean_speedup']:.3f}x | {_x(s['mean_speedup_on_success'])} | "
            f"{roof['before_ms'] * 1e3:.1f} -> {roof['after_ms'] * 1e3:.1f} us | {roof['floor_ms'] * 1e3:.1f} us | "
            f"{roof['before_x_floor']:.2f}x -> {roof['after_x_floor']:.2f}x | {wall} |")


def _x(value) -> str:
    return "-" if value is None else f"{value:.2f}x"


def main() -> int:
    sys.path.insert(0, str(HERE.parent.parent.parent / "src"))
    from tritune.report import write_report

    header = ("| set | keys | optimized | improved >= 1.05x | geomean (all) | mean on success | "
              "sum of kernel times | roofline floor | x floor | optimizer wall / kernel (median) |\n"
              "|---|---|---|---|---|---|---|---|---|---|")
    lines = [header]
    merged, walls_all = None, []
    for model in MODELS:
        results = json.loads((HERE / f"{model}.json").read_text())
        walls = fresh_walls(results["kernels"])
        walls_all += walls
        lines.append(row(model, results, walls))
        if merged is None:
            merged = {**results, "command": "tritune optimize --launches <harvest> --sample N, five models",
                      "kernels": [], "keys": 0, "planned": 0}
        merged["kernels"] += [{**k, "kind": f"inductor ({model})"} for k in results["kernels"]]
        merged["keys"] += results.get("keys") or 0
    lines.append(row("**five models**", merged, walls_all))
    suite = json.loads((HERE / "suite.json").read_text())
    progress = [json.loads(line) for line in (HERE / "suite_kernels.jsonl").read_text().splitlines()]
    first_run = min(p["run_id"] for p in progress)
    first = {p["result"]["key_sha"]: p["result"] for p in progress if p["run_id"] == first_run}
    later = [k for k in suite["kernels"] if k["key_sha"] not in first]  # kernels the first run did not reach
    suite_walls = fresh_walls(list(first.values()) + later)
    lines.append(row("hand-written suite", suite, suite_walls))
    (HERE / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    write_report(merged, HERE / "models_report")
    write_report(suite, HERE / "suite_report")
    return 0


if __name__ == "__main__":
    sys.exit(main())
