"""TritonForge's table for the LLM proposer, from optimize runs of the suite made with ``--llm``
(``benchmarks/llm_suite.sh``). No GPU, no endpoint: it reads the runs' ``optimize.json``.

Per run (an arm: the model alone, ``--families llm``; the model-free families then the model):
kernels optimized, improved (>= the threshold, confirmed), success rate, mean speedup on success,
geomean over all, median optimizer wall time per kernel, and the model's cost per kernel (requests,
tokens in / out, seconds, dollars when the run had ``--llm-price``), with the kernels whose
decision the model made. TritonForge (seed 002) reports 42.7% at 1.76x, ~22 min and ~$1.20 a kernel.

    python3 benchmarks/llm_summary.py NAME=RUN/optimize.json [NAME=...] [--json OUT]
"""

from __future__ import annotations

import json
import pathlib
import statistics
import sys

import _common
from rewrites_summary import arm as figures_of


def arm(results: dict) -> dict:
    figures = figures_of(results)
    kernels = [k for k in results.get("kernels") or [] if k.get("llm")]
    costs = [(k["llm"].get("cost") or {}) for k in kernels]

    def per_kernel(field: str) -> float | None:
        values = [c.get(field) for c in costs if c.get(field) is not None]
        return statistics.mean(values) if values else None

    by_model = sorted(k["kernel"] for k in results.get("kernels") or []
                      if k.get("accepted") and any(w.startswith("llm(") for w in k.get("won_by") or []))
    figures.pop("wins_per_rule", None)
    figures.update(llm_kernels=len(kernels), requests_per_kernel=per_kernel("requests"),
                   tokens_in_per_kernel=per_kernel("prompt_tokens"), tokens_out_per_kernel=per_kernel("completion_tokens"),
                   model_seconds_per_kernel=per_kernel("seconds"), dollars_per_kernel=per_kernel("dollars"),
                   total=(results.get("llm") or {}).get("cost"), decided_by_the_model=by_model)
    return figures


def table(arms: dict[str, dict]) -> str:
    rows = ["| arm | optimized | improved | success | mean on success | median wall / kernel | model per kernel |",
            "|---|---|---|---|---|---|---|"]
    for name, a in arms.items():
        model = (f"{_n(a['requests_per_kernel'])} requests, {_n(a['tokens_in_per_kernel'])} / "
                 f"{_n(a['tokens_out_per_kernel'])} tokens, {_n(a['model_seconds_per_kernel'])} s"
                 + (f", ${a['dollars_per_kernel']:.2f}" if a["dollars_per_kernel"] is not None else ""))
        success = "-" if a["success_rate"] is None else f"{a['success_rate']:.0%}"
        mean = "-" if a["mean_speedup_on_success"] is None else f"{a['mean_speedup_on_success']:.2f}x"
        wall = "-" if a["median_wall_s"] is None else f"{a['median_wall_s']:.0f} s"
        rows.append(f"| {name} | {a['optimized']} | {a['improved']} | {success} | {mean} | {wall} | {model} |")
    return "\n".join(rows)


def _n(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def main(argv: list[str] | None = None) -> int:
    parser = _common.OneLineParser(prog="llm_summary.py", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="NAME=PATH", help="an arm's name and its optimize.json")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write the figures here")
    args = parser.parse_args(argv)
    arms = {}
    for given in args.runs:
        name, sep, path = given.partition("=")
        if not sep or not name or not path:
            parser.error(f"{given!r} is not NAME=PATH")
        try:
            arms[name] = arm(json.loads(pathlib.Path(path).read_text()))
        except (OSError, ValueError) as exc:
            parser.error(f"{path}: not an optimize.json ({exc.__class__.__name__}: {exc})")
    print(table(arms))
    if args.json:
        args.json.write_text(json.dumps({"arms": arms, "command": _common.portable_command(sys.argv)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
