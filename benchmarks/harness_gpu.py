"""The harness on the GPU (issue 4): capture -> replay -> verify -> bench, on real programs.

1. ``demo``: ``tritune capture -- python examples/user_program.py`` (a user's script: plain,
   autotuned, heuristics, gather and in-place kernels).
2. Inductor kernels of real models: ``tritune harvest --model M --mode train`` for each
   ``--models`` entry (default BERT and timm coat_lite_mini), which compiles the model, runs one
   training step and captures every kernel at the config Inductor chose.

Then every captured launch, each in an isolated worker: the baseline verified against itself
(bitwise, 3 fresh input sets, outputs poisoned; a nondeterministic kernel is flagged and compared
within its own spread) and timed (do_bench median twice for the noise, CUDA-event mean/p50/p95
of 200, CUDA-graph replay), with bytes moved (Inductor's ``kernel_num_gb`` or the launch's
tensors), GB/s and the fraction of the measured copy bandwidth (the roofline).

Resumable: per-launch records are appended to ``WORK/records.jsonl`` as they finish, captures and
harvests are kept in WORK, so a rerun after a time limit goes on where it stopped.

    PYTHONPATH=src python3 benchmarks/harness_gpu.py --out $OUT --work /tmp/tritune-harness
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

COLUMNS = ["source", "id", "kernel", "kernel_type", "count", "grid", "verified", "nondeterministic",
           "failure", "message", "time_ms", "p50_ms", "p95_ms", "graph_ms", "noise", "bytes",
           "bytes_source", "gbps", "roofline_fraction", "floor_ms"]


def tritune(*args: str, timeout: float) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "tritune", *args]
    _common.log("$ tritune " + " ".join(args))
    done = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    tail = (done.stdout + done.stderr).strip().splitlines()[-12:]
    _common.log("\n".join("  " + line for line in tail))
    return done


def sources(work: Path, models: list[str], deadline: float) -> list[tuple[str, Path]]:
    """Capture the demo and harvest each model (skipped when already done in WORK)."""
    found = []
    demo = work / "demo"
    if not (demo / "launches.jsonl").exists():
        tritune("capture", "--out", str(demo), "--force", "--", sys.executable,
                str(_common.REPO / "examples" / "user_program.py"), timeout=300)
    found.append(("demo", demo))
    for entry in models:
        model, _, mode = entry.partition(":")
        out = work / f"{model}_{mode or 'train'}"
        if not (out / "launches.jsonl").exists():
            left = deadline - time.time()
            if left < 120:
                _common.log(f"skip harvest of {entry}: {left:.0f} s left")
                continue
            tritune("harvest", "--model", model, "--mode", mode or "train", "--out", str(out), timeout=left)
        if (out / "launches.jsonl").exists():
            found.append((entry, out))
    return found


def measure(source: str, root: Path, spec, worker, copy_gbps: float) -> dict:
    record = {"source": source, "id": spec.id, "kernel": spec.kernel, "count": spec.count,
              "grid": "x".join(map(str, spec.grid)), "kernel_type": spec.extra.get("kernel_type") or spec.kind}
    payload = {"spec": spec.to_json(), "root": str(root)}
    checked = worker.call("tritune.verify:verify_job", {**payload, "mode": "bitwise", "input_sets": 3})
    if not checked.ok:
        record.update(verified=False, failure=checked.failure.kind, message=checked.failure.message)
        return record
    verdict = checked.value
    record.update(verified=verdict["ok"], nondeterministic=verdict["nondeterministic"],
                  failure=verdict.get("failure"), message=verdict.get("message"))
    timed = worker.call("tritune.bench.run:bench_job", {**payload, "copy_gbps": copy_gbps})
    if not timed.ok:
        record.update(failure=timed.failure.kind, message=timed.failure.message)
        return record
    record.update({k: timed.value.get(k) for k in COLUMNS if k in timed.value and k not in record})
    record["roofline_fraction"] = timed.value.get("roofline")
    return record


def complete(record: dict, copy_gbps: float) -> dict:
    """Roofline fraction and floor from GB/s and bytes (the same formulas as tritune.bench.roofline),
    for records written before the harness copied them (the 2026-11-23 run)."""
    from tritune.bench import roofline

    if record.get("gbps") and record.get("roofline_fraction") is None:
        record["roofline_fraction"] = roofline.roofline_fraction(record["gbps"], copy_gbps)
    if record.get("bytes") and record.get("floor_ms") is None:
        record["floor_ms"] = roofline.floor_ms(record["bytes"], copy_gbps)
    return record


def summarize(records: list[dict]) -> list[dict]:
    from tritune.bench.render import overestimated

    rows = []
    for source in sorted({r["source"] for r in records}):
        mine = [r for r in records if r["source"] == source]
        timed = [r for r in mine if r.get("time_ms")]
        # An estimate above copy bandwidth is an upper bound (a gather reads part of a tensor).
        bounded = [r for r in timed if not overestimated({**r, "roofline": r.get("roofline_fraction")})]
        fractions = [r["roofline_fraction"] for r in bounded if r.get("roofline_fraction")]
        floor = sum(r["floor_ms"] * r["count"] for r in bounded if r.get("floor_ms"))
        rows.append({
            "source": source, "launches": len(mine), "verified": sum(bool(r.get("verified")) for r in mine),
            "nondeterministic": sum(bool(r.get("nondeterministic")) for r in mine),
            "failed": sum(bool(r.get("failure")) for r in mine), "timed": len(timed),
            "sum_ms": sum(r["time_ms"] * r["count"] for r in timed), "roofline_floor_ms": floor,
            "sum_ms_with_floor": sum(r["time_ms"] * r["count"] for r in bounded if r.get("floor_ms")),
            "upper_bound_estimates": len(timed) - len(bounded),
            "median_fraction": statistics.median(fractions) if fractions else None,
            "geomean_fraction": math.exp(statistics.fmean(math.log(f) for f in fractions)) if fractions else None,
            "under_25pct": sum(f < 0.25 for f in fractions),
        })
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=_common.default_out_dir())
    parser.add_argument("--work", default="/tmp/tritune-harness", help="captures, harvests, partial records")
    parser.add_argument("--models", nargs="*", default=["bert:train", "coat_lite_mini:train"])
    parser.add_argument("--budget-s", type=float, default=540.0)
    parser.add_argument("--resummarize", metavar="JSON", help="recompute the summary of a harness_gpu.json "
                        "(no GPU): fills roofline fraction and floor from GB/s, bytes and its copy bandwidth")
    args = parser.parse_args()
    if args.resummarize:
        return resummarize(Path(args.resummarize), args.out)
    deadline = time.time() + args.budget_s
    _common.bootstrap()
    _common.require_cuda("harness_gpu.py")
    from tritune.capture.spec import read_launches
    from tritune.worker import Worker

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    env = _common.environment()
    found = sources(work, args.models, deadline)
    partial = work / "records.jsonl"
    done = {}
    if partial.exists():
        for line in partial.read_text().splitlines():
            record = json.loads(line)
            done[(record["source"], record["id"])] = record
    with Worker(timeout_s=120, preload=("torch", "triton")) as worker, partial.open("a") as sink:
        copy_gbps = worker.call("tritune.bench.run:bandwidth_job", {}).value["copy_gbps"]
        _common.log(f"copy bandwidth {copy_gbps:.0f} GB/s")
        for source, root in found:
            specs = read_launches(root)
            _common.log(f"{source}: {len(specs)} launches")
            for index, spec in enumerate(specs):
                if (source, spec.id) in done:
                    continue
                if time.time() > deadline:
                    _common.log(f"budget spent: {source} stops at {index}/{len(specs)}")
                    break
                record = measure(source, root, spec, worker, copy_gbps)
                done[(source, spec.id)] = record
                sink.write(json.dumps(record, default=str) + "\n")
                sink.flush()
                _common.log(f"[{source} {index + 1}/{len(specs)}] {spec.kernel}: "
                            f"{'ok' if record.get('verified') else record.get('failure')} "
                            f"{record.get('time_ms') or float('nan'):.4f} ms "
                            f"{(record.get('roofline_fraction') or 0) * 100:.0f}% of roofline")
    records = list(done.values())
    summary = summarize(records)
    env["copy_gbps"] = copy_gbps
    _common.write_results(args.out, "harness_gpu", env, records, COLUMNS,
                          extra={"summary": summary, "launch_counts": {s: len(read_launches(r)) for s, r in found}})
    _common.print_table(summary, list(summary[0]) if summary else ["source"])
    return 0


def resummarize(path: Path, out: str) -> int:
    _common.bootstrap()
    body = json.loads(path.read_text())
    env = body["environment"]
    records = [complete(r, env["copy_gbps"]) for r in body["records"]]
    summary = summarize(records)
    env["resummarized_by"] = _common.portable_command(sys.argv)
    _common.write_results(out, "harness_gpu", env, records, COLUMNS,
                          extra={"summary": summary, "launch_counts": body.get("launch_counts")})
    _common.print_table(summary, list(summary[0]) if summary else ["source"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
