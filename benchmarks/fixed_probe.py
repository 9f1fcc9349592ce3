"""Where a small run's fixed costs go, part by part, with a lane's workers as ``tritune optimize``
makes them (jailed, ``--jobs`` verify workers beside one timing worker): issue 24, section 1.

For each capture and arm, in this one process, on a fresh lane:

- ``start_s``: the timing worker and the verify workers the lane waits for started together
  (``LocalLane.start``: torch and Triton imported, the GPU brought up, the capture's libraries
  in the ``after`` arms), then ``target_s``: the target job (the copy bandwidth);
- the ranking (``Evaluator.baselines``): ``build_s``, every launch built by the verify workers,
  and ``time_s``, timed by the timing worker;
- two rounds of candidates of the capture's first launch (``num_warps``/``num_stages``
  variants, verified then timed, ``--jobs`` at a time): ``round_s`` (6 candidates, at once after
  the ranking) and ``round2_s`` (12), each candidate's ``verify_s``/``time_s``/``wait_s``;
- ``close_s``: the workers stopped.

``--phases`` adds, before the arms, what a lane's start is made of, in one more fresh jailed worker
(``phases``): starting it with nothing imported (the interpreter, the jail), then importing torch,
Triton, tritune's jobs and bringing the GPU up, each timed; and the target job. ``--profile``: the
ranking's timing call of the first arm runs under cProfile in the timing worker (``ranking_top``).

Arms: ``before``, as main was before this probe's changes (a Triton cache per worker, nothing
warmed, the lane waiting for all its verify workers); ``after``, the defaults now (one
``SharedCache`` for the lane's workers, the capture's libraries imported at start,
``replay.warm``; the lane waits for ``FIRST_VERIFIERS``, the rest join as they start);
``after-j4``: ``after`` with 4 verify workers. Every arm starts on an empty cache.

    export PYTHONPATH=$PWD/src
    python3 benchmarks/fixed_probe.py --out $OUT/fixed_probe.json CAPTURE [CAPTURE ...]
    TRITON_INTERPRET=1 python3 benchmarks/fixed_probe.py --out /tmp/probe.json --arms after CAPTURE   # CPU smoke
"""

from __future__ import annotations

import argparse
import json
import pathlib
import statistics
import sys
import time

import _common

CANDIDATES = ({"num_warps": 2}, {"num_warps": 8}, {"num_warps": 16}, {"num_warps": 4, "num_stages": 1},
              {"num_warps": 4, "num_stages": 4}, {"num_warps": 1})
ARMS = {"before": {"shared": False, "warm": False, "staged": False, "jobs": None},
        "after": {"shared": True, "warm": True, "staged": True, "jobs": None},
        "after-j4": {"shared": True, "warm": True, "staged": True, "jobs": 4}}


def import_phases(payload: dict) -> dict:
    """A job: each import a lane's worker does at its start, timed (seconds), in this order, then
    the capture's libraries (``payload["warm"]``, ``replay.warm``); and, per top-level package,
    how many modules it loaded from bytecode and how many it compiled from source
    (``bytecode``: ``[read, compiled]``; a jailed worker writes none, so bytecode found after the
    import was there before it)."""
    import importlib
    import os

    found = {}
    before = set(sys.modules)
    for name in ("tritune.worker.triton_hash", "torch", "triton", "tritune.loop.jobs", "tritune.bench.run",
                 "tritune.verify", "tritune.loop.device_ready", *payload.get("warm", ())):
        begin = time.perf_counter()
        try:
            importlib.import_module(name)
        except Exception as exc:  # noqa: BLE001 - a probe: say it, go on
            found[name] = f"{type(exc).__name__}: {exc}"
            continue
        found[name] = round(time.perf_counter() - begin, 3)
    counts: dict = {}
    for name in set(sys.modules) - before:
        cached = getattr(sys.modules[name], "__cached__", None)
        if isinstance(cached, str):
            row = counts.setdefault(name.split(".")[0], [0, 0])
            row[0 if os.path.exists(cached) else 1] += 1
    found["bytecode"] = dict(sorted(counts.items(), key=lambda item: -sum(item[1])))
    return found


def profiled(payload: dict) -> dict:
    """A job: ``target`` (a job's name) run on ``payload["body"]`` under cProfile; its wall time and
    the top functions by cumulative time."""
    import cProfile
    import io
    import pstats

    from tritune.worker.child import resolve

    profiler = cProfile.Profile()
    begin = time.perf_counter()
    profiler.enable()
    try:
        value = resolve(payload["target"])(payload["body"])
    finally:
        profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("cumulative").print_stats(50)
    return {"wall_s": round(time.perf_counter() - begin, 3), "top": text.getvalue()[-14000:],
            "timed": len(value.get("timings", ())) if isinstance(value, dict) else None}


def phases(capture: pathlib.Path) -> dict:
    """A lane worker's start, part by part (``--phases``): its jail and environment (the
    bytecode folder where a run filled it) as a lane makes them, its preloads one by one."""
    from tritune import config
    from tritune.loop.jobs import TARGET_JOB
    from tritune.loop.lanes import LocalLane
    from tritune.replay.warm import kernel_imports
    from tritune.worker import Worker, jail

    lane = LocalLane(None, capture, jail=jail.for_workers(capture, untrusted=False))  # made, not started
    made = lane.evaluator.worker
    lane.close()
    found: dict = {"jailed": made.jail is not None, "bytecode": config.ENV_PYCACHE_PREFIX in made.env}
    begin = time.perf_counter()
    with Worker(600.0, env=made.env, jail=made.jail) as worker:
        outcome = worker.start()
        found["bare_start_s"] = round(time.perf_counter() - begin, 3)
        done = worker.call("fixed_probe:import_phases", {"warm": list(kernel_imports(capture))})
        found["imports_s"] = done.value if done.ok else str(done.failure)
        begin = time.perf_counter()
        target = worker.call(TARGET_JOB, {})
        found["target_s"] = round(time.perf_counter() - begin, 3)
        found["target_ok"] = target.ok and outcome.ok
    return found


def probe(capture: pathlib.Path, arm: str, profile: bool = False) -> dict:
    from tritune.capture.spec import read_launches
    from tritune.loop.evaluate import PRELOAD, Evaluator, default_jobs
    from tritune.loop.jobs import BASELINES_JOB, TARGET_JOB
    from tritune.loop.lanes import FIRST_VERIFIERS, HASH_MODULE, READY_MODULE
    from tritune.model.variant import Variant
    from tritune.replay.warm import kernel_imports
    from tritune.worker import SharedCache, Worker, jail

    how = ARMS[arm]
    jobs = how["jobs"] or default_jobs()
    policy = jail.for_workers(capture, untrusted=False)
    cache = SharedCache() if how["shared"] and policy is not None else None
    warm = kernel_imports(capture) if how["warm"] else ()
    worker = Worker(600.0, preload=(HASH_MODULE, *PRELOAD, READY_MODULE), jail=policy,
                    cache=cache.path if cache is not None else None, warm=warm)
    evaluator = Evaluator(str(capture), jobs=jobs, worker=worker, cache=cache)
    specs = read_launches(capture)
    found: dict = {"capture": capture.name if capture.name != "capture" else capture.parent.name, "arm": arm,
                   "jobs": jobs, "jailed": policy is not None, "launches": len(specs), "warm": list(warm)}
    try:
        begin = time.perf_counter()
        starting = evaluator.start_verifiers(FIRST_VERIFIERS if how["staged"] else None)
        worker.start()
        for future in starting:
            future.result()
        found["start_s"] = time.perf_counter() - begin
        begin = time.perf_counter()
        target = evaluator.call(TARGET_JOB, {})
        found["target_s"] = time.perf_counter() - begin
        evaluator.start_rest()
        evaluator.copy_gbps = (target.value or {}).get("copy_gbps") if target.ok else None
        found["gpu"] = (target.value or {}).get("gpu") if target.ok else None
        begin = time.perf_counter()
        if profile:  # built as the ranking builds, then its timing call under cProfile
            evaluator._build(specs, lambda line: None)
            body = {"target": BASELINES_JOB, "body": evaluator._ranking(specs)}
            done = worker.call("fixed_probe:profiled", body)
            found["ranking_profile"] = done.value if done.ok else str(done.failure)
        timings = evaluator.baselines(specs)
        found["ranking_s"] = time.perf_counter() - begin
        found["ranking"] = dict(evaluator.ranking)
        found["untimed"] = [sid for sid, (timing, _) in timings.items() if timing is None]
        for name, repeat in (("round", 1), ("round2", 2)):
            items = [(Variant(name=f"{name}-{i}", options=dict(options)), "tolerance")
                     for i, options in enumerate(CANDIDATES * repeat)]
            begin = time.perf_counter()
            rows = []
            for (variant, _), done in zip(items, evaluator.candidates(specs[0], items)):
                rows.append({"variant": variant.describe(), "ok": done.trial.ok, "failure": done.trial.failure,
                             "seconds": round(done.seconds, 3),
                             **{k: round(v, 3) for k, v in (done.split or {}).items()}})
            found[f"{name}_s"] = time.perf_counter() - begin
            found[f"{name}_candidates"] = rows
            verified = [r["verify_s"] for r in rows if r["verify_s"] > 0]
            found[f"{name}_verify_median_s"] = statistics.median(verified) if verified else None
            timed = [r["time_s"] for r in rows if r["time_s"] > 0]
            found[f"{name}_time_median_s"] = statistics.median(timed) if timed else None
    finally:
        begin = time.perf_counter()
        evaluator.close()
        found["close_s"] = time.perf_counter() - begin
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captures", nargs="+", type=pathlib.Path)
    parser.add_argument("--out", type=pathlib.Path, required=True)
    parser.add_argument("--arms", default=",".join(ARMS))
    parser.add_argument("--phases", action="store_true", help="a lane worker's start, part by part, first")
    parser.add_argument("--profile", action="store_true", help="the first arm's ranking timing under cProfile")
    args = parser.parse_args()
    runs = []
    for capture in args.captures:
        if args.phases:
            runs.append({"capture": capture.name, "phases": phases(capture.resolve())})
            print(json.dumps(runs[-1]), flush=True)
        for i, arm in enumerate(a for a in args.arms.split(",") if a):  # --arms "": the phases alone
            found = probe(capture.resolve(), arm, profile=args.profile and i == 0)
            runs.append(found)
            print(json.dumps({k: v for k, v in found.items() if not k.endswith("candidates")}), flush=True)
            args.out.write_text(json.dumps({"environment": _common.environment(), "command": " ".join(sys.argv),
                                            "runs": runs}, indent=1, default=str))


if __name__ == "__main__":
    main()
