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

The keys run on lanes (``loop.lanes``: one per GPU, ``--workers``/``--devices``), handed out in
rank order to whichever lane of their kind of GPU is free, each key's budget computed when it is
handed out; with one lane, one key after another as before. ``results.kernels`` stays in rank
order whatever finished first, so a run on N lanes decides and reports what a run on one does.
A lane that dies gives its key back (its candidates in flight go back to ``pending``) and the
others go on. On a host with two kinds of GPU each key is planned, ranked and optimized once per
kind (its decision key names the GPU), by that kind's lanes.

Resumable at three levels: ``OUT/baselines.json`` keeps the timed keys (a resumed run does not
time them again), the store holds every candidate (``KernelLoop`` reuses them), and
``OUT/kernels.jsonl`` holds every finished kernel's result for the run, so a resumed run skips
those kernels outright. ``OUT/optimize.json`` (``RunResults``) is rewritten after each kernel:
an interrupted run leaves a readable partial result (``finished: null``). Ctrl-C marks the run
``interrupted`` in the store; running the same command again continues it.

Fixed costs: ``results.fixed`` holds the seconds before any key started (the lanes starting, the
ranking's baselines) and ``results.deadline_s`` the deadline they are a share of. Every key is in
``results.timed``, with its time or why it has none (a failure of its own, or ``untimed``: its
kind's lanes all died, or the ranking lost it), never silently dropped.
"""

from __future__ import annotations

import bisect
import dataclasses
import contextlib
import datetime as dt
import functools
import hashlib
import importlib
import json
import os
import random
import sys
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

from tritune.capture.spec import read_launches
from tritune.errors import one_line
from tritune.llm.family import LLMSession
from tritune.loop.category import category_of
from tritune.loop.evaluate import Evaluator
from tritune.loop.jobs import TargetUnknown, ask_target
from tritune.model.failures import ERROR
from tritune.model.launch import LaunchSpec
from tritune.model.request import RunRequest
from tritune.model.settings import LoopSettings
from tritune.model.target import Target
from tritune.loop.lanes import (Device, KeyJob, Lane, LaneDied, LaneError, LanePool, LocalLane, Task, close_lanes,
                                lane_devices, local_lanes)
from tritune.model.key import DecisionKey
from tritune.model.results import FILE_NAME as RESULTS_FILE, KernelResult, KeyTime, RunResults, shares
from tritune.secrets import scrub, write_json
from tritune.store import DecisionStore, key_for
from tritune.worker import Worker
from tritune.worker.failures import Failure

PROGRESS_FILE = "kernels.jsonl"
BASELINES_FILE = "baselines.json"
RANK_CHUNK = 64  # keys ranked per Evaluator.baselines call (built in parallel, then timed), saved after each
WARM_MODULES = ("torch", "triton.runtime.jit")  # imported in the background while the lanes start (``_warm_parent``)
# and, for a capture of Inductor's kernels, Inductor's autotune heuristics (their max-autotune seeds)
INDUCTOR_WARM_MODULES = ("torch._inductor.runtime.triton_heuristics",)
class OptimizeError(RuntimeError):
    """The run cannot start (no launches, no usable target); the message names the problem."""


@dataclasses.dataclass
class Plan:
    """The kernels to optimize: one launch per decision key, most launched first."""

    items: list[tuple[LaunchSpec, DecisionKey]]  # the spec's count is its key's total
    keys: int  # distinct keys before ``sample`` cut the list


def plan(specs: Iterable[LaunchSpec], target: Target, *, kernels: Iterable[str] = (),
         sample: int | None = None, seed: int = 0) -> Plan:
    """One launch per key, most launched first (``ranked`` then orders them by time); ``sample``:
    a seeded random sample of the keys instead (a benchmark over hundreds of Inductor kernels that
    cannot afford them all, not even their baselines)."""
    wanted = set(kernels)
    by_key: dict[str, tuple[LaunchSpec, DecisionKey, int]] = {}
    for spec in specs:
        if wanted and spec.kernel not in wanted and spec.id not in wanted:
            continue
        key = key_for(spec, target)
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


def optimize(root: str | Path, request: RunRequest, *, evaluator: Evaluator | None = None,
             lanes: Sequence[Lane] | None = None, devices: Sequence[Device] | None = None,
             progress: Callable[[str, int, int], None] | None = None,
             log: Callable[[str], None] | None = None,
             families: Callable[[LaunchSpec], list] | None = None) -> RunResults:
    """Optimize the launches captured in ``root`` as ``request`` asks; results in ``request.out``
    (module docstring). ``families(spec)`` replaces the proposer families (tests plant candidates
    through it).

    Where the keys run: ``lanes`` (the caller's, not closed here), else one lane on
    ``evaluator`` (the caller's), else a ``LocalLane`` per ``devices`` (``lanes.lane_devices``:
    by default one per GPU this host shows)."""
    log = None if log is None else _scrubbing(log)  # None stays None: the loop's own lines are then not said
    root = Path(root)
    specs = read_launches(root)
    if not specs:
        raise OptimizeError(f"{root}: no launches to optimize")
    request = _with_template(request)
    run = functools.partial(_optimize, root, request, specs, progress=progress, log=log, families=families)
    if evaluator is not None:
        lanes = [LocalLane(None, root, evaluator=evaluator)]
    if lanes is not None:
        return run(list(lanes))
    try:
        owned = local_lanes(root, request.settings, devices if devices is not None else lane_devices())
    except LaneError as exc:
        raise OptimizeError(str(exc)) from None
    try:
        return run(owned)
    finally:
        close_lanes(owned)


def _with_template(request: RunRequest) -> RunRequest:
    """``request`` with its model family's prompt templates' version (``LLMSettings.template``):
    a run asked with other templates is another run."""
    llm = request.settings.llm
    if llm is None or llm.template:
        return request
    from tritune.llm import prompts

    settings = dataclasses.replace(request.settings, llm=dataclasses.replace(llm, template=prompts.version()))
    return dataclasses.replace(request, settings=settings)


@dataclasses.dataclass
class _Kind:
    """One kind of GPU among the lanes (all of them but on a mixed host): its target, its lanes,
    its keys ranked, and how the key phase stands for it."""

    target: Target
    lanes: list
    plan: Plan | None = None
    timings: dict = dataclasses.field(default_factory=dict)  # key sha -> (timing, failure)
    timed: list[KeyTime] = dataclasses.field(default_factory=list)
    items: list[tuple[LaunchSpec, DecisionKey]] = dataclasses.field(default_factory=list)
    llm: LLMSession | None = None
    share_of: dict[str, float | None] = dataclasses.field(default_factory=dict)  # key sha -> time share
    pending: list[int] = dataclasses.field(default_factory=list)  # indices in ``items`` not handed out
    running: dict[int, float | None] = dataclasses.field(default_factory=dict)  # handed out: index -> share
    finished: dict[int, KernelResult] = dataclasses.field(default_factory=dict)
    covered: float = 0.0  # shares of the finished keys the loop ran on
    left: float = 0.0  # shares of the keys not finished
    blocked: str | None = None  # why nothing was handed out the last time: "cover" or "deadline"
    died: str | None = None  # why, when every lane of this kind died while timing the baselines

    @property
    def gpu(self) -> str:
        return self.target.gpu

    @property
    def key_target(self) -> dict:
        """The kind's identity (``Target.identity``) as JSON: how the run's settings name it."""
        return self.target.key_json()


def _optimize(root: Path, request: RunRequest, specs: list[LaunchSpec], lanes: list[Lane], *, progress, log,
              families) -> RunResults:
    started = time.monotonic()
    out, settings, kernels, sample = request.out, request.settings, request.kernels, request.sample
    out.mkdir(parents=True, exist_ok=True)
    store_path = request.store
    pool = LanePool(lanes)
    fixed = {}  # the run's fixed costs (``RunResults.fixed``)
    warm = _warm_parent(specs)
    try:
        kinds = _start_lanes(pool, log, _prebuild(specs, lanes, out, kernels=kernels, sample=sample))
        fixed["start_s"] = time.monotonic() - started
        heads = [lane.head_started for lane in lanes if getattr(lane, "head_started", None) is not None]
        if heads:
            fixed["head_s"] = started - min(heads)
        for kind in kinds:
            kind.plan = plan(specs, kind.target, kernels=kernels, sample=sample)
        chosen = kinds[0].plan
        if not chosen.items:
            raise OptimizeError(f"{root}: no launch matches --kernel {', '.join(kernels)}")
        mixed = len(kinds) > 1
        run_settings = {"loop": settings.to_json(), "launches": _digest(root), "kernels": sorted(kernels),
                        "max_kernels": request.max_kernels, "sample": sample, "cover": request.cover,
                        "target": kinds[0].key_target}
        if mixed:
            run_settings["targets"] = [kind.key_target for kind in kinds]
        first = kinds[0].target
        results = RunResults(command=request.command, started=_now(), target=kinds[0].key_target, settings=settings.to_json(),
                             meaningful=first.meaningful, copy_gbps=first.copy_gbps, store=str(store_path),
                             launches=str(root), keys=chosen.keys, cover=request.cover,
                             jobs=getattr(lanes[0], "jobs", settings.jobs),  # a lane's verify workers
                             targets=run_settings.get("targets", []), fixed=fixed, deadline_s=request.deadline_s)
        with DecisionStore(store_path) as store:
            for kernel, (candidates, decisions) in store.unsigned_by_kernel().items():
                (log or _stderr)(f"tritune optimize: {kernel}: {candidates} candidate(s) and {decisions} decision(s) "
                                 f"in {store_path} not signed by this user: candidates are evaluated again here, "
                                 "decisions ignored (`tritune store import` judges them)")
            run_id, done, resumed = _start(store, run_settings, request.command, out, request.fresh)
            results.run_id = run_id
            if resumed:
                (log or _stderr)(f"tritune optimize: resuming run {run_id} in {out}: {len(done)} kernel(s) done "
                                 "before (--fresh starts over)")
            resumable = False
            try:
                ranking = time.monotonic()
                _timed_baselines(kinds, pool, out, run_settings, log)
                fixed["baselines_s"] = time.monotonic() - ranking
                fixed.update(_ranking_split(pool.lanes))
                for kind in kinds:
                    why = (f"every lane of {kind.gpu} died before it was timed ({kind.died}); run the same command "
                           "again to go on") if kind.died else "the ranking returned no timing for it"
                    kind.timed = shares([timing_to_key(spec, key, kind.timings.get(key.sha), why=why)
                                         for spec, key in kind.plan.items])
                    if mixed:
                        for t in kind.timed:
                            t.gpu = kind.gpu
                    kind.items = ranked(kind.plan.items, kind.timed, max_kernels=request.max_kernels)
                    kind.llm = _llm_session(settings, kind.target, log)
                results.timed = [t for kind in kinds for t in kind.timed]
                results.planned = sum(len(kind.items) for kind in kinds)
                # the keys' proposals import what the thread imports (Inductor's heuristics): two threads
                # importing torch's modules at once may see one partially initialized (AttributeError).
                # What the ranking left of it is a fixed cost now, not the first key's: named in ``fixed``
                waiting = time.monotonic()
                warm.join()
                fixed["warm_s"] = time.monotonic() - waiting
                resumable = _loop(kinds, pool, results, store, run_id, done, root, request, started, progress, log,
                                  families)
            except BaseException:
                store.finish_run(run_id, "interrupted")
                results.lanes, results.wall_s = pool.lines(), time.monotonic() - started
                _write(results, out / RESULTS_FILE)
                raise
            store.finish_run(run_id, "interrupted" if resumable else "finished")
    finally:
        pool.close()
        warm.join()
    if not resumable:
        results.finished = _now()
    results.lanes, results.wall_s = pool.lines(), time.monotonic() - started
    fixed.setdefault("total_s", results.wall_s)  # no key started: all of it was fixed
    _write(results, out / RESULTS_FILE)
    return results


def _ranking_split(lanes: list[Lane]) -> dict[str, float]:
    """The ranking's building and timing seconds (``Evaluator.ranking``) of the local lane that
    spent the most on it (lanes rank at once: their sum would exceed the wall); none when no
    local lane ranked anything (a Ray lane's evaluator is in its actor; a resumed run reuses
    its baselines)."""
    splits = [lane.evaluator.ranking for lane in lanes if isinstance(getattr(lane, "evaluator", None), Evaluator)]
    splits = [s for s in splits if s["launches"]]
    if not splits:
        return {}
    longest = max(splits, key=lambda s: s["build_s"] + s["time_s"])
    return {"build_s": longest["build_s"], "rank_time_s": longest["time_s"]}


def _warm_parent(specs: list[LaunchSpec]) -> threading.Thread:
    """A thread importing what a key's first proposal imports in this process (torch, through
    Triton's type mangling in the rewrites' launch facts: 3-8 s; for Inductor's kernels its
    heuristics too, ``search.inductor_configs``: 2 s here, and on an H200 host 5.2 s of the
    Llama step's first key's time to its first candidate), started while the lanes start, so
    that the first key's time to its first candidate does not pay for it. Joined before the
    first key (the ranking's time has usually covered it) and at the end: no import is left
    running while the interpreter exits."""
    names = WARM_MODULES + (INDUCTOR_WARM_MODULES if any(s.kind == "inductor" for s in specs) else ())
    thread = threading.Thread(target=_import_quietly, args=(names,), name="tritune-warm", daemon=True)
    thread.start()
    return thread


def _import_quietly(names: tuple[str, ...]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001 - the proposal that needs it reports its own error
            return


def _prebuild(specs: list[LaunchSpec], lanes: Sequence[Lane], out: Path, *, kernels, sample) -> list[LaunchSpec]:
    """The launches the ranking will build first, for a lone lane to build as it starts
    (``LocalLane.start``): the plan's (its keys do not depend on the target's values), at most
    ``RANK_CHUNK``; none for several lanes (each ranks its own part) or where the out folder
    holds baselines (an earlier run's, kept even by ``--fresh`` when they match:
    ``_kept_baselines``)."""
    if len(lanes) != 1 or (out / BASELINES_FILE).exists():
        return []
    anywhere = Target("", 0, "")
    return [spec for spec, _ in plan(specs, anywhere, kernels=kernels, sample=sample).items[:RANK_CHUNK]]


def _start_lanes(pool: LanePool, log, prebuild: Sequence[LaunchSpec] = ()) -> list[_Kind]:
    """Every lane started (its target, from its own worker), grouped by kind of GPU, in lane
    order; ``prebuild`` passed on (``LocalLane.start``)."""
    failed = pool.start(prebuild)
    if not pool.live:
        if len(failed) == 1:
            raise OptimizeError(str(failed[0][1]))
        raise OptimizeError("no lane could start: " + "; ".join(f"{lane.name}: {exc}" for lane, exc in failed))
    for lane, exc in failed:
        (log or _stderr)(f"tritune optimize: lane {lane.name} could not start: {exc}; going on with "
                         f"{len(pool.live)} lane(s)")
    kinds: list[_Kind] = []
    for lane in pool.live:
        target = lane.target
        kind = next((k for k in kinds if k.target.identity == target.identity), None)
        if kind is None:
            kinds.append(_Kind(target, [lane]))
        else:
            kind.lanes.append(lane)
    return kinds


def _loop(kinds: list[_Kind], pool: LanePool, results: RunResults, store: DecisionStore, run_id: int, done: dict,
          root: Path, request: RunRequest, started: float, progress, log, families) -> bool:
    """The keys in share order, each through ``KernelLoop`` with its budget on a free lane of its
    kind, until covered. With one lane: one key after another, as before lanes. With more: a key
    is handed out as a lane frees (its budget computed then), no key is handed out once the keys
    finished and running hold ``cover`` (one that ends without running gives its share back),
    and ``results.kernels`` stays in rank order whatever finished first. True when the run
    stopped early and can be resumed (the deadline, or every lane of a kind died)."""
    out, settings, deadline_s, cover = request.out, request.settings, request.deadline_s, request.cover
    total = sum(len(kind.items) for kind in kinds)
    mixed = len(kinds) > 1
    kind_of = {id(lane): kind for kind in kinds for lane in kind.lanes}
    for kind in kinds:
        kind.share_of = {t.key_sha: t.time_share for t in kind.timed}
        kind.left = sum(kind.share_of.get(key.sha) or 0.0 for _, key in kind.items)
        kind.pending = list(range(len(kind.items)))
    llms = [kind.llm for kind in kinds if kind.llm is not None]

    def write() -> None:
        results.lanes, results.wall_s = pool.lines(), time.monotonic() - started
        _write(results, out / RESULTS_FILE)

    def settle(kind: _Kind, index: int, result: KernelResult, part: float | None) -> None:
        kind.finished[index] = result
        results.kernels = [k.finished[i] for k in kinds for i in sorted(k.finished)]
        write()
        if part is not None:
            kind.covered += part if result.ran else 0.0
            kind.left -= part

    def take(lane: Lane) -> Task | None:
        kind = kind_of[id(lane)]
        kind.blocked = None
        while kind.pending:
            index = kind.pending[0]
            spec, key = kind.items[index]
            part = kind.share_of.get(key.sha)
            if progress:
                progress(spec.kernel, sum(len(k.finished) for k in kinds), total)
            claimed = kind.covered + sum(s or 0.0 for s in kind.running.values())
            if kind.timed and claimed >= cover - 1e-9 and part is not None:
                kind.blocked = "cover"
                return None
            if key.sha in done:
                kind.pending.pop(0)
                settle(kind, index, KernelResult.from_json(done[key.sha]), part)
                continue
            elapsed = time.monotonic() - started
            if deadline_s is not None and elapsed > deadline_s:
                kind.blocked = "deadline"
                return None
            kind.pending.pop(0)
            live = [lane for lane in kind.lanes if lane in pool.live]
            budget = budget_for(part, kind.left, settings.budget_s, request.floor_s,
                                None if deadline_s is None else deadline_s - elapsed, lanes=len(live))
            kind.running[index] = part
            results.fixed.setdefault("total_s", time.monotonic() - started)  # the first key starts now
            job = KeyJob(spec, key, settings=dataclasses.replace(settings, budget_s=budget), run_id=run_id,
                         store_path=str(store.path), root=str(root), category=category_of(spec, root),
                         baseline=kind.timings.get(key.sha),
                         families=families(spec) if families is not None else None, llm=kind.llm, log=log)
            return Task((kind, index, budget), lambda lane, job=job: lane.run_key(job))
        return None

    def finished(lane: Lane, task: Task, result: KernelResult) -> None:
        kind, index, budget = task.what
        part = kind.running.pop(index)
        if llms:
            from tritune.llm.family import totals_of

            results.llm = totals_of(llms)
        result.time_share, result.budget_s, result.lane = part, budget, lane.name
        if mixed:
            result.gpu = kind.gpu
        _append(out / PROGRESS_FILE, {"run_id": run_id, "result": result.to_json()})
        pool.line(lane).kernels += 1
        settle(kind, index, result, part)

    def lost(lane: Lane, task: Task, exc: LaneDied) -> None:
        kind, index, _ = task.what
        kind.running.pop(index)
        bisect.insort(kind.pending, index)
        spec, key = kind.items[index]
        store.release(run_id, key)
        left = sum(other in pool.live for other in kind.lanes)
        (log or _stderr)(f"tritune optimize: lane {lane.name} ({lane.gpu}) died: {exc}; {spec.kernel} goes back to "
                         f"the queue ({left} lane(s) of {kind.gpu} left)")
        write()

    pool.drive(take, finished, lost)
    results.stopped, resumable = _stopped(kinds, pool, request)
    if results.stopped is None and progress:
        progress("", total, total)
    return resumable


def _stopped(kinds: list[_Kind], pool: LanePool, request: RunRequest) -> tuple[str | None, bool]:
    """Why the run stopped before every key (None: it did not), one line per kind of GPU, and whether
    running the same command again goes on (the deadline, or every lane of a kind died)."""
    deadline_s, cover, mixed = request.deadline_s, request.cover, len(kinds) > 1
    stops, resumable = [], False
    for kind in kinds:
        if not kind.pending:
            continue
        unfinished = len(kind.items) - len(kind.finished)
        if not any(lane in pool.live for lane in kind.lanes):
            why = "; ".join(filter(None, (pool.line(lane).died for lane in kind.lanes)))
            stop = (f"lanes: every lane of {kind.gpu} died ({why}); {unfinished} kernels left; "
                    "run the same command again to go on")
            resumable = True
        elif kind.blocked == "deadline":
            stop = (f"deadline: {deadline_s:.0f} s spent, {len(kind.pending)} kernels left; "
                    "run the same command again to go on")
            resumable = True
        else:
            stop = (f"cover: the {len(kind.finished)} kernels optimized hold {kind.covered:.1%} of the kernel time "
                    f"(--cover {cover:.0%}); {unfinished} kernels left")
        stops.append(f"{stop} [{kind.gpu}]" if mixed else stop)
    return " | ".join(stops) or None, resumable


def _llm_session(settings: LoopSettings, target: Target, log) -> Any:
    """The run's ``LLMSession`` when ``--llm`` is set: the GPU's facts for the prompts, the cost."""
    if settings.llm is None:
        return None
    from tritune.llm.family import LLMSession

    return LLMSession(settings.llm, gpu=target, log=log or _stderr)


def budget_for(share: float | None, left: float, cap_s: float, floor_s: float,
               remaining_s: float | None, lanes: int = 1) -> float:
    """A key's wall budget: its share of the time still to cover, times the time still left
    (``remaining_s``, None: no deadline) on the ``lanes`` that run keys at once, between
    ``floor_s`` and ``cap_s``, and never past the deadline. Without a deadline every key may use
    the cap (the candidate cap then bounds it); a key that finishes early leaves its time to the
    keys after it."""
    if remaining_s is None:
        return cap_s
    if share is None or left <= 0:
        proportional = floor_s
    else:
        proportional = remaining_s * min(1.0, max(1, lanes) * share / left)
    return max(1e-3, min(cap_s, max(floor_s, proportional), remaining_s))


def ranked(items: list[tuple[LaunchSpec, DecisionKey]], timed: list[KeyTime], *,
           max_kernels: int | None = None) -> list[tuple[LaunchSpec, DecisionKey]]:
    """The keys costliest first (``timed``'s order: share, then untimed keys); ``max_kernels``:
    the first N of them."""
    position = {t.key_sha: i for i, t in enumerate(timed)}
    chosen = sorted(items, key=lambda item: position.get(item[1].sha, len(position)))
    return chosen[:max_kernels] if max_kernels is not None else chosen


def timing_to_key(spec: LaunchSpec, key: DecisionKey, found: tuple[dict | None, Failure | None] | None, *,
                  why: str = "the ranking returned no timing for it") -> KeyTime:
    """Every key's line in ``results.timed``: its time, or why it has none (``found`` None: it
    was never timed, ``why`` says so, failure ``untimed``)."""
    if found is None:
        return KeyTime(key_sha=key.sha, id=spec.id, kernel=spec.kernel, launches=spec.count, baseline_ms=None,
                       failure="untimed", message=why)
    timing, failure = found
    base = (timing or {}).get("time_ms")
    if base:
        return KeyTime(key_sha=key.sha, id=spec.id, kernel=spec.kernel, launches=spec.count, baseline_ms=float(base))
    return KeyTime(key_sha=key.sha, id=spec.id, kernel=spec.kernel, launches=spec.count, baseline_ms=None,
                   failure=failure.kind if failure is not None else ERROR,
                   message=failure.message if failure is not None else (timing or {}).get("message") or "no time")


def _timed_baselines(kinds: list[_Kind], pool: LanePool, out: Path, run_settings: dict, log) -> None:
    """Every key's baseline timed once, per kind of GPU: ``kind.timings``, by key sha, ``(timing,
    failure)``. Kept in ``OUT/baselines.json`` (a file per kind on a mixed host) for the same
    capture and target, so a resumed run reuses them. The keys go out in chunks to the kind's
    lanes as they free (one lane: one chunk after another), each chunk saved when it is back."""
    say = log or (lambda line: None)
    mixed = len(kinds) > 1
    work: dict[int, tuple[Path, dict, dict, list]] = {}
    for kind in kinds:
        path = out / (f"baselines.{_slug(kind)}.json" if mixed else BASELINES_FILE)
        stamp = {"launches": run_settings["launches"], "target": kind.key_target}
        kept = _kept_baselines(path, stamp)
        missing = [(spec, key) for spec, key in kind.plan.items if key.sha not in kept]
        if missing:
            say(f"timing {len(missing)} baseline(s) to rank the kernels by their share of time"
                + (f" on {kind.gpu}" if mixed else ""))
        size = max(1, min(RANK_CHUNK, -(-len(missing) // len(kind.lanes))))  # Ctrl-C keeps what was timed
        work[id(kind)] = (path, stamp, kept, [missing[i:i + size] for i in range(0, len(missing), size)])
    kind_of = {id(lane): kind for kind in kinds for lane in kind.lanes}

    def take(lane: Lane) -> Task | None:
        kind = kind_of[id(lane)]
        chunks = work[id(kind)][3]
        if not chunks:
            return None
        part = chunks.pop(0)
        return Task((kind, part), lambda lane: lane.baselines([spec for spec, _ in part], log=log))

    def done(lane: Lane, task: Task, found: dict) -> None:
        kind, part = task.what
        path, stamp, kept, _ = work[id(kind)]
        for spec, key in part:
            if spec.id not in found:  # never silently: the key is listed untimed, with why
                continue
            timing, failure = found[spec.id]
            kept[key.sha] = [timing, failure.to_json() if failure is not None else None]
        with _writing(path):
            write_json(path, {"stamp": stamp, "keys": kept})

    def lost(lane: Lane, task: Task, exc: LaneDied) -> None:
        kind, part = task.what
        work[id(kind)][3].insert(0, part)
        (log or _stderr)(f"tritune optimize: lane {lane.name} ({lane.gpu}) died: {exc}; its baselines go back to "
                         "the queue")

    pool.drive(take, done, lost)
    dead = []
    for kind in kinds:
        _, _, kept, chunks = work[id(kind)]
        kind.timings = {sha: (pair[0], Failure.from_json(pair[1]) if pair[1] else None) for sha, pair in kept.items()}
        if chunks:
            kind.died = "; ".join(filter(None, (pool.line(lane).died for lane in kind.lanes)))
            dead.append(kind)
    if len(dead) == len(kinds):
        why = "; ".join(f"{kind.gpu}: {kind.died}" if len(kinds) > 1 else kind.died for kind in dead)
        raise OptimizeError(f"every lane died while timing the baselines ({why}); run the same command again to go on")
    for kind in dead:  # a mixed host: the other kinds go on; this one's keys wait for a resumed run
        (log or _stderr)(f"tritune optimize: every lane of {kind.gpu} died while timing the baselines "
                         f"({kind.died}): its kernels are not optimized in this run; the other GPUs go on")


def _kept_baselines(path: Path, stamp: dict) -> dict[str, Any]:
    """The timings ``path`` holds for this capture and target (none for another)."""
    try:
        body = json.loads(path.read_text())
        if isinstance(body, dict) and body.get("stamp") == stamp and isinstance(body.get("keys"), dict):
            return body["keys"]
    except (OSError, json.JSONDecodeError):
        pass
    return {}


def _slug(kind: _Kind) -> str:
    return "".join(c if c.isalnum() else "-" for c in kind.gpu) + f"-sm{kind.target.capability}"


def _stderr(line: str) -> None:
    print(scrub(line), file=sys.stderr)


def _scrubbing(log: Callable[[str], None]) -> Callable[[str], None]:
    """``log``, given each line scrubbed of secrets (``tritune.secrets``): a candidate's message
    is said in the log, and it may quote what the candidate read."""
    def scrubbed(line: str) -> None:
        log(scrub(line))

    return scrubbed


def machine(worker: Worker) -> Target:
    """The target decisions are keyed by, from a worker (``jobs.ask_target``)."""
    try:
        return ask_target(worker.call)
    except TargetUnknown as exc:
        raise OptimizeError(str(exc)) from None


def _start(store: DecisionStore, run_settings: dict, command: str, out: Path,
           fresh: bool) -> tuple[int, dict, bool]:
    """A resumed run (its finished kernels, True) or a new one (False)."""
    found = None if fresh else store.find_resumable(run_settings, command)
    if found is None:
        return store.start_run(run_settings, command), {}, False
    run = store.resume_run(found.id)
    done = {}
    for line in _lines(out / PROGRESS_FILE):
        if line.get("run_id") == run.id:
            done[line["result"]["key_sha"]] = line["result"]
    return run.id, done, True


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
    with _writing(path), open(path, "a") as handle:
        handle.write(scrub(json.dumps(body, default=str)) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _write(results: RunResults, path: Path) -> None:
    with _writing(path):
        results.write(path)


@contextlib.contextmanager
def _writing(path: Path) -> Iterator[None]:
    """A results file that cannot be written (a full disk, a folder made read-only meanwhile) is an
    ``OptimizeError`` of one line naming it: the store keeps what was recorded, a rerun resumes.
    The error a write raises often names no file (ENOSPC from ``write``), or the temporary one."""
    try:
        yield
    except OSError as exc:
        raise OptimizeError(f"{path}: {exc.strerror or one_line(exc)}; what was recorded before is kept: run the "
                            "same command again to resume") from None


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="seconds")
