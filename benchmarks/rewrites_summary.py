"""Issue 12's table from two optimize runs of the suite, same budget: knobs only (``--without
source-rewrite``) and with the source rewrites. No GPU: it reads the runs' ``optimize.json``.

Per arm: kernels optimized, improved (>= the run's threshold, confirmed), success rate, mean
speedup on success, geomean over all, median optimizer wall time per kernel; for the rewrites
arm, the wins per rule (the rule that starts a decision's chain, ``won_by[0]``), and the kernels
that only the rewrites arm improved. Writes JSON (``--json``) and prints a Markdown table.

    python3 benchmarks/rewrites_summary.py KNOBS/optimize.json REWRITES/optimize.json [--json OUT]
"""

from __future__ import annotations

import collections
import json
import pathlib
import re
import sys

import _common

RULE = re.compile(r"^([a-z0-9-]+)(\[noalias\])?(\(|$)")  # "pipeline-loop(S=2)" -> pipeline-loop


def arm(results: dict) -> dict:
    from tritune.report import summarize

    figures = summarize(results)
    rules = _rule_names()
    improved = [k for k in results["kernels"] if _improved(k, results)]
    wins = collections.Counter(_rule_of(k["won_by"][0]) for k in improved if k.get("won_by"))
    return {"optimized": figures["optimized"], "improved": figures["improved"],
            "success_rate": figures["success_rate"], "mean_speedup_on_success": figures["mean_speedup_on_success"],
            "geomean_speedup": figures["geomean_speedup"], "median_wall_s": figures["wall_s"]["median"],
            "wins_per_rule": {rule: n for rule, n in wins.items() if rule in rules},
            "improved_kernels": sorted(k["kernel"] for k in improved)}


def _rule_of(change: str) -> str:
    """The rule a ``won_by`` entry names ("pipeline-loop(S=2)" -> "pipeline-loop"); a knob stays."""
    match = RULE.match(change)
    return match.group(1) if match else change


def _rule_names() -> set[str]:
    from tritune.rewrites import RULES

    return set(RULES)


def _improved(kernel: dict, results: dict) -> bool:
    threshold = (results.get("settings") or {}).get("arbiter", {}).get("threshold", 1.05)
    return bool(kernel.get("accepted")) and (kernel.get("speedup") or 0) >= threshold


def table(knobs: dict, rewrites: dict) -> str:
    rows = ["| arm | optimized | improved | success | mean on success | geomean (all) | median wall / kernel | wins per rule |",
            "|---|---|---|---|---|---|---|---|"]
    for name, a in (("knobs only (`--without source-rewrite`)", knobs), ("knobs + source rewrites", rewrites)):
        wins = ", ".join(f"{rule} {n}" for rule, n in sorted(a["wins_per_rule"].items())) or "-"
        rows.append(f"| {name} | {a['optimized']} | {a['improved']} | {_pct(a['success_rate'])} | "
                    f"{_x(a['mean_speedup_on_success'])} | {_x(a['geomean_speedup'])} | {_s(a['median_wall_s'])} | {wins} |")
    return "\n".join(rows)


def _pct(value: float | None) -> str:
    return "-" if value is None else f"{value:.0%}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"


def main(argv: list[str] | None = None) -> int:
    parser = _common.OneLineParser(prog="rewrites_summary.py", description=__doc__.splitlines()[0])
    parser.add_argument("knobs", type=pathlib.Path, help="optimize.json of the run --without source-rewrite")
    parser.add_argument("rewrites", type=pathlib.Path, help="optimize.json of the run with the rewrites")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    loaded = []
    for path in (args.knobs, args.rewrites):
        try:
            loaded.append(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            parser.error(f"{path}: not an optimize.json ({exc.__class__.__name__}: {exc})")
    knobs, rewrites = (arm(results) for results in loaded)
    only = sorted(set(rewrites["improved_kernels"]) - set(knobs["improved_kernels"]))
    print(table(knobs, rewrites))
    print(f"\nimproved only with the rewrites: {', '.join(only) or 'none'}")
    if args.json:
        args.json.write_text(json.dumps({"knobs": knobs, "rewrites": rewrites, "only_with_rewrites": only,
                                         "command": _common.portable_command(sys.argv)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
