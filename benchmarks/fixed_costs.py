"""Where an optimize run's time goes, with tritune's defaults (issue 24, section 1).

Captures a file of suite kernels (``--only``, default 10 of them: a 5-15 kernel file), then runs
``tritune optimize`` on it as a user would (no ``--ncu`` flag: ``auto``; jailed workers) with a
per-file deadline, once per arm (``--arms``: ``defaults``, and ``unjailed`` = ``--unsafe-no-jail``,
where ncu can run and the budgeted profile decides per key whether it may). From each run's
``optimize.json``: the fixed costs (lanes starting, the ranking's baselines) and their share of the
deadline, the share of the run spent on candidates, each key's time to its first candidate, its
profile's cost and source, its verified and timed candidates, and the keys with no baseline.

Targets (issue 24): fixed costs <= 10% of the deadline; >= 80% of a 40-s run on candidates;
median time to a key's first candidate <= 2 s.

    export PYTHONPATH=$PWD/src
    python benchmarks/fixed_costs.py --out $OUT/fixed_costs            # ~2 x 40 s + capture, ~2.5 min
    python benchmarks/fixed_costs.py --out $OUT/fixed_costs --arms defaults --deadline-s 200
    TRITON_INTERPRET=1 python benchmarks/fixed_costs.py --out /tmp/fc --small --only vector_add,silu \
        --arms defaults --deadline-s 30                                   # CPU smoke: the flow, no figures

``summarize(optimize.json body)`` is the figures; it is tested on the CPU.
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
DEFAULT_ONLY = ("vector_add,scale_bias,gelu_tanh,silu,swiglu,row_softmax,rms_norm,layer_norm,rope,col_mean")
ARMS = {"defaults": [], "unjailed": ["--unsafe-no-jail"]}


def summarize(body: dict) -> dict:
    """The run's time figures from an ``optimize.json`` body (``model.results.RunResults``)."""
    kernels = body.get("kernels") or []
    firsts = [k["split"]["to_first_s"] for k in kernels if "to_first_s" in (k.get("split") or {})]
    fixed = body.get("fixed") or {}
    rows = [{"kernel": k.get("kernel"), "budget_s": k.get("budget_s"), "wall_s": k.get("wall_s"),
             "to_first_s": (k.get("split") or {}).get("to_first_s"),
             "profile_s": (k.get("split") or {}).get("profile_s"), "profile_source": k.get("profile_source"),
             "profile_note": k.get("profile_note"), "timed_candidates": k.get("timed_candidates", 0),
             "speedup": k.get("speedup"), "accepted": k.get("accepted"), "split": k.get("split") or {}}
            for k in kernels]
    untimed = [{"kernel": t.get("kernel"), "failure": t.get("failure"), "message": t.get("message")}
               for t in body.get("timed") or [] if t.get("baseline_ms") is None]
    return {"deadline_s": body.get("deadline_s"), "wall_s": body.get("wall_s"), "fixed": fixed,
            "fixed_share": body.get("fixed_share"), "candidate_share": body.get("candidate_share"),
            "keys": len(body.get("timed") or []), "reached": len(kernels),
            "to_first_median_s": statistics.median(firsts) if firsts else None,
            "to_first_max_s": max(firsts) if firsts else None,
            "improved": sum(1 for k in kernels if k.get("accepted") and (k.get("speedup") or 0) >= 1.05),
            "untimed": untimed, "kernels": rows}


def capture(out: pathlib.Path, only: str, small: bool = False) -> pathlib.Path:
    folder = out / "capture"
    if (folder / "launches.jsonl").exists():
        return folder
    env = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="tritune-fixed-capture-")}
    cmd = [sys.executable, "-m", "tritune", "capture", "--out", str(folder), "--", sys.executable,
           str(REPO / "benchmarks" / "suite" / "run.py"), "--only", only, *(["--small"] if small else [])]
    begin = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    # its seconds and what it said (on a machine whose packages carry no bytecode, the first
    # capture waits for the workers' bytecode: ``bytecode.filled_meanwhile``)
    (out / "capture.log").write_text(f"capture: {time.monotonic() - begin:.1f} s, exit {done.returncode}\n"
                                     + done.stdout[-4000:] + done.stderr[-4000:])
    if done.returncode != 0:
        sys.exit(f"capture failed: {(done.stdout + done.stderr).strip().splitlines()[-1:]}")
    return folder


def run_arm(name: str, launches: pathlib.Path, out: pathlib.Path, deadline_s: float) -> dict:
    run_dir = out / name
    cmd = [sys.executable, "-m", "tritune", "optimize", "--launches", str(launches), "--out", str(run_dir),
           "--deadline-s", f"{deadline_s:g}", "--cover", "1", "--fresh", "--no-report", *ARMS[name]]
    env = {**os.environ, "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix=f"tritune-fixed-{name}-")}
    begin = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True)
    (out / f"{name}.log").write_text(done.stdout + done.stderr)
    result = {"arm": name, "command": " ".join(cmd[2:]), "exit": done.returncode,
              "process_s": round(time.monotonic() - begin, 2)}
    path = run_dir / "optimize.json"
    if path.exists():
        result.update(summarize(json.loads(path.read_text())))
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--only", default=DEFAULT_ONLY, help="suite kernels to capture (benchmarks/suite/run.py --only)")
    parser.add_argument("--launches", type=pathlib.Path, default=None, help="a capture to use instead")
    parser.add_argument("--deadline-s", type=float, default=40.0)
    parser.add_argument("--arms", default="defaults,unjailed")
    parser.add_argument("--small", action="store_true", help="the suite's small sizes (a CPU smoke run)")
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    launches = args.launches or capture(args.out, args.only, args.small)
    results = [run_arm(name.strip(), launches, args.out, args.deadline_s) for name in args.arms.split(",")]
    (args.out / "fixed_costs.json").write_text(json.dumps(results, indent=1))
    for r in results:
        print(f"{r['arm']}: exit {r['exit']}, {r.get('reached')} of {r.get('keys')} keys reached, "
              f"fixed {r.get('fixed', {}).get('total_s')} s ({r.get('fixed_share')}), candidates "
              f"{r.get('candidate_share')}, to first median {r.get('to_first_median_s')} s, "
              f"improved {r.get('improved')}, untimed {len(r.get('untimed') or [])}")
        for k in r.get("kernels") or []:
            print(f"  {k['kernel']}: first {k['to_first_s']} s, profile {k['profile_s']} s ({k['profile_source']}), "
                  f"{k['timed_candidates']} timed, {k['speedup']}")


if __name__ == "__main__":
    main()
