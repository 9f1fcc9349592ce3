"""The end-to-end table for benchmarks/README.md, from ``results/e2e/*.json`` (``e2e.py``'s); no GPU.

    python3 benchmarks/e2e_table.py [DIR]        # default: benchmarks/results/e2e
    python3 benchmarks/e2e_table.py --merge OLD.json NEW.json OUT.json   # two states' results of one model

One table per model: the five modes' step time (with its noise), how each compares with the
default mode (separate processes), tritune's gain over its own baseline in the same process
(ABAB), Triton kernel time, how busy the GPU is, compile or optimize time and the loss check;
then where the step is CPU-bound, the coverage of the optimize runs and the goals as measured.
"""

from __future__ import annotations

import json
import pathlib
import sys

BENCH = pathlib.Path(__file__).resolve().parent
ROWS = ("default", "coordinate_descent", "max_autotune", "tritune", "coordinate_descent+tritune")
HEADER = ("| mode | step ms (noise) | vs default | tritune on / off, same process | Triton kernel ms | "
          "kernel vs default | GPU busy | compile / optimize s | loss |")


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def _ms(row: dict) -> str:
    if row.get("step_ms") is None:
        return row.get("status") or "-"
    return f"{row['step_ms']:.2f} (±{row['noise']:.1%})" if row.get("noise") is not None else f"{row['step_ms']:.2f}"


def _ratio(base: float | None, value: float | None) -> float | None:
    return base / value if base and value else None


def _same_process(row: dict) -> str:
    paired = row.get("speedup")
    if not paired:
        return ""
    kernels = row.get("kernel_speedup")
    return (f"{paired['speedup']:.3f}x ({paired['verdict']}, {len(paired['ratios'])} pairs"
            f"{f'; kernels {kernels:.3f}x' if kernels else ''})")


def _cost(row: dict) -> str:
    if row.get("compile_s") is not None:
        return f"compile {row['compile_s']:.0f}"
    if row.get("optimize_s") is not None:
        return f"optimize {row['optimize_s']:.0f}"
    return "-"


def _loss(row: dict) -> str:
    check = row.get("loss_check")
    if check:
        verdict = "equal" if check["ok"] else "DIFFER"
        return f"{verdict}: max rel. diff {check['max_rel_diff']:.1e} (tol. {check['tolerance']:.1e})"
    return f"last {row['loss'][-1]:.4f}" if row.get("loss") else "-"


def table(result: dict) -> str:
    modes = result["modes"]
    default = modes["default"]
    lines = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    for name in ROWS:
        row = modes.get(name) or {}
        vs = _x(_ratio(default.get("step_ms"), row.get("step_ms")))
        kernel_vs = _x(_ratio(default.get("kernel_ms"), row.get("kernel_ms")))
        busy = f"{row['gpu_busy']:.0%}" if row.get("gpu_busy") is not None else "-"
        kernel = f"{row['kernel_ms']:.2f}" if row.get("kernel_ms") is not None else "-"
        lines.append(f"| {name} | {_ms(row)} | {vs} | {_same_process(row)} | {kernel} | {kernel_vs} | {busy} | "
                     f"{_cost(row)} | {_loss(row)} |")
    return "\n".join(lines)


def notes(result: dict) -> list[str]:
    out = []
    if result.get("cpu_bound"):
        out.append(f"- Default mode: {result['cpu_bound']}.")
    for mode, cover in (result.get("coverage") or {}).items():
        if cover:
            share = f"{cover['share']:.0%}" if cover.get("share") is not None else "-"
            out.append(f"- Optimize run ({mode}): {cover['optimized']} of {cover['keys']} keys optimized, "
                       f"{cover['decided']} decided; covered {share} of {cover['of']}"
                       + (f"; stopped: {cover['stopped']}" if cover.get("stopped") else ""))
    goals = result.get("goals") or {}
    named = {"tritune_step_speedup_ge_1.05": "step >= 1.05x over default (same process)",
             "tritune_at_least_coordinate_descent": "step >= coordinate descent's (separate processes)",
             "tritune_kernel_speedup_ge_1.10": "Triton kernel time >= 1.10x (same process)",
             "losses_equal_within_tolerance": "losses equal within tolerance"}
    said = [f"{text}: {'met' if goals[key] else 'not met'}" for key, text in named.items() if goals.get(key) is not None]
    if said:
        out.append("- Goals: " + "; ".join(said) + ".")
    if result.get("merged_from"):
        by_date: dict = {}
        for mode, row in (result.get("modes") or {}).items():
            if row.get("step_ms") is not None:
                by_date.setdefault((row.get("measured") or "?")[:10], []).append(mode)
        out.append("- Measured in separate sessions (a machine of the same kind each): "
                   + "; ".join(f"{', '.join(modes)} on {date}" for date, modes in sorted(by_date.items())) + ".")
    if result.get("missing"):
        out.append(f"- Not measured yet: {', '.join(result['missing'])}.")
    return out


def render(result: dict) -> str:
    model = result.get("model") or {}
    head = f"**{model.get('name')}**"
    if model.get("what"):
        head += f": {model['what']}; {model.get('precision')}; {model.get('params', 0) / 1e6:.1f}M parameters"
    if result.get("gpu"):
        head += f" ({result['gpu']}, {result.get('date')}, torch {result.get('torch')}, triton {result.get('triton')})"
    return "\n".join([head, "", table(result), "", *notes(result)])


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args[:1] == ["--merge"]:
        if len(args) != 4:
            print("e2e_table.py: --merge OLD.json NEW.json OUT.json", file=sys.stderr)
            return 2
        sys.path.insert(0, str(BENCH / "e2e"))
        from summary import merge

        old, new = (json.loads(pathlib.Path(path).read_text()) for path in args[1:3])
        try:
            merged = merge(old, new)
        except ValueError as exc:
            print(f"e2e_table.py: {exc}", file=sys.stderr)
            return 2
        pathlib.Path(args[3]).write_text(json.dumps(merged, indent=1) + "\n")
        print(render(merged))
        return 0
    folder = pathlib.Path(args[0]) if args else BENCH / "results" / "e2e"
    files = sorted(p for p in folder.glob("*.json") if p.name != "provenance.json")  # the folder's manifest
    if not files:
        print(f"e2e_table.py: no results in {folder}", file=sys.stderr)
        return 2
    print("\n\n".join(render(json.loads(path.read_text())) for path in files))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
