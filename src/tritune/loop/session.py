"""``optimize``: every distinct kernel launch of a capture, through the loop, into the store.

Launches are grouped by decision key (kernel source, specialization with its shape bucket, GPU,
Triton): one loop per key, on its most frequent launch, since a decision applies to the whole
key. Keys are taken in order of launch count (what the program runs most first).

Resumable at two levels: the store holds every candidate (``KernelLoop`` reuses them), and
``OUT/kernels.jsonl`` holds every finished kernel's result for the run, so a resumed run skips
those kernels outright. ``OUT/optimize.json`` is rewritten after each kernel: an interrupted run
leaves a readable partial result (``finished: null``). Ctrl-C marks the run ``interrupted`` in
the store; running the same command again continues it.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import os
import random
import sys
import time
from pathlib import Path
from typing import Any, Callable, Iterable

from tritune.capture.spec import LaunchSpec, read_launches
from tritune.loop.category import category_of
from tritune.loop.evaluate import Evaluator
from tritune.loop.jobs import TARGET_JOB
from tritune.loop.kernel import KernelLoop, LoopSettings
from tritune.store import DecisionKey, DecisionStore, key_for
from tritune.worker import Worker

RESULTS_FORMAT = 1
RESULTS_FILE = "optimize.json"
PROGRESS_FILE = "kernels.jsonl"


class OptimizeError(RuntimeError):
    """The run cannot start (no launches, no usable target); the message names the problem."""


@dataclasses.dataclass
class Plan:
    """The kernels to optimize: one launch per decision key, most launched first."""

    items: list[tuple[LaunchSpec, DecisionKey]]  # the spec's count is its key's total
    keys: int  # distinct keys before ``max_kernels`` cut the list


def plan(specs: Iterable[LaunchSpec], target: dict, *, kernels: Iterable[str] = (),
         max_kernels: int | None = None, sample: int | None = None, seed: int = 0) -> Plan:
    """One launch per key, most launched first; ``sample``: a seeded random sample of the keys
    instead (a benchmark over hundreds of Inductor kernels that cannot afford them all; the
    most-launched order would favour whatever sorts first among equal counts)."""
    wanted = set(kernels)
    by_key: dict[str, tuple[LaunchSpec, DecisionKey, int]] = {}
    for spec in specs:
        if wanted and spec.kernel not in wanted and spec.id not in wanted:
            continue
        key = key_for(spec, gpu=target["gpu"], capability=target["capability"],
                      triton_version=target["triton_version"])
        held = by_key.get(key.sha)
        total = spec.count + (held[2] if held else 0)
        if held is None or spec.count > held[0].count:
            by_key[key.sha] = (spec, key, total)
        else:
            by_key[key.sha] = (held[0], held[1], total)
    items = sorted(by_key.values(), key=lambda item: (-item[2], item[0].kernel, item[0].id))
    chosen = [(dataclasses.replace(spec, count=total), key) for spec, key, total in items]
    if sample is not None and sample < len(chosen):
        keep = set(random.Random(seed).sample(range(len(chosen)), sample))
        chosen = [item for i, item in enumerate(chosen) if i in keep]
    return Plan(chosen[:max_kernels] if max_kernels is not None else chosen, len(items))


def optimize(root: str | Path, out: str | Path, *, store_path: str | Path | None = None,
             settings: LoopSettings = LoopSettings(), kernels: Iterable[str] = (), max_kernels: int | None = None,
             sample: int | None = None, deadline_s: float | None = None, command: str = "", fresh: bool = False, evaluator: Evaluator | None = None,
             progress: Callable[[str, int, int], None] | None = None,
             log: Callable[[str], None] | None = None,
             families: Callable[[LaunchSpec], list] | None = None) -> dict:
    """Optimize the launches captured in ``root``; results in ``out`` (module docstring).
    ``deadline_s``: no kernel is started after that many seconds; the run stays resumable.
    ``families(spec)`` replaces the proposer families (tests plant candidates through it)."""
    root, out = Path(root), Path(out)
    specs = read_launches(root)
    if not specs:
        raise OptimizeError(f"{root}: no launches to optimize")
    job = dict(store_path=store_path, settings=settings, kernels=kernels, max_kernels=max_kernels, sample=sample,
               deadline_s=deadline_s, command=command, fresh=fresh, progress=progress, log=log, families=families)
    if evaluator is not None:
        return _optimize(root, out, specs, evaluator, **job)
    owned = Evaluator(root, use_ncu=settings.use_ncu)
    try:
        return _optimize(root, out, specs, owned, **job)
    finally:
        owned.close()


def _optimize(root: Path, out: Path, specs: list[LaunchSpec], evaluator: Evaluator, *, store_path, settings,
              kernels, max_kernels, sample, deadline_s, command, fresh, progress, log, families) -> dict:
    out.mkdir(parents=True, exist_ok=True)
    store_path = Path(store_path) if store_path else out / "decisions.db"
    target = machine(evaluator.worker)  # the same warm worker then builds the candidates
    if evaluator.copy_gbps is None:
        evaluator.copy_gbps = target.get("copy_gbps")
    chosen = plan(specs, target, kernels=kernels, max_kernels=max_kernels, sample=sample)
    if not chosen.items:
        raise OptimizeError(f"{root}: no launch matches --kernel {', '.join(kernels)}")
    run_settings = {"loop": settings.to_json(), "launches": _digest(root), "kernels": sorted(kernels),
                    "max_kernels": max_kernels, "sample": sample, "target": {k: target[k] for k in ("gpu", "capability",
                                                                                   "triton_version")}}
    results = {"tritune_optimize": RESULTS_FORMAT, "command": command, "started": _now(), "finished": None,
               "target": run_settings["target"], "settings": settings.to_json(), "meaningful": target["meaningful"],
               "copy_gbps": target.get("copy_gbps"), "store": str(store_path), "launches": str(root),
               "kernels": []}
    results["planned"], results["keys"] = len(chosen.items), chosen.keys
    started = time.monotonic()
    with DecisionStore(store_path) as store:
        for kernel, (candidates, decisions) in store.unsigned_by_kernel().items():
            (log or _stderr)(f"tritune optimize: {kernel}: {candidates} candidate(s) and {decisions} decision(s) in "
                             f"{store_path} not signed by this user: candidates are evaluated again here, "
                             "decisions ignored (`tritune store import` judges them)")
        run_id, done = _start(store, run_settings, command, out, fresh)
        results["run_id"] = run_id
        try:
            for index, (spec, key) in enumerate(chosen.items):
                if progress:
                    progress(spec.kernel, index, len(chosen.items))
                if key.sha in done:
                    results["kernels"].append(done[key.sha])
                    continue
                if deadline_s is not None and time.monotonic() - started > deadline_s:
                    results["stopped"] = (f"deadline: {deadline_s:.0f} s spent, {len(chosen.items) - index} "
                                          "kernels left; run the same command again to go on")
                    store.finish_run(run_id, "interrupted")
                    _write(out / RESULTS_FILE, results)
                    return results
                loop = KernelLoop(spec, key, store=store, run_id=run_id, evaluator=evaluator, settings=settings,
                                  category=category_of(spec, root), log=log,
                                  families=families(spec) if families is not None else None)
                result = loop.run()
                _append(out / PROGRESS_FILE, {"run_id": run_id, "result": result})
                results["kernels"].append(result)
                _write(out / RESULTS_FILE, results)
            if progress:
                progress("", len(chosen.items), len(chosen.items))
        except BaseException:
            store.finish_run(run_id, "interrupted")
            _write(out / RESULTS_FILE, results)
            raise
        store.finish_run(run_id)
    results["finished"] = _now()
    _write(out / RESULTS_FILE, results)
    return results


def _stderr(line: str) -> None:
    print(line, file=sys.stderr)


def machine(worker: Worker) -> dict:
    """The target decisions are keyed by, from a worker (the parent never touches the GPU)."""
    outcome = worker.call(TARGET_JOB, {})
    if not outcome.ok:
        raise OptimizeError(f"cannot tell which GPU this is: {outcome.failure.kind}: {outcome.failure.message}")
    return outcome.value


def _start(store: DecisionStore, run_settings: dict, command: str, out: Path, fresh: bool) -> tuple[int, dict]:
    """A resumed run (its finished kernels) or a new one."""
    found = None if fresh else store.find_resumable(run_settings, command)
    if found is None:
        return store.start_run(run_settings, command), {}
    run = store.resume_run(found.id)
    done = {}
    for line in _lines(out / PROGRESS_FILE):
        if line.get("run_id") == run.id:
            done[line["result"]["key_sha"]] = line["result"]
    return run.id, done


def _digest(root: Path) -> str:
    """What identifies the captured launches, so a resume never mixes two captures."""
    return hashlib.sha256((root / "launches.jsonl").read_bytes()).hexdigest()[:16]


def _lines(path: Path) -> list[dict]:
    if not path.exists():
        return []
    found = []
    for line in path.read_text().splitlines():
        try:
            found.append(json.loads(line))
        except json.JSONDecodeError:  # the last line of a run killed mid-write
            continue
    return found


def _append(path: Path, body: dict) -> None:
    with open(path, "a") as handle:
        handle.write(json.dumps(body, default=str) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _write(path: Path, body: dict) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=1, default=str))
    os.replace(tmp, path)


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
