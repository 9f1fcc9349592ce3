"""``optimize``: every distinct kernel launch of a capture, through the loop, into the store.

Launches are grouped by decision key (kernel source, specialization with its shape bucket, GPU,
Triton): one loop per key, on its most frequent launch, since a decision applies to the whole
key. Before anything is proposed, every key's baseline is built by the verify workers at once and
timed once (one do_bench median each, batched in the timing worker, ``Evaluator.baselines``), and
the keys are ranked by their share of the program's kernel time (launches x time): a test-sized
launch made twice no longer outranks the one that matters. Each key gets a wall budget in
proportion to its share of what is left (``budget_for``: at least ``floor_s``, at most
``LoopSettings.budget_s``, never past the deadline), and the run stops once the keys it ran on
hold ``cover`` of the kernel time (``--cover``, default 95%).

Resumable at three levels: ``OUT/baselines.json`` keeps the timed keys (a resumed run does not
time them again), the store holds every candidate (``KernelLoop`` reuses them), and
``OUT/kernels.jsonl`` holds every finished kernel's result for the run, so a resumed run skips
those kernels outright. ``OUT/optimize.json`` (``RunResults``) is rewritten after each kernel:
an interrupted run leaves a readable partial result (``finished: null``). Ctrl-C marks the run
``interrupted`` in the store; running the same command again continues it.
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
from tritune.loop.jobs import TARGET_JOB, full_timing
from tritune.loop.kernel import KernelLoop, LoopSettings
from tritune.loop.results import FILE_NAME as RESULTS_FILE
from tritune.loop.results import KernelResult, KeyTime, RunResults, shares
from tritune.store import DecisionKey, DecisionStore, key_for
from tritune.worker import Worker
from tritune.worker.failures import Failure

PROGRESS_FILE = "kernels.jsonl"
BASELINES_FILE = "baselines.json"
DEFAULT_COVER = 0.95  # stop once the keys optimized hold 95% of the program's kernel time
RANK_CHUNK = 64  # keys ranked per Evaluator.baselines call (built in parallel, then timed), saved after each
FLOOR_S = 10.0  # the least wall time a key gets: a profile and a round or two of candidates
class OptimizeError(RuntimeError):
    """The run cannot start (no launches, no usable target); the message names the problem."""


@dataclasses.dataclass
class Plan:
    """The kernels to optimize: one launch per decision key, most launched first."""

    items: list[tuple[LaunchSpec, DecisionKey]]  # the spec's count is its key's total
    keys: int  # distinct keys before ``sample`` cut the list


def plan(specs: Iterable[LaunchSpec], target: dict, *, kernels: Iterable[str] = (),
         sample: int | None = None, seed: int = 0) -> Plan:
    """One launch per key, most launched first (``ranked`` then orders them by time); ``sample``:
    a seeded random sample of the keys instead (a benchmark over hundreds of Inductor kernels that
    cannot afford them all, not even their baselines)."""
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
    return Plan(chosen, len(items))


def optimize(root: str | Path, out: str | Path, *, store_path: str | Path | None = None,
             settings: LoopSettings = LoopSettings(), kernels: Iterable[str] = (), max_kernels: int | None = None,
             sample: int | None = None, deadline_s: float | None = None, cover: float = DEFAULT_COVER,
             floor_s: float = FLOOR_S, command: str = "", fresh: bool = False, evaluator: Evaluator | None = None,
             progress: Callable[[str, int, int], None] | None = None,
             log: Callable[[str], None] | None = None,
             families: Callable[[LaunchSpec], list] | None = None) -> RunResults:
    """Optimize the launches captured in ``root``; results in ``out`` (module docstring).
    ``deadline_s``: no kernel is started after that many seconds, and none runs past it by more
    than the round it is in; the run stays resumable. ``cover`` (0..1]: stop once the keys the
    loop ran on hold that share of the kernel time. ``families(spec)`` replaces the proposer
    families (tests plant candidates through it)."""
    if not 0 < cover <= 1:
        raise OptimizeError(f"--cover must be in (0, 1], not {cover}")
    root, out = Path(root), Path(out)
    specs = read_launches(root)
    if not specs:
        raise OptimizeError(f"{root}: no launches to optimize")
    job = dict(store_path=store_path, settings=settings, kernels=kernels, max_kernels=max_kernels, sample=sample,
               deadline_s=deadline_s, cover=cover, floor_s=floor_s, command=command, fresh=fresh, progress=progress,
               log=log, families=families)
    if evaluator is not None:
        return _optimize(root, out, specs, evaluator, **job)
    owned = Evaluator(root, use_ncu=settings.use_ncu, jobs=settings.jobs)
    try:
        return _optimize(root, out, specs, owned, **job)
    finally:
        owned.close()


def _optimize(root: Path, out: Path, specs: list[LaunchSpec], evaluator: Evaluator, *, store_path, settings,
              kernels, max_kernels, sample, deadline_s, cover, floor_s, command, fresh, progress, log,
              families) -> RunResults:
    started = time.monotonic()
    out.mkdir(parents=True, exist_ok=True)
    store_path = Path(store_path) if store_path else out / "decisions.db"
    target = machine(evaluator.worker)  # the same warm worker then builds the candidates
    if evaluator.copy_gbps is None:
        evaluator.copy_gbps = target.get("copy_gbps")
    chosen = plan(specs, target, kernels=kernels, sample=sample)
    if not chosen.items:
        raise OptimizeError(f"{root}: no launch matches --kernel {', '.join(kernels)}")
    key_target = {k: target[k] for k in ("gpu", "capability", "triton_version")}
    run_settings = {"loop": settings.to_json(), "launches": _digest(root), "kernels": sorted(kernels),
                    "max_kernels": max_kernels, "sample": sample, "cover": cover, "target": key_target}
    results = RunResults(command=command, started=_now(), target=key_target, settings=settings.to_json(),
                         meaningful=target["meaningful"], copy_gbps=target.get("copy_gbps"), store=str(store_path),
                         launches=str(root), keys=chosen.keys, cover=cover, jobs=evaluator.jobs)
    with DecisionStore(store_path) as store:
        for kernel, (candidates, decisions) in store.unsigned_by_kernel().items():
            (log or _stderr)(f"tritune optimize: {kernel}: {candidates} candidate(s) and {decisions} decision(s) in "
                             f"{store_path} not signed by this user: candidates are evaluated again here, "
                             "decisions ignored (`tritune store import` judges them)")
        run_id, done = _start(store, run_settings, command, out, fresh)
        results.run_id = run_id
        try:
            timings = _timed_baselines(chosen.items, evaluator, out, run_settings, log)
            results.timed = shares([timing_to_key(spec, key, timings.get(key.sha)) for spec, key in chosen.items])
            items = ranked(chosen.items, results.timed, max_kernels=max_kernels)
            results.planned = len(items)
            llm = _llm_session(settings, target, log)
            _loop(items, results, timings, evaluator, store, run_id, done, out, root, settings, deadline_s, cover,
                  floor_s, started, progress, log, families, llm)
        except BaseException:
            store.finish_run(run_id, "interrupted")
            results.write(out / RESULTS_FILE)
            raise
        store.finish_run(run_id, "interrupted" if results.stopped and results.stopped.startswith("deadline")
                         else "finished")
    if not (results.stopped or "").startswith("deadline"):
        results.finished = _now()
    results.write(out / RESULTS_FILE)
    return results


def _loop(items, results: RunResults, timings: dict, evaluator: Evaluator, store: DecisionStore, run_id: int,
          done: dict, out: Path, root: Path, settings: LoopSettings, deadline_s, cover: float, floor_s: float,
          started: float, progress, log, families, llm=None) -> None:
    """The keys in share order, each through ``KernelLoop`` with its budget, until covered."""
    share_of = {t.key_sha: t.time_share for t in results.timed}
    left = sum(share_of.get(key.sha) or 0.0 for _, key in items)
    covered = 0.0
    for index, (spec, key) in enumerate(items):
        if progress:
            progress(spec.kernel, index, len(items))
        share = share_of.get(key.sha)
        if results.timed and covered >= cover - 1e-9 and share is not None:
            results.stopped = (f"cover: the {index} kernels optimized hold {covered:.1%} of the kernel time "
                               f"(--cover {cover:.0%}); {len(items) - index} kernels left")
            break
        if key.sha in done:
            result = KernelResult.from_json(done[key.sha])
        else:
            elapsed = time.monotonic() - started
            if deadline_s is not None and elapsed > deadline_s:
                results.stopped = (f"deadline: {deadline_s:.0f} s spent, {len(items) - index} kernels left; "
                                   "run the same command again to go on")
                break
            budget = budget_for(share, left, settings.budget_s, floor_s,
                                None if deadline_s is None else deadline_s - elapsed)
            loop = KernelLoop(spec, key, store=store, run_id=run_id, evaluator=evaluator,
                              settings=dataclasses.replace(settings, budget_s=budget), category=category_of(spec, root),
                              log=log, families=families(spec) if families is not None else None,
                              baseline=loop_baseline(timings.get(key.sha)), llm=llm)
            result = KernelResult.from_json(loop.run())
            if llm is not None:
                results.llm = llm.totals()
            result.time_share, result.budget_s = share, budget
            _append(out / PROGRESS_FILE, {"run_id": run_id, "result": result.to_json()})
        results.kernels.append(result)
        results.write(out / RESULTS_FILE)
        if share is not None:
            covered += share if result.ran else 0.0
            left -= share
    else:
        if progress:
            progress("", len(items), len(items))


def _llm_session(settings: LoopSettings, target: dict, log) -> Any:
    """The run's ``LLMSession`` when ``--llm`` is set: the GPU's facts for the prompts, the cost."""
    if settings.llm is None:
        return None
    from tritune.llm.family import LLMSession

    return LLMSession(settings.llm, gpu=target, log=log or _stderr)


def budget_for(share: float | None, left: float, cap_s: float, floor_s: float,
               remaining_s: float | None) -> float:
    """A key's wall budget: its share of the time still to cover, times the time still left
    (``remaining_s``, None: no deadline), between ``floor_s`` and ``cap_s``, and never past the
    deadline. Without a deadline every key may use the cap (the candidate cap then bounds it); a
    key that finishes early leaves its time to the keys after it."""
    if remaining_s is None:
        return cap_s
    if share is None or left <= 0:
        proportional = floor_s
    else:
        proportional = remaining_s * min(1.0, share / left)
    return max(1e-3, min(cap_s, max(floor_s, proportional), remaining_s))


def ranked(items: list[tuple[LaunchSpec, DecisionKey]], timed: list[KeyTime], *,
           max_kernels: int | None = None) -> list[tuple[LaunchSpec, DecisionKey]]:
    """The keys costliest first (``timed``'s order: share, then untimed keys); ``max_kernels``:
    the first N of them."""
    position = {t.key_sha: i for i, t in enumerate(timed)}
    chosen = sorted(items, key=lambda item: position.get(item[1].sha, len(position)))
    return chosen[:max_kernels] if max_kernels is not None else chosen


def loop_baseline(found: tuple[dict | None, Failure | None] | None) -> tuple[dict | None, Failure | None] | None:
    """What ``KernelLoop`` starts from: a failure, or a full timing as a resumed run may keep it;
    None for the ranking's one median, so the loop times its baseline fully (noise, graph time)
    for itself (``Evaluator.baselines`` says why)."""
    if found is None or found[1] is not None or full_timing(found[0]):
        return found
    return None


def timing_to_key(spec: LaunchSpec, key: DecisionKey, found: tuple[dict | None, Failure | None] | None) -> KeyTime:
    timing, failure = found if found is not None else (None, None)
    base = (timing or {}).get("time_ms")
    if base:
        return KeyTime(key_sha=key.sha, id=spec.id, kernel=spec.kernel, launches=spec.count, baseline_ms=float(base))
    return KeyTime(key_sha=key.sha, id=spec.id, kernel=spec.kernel, launches=spec.count, baseline_ms=None,
                   failure=failure.kind if failure is not None else "error",
                   message=failure.message if failure is not None else (timing or {}).get("message") or "no time")


def _timed_baselines(items: list[tuple[LaunchSpec, DecisionKey]], evaluator: Evaluator, out: Path,
                     run_settings: dict, log) -> dict[str, tuple[dict | None, Failure | None]]:
    """Every key's baseline timed once, by key sha: ``(timing, failure)``. Kept in
    ``OUT/baselines.json`` for the same capture and target, so a resumed run reuses them."""
    path = out / BASELINES_FILE
    stamp = {"launches": run_settings["launches"], "target": run_settings["target"]}
    kept: dict[str, Any] = {}
    try:
        body = json.loads(path.read_text())
        if isinstance(body, dict) and body.get("stamp") == stamp and isinstance(body.get("keys"), dict):
            kept = body["keys"]
    except (OSError, json.JSONDecodeError):
        pass
    missing = [(spec, key) for spec, key in items if key.sha not in kept]
    if missing:
        (log or (lambda line: None))(f"timing {len(missing)} baseline(s) to rank the kernels by their share of time")
    for start in range(0, len(missing), RANK_CHUNK):  # saved after each chunk: Ctrl-C keeps what was timed
        part = missing[start:start + RANK_CHUNK]
        found = evaluator.baselines([spec for spec, _ in part], log=log)
        for spec, key in part:
            timing, failure = found[spec.id]
            kept[key.sha] = [timing, failure.to_json() if failure is not None else None]
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"stamp": stamp, "keys": kept}, default=str))
        os.replace(tmp, path)
    return {sha: (pair[0], Failure.from_json(pair[1]) if pair[1] else None) for sha, pair in kept.items()}


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


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
