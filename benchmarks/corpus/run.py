"""The development corpus end to end, per file: ``tritune capture`` of its driver, ``tritune optimize``
with a fixed deadline (tritune's defaults otherwise, as a user runs it), then ``measure.py`` (enabled
vs disabled in one process); resumable across device calls.

    PYTHONPATH=$PWD/src python3 benchmarks/corpus/run.py --out $OUT --limit-s 540 [--deadline-s 30] [--only a,b]

State lives in ``--state`` (default gpu_state/corpus), one folder per file: ``capture/``,
``opt/`` (the optimize run: decisions.db, optimize.json), ``measure.json`` and ``file.json`` (this
script's record: seconds per stage, exit codes, done). A file done is not redone; an optimize run
cut by the limit resumes (tritune's own resume) in the next call, its seconds summed. ``--limit-s``:
no stage starts that is not expected to end before it, and a stage still running at it is stopped
(SIGINT, then killed), so one device call ends cleanly. ``--out`` gets results.json (every file's
record), corpus.md (``summary.py``'s table) and state.tgz (the state without Triton caches, to carry
to the next call: unpack it at the repository root).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from benchmarks.corpus import drivers  # noqa: E402

GRACE_S = 20  # after SIGINT: tritune optimize saves its run, then the process group is killed
# Seconds a stage is expected to take at most (a stage predicted not to fit the limit waits for the
# next call). Capture: imports, every kernel compiled and autotuned once, fla's many autotune configs.
CAPTURE_S = 150
OPTIMIZE_FIXED_S = 90  # beyond --deadline-s: workers starting, baselines, the round in flight, report
MEASURE_S = 150
CACHE = "triton_cache"


def file_record(state: Path, name: str) -> dict:
    path = state / name / "file.json"
    return json.loads(path.read_text()) if path.is_file() else {"file": name, "optimize_s": 0.0, "stages": {}}


def save_record(state: Path, record: dict) -> None:
    (state / record["file"] / "file.json").write_text(json.dumps(record, indent=1))


def optimize_finished(opt: Path) -> bool:
    path = opt / "optimize.json"
    try:
        return bool(json.loads(path.read_text()).get("finished"))
    except (OSError, ValueError):
        return False


def commands(name: str, folder: Path, deadline_s: float, small: bool = False) -> dict[str, list[str]]:
    """The three stages' command lines for one file (``small``: a CPU smoke run, tiny shapes)."""
    py = sys.executable
    tiny = ["--small"] if small else []
    cpu = ["--device", "cpu", "--small"] if small else []
    return {
        "capture": [py, "-m", "tritune", "capture", "--out", str(folder / "capture"), "--force", "--",
                    py, str(drivers.path(name)), *tiny],
        "optimize": [py, "-m", "tritune", "optimize", "--out", str(folder / "opt"), "--launches",
                     str(folder / "capture"), "--deadline-s", f"{deadline_s:g}"],
        "measure": [py, str(HERE / "measure.py"), name, "--store", str(folder / "opt" / "decisions.db"),
                    "--json", str(folder / "measure.json"), "--capture", str(folder / "capture"), *cpu],
    }


def run_stage(cmd: list[str], log: Path, timeout: float, env: dict) -> tuple[int | None, float, bool]:
    """Run ``cmd`` in its own process group, output appended to ``log``; past ``timeout`` SIGINT,
    then kill. Returns (exit code or None, seconds, cut)."""
    start = time.monotonic()
    with log.open("a") as out:
        out.write(f"$ {shlex.join(cmd)}\n")
        out.flush()
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env, start_new_session=True,
                                cwd=REPO)
        try:
            return proc.wait(timeout=max(1.0, timeout)), time.monotonic() - start, False
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGINT)
            try:
                proc.wait(timeout=GRACE_S)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            return None, time.monotonic() - start, True


def expected_s(stage: str, deadline_s: float, name: str | None = None) -> float:
    """Seconds a stage may take; a driver whose capture compiles many autotune configs says so
    (its ``CAPTURE_S``)."""
    capture = getattr(drivers.load(name), "CAPTURE_S", CAPTURE_S) if name else CAPTURE_S
    return {"capture": capture, "optimize": deadline_s + OPTIMIZE_FIXED_S, "measure": MEASURE_S}[stage]


def process_file(name: str, state: Path, deadline_s: float, left, say, small: bool = False) -> bool:
    """Run what is left of one file; False when the limit stopped it (the next call goes on)."""
    folder = state / name
    folder.mkdir(parents=True, exist_ok=True)
    record = file_record(state, name)
    if record.get("done"):
        return True
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "TRITON_CACHE_DIR": str(folder / CACHE)}
    # An optimize run cut by the limit resumes with what is left of the file's deadline, so a file
    # gets its deadline once, however many calls it spans (at least 10 s: tritune's least share).
    left_s = max(10.0, deadline_s - record.get("optimize_s", 0.0))
    cmds = commands(name, folder, left_s, small)
    for stage in ("capture", "optimize", "measure"):
        info = record["stages"].get(stage, {})
        if info.get("done"):
            continue
        if stage == "measure" and not (folder / "opt" / "decisions.db").is_file():
            record["stages"][stage] = {"done": True, "rc": None, "skipped": "no decision store: optimize wrote none"}
            say(f"{name}: measure skipped: optimize wrote no decision store")
            continue
        need = expected_s(stage, deadline_s, name)
        if left() < need:
            say(f"{name}: {stage} left for the next call ({left():.0f} s left, ~{need:.0f} s needed)")
            save_record(state, record)
            return False
        say(f"{name}: {stage}")
        if stage == "measure":  # a result left by an earlier, broken run must not pass for this one's
            (folder / "measure.json").unlink(missing_ok=True)
        rc, seconds, cut = run_stage(cmds[stage], folder / f"{stage}.log", left(), env)
        info = {"rc": rc, "seconds": info.get("seconds", 0.0) + seconds, "cut": cut,
                "command": portable(cmds[stage])}
        if stage == "optimize":
            record["optimize_s"] = record.get("optimize_s", 0.0) + seconds
            # exit 1: no key ran within the deadline, an outcome of it (summary.py says so); 2: an error
            info["done"] = optimize_finished(folder / "opt") or (not cut and rc is not None)
        elif stage == "capture":
            info["done"] = rc == 0 and (folder / "capture" / "launches.jsonl").is_file()
        else:
            info["done"] = not cut and (folder / "measure.json").is_file()
        record["stages"][stage] = info
        save_record(state, record)
        if cut:
            say(f"{name}: {stage} stopped at the limit after {seconds:.0f} s")
            return False
        if not info["done"]:
            say(f"{name}: {stage} failed (exit {rc}); see {stage}.log")
            if stage == "capture":  # nothing to optimize or measure
                break
            info["done"] = True  # recorded as failed, not retried
            save_record(state, record)
    record["done"] = True
    save_record(state, record)
    return True


def portable(cmd: list[str]) -> str:
    """The command as the reader would type it: python3, paths relative to the repository."""
    parts = []
    for part in cmd:
        if part == sys.executable:
            part = "python3"
        elif part.startswith(str(REPO) + os.sep):
            part = os.path.relpath(part, REPO)
        parts.append(part)
    return shlex.join(parts)


def collect(state: Path, names: list[str], deadline_s: float, command: str) -> dict:
    """Every file's record, with its optimize.json summary and measure.json, for summary.py."""
    import _common
    from tritune.model.results import RunResults

    files = []
    for name in names:
        record = file_record(state, name)
        opt = state / name / "opt" / "optimize.json"
        meas = state / name / "measure.json"
        record["optimize"] = summarize_optimize(RunResults.load(opt)) if opt.is_file() else None
        record["measure"] = json.loads(meas.read_text()) if meas.is_file() else None
        files.append(record)
    return {"environment": _common.environment(), "command": command, "deadline_s": deadline_s, "files": files}


def summarize_optimize(run) -> dict:
    """What the table needs from one ``RunResults`` (optimize.json): keys, replayed (baseline
    timed) and why not, the keys decided with their stored speedups, and each key's time split
    where this tritune records it (``split``, ``timed_candidates``, the run's ``fixed``)."""
    return {
        "keys": run.keys if run.keys is not None else len(run.timed),
        "timed": len(run.timed),
        "replayed": sum(1 for t in run.timed if t.baseline_ms is not None),
        "not_replayed": [{"id": t.id, "kernel": t.kernel, "failure": t.failure, "message": t.message}
                         for t in run.timed if t.baseline_ms is None],
        "optimized": len(run.kernels),
        "decided": [{"id": k.id, "kernel": k.kernel, "speedup": k.speedup, "decision": k.decision,
                     "won_by": k.won_by} for k in run.kernels if k.accepted],
        "per_key": [{"id": k.id, "kernel": k.kernel, "finish": k.finish, "wall_s": k.wall_s,
                     "profile_source": k.profile_source, "candidates": len(k.candidates), "failure": k.failure,
                     "split": getattr(k, "split", None), "timed_candidates": getattr(k, "timed_candidates", None)}
                    for k in run.kernels],
        "finished": run.finished, "stopped": run.stopped, "fixed": getattr(run, "fixed", None),
    }


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--state", type=Path, default=REPO / "gpu_state" / "corpus")
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--deadline-s", type=float, default=30.0)
    parser.add_argument("--limit-s", type=float, default=540.0, help="stop cleanly within this many seconds")
    parser.add_argument("--only", default="", help="comma-separated files (default: all)")
    parser.add_argument("--small", action="store_true", help="CPU smoke run under TRITON_INTERPRET=1: tiny shapes")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(drivers.FILES)
    for name in names:
        drivers.path(name)  # an unknown name fails here, in one line
    args.state.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()

    def left() -> float:
        return args.limit_s - (time.monotonic() - start)

    def say(line: str) -> None:
        print(f"[{time.monotonic() - start:6.0f} s] {line}", flush=True)

    complete = True
    for name in names:
        if not process_file(name, args.state, args.deadline_s, left, say, args.small):
            complete = False
            break
    import _common

    results = collect(args.state, names, args.deadline_s, _common.portable_command(sys.argv))
    (args.state / "results.json").write_text(json.dumps(results, indent=1, default=str))
    from benchmarks.corpus import summary

    table = summary.render(results)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "results.json").write_text(json.dumps(results, indent=1, default=str))
        (args.out / "corpus.md").write_text(table)
        with tarfile.open(args.out / "state.tgz", "w:gz") as tar:
            arcname = os.path.relpath(args.state, REPO) if args.state.is_relative_to(REPO) else args.state.name
            tar.add(args.state, arcname=arcname, filter=lambda info: None if f"/{CACHE}" in info.name else info)
    done = sum(1 for f in results["files"] if f.get("done"))
    say(f"{done} of {len(names)} files done" + ("" if complete else "; run the same command again to go on"))
    return 0


if __name__ == "__main__":
    sys.exit(main())
