"""Wall time per candidate and per kernel, ``--jobs 1`` against ``--jobs N``, same capture, same run.

Issue 11 asks for the candidate time before (one worker built, verified and timed each candidate
in turn) and after (N verify workers beside one timing worker). Both are the same ``tritune
optimize`` on the same kernels of one capture, each with a fresh store and a fresh Triton cache
(so neither finds the other's binaries), the same per-kernel budget and ``--ncu never``; the
kernels are the capture's costliest (``--top``, by time share from an earlier run's
``optimize.json``, or the capture's first ones). Per run: the median of each candidate's share of
its round's wall time (``share_s``: what a candidate costs with the others of its round beside
it; with one worker, its own wall time), the median of each candidate's own wall time
(``seconds``) and each kernel's wall time, and the whole run's wall time.

    PYTHONPATH=src python3 benchmarks/candidate_time.py --launches CAPTURE --ranking OPT/optimize.json \\
        --top 3 --jobs 1,16 --budget-s 12 --out $OUT/candidate_time
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

import _common


def top_kernels(ranking: pathlib.Path | None, launches: pathlib.Path, top: int) -> list[str]:
    """Launch ids of the ``top`` costliest keys (an earlier run's time shares, those this capture
    holds), else the capture's first."""
    from tritune.capture.spec import read_launches

    ids = [spec.id for spec in read_launches(launches)]
    if ranking is not None:
        timed = json.loads(ranking.read_text()).get("timed") or []
        ordered = sorted((t for t in timed if t.get("time_share") and t["id"] in ids), key=lambda t: -t["time_share"])
        if ordered:
            return [t["id"] for t in ordered[:top]]
    return ids[:top]


def run_one(jobs: int, kernels: list[str], args: argparse.Namespace, out: pathlib.Path) -> dict:
    run_dir = out / f"jobs-{jobs}"
    cmd = [sys.executable, "-m", "tritune", "optimize", "--launches", str(args.launches), "--out", str(run_dir),
           "--jobs", str(jobs), "--budget-s", f"{args.budget_s:g}", "--ncu", "never", "--cover", "1", "--no-report", "--fresh"]
    for kernel in kernels:
        cmd += ["--kernel", kernel]
    env = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix=f"tritune-jobs{jobs}-triton-")}
    begin = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    wall = time.monotonic() - begin
    (out / f"jobs-{jobs}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        return {"jobs": jobs, "exit": done.returncode, "wall_s": wall,
                "error": (done.stdout + done.stderr).strip().splitlines()[-1:]}
    results = json.loads((run_dir / "optimize.json").read_text())
    return summarize(jobs, results, wall, portable(cmd, args.out))


def portable(cmd: list[str], out: pathlib.Path) -> str:
    """The inner command as typed in the repository root, the output folder as ``$OUT_DIR``."""
    return shlex.join("python3" if part == sys.executable else part for part in cmd).replace(str(out), "$OUT_DIR")


def summarize(jobs: int, results: dict, wall: float, command: str) -> dict:
    kernels = [k for k in results["kernels"] if k.get("candidates")]
    fresh = [c for k in kernels for c in k["candidates"] if not c.get("reused")]
    return {"jobs": jobs, "command": command, "wall_s": wall, "kernels": len(kernels), "candidates": len(fresh),
            "median_share_s": _median(fresh, "share_s"), "median_candidate_s": _median(fresh, "seconds"),
            "median_verify_s": _median(fresh, "verify_s"), "median_time_s": _median(fresh, "time_s"),
            "median_kernel_s": _median(kernels, "wall_s"),
            "per_kernel": [{"kernel": k["kernel"], "wall_s": k["wall_s"], "candidates": len(k["candidates"]),
                            "decision": k.get("decision"), "speedup": k.get("speedup"),
                            "finish_reason": k.get("finish_reason")} for k in kernels]}


def _median(candidates: list[dict], field: str) -> float | None:
    values = [c[field] for c in candidates if c.get(field) is not None]
    return statistics.median(values) if values else None


def main(argv: list[str] | None = None) -> int:
    parser = _common.OneLineParser(prog="candidate_time.py", description=__doc__.splitlines()[0])
    parser.add_argument("--launches", type=pathlib.Path, required=True, help="a tritune capture directory")
    parser.add_argument("--ranking", type=pathlib.Path, default=None, help="an optimize.json with time shares")
    parser.add_argument("--top", type=int, default=3, help="how many of the costliest kernels")
    parser.add_argument("--jobs", default="1,16", help="the --jobs values to compare, in this order")
    parser.add_argument("--budget-s", type=float, default=12.0, help="tritune optimize --budget-s (per kernel)")
    parser.add_argument("--out", type=pathlib.Path, default=pathlib.Path(_common.default_out_dir()) / "candidate_time")
    args = parser.parse_args(argv)
    if not (args.launches / "launches.jsonl").is_file():
        parser.error(f"--launches {args.launches}: not a capture (no launches.jsonl)")
    if args.ranking is not None and not args.ranking.is_file():
        parser.error(f"--ranking {args.ranking}: no such file")
    try:
        jobs = [int(j) for j in args.jobs.split(",")]
    except ValueError:
        parser.error(f"--jobs {args.jobs}: not a comma-separated list of integers")
    _common.require_cuda("candidate_time.py")
    args.out.mkdir(parents=True, exist_ok=True)
    kernels = top_kernels(args.ranking, args.launches, args.top)
    runs = []
    for j in jobs:
        print(f"--jobs {j}: {len(kernels)} kernels, budget {args.budget_s:g} s each", flush=True)
        runs.append(run_one(j, kernels, args, args.out))
        print(json.dumps({k: v for k, v in runs[-1].items() if k != "per_kernel"}), flush=True)
    result = {**_common.environment(), "kernels": kernels, "budget_s": args.budget_s, "runs": runs}
    (args.out / "candidate_time.json").write_text(json.dumps(result, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
