"""The corpus table from ``run.py``'s results.json (no GPU needed):

    python3 benchmarks/corpus/summary.py RESULTS.json [--out corpus.md]

Per file and overall:
- kernels: decision keys in the capture (distinct kernel, specialization and shape bucket);
  replayed: keys whose baseline the optimizer could replay and time (the rest are named below the
  table with why);
- decided: keys with an accepted decision (the optimizer's own verified >= 1.05x);
- improved: Triton kernels (by name) that, enabled vs disabled in one process, ran a decision
  (applied launches) and were >= 1.05x faster per step (torch.profiler, interleaved rounds);
  mean and geomean of those kernels' measured speedups (on success only);
- wrong: outputs of the enabled step outside tolerance of the disabled step (must be 0);
- step: the file's whole step, enabled vs disabled (median of interleaved block pairs);
- optimizer s: wall seconds of ``tritune optimize`` on the file (all calls summed).
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

THRESHOLD = 1.05


def file_row(record: dict) -> dict:
    """One file's figures (None where the stage did not run)."""
    opt = record.get("optimize") or {}
    meas = record.get("measure") or {}
    improved = [k for k in meas.get("kernels", []) if k.get("improved")]
    speedups = [k["speedup"] for k in improved]
    step = (meas.get("step") or {}).get("paired") or {}
    return {"file": record["file"], "done": bool(record.get("done")), "keys": opt.get("keys"),
            "replayed": opt.get("replayed"), "decided": len(opt.get("decided", [])) if opt else None,
            "improved": len(improved) if meas else None, "speedups": speedups,
            "wrong": meas.get("wrong") if meas else None, "step": step.get("speedup"),
            "verdict": step.get("verdict"), "optimizer_s": record.get("optimize_s"),
            "not_replayed": opt.get("not_replayed", []), "failed": failed_stages(record),
            "reproducible": meas.get("reproducible", True) if meas else True}


def failed_stages(record: dict) -> list[str]:
    """Stages that failed or were cut. ``tritune optimize`` exits 1 when no key ran (e.g. the
    deadline spent before any): an outcome of the fixed deadline, said with the run's own reason."""
    out = []
    for stage, info in record.get("stages", {}).items():
        rc = info.get("rc")
        if info.get("skipped"):
            out.append(f"{stage}: skipped: {info['skipped']}")
        elif info.get("cut"):
            out.append(f"{stage}: cut at the call's limit")
        elif stage == "optimize" and rc == 1:
            stopped = (record.get("optimize") or {}).get("stopped")
            out.append("optimize: no key ran (exit 1)" + (f": {stopped}" if stopped else ""))
        elif rc not in (0, None):
            out.append(f"{stage}: failed (exit {rc})")
    return out


def _mean(values: list[float]) -> str:
    return f"{statistics.mean(values):.3f}x" if values else "-"


def _geomean(values: list[float]) -> str:
    return f"{statistics.geometric_mean(values):.3f}x" if values else "-"


def _n(value) -> str:
    return "-" if value is None else (f"{value:.0f}" if isinstance(value, float) else str(value))


def render(results: dict) -> str:
    env = results.get("environment", {})
    rows = [file_row(f) for f in results.get("files", [])]
    lines = [
        "# Development corpus: Liger-Kernel and flash-linear-attention (issue 24, section 4)",
        "",
        f"GPU: {env.get('gpu')}; {env.get('utc')}; torch {env.get('torch')}, triton {env.get('triton')}; "
        f"tritune optimize --deadline-s {results.get('deadline_s'):g} a file, defaults otherwise.",
        f"Command: `{results.get('command')}`",
        "",
        "| file | kernels | replayed | decided | improved | mean | geomean | wrong | step | optimizer s |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        step = f"{r['step']:.3f}x" if r["step"] else "-"
        lines.append(f"| {r['file']}{'' if r['done'] else ' (not done)'} | {_n(r['keys'])} | {_n(r['replayed'])} | "
                     f"{_n(r['decided'])} | {_n(r['improved'])} | {_mean(r['speedups'])} | {_geomean(r['speedups'])} | "
                     f"{_n(r['wrong'])} | {step} | {_n(r['optimizer_s'])} |")
    every = [s for r in rows for s in r["speedups"]]

    def total(field: str):
        values = [r[field] for r in rows if r[field] is not None]
        return sum(values) if values else None

    lines.append(f"| **all** | {_n(total('keys'))} | {_n(total('replayed'))} | {_n(total('decided'))} | "
                 f"{_n(total('improved'))} | {_mean(every)} | {_geomean(every)} | {_n(total('wrong'))} | | "
                 f"{_n(total('optimizer_s'))} |")
    notes = []
    for r in rows:
        for miss in r["not_replayed"]:
            notes.append(f"- {r['file']}: `{miss.get('kernel')}` ({miss.get('id')}) not replayed: "
                         f"{miss.get('failure')}: {miss.get('message')}")
        for stage in r["failed"]:
            notes.append(f"- {r['file']}: {stage}")
        if not r["reproducible"]:
            notes.append(f"- {r['file']}: the disabled step differs from itself beyond the tolerance table "
                         "(nondeterministic); the enabled side is held to 4x that spread")
    if notes:
        lines += ["", "Not replayed, failed or cut:", *notes]
    lines += kernel_lines(results.get("files", [])) + time_lines(results.get("files", []))
    lines += ["", f"improved: a decision applied and >= {THRESHOLD}x per step measured enabled vs disabled in one "
                  "process; mean/geomean over those kernels. wrong must be 0.", ""]
    return "\n".join(lines)


def kernel_lines(files: list[dict]) -> list[str]:
    """Every Triton kernel that has a decision or ran faster: the optimizer's stored speedup beside
    the one measured enabled vs disabled in one process."""
    rows = []
    for record in files:
        decided: dict[str, list[float]] = {}
        for d in (record.get("optimize") or {}).get("decided", []):
            decided.setdefault(d.get("kernel"), []).append(d.get("speedup") or 0.0)
        for k in (record.get("measure") or {}).get("kernels", []):
            if not (k.get("decisions") or k.get("improved") or k.get("kernel") in decided):
                continue
            stored = ", ".join(f"{x:.2f}x" for x in decided.get(k["kernel"], [])) or "-"
            measured = f"{k['speedup']:.3f}x" if k.get("speedup") else "-"
            times = (f"{k['off_ms']:.4f} / {k['on_ms']:.4f}" if k.get("off_ms") is not None
                     and k.get("on_ms") is not None else "-")
            rows.append(f"| {record['file']} | `{k['kernel']}` | {stored} | {k.get('applied', 0)} of "
                        f"{k.get('launches', 0)} | {times} | {measured} | {'yes' if k.get('improved') else 'no'} |")
    if not rows:
        return []
    return ["", "Per kernel (decided keys' stored speedups; ms per step disabled / enabled, torch.profiler):", "",
            "| file | kernel | stored | applied launches | ms off / on | measured | improved |",
            "|---|---|---|---|---|---|---|", *rows]


def time_lines(files: list[dict]) -> list[str]:
    """Where each optimize run's time went, from optimize.json's per-key ``split`` and the run's
    ``fixed`` (where this tritune records them)."""
    rows = []
    for record in files:
        opt = record.get("optimize") or {}
        keys = opt.get("per_key", [])
        if not keys:
            continue
        firsts = [k["split"]["to_first_s"] for k in keys if (k.get("split") or {}).get("to_first_s") is not None]
        timed = [k["timed_candidates"] for k in keys if k.get("timed_candidates") is not None]
        fixed = (opt.get("fixed") or {}).get("total_s")
        first = f"{statistics.median(firsts):.1f}" if firsts else "-"
        rows.append(f"| {record['file']} | {len(keys)} | {sum(timed) if timed else '-'} | {first} | "
                    f"{'-' if fixed is None else f'{fixed:.1f}'} | {_n(record.get('optimize_s'))} |")
    if not rows:
        return []
    return ["", "Optimizer time per file:", "",
            "| file | keys optimized | candidates timed | median s to first candidate | fixed s | wall s |",
            "|---|---|---|---|---|---|", *rows]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("results", type=Path)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args(argv)
    text = render(json.loads(args.results.read_text()))
    if args.out:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
