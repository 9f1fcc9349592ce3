"""What starting a run's lanes beside its capture buys (``loop.lanes.HeadStart``, issue 24 section 1).

``tritune optimize --deadline-s 40 -- python FILE`` as a user runs it (one command: capture, then
optimize, defaults otherwise), with ``TRITUNE_HEAD_START=off`` and ``on`` in turn, on the same
machine, in one call. Each arm keeps a bytecode folder of its own (``TRITUNE_BYTECODE``), so that
its first run is a machine's first run and its second a later one; every run has a fresh Triton
cache, so each capture compiles the same. Arms alternate (``--arms``, default off,on,off,on) so
that neither side alone runs on warm disk caches. From each run: the process's seconds, the
capture's (the process's less the optimize run's wall), the fixed costs (``fixed``: start,
baselines, total; ``head_s``: how long the lanes had been starting when the run began), their
share of the deadline and the share of the run on candidates (``fixed_costs.summarize``).

Files (``--files``): ``suite10`` (the 10-kernel suite file of ``fixed_costs.py``) and the corpus's
driver names (``benchmarks/corpus/drivers``; their libraries importable, see corpus/README.md).

    export PYTHONPATH=$PWD/src:/tmp/site
    python benchmarks/head_start.py --out $OUT/head --files suite10,liger_jsd        # ~8 min on an H200
    TRITON_INTERPRET=1 python benchmarks/head_start.py --out /tmp/hs --files suite10 --small \
        --arms off,on --deadline-s 20                                               # CPU smoke: the flow
"""

from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import tempfile
import time

REPO = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from benchmarks.corpus import drivers  # noqa: E402
from benchmarks.fixed_costs import DEFAULT_ONLY, summarize  # noqa: E402


def program(name: str, small: bool) -> list[str]:
    tiny = ["--small"] if small else []
    if name == "suite10":
        return [sys.executable, str(REPO / "benchmarks" / "suite" / "run.py"), "--only", DEFAULT_ONLY, *tiny]
    return [sys.executable, str(drivers.path(name)), *tiny]


def run(name: str, arm: str, index: int, state: pathlib.Path, deadline_s: float, small: bool) -> dict:
    out = state / f"{name}-{arm}-{index}"
    cmd = [sys.executable, "-m", "tritune", "optimize", "--out", str(out), "--deadline-s", f"{deadline_s:g}",
           "--cover", "1", "--no-report", "--", *program(name, small)]
    env = {**os.environ, "TRITUNE_HEAD_START": arm, "TRITUNE_BYTECODE": str(state / f"bytecode-{arm}"),
           "TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="tritune-head-triton-")}
    begin = time.monotonic()
    done = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd=REPO)
    process_s = time.monotonic() - begin
    (state / f"{name}-{arm}-{index}.log").write_text(done.stdout[-6000:] + done.stderr[-6000:])
    found = {"file": name, "arm": arm, "run": index, "exit": done.returncode, "process_s": round(process_s, 2),
             "command": " ".join(["tritune", *cmd[3:]])}
    path = out / "optimize.json"
    if path.exists():
        figures = summarize(json.loads(path.read_text()))
        found.update({k: figures[k] for k in ("deadline_s", "wall_s", "fixed", "fixed_share", "candidate_share",
                                               "keys", "reached", "to_first_median_s", "improved")})
        found["capture_s"] = round(process_s - (figures["wall_s"] or 0.0), 2)
    return found


def line(r: dict) -> str:
    fixed = r.get("fixed") or {}
    return (f"{r['file']} {r['arm']}#{r['run']}: exit {r['exit']}, process {r['process_s']:.1f} s, capture "
            f"{r.get('capture_s')} s, head {fixed.get('head_s', 0):.1f} s, start {fixed.get('start_s', 0):.2f} s, "
            f"fixed {fixed.get('total_s', 0):.2f} s ({r.get('fixed_share')}), on candidates {r.get('candidate_share')}, "
            f"{r.get('reached')} of {r.get('keys')} keys, improved {r.get('improved')}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--state", type=pathlib.Path, default=None, help="the runs' folders (default OUT/state)")
    parser.add_argument("--files", default="suite10,liger_jsd")
    parser.add_argument("--arms", default="off,on,off,on")
    parser.add_argument("--deadline-s", type=float, default=40.0)
    parser.add_argument("--small", action="store_true", help="small sizes (a CPU smoke run)")
    args = parser.parse_args()
    state = args.state or args.out / "state"
    state.mkdir(parents=True, exist_ok=True)
    names = [n for n in args.files.split(",") if n]
    for name in names:
        if name != "suite10":
            drivers.path(name)  # an unknown name fails here, in one line
    arms = [a.strip() for a in args.arms.split(",") if a.strip()]
    if not set(arms) <= {"on", "off"}:
        sys.exit(f"--arms takes on and off, not {args.arms!r}")
    results = []
    for name in names:
        seen: dict[str, int] = {}
        for arm in arms:
            seen[arm] = seen.get(arm, 0) + 1
            results.append(run(name, arm, seen[arm], state, args.deadline_s, args.small))
            print(line(results[-1]), flush=True)
            (args.out / "head_start.json").write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
