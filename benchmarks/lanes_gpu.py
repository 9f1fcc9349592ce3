"""Issue 15's evidence: one corpus optimized on 1, 2 (and 4) GPUs of one host, same budgets.

    PYTHONPATH=$PWD/src python3 benchmarks/lanes_gpu.py --out $OUT --limit-s 560
        [--workers-list 1,2,4] [--budget-s 10] [--max-candidates 12] [--corpus DIR] [--work gpu_state/lanes]
    python3 benchmarks/lanes_gpu.py --table DIR [--out DIR2]     # lanes.md again from DIR's optimize.json files

The corpus is captured once (``tritune capture --out WORK/capture -- python3
benchmarks/suite/run.py``, the kernel suite as ``optimize_gpu.sh`` runs it, fresh Triton cache),
or ``--corpus DIR`` names an existing capture (``tritune capture`` or ``tritune harvest`` output).
Then, for each N of ``--workers-list``, one process after another:

    python3 -m tritune optimize --launches CAPTURE --out WORK/workers-N --workers N --budget-s B
        --max-candidates M --cover 1 --ncu never

each with a fresh store and a fresh Triton cache (a compiled candidate of one run must not make the
next one faster). Its wall time is the process's, as the user waits for it (lane start, ranking,
keys, report). Resumable: a run whose ``optimize.json`` says finished (same corpus and budgets) is
not run again; an unfinished one is removed and run from the start (a resumed run's wall time
would mean nothing). ``--limit-s``: no run starts unless its predicted time fits in what is left
(``predict_s``), and one that runs past the limit is interrupted, recorded as cut and run again
by the next call; each skip is said, with why. N above the GPUs this host shows is skipped.

Writes to OUT (the device tool returns at most 8 files): ``lanes.json``, ``lanes.md``,
``lanes.log`` and ``workers-N.json`` (each run's ``optimize.json`` with this benchmark's record
of it under ``lanes_bench``). Per N: wall seconds, kernels optimized, kernels per minute, the
throughput over N=1, each lane's line (kernels, busy, idle), the decided kernels; and N=1 against
each N: the same kernels optimized and decided, the same decision per kernel up to timing noise
(``judge``); the goals (>= 1.8x throughput on 2 GPUs, >= 3.4x on 4) checked. Every file names
the GPU, the date and the command. ``WORK`` (default ``gpu_state/lanes``, git-ignored) keeps the
capture, the stores, reports and full logs on the machine while it is warm.
"""

from __future__ import annotations

import collections
import dataclasses
import datetime
import json
import math
import pathlib
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Iterable, Mapping, Sequence

import _common
import e2e  # run_process, portable: a command in its own process group, SIGINT at the limit

BENCH = pathlib.Path(__file__).resolve().parent
PROGRAM = "python3 benchmarks/suite/run.py"  # the default corpus: the kernel suite (57 kernels)
DEFAULT_WORKERS = "1,2,4"
GOALS = {2: 1.8, 4: 3.4}  # issue 15, section 4: throughput over one GPU
NOISE = 1.10  # two speedups within 10% of each other are the same decision up to timing noise
EFFICIENCY = 0.8  # predicting N lanes from a finished run of fewer: at least 80% of linear
MIN_START_S = 60  # with nothing finished to predict from, a run starts only with this much left
RESERVE_S = 10  # kept at the end of --limit-s: the summary
RUN_INFO = "lanes_run.json"  # this benchmark's record of a run, beside its optimize.json
RESULTS = "optimize.json"
TAIL_LINES = 12  # of each run's output, copied to lanes.log


# ------------------------------------------------------------------------------------ the runs

def parse_workers(text: str) -> list[int]:
    """``1,2,4`` -> [1, 2, 4]: positive, distinct, in the order given; else a one-line error."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise SystemExit(f"lanes_gpu.py: --workers-list {text!r}: expected numbers like 1,2,4") from None
    if not values or any(v < 1 for v in values) or len(set(values)) != len(values):
        raise SystemExit(f"lanes_gpu.py: --workers-list {text!r}: distinct numbers of at least 1, like 1,2,4")
    return values


def run_dir(work: pathlib.Path, workers: int) -> pathlib.Path:
    return work / f"workers-{workers}"


def optimize_command(corpus: pathlib.Path, out_dir: pathlib.Path, workers: int, budget_s: float,
                     max_candidates: int | None) -> list[str]:
    cmd = [sys.executable, "-m", "tritune", "optimize", "--launches", str(corpus), "--out", str(out_dir),
           "--workers", str(workers), "--budget-s", f"{budget_s:g}"]
    if max_candidates is not None:
        cmd += ["--max-candidates", str(max_candidates)]
    return cmd + ["--cover", "1", "--ncu", "never"]


def expectation(corpus: pathlib.Path, budget_s: float, max_candidates: int | None) -> dict:
    """What a finished run must have been run with to count for this call."""
    return {"launches": str(corpus.resolve()), "budget_s": float(budget_s), "max_candidates": max_candidates}


def run_state(folder: pathlib.Path, expect: Mapping[str, Any] | None = None) -> tuple[str, str]:
    """(state, why) of one run's folder: "finished" (not run again), "stale" (finished with
    another corpus or budgets), "unfinished" (cut, interrupted or failed: run again from the
    start) or "missing"."""
    from tritune.model.results import ResultsError, RunResults

    if not (folder / RESULTS).is_file():
        return ("unfinished", "no optimize.json") if folder.exists() else ("missing", "not run yet")
    try:
        results = RunResults.load(folder)
    except ResultsError as exc:
        return "unfinished", str(exc)
    if not results.finished:
        return "unfinished", f"not finished ({results.stopped or 'cut or interrupted'})"
    for field, wanted in (expect or {}).items():
        had = (str(pathlib.Path(results.launches).resolve()) if results.launches else "") if field == "launches" \
            else results.settings.get(field)
        if wanted is not None and had != wanted:
            return "stale", f"finished with {field} {had}, not {wanted}"
    return "finished", f"finished {results.finished}"


def predict_s(workers: int, walls: Mapping[int, float]) -> tuple[float, int] | None:
    """A run's predicted wall seconds, and the finished run it comes from (the one with the
    nearest number of lanes): from fewer lanes, as if they scaled at ``EFFICIENCY``; from more,
    as if they scaled linearly (an upper bound: more lanes are never more than linear). None
    with nothing finished."""
    if not walls:
        return None
    ref = min(walls, key=lambda m: (abs(math.log(m / workers)), m))
    wall = walls[ref]
    if ref == workers:
        return wall, ref
    scaled = wall * ref / workers
    return (min(wall, scaled / EFFICIENCY) if ref < workers else scaled), ref


def next_step(workers: int, state: str, walls: Mapping[int, float], left_s: float,
              gpus: int | None = None) -> tuple[str, str]:
    """("done" | "run" | "skip", why) for one N, with ``left_s`` seconds left of --limit-s."""
    if state == "finished":
        return "done", "finished earlier: not run again"
    if gpus is not None and workers > gpus:
        return "skip", f"this host shows {gpus} GPU(s)"
    left_s = max(0.0, left_s)
    predicted = predict_s(workers, walls)
    if predicted is None:
        if left_s < MIN_START_S:
            return "skip", f"only {left_s:.0f} s left of --limit-s and nothing finished to predict from"
        return "run", f"nothing finished to predict from; {left_s:.0f} s left (cut at the limit if it needs more)"
    seconds, ref = predicted
    basis = f"predicted {seconds:.0f} s from workers-{ref}'s {walls[ref]:.0f} s"
    if seconds > left_s:
        return "skip", f"{basis}, {left_s:.0f} s left of --limit-s: run again (same --work) to do it"
    return "run", f"{basis}; {left_s:.0f} s left"


def finished_walls(work: pathlib.Path, workers: Iterable[int], states: Mapping[int, str]) -> dict[int, float]:
    """Wall seconds of the finished runs, as recorded (``RUN_INFO``), else from optimize.json."""
    out = {}
    for n in workers:
        if states.get(n) == "finished":
            run = load_run(work, n)
            if run.wall_s:
                out[n] = run.wall_s
    return out


# ------------------------------------------------------------------------------ the machine

def nvidia_gpus() -> list[str]:
    """``nvidia-smi -L``'s lines ("GPU 0: NVIDIA H100 80GB HBM3 (UUID: ...)"); without nvidia-smi,
    what torch in a worker finds (``lanes.visible_gpus``: this process never initialises CUDA)."""
    try:
        done = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=60)
        lines = [line.strip() for line in done.stdout.splitlines() if line.startswith("GPU ")]
        if done.returncode == 0 and lines:
            return lines
    except (OSError, subprocess.SubprocessError):
        pass
    from tritune import config
    from tritune.loop.lanes import LaneError, visible_gpus

    if config.interpreting():
        return []
    try:
        return [f"GPU {i}: {gpu['name']} (capability {gpu['capability']}, from torch)"
                for i, gpu in enumerate(visible_gpus())]
    except LaneError:
        return []


def gpu_name(line: str) -> str:
    match = re.match(r"GPU \d+: (.*?)(?: \((?:UUID: |capability ).*\))?$", line)
    return match.group(1) if match else line


def usable_gpus(lines: Sequence[str]) -> int:
    """The GPUs a run may use: nvidia-smi's, within CUDA_VISIBLE_DEVICES when set."""
    from tritune import config

    visible = config.visible_devices()
    return len(lines) if visible is None else min(len(lines), len(visible))


def command_line(argv: list[str] | None = None) -> str:
    """This benchmark's command as typed in the repository root (``main``'s argv, else sys.argv)."""
    return _common.portable_command([__file__, *(sys.argv[1:] if argv is None else argv)])


def environment(gpus: Sequence[str], command: str) -> dict:
    """GPU (``nvidia-smi -L``: the parent never initialises CUDA, so every GPU is the runs'),
    versions, date and the command, as the other benchmarks record them."""
    import torch
    import triton

    now = datetime.datetime.now(datetime.timezone.utc)
    names = collections.Counter(gpu_name(line) for line in gpus)
    return {"command": command, "utc": now.isoformat(timespec="seconds"),
            "date": now.date().isoformat(), "gpu": ", ".join(f"{n} x {name}" for name, n in names.items()) or None,
            "nvidia_smi": list(gpus), "torch": torch.__version__, "triton": triton.__version__,
            "python": sys.version.split()[0], "git": _common._git_head()}


class Log:
    """Lines to stdout and to OUT/lanes.log."""

    def __init__(self, path: pathlib.Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)

    def __call__(self, line: str) -> None:
        _common.log(line)
        with open(self.path, "a") as f:
            f.write(line + "\n")


# ---------------------------------------------------------------------------------- one call

def child_env(triton_cache: str) -> dict[str, str]:
    from tritune import config

    return config.environment({config.ENV_PYTHONPATH: config.python_path_first(str(_common.REPO / "src")),
                               config.ENV_TRITON_CACHE: triton_cache, "PYTHONUNBUFFERED": "1", "COLUMNS": "160"})


def capture(work: pathlib.Path, program: str, timeout_s: float, log: Log) -> pathlib.Path | None:
    """WORK/capture, made once (``tritune capture --force``, fresh Triton cache); None if it failed."""
    target, done = work / "capture", work / "capture.done"
    if done.exists() and (target / "launches.jsonl").exists():
        log(f"capture: {target} (made earlier)")
        return target
    work.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "tritune", "capture", "--out", str(target), "--force", "--", *shlex.split(program)]
    cache = tempfile.mkdtemp(prefix="tritune-lanes-triton-")
    try:
        rc, seconds, cut = e2e.run_process(cmd, child_env(cache), timeout_s, work / "capture.log")
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    if rc != 0 or cut or not (target / "launches.jsonl").exists():
        log(f"capture: FAILED ({'cut at the limit' if cut else f'exit {rc}'}): {e2e.last_line(work / 'capture.log')}")
        return None
    done.write_text(json.dumps({"command": portable(cmd, work), "seconds": round(seconds, 1)}))
    log(f"capture: {launches(target)} distinct launches in {seconds:.0f} s -> {target}")
    return target


def portable(cmd: Sequence[str], work: pathlib.Path, corpus: pathlib.Path | None = None) -> str:
    """A command as typed in the repository root: python3, $CORPUS and $WORK for those folders."""
    text = e2e.portable(list(cmd))
    if corpus is not None:
        text = text.replace(str(corpus), "$CORPUS")
    return text.replace(str(work), "$WORK")


def launches(corpus: pathlib.Path) -> int:
    """The capture's distinct launches; a one-line error for a folder that is not a capture."""
    from tritune.capture.spec import read_launches
    from tritune.model.launch import SpecError

    try:
        return len(read_launches(corpus))
    except SpecError as exc:
        raise SystemExit(f"lanes_gpu.py: {exc}") from None


def _lines(path: pathlib.Path) -> list[str]:
    return [line for line in path.read_text().splitlines() if line.strip()]


def run_one(corpus: pathlib.Path, work: pathlib.Path, workers: int, args, timeout_s: float, env: Mapping,
            log: Log) -> dict:
    """One ``tritune optimize --workers N`` from the start: a fresh folder, store and Triton cache.
    Its record (``RUN_INFO``): the command, wall seconds, exit status, cut or not."""
    folder = run_dir(work, workers)
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    cmd = optimize_command(corpus, folder, workers, args.budget_s, args.max_candidates)
    cache = tempfile.mkdtemp(prefix="tritune-lanes-triton-")
    started = datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")
    try:
        rc, seconds, cut = e2e.run_process(cmd, child_env(cache), timeout_s, folder / "optimize.log", interrupt=True)
    finally:
        shutil.rmtree(cache, ignore_errors=True)
    info = {"workers": workers, "command": portable(cmd, work, corpus),
            "corpus": str(corpus), "started": started, "wall_s": round(seconds, 2), "rc": rc, "cut": cut,
            "gpu": env.get("gpu"), "date": env.get("date"), "benchmark": env.get("command")}
    (folder / RUN_INFO).write_text(json.dumps(info, indent=1))
    tail = _lines(folder / "optimize.log")[-TAIL_LINES:]
    log(f"workers-{workers}: {'cut at the limit' if cut else f'exit {rc}'} after {seconds:.0f} s; last lines:")
    for line in tail:
        log(f"    {line}")
    return info


# ------------------------------------------------------------------------------ reading runs

@dataclasses.dataclass
class Run:
    """One N as found on disk: its optimize.json (if any) and this benchmark's record of it."""

    workers: int
    state: str = "missing"  # finished | unfinished | stale | missing | skipped
    note: str = ""
    results: Any = None  # RunResults
    info: dict = dataclasses.field(default_factory=dict)
    data: dict = dataclasses.field(default_factory=dict)  # the optimize.json as written, for the copy in OUT

    @property
    def loop_s(self) -> float | None:
        """optimize.json's started -> finished (whole seconds: lanes started to report)."""
        if self.results is None or not self.results.finished:
            return None
        try:
            began = datetime.datetime.fromisoformat(self.results.started)
            ended = datetime.datetime.fromisoformat(self.results.finished)
        except ValueError:
            return None
        return max(0.0, (ended - began).total_seconds())

    @property
    def wall_s(self) -> float | None:
        """The process's wall seconds as this benchmark measured them, else ``loop_s``."""
        wall = self.info.get("wall_s")
        return float(wall) if isinstance(wall, (int, float)) and wall > 0 else self.loop_s


def load_run(root: pathlib.Path, workers: int) -> Run:
    """N's run from ROOT/workers-N/optimize.json (+ ``RUN_INFO``), or from ROOT/workers-N.json
    (the copy in OUT, its record under ``lanes_bench``)."""
    from tritune.model.results import ResultsError, RunResults

    folder, copy = run_dir(root, workers), root / f"workers-{workers}.json"
    path = folder / RESULTS if (folder / RESULTS).is_file() else copy if copy.is_file() else None
    if path is None:
        return Run(workers, "unfinished" if folder.exists() else "missing",
                   "no optimize.json" if folder.exists() else "not run")
    try:
        data = json.loads(path.read_text())
        results = RunResults.from_json(data, str(path))
    except (json.JSONDecodeError, ResultsError) as exc:
        return Run(workers, "unfinished", str(exc).splitlines()[0])
    info = data.get("lanes_bench") if isinstance(data.get("lanes_bench"), dict) else {}
    if (folder / RUN_INFO).is_file():
        info = json.loads((folder / RUN_INFO).read_text())
    state = "finished" if results.finished else "unfinished"
    note = "cut at the limit" if info.get("cut") else ("" if results.finished else results.stopped or "not finished")
    data = {k: v for k, v in data.items() if k != "lanes_bench"}
    return Run(workers, state, note, results, info, data)


def found_workers(root: pathlib.Path) -> list[int]:
    """The N of every run under ROOT (workers-N/ or workers-N.json), ascending."""
    found = set()
    for path in root.glob("workers-*"):
        match = re.fullmatch(r"workers-(\d+)(?:\.json)?", path.name)
        if match:
            found.add(int(match.group(1)))
    return sorted(found)


# ---------------------------------------------------------------------------- the comparison

def ident(kernel) -> tuple[str, str]:
    """A kernel's identity across runs of one corpus: its key, on its kind of GPU."""
    return (kernel.key_sha or kernel.id, kernel.gpu or "")


def best_seen(kernel, threshold: float) -> float | None:
    """A decided kernel's speedup; an undecided one's best candidate (confirmed ratio where
    the arbiter re-timed it, else its first timing); None if no candidate was timed."""
    if kernel.improved(threshold):
        return kernel.speedup
    seen = []
    for cand in kernel.candidates:
        value = cand.confirmed if cand.confirmed is not None else cand.speedup
        if value is not None and value > 0 and math.isfinite(value):
            seen.append(float(value))
    return max(seen) if seen else None


def judge(base, other, threshold: float, noise: float = NOISE) -> tuple[str, str]:
    """One kernel in the N=1 run and in another: (verdict, why). "same": both undecided, or both
    chose the same variant; "equivalent": different variants whose speedups are within ``noise``
    of each other (max / min <= 1.10), both >= the threshold; "edge": decided in one run only, and
    the other run's best candidate came within ``noise`` of that speedup (it crossed the threshold
    in one run and not in the other); "differs": anything else."""
    a, b = base.improved(threshold), other.improved(threshold)
    if not a and not b:
        return "same", "neither decided"
    if a and b:
        if base.decision == other.decision:
            return "same", f"{base.decision}"
        ratio = max(base.speedup, other.speedup) / min(base.speedup, other.speedup)
        why = f"{base.decision} {base.speedup:.2f}x vs {other.decision} {other.speedup:.2f}x"
        return ("equivalent" if ratio <= noise else "differs"), why
    decided, undecided = (base, other) if a else (other, base)
    seen = best_seen(undecided, threshold)
    why = (f"{decided.decision} {decided.speedup:.2f}x in one run; the other's best "
           + (f"{seen:.2f}x" if seen else "none timed"))
    return ("edge" if seen and decided.speedup / seen <= noise else "differs"), why


def compare(base, other, noise: float = NOISE) -> dict:
    """N=1's run against another's: same kernels optimized? decided? same decision per kernel?"""
    threshold = base.threshold
    a = {ident(k): k for k in base.kernels if k.ran}
    b = {ident(k): k for k in other.kernels if k.ran}
    decided_a = {i for i, k in a.items() if k.improved(threshold)}
    decided_b = {i for i, k in b.items() if k.improved(threshold)}
    name = {**{i: k.kernel for i, k in b.items()}, **{i: k.kernel for i, k in a.items()}}
    kernels = []
    for i in [i for i in a if i in b]:
        verdict, why = judge(a[i], b[i], threshold, noise)
        kernels.append({"kernel": a[i].kernel, "id": a[i].id, "key_sha": i[0], "verdict": verdict, "why": why})
    counts = collections.Counter(k["verdict"] for k in kernels)
    optimized_same = a.keys() == b.keys()
    return {
        "optimized_same": optimized_same,
        "only_in_base": sorted(name[i] for i in a.keys() - b.keys()),
        "only_in_other": sorted(name[i] for i in b.keys() - a.keys()),
        "decided_same": decided_a == decided_b,
        "decided_only_in_base": sorted(name[i] for i in decided_a - decided_b),
        "decided_only_in_other": sorted(name[i] for i in decided_b - decided_a),
        "verdicts": {v: counts.get(v, 0) for v in ("same", "equivalent", "edge", "differs")},
        "identical": optimized_same and decided_a == decided_b and counts.get("same", 0) == len(kernels),
        "agree_within_noise": optimized_same and not counts.get("differs"),
        "kernels": kernels,
    }


def row(run: Run, base: Run | None) -> dict:
    """One N's figures."""
    out: dict[str, Any] = {"workers": run.workers, "state": run.state, "note": run.note,
                           "command": run.info.get("command"), "wall_s": run.wall_s, "loop_s": run.loop_s}
    res = run.results
    if res is None:
        return out
    threshold = res.threshold
    ran = [k for k in res.kernels if k.ran]
    decided = [k for k in ran if k.improved(threshold)]
    per_min = len(ran) / run.wall_s * 60 if run.wall_s and run.state == "finished" else None
    out.update(gpu=res.target.get("gpu"), meaningful=res.meaningful, jobs=res.jobs, keys=res.keys,
               planned=res.planned, optimized=len(ran), decided=len(decided), kernels_per_min=per_min,
               stopped=res.stopped, lanes=[line.to_json() for line in res.lanes],
               decisions=[{"kernel": k.kernel, "id": k.id, "decision": k.decision, "speedup": k.speedup}
                          for k in decided])
    base_row = row(base, None) if base is not None and base is not run and base.results is not None else None
    if run is base:
        out["throughput_vs_1"] = 1.0
    elif base_row and base_row.get("kernels_per_min") and per_min:
        out["throughput_vs_1"] = per_min / base_row["kernels_per_min"]
        if run.loop_s and base.loop_s and base_row.get("optimized"):
            out["loop_speedup_vs_1"] = (len(ran) / run.loop_s) / (base_row["optimized"] / base.loop_s)
    return out


def goals(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """The issue's goals for the N measured: met, not met, or None (not measured / not meaningful)."""
    out = []
    by_n = {r["workers"]: r for r in rows}
    for n, goal in GOALS.items():
        r = by_n.get(n) or {}
        value = r.get("throughput_vs_1") if r.get("state") == "finished" else None
        meaningful = r.get("meaningful") is not False
        met = None if value is None or not meaningful else value >= goal
        why = ("not measured" if value is None else f"{value:.2f}x" + ("" if meaningful else
               ", not meaningful: interpreter lanes (no GPU)"))
        out.append({"workers": n, "goal": goal, "throughput_vs_1": value, "met": met, "why": why})
    return out


def summarize(runs: Sequence[Run], env: Mapping[str, Any], settings: Mapping[str, Any] | None = None) -> dict:
    base = next((r for r in runs if r.workers == 1 and r.state == "finished"), None)
    rows = [row(r, base) for r in runs]
    comparisons = {r.workers: compare(base.results, r.results) for r in runs
                   if base is not None and r is not base and r.state == "finished"}
    first = next((r.results for r in runs if r.results is not None), None)
    return {"environment": dict(env), "settings": dict(settings or {}),
            "target": first.target if first else {}, "noise": NOISE, "goals": goals(rows), "rows": rows,
            "comparisons": comparisons, "per_kernel": per_kernel(runs, base)}


def per_kernel(runs: Sequence[Run], base: Run | None) -> list[dict]:
    """Every kernel decided in some run: each run's decision (or best candidate), the verdict vs N=1."""
    done = [r for r in runs if r.results is not None and r.state == "finished"]
    decided: dict[tuple, str] = {}
    for r in done:
        for k in r.results.kernels:
            if k.ran and k.improved(r.results.threshold):
                decided.setdefault(ident(k), k.kernel)
    out = []
    for i, kernel in decided.items():
        cells, verdicts = {}, {}
        ref = _kernel(base.results, i) if base is not None else None
        for r in done:
            k = _kernel(r.results, i)
            if k is None:
                cells[r.workers] = "not optimized"
                continue
            if k.improved(r.results.threshold):
                cells[r.workers] = f"{k.decision} ({k.speedup:.2f}x)"
            else:
                seen = best_seen(k, r.results.threshold)
                cells[r.workers] = "-" + (f" (best {seen:.2f}x)" if seen else "")
            if ref is not None and r is not base:
                verdicts[r.workers] = judge(ref, k, base.results.threshold)[0]
        out.append({"kernel": kernel, "key_sha": i[0], "cells": cells, "vs_1": verdicts})
    return out


def _kernel(results, i):
    return next((k for k in results.kernels if k.ran and ident(k) == i), None)


# ------------------------------------------------------------------------------------ the table

def _num(value: float | None, fmt: str = "{:.0f}") -> str:
    return "-" if value is None else fmt.format(value)


def _cell(text: Any) -> str:
    return str(text).replace("|", "\\|")


def _met(goal: Mapping[str, Any]) -> str:
    return {True: "met", False: "NOT met", None: "not checked"}[goal["met"]]


def render_markdown(summary: Mapping[str, Any]) -> str:
    env, rows, settings = summary["environment"], summary["rows"], summary["settings"]
    workers = [r["workers"] for r in rows]
    versions = (f"torch {env['torch']}, triton {env.get('triton')}" if env.get("torch")
                else f"triton {summary['target'].get('triton_version')}")
    lines = ["# tritune optimize on several GPUs of one host (issue 15, section 4)", "",
             f"GPU: {env.get('gpu') or summary['target'].get('gpu')}; {versions}; "
             f"date {env.get('utc') or env.get('date')}", "",
             f"Command: `{env['command']}`" if env.get("command") else
             "Command: not recorded (the table was rebuilt from the runs' files; each run's command is below)", ""]
    if env.get("table"):
        lines += [f"Table rebuilt by: `{env['table']}`", ""]
    if env.get("nvidia_smi"):
        lines += ["`nvidia-smi -L`:", ""] + [f"    {line}" for line in env["nvidia_smi"]] + [""]
    if settings:
        lines += [f"Corpus: `{settings.get('corpus')}` ({settings.get('corpus_note', '')}); each run: "
                  f"`tritune optimize --launches CORPUS --workers N --budget-s {settings.get('budget_s'):g}"
                  + (f" --max-candidates {settings['max_candidates']}" if settings.get("max_candidates") else "")
                  + " --cover 1 --ncu never`, a fresh store and Triton cache each, one after another"
                  + (f" (`$WORK`: `{settings['work']}`)." if settings.get("work") else "."), ""]
    lines += ["Wall: the `tritune optimize` process as the user waits for it (lanes started, ranking, keys, "
              "report); loop: its optimize.json's started -> finished (whole seconds). Throughput: kernels "
              "optimized per minute of wall time, over the one-GPU run's.", "",
              "| workers | state | wall s | loop s | kernels optimized | decided | kernels / min | throughput vs 1 "
              "| (by loop time) | verify workers per lane |", "|" + "---|" * 10]
    for r in rows:
        state = r["state"] + (f": {r['note']}" if r.get("note") else "")
        lines.append(f"| {r['workers']} | {_cell(state)} | {_num(r.get('wall_s'))} | {_num(r.get('loop_s'))} | "
                     f"{_num(r.get('optimized'), '{}')} | {_num(r.get('decided'), '{}')} | "
                     f"{_num(r.get('kernels_per_min'), '{:.1f}')} | {_num(r.get('throughput_vs_1'), '{:.2f}x')} | "
                     f"{_num(r.get('loop_speedup_vs_1'), '{:.2f}x')} | {_num(r.get('jobs'), '{}')} |")
    lines += ["", "Goals:", ""]
    for g in summary["goals"]:
        lines.append(f"- {g['workers']} GPUs, >= {g['goal']:.1f}x throughput over one: {_met(g)} ({g['why']})")
    lanes = [(r["workers"], lane) for r in rows for lane in r.get("lanes") or ()]
    if lanes:
        lines += ["", "Lanes (`optimize.json`'s `lanes`):", "",
                  "| workers | lane | GPU | kernels | busy s | idle s | died |", "|" + "---|" * 7]
        for n, lane in lanes:
            lines.append(f"| {n} | {lane['name']} | {_cell(lane['gpu'])} | {lane['kernels']} | "
                         f"{lane['busy_s']:.0f} | {lane['idle_s']:.0f} | {_cell(lane.get('died') or '-')} |")
    comparisons = summary["comparisons"]
    if comparisons:
        lines += ["", "Decisions against the one-GPU run:", "",
                  "| workers | same kernels optimized | same kernels decided | same decision per kernel "
                  "| same / equivalent / edge / differs | identical |", "|" + "---|" * 6]
        for n, c in comparisons.items():
            v = c["verdicts"]
            decided = "yes" if c["decided_same"] else "no: " + "; ".join(
                filter(None, [f"only with 1: {', '.join(c['decided_only_in_base'])}" if c["decided_only_in_base"] else "",
                              f"only with {n}: {', '.join(c['decided_only_in_other'])}"
                              if c["decided_only_in_other"] else ""]))
            optimized = "yes" if c["optimized_same"] else "no: " + "; ".join(
                filter(None, [f"only with 1: {', '.join(c['only_in_base'])}" if c["only_in_base"] else "",
                              f"only with {n}: {', '.join(c['only_in_other'])}" if c["only_in_other"] else ""]))
            lines.append(f"| {n} | {_cell(optimized)} | {_cell(decided)} | "
                         f"{'yes, up to noise' if c['agree_within_noise'] else 'NO'} | "
                         f"{v['same']} / {v['equivalent']} / {v['edge']} / {v['differs']} | "
                         f"{'yes' if c['identical'] else 'no'} |")
        lines += ["", f"How a decision is judged the same: both runs chose the same variant (same); or both "
                  f"decided, with different variants whose confirmed speedups are within {NOISE - 1:.0%} of "
                  f"each other (equivalent); or one run decided at speedup s and the other's best candidate "
                  f"came within {NOISE - 1:.0%} of s, so the kernel sat at the threshold (edge). Anything else "
                  "differs. Identical: the same kernels, decided the same, every variant equal."]
    if summary["per_kernel"]:
        lines += ["", "Decided kernels (decision and confirmed speedup; `-`: none, with the best candidate "
                  "seen):", "",
                  "| kernel | " + " | ".join(f"workers={n}" for n in workers) + " | vs workers=1 |",
                  "|" + "---|" * (len(workers) + 2)]
        for k in summary["per_kernel"]:
            vs = "; ".join(f"{n}: {v}" for n, v in k["vs_1"].items()) or "-"
            lines.append(f"| {_cell(k['kernel'])} | "
                         + " | ".join(_cell(k["cells"].get(n, "not run")) for n in workers) + f" | {vs} |")
    commands = [(r["workers"], r["command"]) for r in rows if r.get("command")]
    if commands:
        lines += ["", "Runs:", ""] + [f"- workers={n}: `{cmd}`" for n, cmd in commands]
    return "\n".join(lines) + "\n"


def write_outputs(summary: Mapping[str, Any], runs: Sequence[Run], out: pathlib.Path) -> pathlib.Path:
    """OUT/lanes.json, OUT/lanes.md and OUT/workers-N.json (optimize.json + ``lanes_bench``)."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "lanes.json").write_text(json.dumps(summary, indent=1, default=str))
    md = out / "lanes.md"
    md.write_text(render_markdown(summary))
    for run in runs:
        if run.results is None:
            continue
        body = dict(run.data or run.results.to_json())
        body["lanes_bench"] = {**run.info, "gpu": run.info.get("gpu") or summary["environment"].get("gpu"),
                               "date": run.info.get("date") or summary["environment"].get("date")}
        target = out / f"workers-{run.workers}.json"
        tmp = target.with_suffix(".tmp")
        tmp.write_text(json.dumps(body, indent=1, default=str))
        tmp.replace(target)
    return md


# ---------------------------------------------------------------------------------------- main

def parse(argv: list[str] | None = None):
    parser = _common.OneLineParser(prog="lanes_gpu.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=None, help="lanes.json/md, the runs' copies (default $OUT)")
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path("gpu_state/lanes"),
                        help="the capture and the runs (stores, reports, logs), kept between calls")
    parser.add_argument("--workers-list", default=None,
                        help="the N to run, in this order (default 1,2,4; with --table: the runs found)")
    parser.add_argument("--budget-s", type=float, default=10.0, help="tritune optimize --budget-s, every run")
    parser.add_argument("--max-candidates", type=int, default=12, help="tritune optimize --max-candidates, every run")
    parser.add_argument("--limit-s", type=float, default=560.0,
                        help="this call's whole time: no run starts unless predicted to fit; one past it is cut")
    parser.add_argument("--corpus", type=pathlib.Path, default=None,
                        help="an existing capture (tritune capture / harvest output) instead of the suite's")
    parser.add_argument("--program", default=PROGRAM, help=f"what to capture without --corpus (default: {PROGRAM})")
    parser.add_argument("--table", type=pathlib.Path, default=None, metavar="DIR",
                        help="only rebuild lanes.md/json from DIR's runs (no GPU)")
    args = parser.parse_args(argv)
    if args.budget_s <= 0 or args.limit_s <= 0 or (args.max_candidates is not None and args.max_candidates < 1):
        parser.error("--budget-s and --limit-s must be positive, --max-candidates at least 1")
    return args


def table(args, argv: list[str] | None = None) -> int:
    root = args.table
    if not root.is_dir():
        raise SystemExit(f"lanes_gpu.py: --table {root}: no such folder")
    workers = parse_workers(args.workers_list) if args.workers_list else found_workers(root)
    if not workers:
        raise SystemExit(f"lanes_gpu.py: --table {root}: no workers-N/optimize.json or workers-N.json there")
    previous = root / "lanes.json"
    old = json.loads(previous.read_text()) if previous.is_file() else {}
    env = dict(old.get("environment") or {})
    runs = [load_run(root, n) for n in sorted(workers)]
    if not env:
        first = next((r for r in runs if r.results is not None), None)
        env = {"gpu": first.results.target.get("gpu") if first else None,
               "date": (first.results.started or "")[:10] if first else None}
    env["table"] = command_line(argv)
    md = write_outputs(summarize(runs, env, old.get("settings")), runs, args.out or root)
    print(md.read_text())
    return 0


def main(argv: list[str] | None = None) -> int:
    began = time.monotonic()
    args = parse(argv)
    _common.bootstrap()
    if args.table is not None:
        return table(args, argv)
    from tritune import config

    workers = parse_workers(args.workers_list or DEFAULT_WORKERS)
    out = (args.out or pathlib.Path(_common.default_out_dir()) / "lanes").absolute()
    work = args.work.absolute()
    given = args.corpus.absolute() if args.corpus is not None else None
    if given is not None:
        launches(given)  # a folder that is not a capture: one line, before anything is written
    gpus = nvidia_gpus()
    if not config.interpreting() and not gpus:
        raise SystemExit("lanes_gpu.py: no NVIDIA GPU here (nvidia-smi -L shows none); run it on the GPU machine, "
                         "or under TRITON_INTERPRET=1 for a CPU check")
    env = environment(gpus, command_line(argv))
    log = Log(out / "lanes.log")
    log(f"# {env['command']}")
    log(f"# GPU: {env['gpu'] or 'none (TRITON_INTERPRET=1)'}; {env['utc']}; torch {env['torch']}, triton {env['triton']}")
    for line in gpus:
        log(f"#   {line}")

    def left() -> float:
        return args.limit_s - RESERVE_S - (time.monotonic() - began)

    if given is not None:
        corpus, note = given, "given"
    else:
        corpus = capture(work, args.program, max(1.0, left()), log)
        if corpus is None:
            return 1
        note = f"`{args.program}` captured once"
    keys = launches(corpus)
    settings = {"corpus": portable([str(corpus)], work) if args.corpus is None else str(args.corpus),
                "corpus_note": f"{note}, {keys} distinct launches", "budget_s": args.budget_s,
                "max_candidates": args.max_candidates, "workers_list": workers, "limit_s": args.limit_s,
                "work": str(args.work)}
    expect = expectation(corpus, args.budget_s, args.max_candidates)
    host = None if config.interpreting() else usable_gpus(gpus)
    notes: dict[int, str] = {}
    for n in workers:
        states = {m: run_state(run_dir(work, m), expect)[0] for m in workers}
        state, why = run_state(run_dir(work, n), expect)
        if state in ("stale", "unfinished"):
            log(f"workers-{n}: {state} ({why}): run again from the start")
        action, reason = next_step(n, state, finished_walls(work, workers, states), left(), host)
        log(f"workers-{n}: {action}: {reason}")
        if action == "skip":
            notes[n] = reason
        elif action == "run":
            run_one(corpus, work, n, args, max(1.0, left()), env, log)
    runs = []
    for n in workers:
        run = load_run(work, n)
        state, why = run_state(run_dir(work, n), expect)
        if state == "stale":
            run = Run(n, "stale", why)
        if n in notes and run.state != "finished":
            run = Run(n, "skipped", notes[n])
        runs.append(run)
    summary = summarize(runs, env, settings)
    md = write_outputs(summary, runs, out)
    log("")
    for line in md.read_text().splitlines():
        if line.startswith("- ") and "GPUs, >=" in line:
            log(line)
    log(f"wrote {out / 'lanes.json'}, {md}, {out / 'lanes.log'} and workers-N.json ({time.monotonic() - began:.0f} s)")
    print(md.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
