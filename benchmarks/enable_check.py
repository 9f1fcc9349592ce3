"""The issue's "done when": the suite's own wrappers, run as a user runs them, without and with
``tritune.enable(store)``: same results (bitwise, and within the suite's tolerance of the float64
reference), and the time of each call.

Each case is timed as the user calls it (``case.run(inputs)``: allocation, Python launch path and
the applier's lookup included), do_bench median with L2 cleared, in ABAB order over 3 rounds
(disabled, enabled, disabled, ...), so clock drift falls on both sides; the reported time of each
side is the median of its rounds. The applier's stats prove a decision was used (``applied``).

    PYTHONPATH=src python3 benchmarks/enable_check.py --store DIR/decisions.db [--json FILE] [--only a,b]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO), str(REPO / "src")]

ROUNDS = 3


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--only", default="")
    args = parser.parse_args()
    if not args.store.is_file():
        parser.error(f"no decision store at {args.store}")

    import torch
    import triton

    import tritune
    from benchmarks.suite import by_name, compare
    from tritune.store import DecisionStore

    with DecisionStore(args.store) as store:
        decided = {d.key.kernel: d for d in store.decisions(usable_only=True)}
    rows = []
    for case in by_name([n for n in args.only.split(",") if n]):
        inputs = case.make_inputs(case.gpu_size, "cuda", 1)
        reference = case.reference(_clone(inputs))
        tritune.disable()
        before = case.run(_clone(inputs))
        applier = tritune.enable(args.store)
        after = case.run(_clone(inputs))
        torch.cuda.synchronize()
        stats = applier.stats().get(case.kernel, {})
        times = {"off": [], "on": []}
        for _ in range(ROUNDS):
            for side in ("off", "on"):
                if side == "off":
                    tritune.disable()
                else:
                    tritune.enable(args.store)
                times[side].append(triton.testing.do_bench(lambda: case.run(inputs), return_mode="median"))
        tritune.disable()
        off, on = statistics.median(times["off"]), statistics.median(times["on"])
        check = compare(after, reference, case.tolerance)
        decision = decided.get(case.kernel)
        rows.append({"case": case.name, "category": case.category, "kernel": case.kernel,
                     "decision": decision.variant.name if decision else None,
                     "stored_speedup": decision.speedup if decision else None,
                     "applied": stats.get("applied", 0), "launches": stats.get("launches", 0),
                     "off_ms": off, "on_ms": on, "speedup": off / on, "rounds_off": times["off"],
                     "rounds_on": times["on"], "bitwise_equal": _equal(before, after),
                     "max_abs_diff": _max_diff(before, after), "within_tolerance": check.ok,
                     "tolerance_message": check.message})
        row = rows[-1]
        print(f"{case.name:20s} {row['decision'] or '-':40.40s} applied={row['applied']:<3d} "
              f"off {off:8.4f} ms  on {on:8.4f} ms  {row['speedup']:5.2f}x  "
              f"bitwise={row['bitwise_equal']} tol={check.ok}", flush=True)
    applied = [r for r in rows if r["applied"]]
    if applied:
        geo = statistics.geometric_mean(r["speedup"] for r in applied)
        print(f"{len(applied)} of {len(rows)} cases ran a decision; geomean {geo:.3f}x on them; "
              f"all within tolerance: {all(r['within_tolerance'] for r in rows)}; "
              f"bitwise equal: {sum(r['bitwise_equal'] for r in rows)} of {len(rows)}")
    if args.json:
        args.json.write_text(json.dumps(results_file(rows), indent=1))
    return 0 if all(r["within_tolerance"] for r in rows) else 1


def results_file(rows: list[dict]) -> dict:
    """What ``--json`` writes: the rows, and the run that made them (GPU, versions, date, command and
    the checkout's git head: ``_common.environment``), so the file names its run by itself."""
    from benchmarks import _common

    env = _common.environment()
    return {"gpu": env["gpu"], "torch": env["torch"], "triton": env["triton"], "date": env["utc"],
            "command": env["command"], "environment": env, "rows": rows}


def _clone(inputs: dict) -> dict:
    return {k: v.clone() if hasattr(v, "clone") else v for k, v in inputs.items()}


def _tensors(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _equal(a, b) -> bool:
    import torch

    return all(torch.equal(x, y) for x, y in zip(_tensors(a), _tensors(b)))


def _max_diff(a, b) -> float:
    return max(float((x.double() - y.double()).abs().max()) if x.numel() else 0.0
               for x, y in zip(_tensors(a), _tensors(b)))


if __name__ == "__main__":
    sys.exit(main())
