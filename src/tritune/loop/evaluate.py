"""The loop's hands: baseline, candidates, confirmation and profile, each in an isolated worker.

``Evaluator`` owns one warm worker process (``tritune.worker``), the timing worker, and turns its
outcomes into plain records. A candidate that faults, hangs or crashes ends only a worker's child
(the next call starts a fresh one) and comes back as a ``Trial`` with the failure kind, so the loop
goes on (seed 004's remediation: classify, record, move on; the proposers learn from the kind).

``jobs`` (``tritune optimize --jobs``): the candidates of a round are built and verified by that
many workers at once, one thread driving each, and timed one at a time by the timing worker; a
GPU lock keeps every other launch off the GPU while it times (``loop.jobs``). Compilation is
most of a candidate's cost and holds no lock, so it overlaps the timing of others. The results
come back in the order the candidates were given, whatever finished first, and the store is
written by the caller's thread only, so ``--jobs 8`` decides exactly what ``--jobs 1`` does.
With one job the timing worker verifies too: one process, as before ``--jobs`` existed.

Each candidate's wall seconds are split (``Evaluated.split``): ``verify_s`` compiling and
verifying, ``time_s`` being timed, ``wait_s`` the rest (queued for a worker or for the timing
worker, waiting for the GPU lock, a worker's restart after a crash).

Lanes (``tritune optimize --workers``, ``loop.lanes``) run one evaluator each, in a thread of
their own, and need two things of it. ``interrupt()``, from another thread (Ctrl-C reaches the
main thread only), kills what its workers run and makes every call from then on raise
``Interrupted``: a job cut short is never recorded as a candidate's crash. And a worker whose
process cannot be started again (``START_TRIES`` tries after it ended; a GPU that fails at
start counts, ``loop.device_ready``) raises ``WorkerLost`` rather than fail every candidate
after it: its lane gives up and another lane takes the key. A worker whose process ended is
started again at once for that check, not at its next call (same number of starts).

Tests substitute the timing (``Evaluator.retime``): on the CPU the interpreter's times measure
numpy, and the loop's decisions must still be exercised end to end. Building and verifying are
never substituted.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import math
import os
import queue
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator, NamedTuple, Sequence

from tritune.arbiter.confirm import Confirmation, confirmation_from_json
from tritune.arbiter.rules import Decision as ArbiterDecision, Verdict, judge_candidate, screen_candidate
from tritune.loop import jobs
from tritune.model import families
from tritune.model.failures import COMPILE_ERROR, ERROR, WRONG_RESULT
from tritune.model.launch import LaunchSpec
from tritune.model.settings import ArbiterSettings
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.profile.runner import FALLBACK
from tritune.worker import Outcome, SharedCache, Worker, close_workers
from tritune.worker.failures import RESTART_KINDS, Failure
from tritune.worker.jail import Policy

PROFILE_JOB = "tritune.profile.runner:profile_job"
NCU_SHARE = 0.10  # ncu profiles a key only when it costs at most this share of the key's budget
# ncu statuses that hold for every later launch in the same workers: not tried again
NCU_NEVER_HERE = frozenset({"missing", "jailed", "interpreter", "permission"})
NCU_TIMEOUT_S = 180.0  # ncu replays the kernel once per metric pass: seconds for a small kernel, minutes for a big one
CANDIDATE_TIMEOUT_S = 600.0  # per call: compile + 3 verified input sets; or do_bench + a graph
BASELINE_TIMEOUT_S = 120.0  # per launch: its build (a verify worker), or its ranking timing (one median)
PROGRESS_S = 10.0  # while ranking many keys, the user hears how far it is this often
ALONE_MAX = 16  # after a ranking call failed, launches timed one a call before batching again
# A build that failed so: its key is reported with that failure and not timed (``baselines``).
BUILD_FINAL = frozenset({COMPILE_ERROR, *RESTART_KINDS})
PRELOAD = ("torch", "triton")
MAX_DEFAULT_JOBS = 16  # past this, more compilers mostly queue on the one timing worker
# A model's candidate (untrusted code, ``allowlist.sandbox``) runs under these per-call limits: a compile
# and three verified input sets take seconds of CPU; a worker with torch and CUDA up holds a few GiB.
SANDBOX_CPU_S = 300.0
SANDBOX_MEMORY_MB = 16384.0
START_TRIES = 2  # a worker whose process ended and cannot be started this many times more is lost


class Interrupted(BaseException):
    """The evaluator was interrupted (``Evaluator.interrupt``): what its calls returned is not to
    be recorded. A BaseException, like KeyboardInterrupt, so that nothing on the way catches it."""


class WorkerLost(RuntimeError):
    """A worker's process cannot be started again: this evaluator can evaluate nothing more."""


def default_jobs(lanes: int = 1) -> int:
    """The CPU cores this process may use (compilation is CPU-bound), shared by ``lanes`` lanes
    (``optimize --workers``: each lane has its own verify workers), at most ``MAX_DEFAULT_JOBS``."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    return max(1, min(MAX_DEFAULT_JOBS, cores // max(1, lanes)))


@dataclasses.dataclass
class Evaluated:
    """A candidate after build, verify and bench: the trial for the proposers, plus the records."""

    trial: Trial
    verification: dict | None = None
    timing: dict | None = None
    seconds: float = 0.0  # wall time from submission to result
    failure: Failure | None = None  # the worker's failure (with its detail), when the job failed
    split: dict | None = None  # seconds: verify_s, time_s, wait_s (module docstring)


class _Ran(NamedTuple):
    """What the worker threads bring back for one candidate; turned into ``Evaluated`` in order."""

    verified: Outcome | None  # None: abandoned before it ran
    timed: Outcome | None  # None: not timed (failed verification, or abandoned)
    seconds: float


class Evaluator:
    def __init__(self, root: str | Path, *, timeout_s: float = CANDIDATE_TIMEOUT_S, input_sets: int = 3,
                 copy_gbps: float | None = None, use_ncu: str = "auto",
                 retime: Callable[[LaunchSpec, Variant, float], float] | None = None,
                 worker: Worker | None = None, jobs: int = 1, verifiers: Sequence[Worker] | None = None,
                 jail: Policy | None = None, cache: SharedCache | None = None) -> None:
        """``jobs`` workers verify (like ``worker``: same limit, environment, preload, warm
        imports, jail and cache); ``verifiers`` gives them instead (tests share warm ones; they
        are not closed here). ``jail``: the policy of the workers made here (``worker.jail``;
        ``worker`` has its own). Jailed workers made here share one Triton cache
        (``SharedCache``, removed at ``close``), so that a launch built in one is only loaded in
        another; ``cache``: the one ``worker`` was given, removed at ``close`` too."""
        if jobs < 1:
            raise ValueError(f"jobs must be at least 1, got {jobs}")
        self.root = str(Path(root).absolute())  # workers run in a directory of their own
        self.input_sets = input_sets
        self.copy_gbps = copy_gbps
        self.use_ncu = use_ncu
        self.retime = retime  # tests only: (spec, variant, measured_ms) -> ms to use instead
        if cache is None and worker is None and jail is not None:
            cache = SharedCache()
        self._cache = cache
        self.worker = worker or Worker(timeout_s, preload=PRELOAD, jail=jail,
                                       cache=self._cache.path if self._cache is not None else None)
        self._owned: list[Worker] = []
        if verifiers is not None:
            self.verifiers = list(verifiers)
        elif jobs > 1:
            self.verifiers = self._owned = [Worker(self.worker.timeout_s, env=self.worker.env,
                                                   preload=self.worker.preload, jail=getattr(self.worker, "jail", None),
                                                   cache=getattr(self.worker, "cache", None),
                                                   warm=getattr(self.worker, "warm", ()))
                                            for _ in range(jobs)]
        else:
            self.verifiers = [self.worker]
        self.jobs = len(self.verifiers)
        # Last in, first out: a round takes the workers that ran last, which have this key's
        # baseline built and their first-use costs paid (about 7 s of a GPT-2 candidate on a
        # worker's first job, measured: results/e2e/optimize/candidate_time_cold_workers.json);
        # a queue would hand each round the workers idle longest, cold ones included.
        self._idle: queue.LifoQueue[Worker] = queue.LifoQueue()
        for verifier in self.verifiers:
            self._idle.put(verifier)
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._starter: concurrent.futures.ThreadPoolExecutor | None = None  # ``start_verifiers``
        self._late: list[Worker] = []  # verify workers left to ``start_rest``
        self._joining: set[int] = set()  # ids of late verify workers starting now (``_join``)
        self._prebuilt: dict[str, concurrent.futures.Future] = {}  # spec id -> its build (``prebuild``)
        self._closing = False
        self._stopping = threading.Event()
        self._interrupted = threading.Event()
        self.progress_s = PROGRESS_S  # tests: 0 times one launch a call and logs each
        self.ncu_s: float | None = None  # seconds ncu took on the first launch it profiled here
        self.ncu_off: str | None = None  # why ncu cannot run in these workers (``NCU_NEVER_HERE``)
        # the ranking's seconds (``baselines``): building in the verify workers, then timing
        self.ranking = {"build_s": 0.0, "time_s": 0.0, "launches": 0}

    @property
    def workers(self) -> list[Worker]:
        """Its timing worker and its verify workers, each once (a lone timing worker verifies too)."""
        return list({id(w): w for w in [self.worker, *self.verifiers]}.values())

    def interrupt(self) -> None:
        """From any thread: kill what the workers run; every call from now on raises ``Interrupted``."""
        self._interrupted.set()
        self._stopping.set()
        for worker in self.workers:
            worker.abort()

    def call(self, job: str, payload: Any, **call: Any) -> Outcome:
        """``job`` on the timing worker (e.g. ``loop.jobs.TARGET_JOB``), as every job here is called."""
        return self._call(self.worker, job, payload, **call)

    def _call(self, worker: Worker, job: str, payload: Any, *, cancelled: Callable[[], bool] | None = None,
              **call: Any) -> Outcome:
        """``worker.call``, then: ``Interrupted`` if ``interrupt`` came meanwhile; ``WorkerLost``
        if the worker's process ended (or never started) and cannot be started again. The job is
        not run once ``interrupt`` came, even when it was waiting for the worker then
        (``cancelled``: when else it is not to run, e.g. its round was left, ``_abandon``)."""
        if self._interrupted.is_set():
            raise Interrupted()
        outcome = worker.call(job, payload, cancelled=cancelled or self._interrupted.is_set, **call)
        if self._interrupted.is_set():
            raise Interrupted()
        if not outcome.ok and worker.pid is None and not self._stopping.is_set():  # not a round left early
            self._revive(worker, outcome.failure)
        return outcome

    def _revive(self, worker: Worker, failure: Failure) -> None:
        for _ in range(START_TRIES):
            started = worker.start()
            if self._interrupted.is_set():
                raise Interrupted()
            if started.ok:
                return
            failure = started.failure
        raise WorkerLost(f"a worker cannot be started again ({START_TRIES} tries): {failure.kind}: {failure.message}")

    def start_verifiers(self, first: int | None = None) -> list[concurrent.futures.Future]:
        """Start the verify workers' processes now, in threads of their own, rather than at their
        first call (the ranking's first build): ``LocalLane.start`` calls it as the timing worker
        starts, so that their cold start (torch, Triton, the GPU brought up, the capture's
        libraries: ``replay.warm``) overlaps the timing worker's instead of following it. A call
        meanwhile waits for the start (the worker's lock); a start that fails is left to the
        worker's first call, which starts it again and handles a failure as it always did
        (``_call``). Workers given as ``verifiers``, or a lone timing worker that verifies, are
        left alone. The starts, each to its ``Outcome``.

        ``first``: only that many start now and are returned (the lane waits for them); the
        others start at ``start_rest``, and each joins the idle workers only when its start is
        done, so no candidate waits for a worker still starting. Seventeen workers importing
        torch and a library at once on 16 cores took 7-11 s to start where 5 took 4 s (H200
        machine, ``benchmarks/fixed_probe.py``, 2026-11-28): a round of ``per_round``
        candidates needs only the first few, and the rest join for the wide rounds and the
        next keys."""
        if not self._owned or self._starter is not None:  # started already: nothing more to start
            return []
        early = self._owned if first is None else self._owned[:max(1, first)]
        self._late = self._owned[len(early):]
        if self._late:
            self._withhold(self._late)
        self._starter = concurrent.futures.ThreadPoolExecutor(len(self._owned), thread_name_prefix="tritune-start")
        return [self._starter.submit(verifier.start) for verifier in early]

    def start_rest(self) -> None:
        """The verify workers ``start_verifiers`` left out started now, in the background, each
        joining the idle ones as its start is done (a start that failed too: its first call tries
        again). Nothing when none was left out."""
        late, self._late = self._late, []
        for verifier in late:
            self._starter.submit(self._join, verifier)

    def _join(self, verifier: Worker) -> None:
        """A late verify worker started, then put under the idle ones (last in, first out: the
        workers that ran last, warm, are taken before it; it is taken when they are all busy)."""
        self._joining.add(id(verifier))
        try:
            if not self._interrupted.is_set() and not self._closing:
                verifier.start()  # a closed worker does not start (``Worker.start``)
        finally:
            self._joining.discard(id(verifier))
        with self._idle.mutex:
            self._idle.queue.insert(0, verifier)
            self._idle.unfinished_tasks += 1
            self._idle.not_empty.notify()

    def _withhold(self, workers: list[Worker]) -> None:
        """``workers`` taken out of the idle ones (the others kept in their order)."""
        kept = []
        while True:
            try:
                worker = self._idle.get_nowait()
            except queue.Empty:
                break
            if all(worker is not w for w in workers):
                kept.append(worker)
        for worker in reversed(kept):
            self._idle.put(worker)

    def close(self) -> None:
        """The threads waited for, then every worker stopped together (``close_workers``: one
        stop window for all, not one each: ~8 s a lane on a GPU, one worker after another). A
        verify worker still starting (``start_rest``) is killed, not waited for: its imports
        made closing a 40-s run take 6-15 s more on an H200 machine."""
        if self._prebuilt:  # a lane that could not start: its builds are killed, not waited for
            self._abandon(list(self._prebuilt.values()))
            self._prebuilt = {}
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        if self._starter is not None:  # verify workers still starting are killed (``Worker``'s close)
            self._closing = True
            self._starter.shutdown(wait=False, cancel_futures=True)
        close_workers([*self._owned, self.worker])
        if self._cache is not None:
            self._cache.remove()

    # ------------------------------------------------------------------------------ baseline

    def baseline(self, spec: LaunchSpec) -> tuple[dict | None, Failure | None]:
        """The captured launch timed (do_bench median twice: the noise; graph; roofline)."""
        outcome = self._exclusive(jobs.BASELINE_JOB, {"spec": spec.to_json(), "root": self.root,
                                                      "methods": list(jobs.BENCH_METHODS),
                                                      "copy_gbps": self.copy_gbps})
        if not outcome.ok:
            return None, outcome.failure
        timing = dict(outcome.value)
        if self.retime is not None and timing.get("time_ms"):
            timing["time_ms"] = self.retime(spec, Variant(), timing["time_ms"])
        return timing, None

    def baselines(self, specs: list[LaunchSpec], log: Callable[[str], None] | None = None
                  ) -> dict[str, tuple[dict | None, Failure | None]]:
        """Every spec's baseline timed for the ranking, by spec id: ``(timing, failure)``.

        First the ``jobs`` verify workers build every launch, one launch a call (``_build``), so
        the timing worker only loads binaries from Triton's cache (jailed, the workers'
        ``SharedCache``; with a cache each, the timing worker built every launch again): the
        build, serial in the one timing worker before, was most of the ranking (resnet50 train,
        169 keys, ``--jobs 16``: most of a 100 s budget for the ranking). A launch whose build
        fails, crashes its worker or runs past ``BASELINE_TIMEOUT_S`` is reported with that
        failure and not sent to the timing worker (where it would fail once more, or crash or
        hang the batch); a plain ``error`` (an allocation that failed beside 15 other builds) is
        left to the timing, which reports its own. Builds never run while the batch times: 16
        compilers beside a timing would delay the host's launches and inflate the times of
        launch-bound kernels.

        Then the rest are timed in as few timing-worker calls as it takes: one per
        ``PROGRESS_S`` of timing (``log`` says how far it is in between), another when a
        launch faults the device (the worker restarts and the rest go in the next call), and
        when a call itself fails the specs not yet timed are timed alone until one fails too
        (the culprit; at most ``ALONE_MAX``), then the rest in batches again, so a launch that
        crashes or hangs the worker costs itself once more, not once per launch before it; a
        call's limit is one launch's past its slice (``_batch_limit``): a hang costs minutes.

        What is timed: one do_bench median per launch (``RANK_METHODS``, L2 cleared before each
        run) on a shorter budget than a decision's (``RANK_BENCH_MS``: 10 ms warm-up, 40 ms of
        runs, not 25 + 100): a share to a few percent is all the rank needs. The second
        median (the noise) and the CUDA-graph time (launch-bound or not) were taken for every
        key too, though only ``KernelLoop`` reads them, and only for the keys it runs on: those
        now time their baseline fully once more, for themselves, as their first candidates build
        (``KernelLoop``).
        Counted per key: before, 1 build + 2 medians + 1 graph in the timing worker; now 1
        build in a verify worker + 1 median, and 2 medians + 1 graph more for each key the loop
        runs on. By do_bench's budget (>= 125 ms a median) and the graph's (~30 replays of
        ~1 ms, plus its capture) that is >= ~0.3 s of timing a key before and ~0.05 s now:
        >= ~30 s less on 169 keys (an estimate from those budgets, not a measurement), against
        ~0.3 s more for each key optimized, whose budget is at least ``FLOOR_S`` (10 s)."""
        say = log or (lambda line: None)
        found: dict[str, tuple[dict | None, Failure | None]] = {}
        began = time.perf_counter()
        for spec, failure in zip(specs, self._build(specs, say)):
            if failure is not None and failure.kind in BUILD_FINAL:
                found[spec.id] = (None, failure)
        self._drop_prebuilt()
        built = time.perf_counter()
        self.ranking["build_s"] += built - began
        try:
            self._time_baselines(specs, found, say)
        finally:
            self.ranking["time_s"] += time.perf_counter() - built
            self.ranking["launches"] += len(specs)
        say(f"built {len(specs)} baseline(s) in {built - began:.1f} s ({self.jobs} job(s)), timed them in "
            f"{time.perf_counter() - built:.1f} s")
        return found

    def _time_baselines(self, specs: list[LaunchSpec], found: dict, say: Callable[[str], None]) -> None:
        """``baselines``' timing part: the specs not in ``found`` timed into it, in batches."""
        pending = [s for s in specs if s.id not in found]
        total, alone, solo = len(pending), False, 0
        while pending:
            batch = pending[:1] if alone else pending
            outcome = self._call(self.worker, jobs.BASELINES_JOB, self._ranking(batch),
                                 timeout_s=self._batch_limit(len(batch)))
            if outcome.ok:
                for entry in outcome.value["timings"]:
                    spec = next(s for s in batch if s.id == entry[0])
                    found[spec.id] = self._timed(spec, entry)
                if outcome.value["fault"]:
                    self.worker.restart()
            elif len(batch) == 1:  # timed alone: the call's failure is its own
                found[batch[0].id] = (None, outcome.failure)
            if not outcome.ok:  # alone from here until the culprit is found (then in batches again)
                alone, solo = len(batch) > 1, 0
            elif alone:
                solo += 1
                alone = solo < ALONE_MAX  # no culprit that far: the failure was not a launch's
            pending = [s for s in pending if s.id not in found]
            if pending and outcome.ok:
                say(f"timed {total - len(pending)} of {total} baselines")

    def _batch_limit(self, launches: int) -> float:
        """A ranking call's time limit: the job starts no launch after ``progress_s``, so one
        launch's limit past that; a hang costs that much, not ``BASELINE_TIMEOUT_S`` per launch
        of the batch (33 keys: 66 minutes). Without a slice, a launch's limit each."""
        if self.progress_s is None:
            return BASELINE_TIMEOUT_S * launches
        return BASELINE_TIMEOUT_S + self.progress_s

    def _ranking(self, specs: list[LaunchSpec]) -> dict:
        return {"specs": [s.to_json() for s in specs], "root": self.root, "copy_gbps": self.copy_gbps,
                "methods": list(jobs.RANK_METHODS), "medians": 1, "bench_ms": list(jobs.RANK_BENCH_MS),
                "slice_s": self.progress_s}

    def _timed(self, spec: LaunchSpec, entry: list) -> tuple[dict | None, Failure | None]:
        """One ``[id, timing, failure]`` of ``baselines_job`` as ``(timing, failure)``."""
        _, timing, failure = entry
        if timing is not None and self.retime is not None and timing.get("time_ms"):
            timing["time_ms"] = self.retime(spec, Variant(), timing["time_ms"])
        return timing, Failure.from_json(failure) if failure is not None else None

    def prebuild(self, specs: Sequence[LaunchSpec]) -> None:
        """``specs`` given to the idle verify workers to build now, in the background; a later
        ``baselines`` takes each one's outcome instead of building it again (``LocalLane.start``:
        they build while the timing worker runs the target job), and drops the ones it did not
        ask for. Nothing when the timing worker is the only verifier (``jobs`` 1): it would
        build instead of running the target job."""
        if all(verifier is self.worker for verifier in self.verifiers):
            return
        self._stopping.clear()
        for spec in specs:
            if spec.id not in self._prebuilt:
                self._prebuilt[spec.id] = self._threads().submit(self._build_one, spec)

    def _drop_prebuilt(self) -> None:
        """Prebuilt launches the ranking did not ask for: not started ones cancelled (a running
        build ends by itself; its binary stays in the cache)."""
        left, self._prebuilt = list(self._prebuilt.values()), {}
        for future in left:
            future.cancel()

    def _build(self, specs: list[LaunchSpec], say: Callable[[str], None]) -> list[Failure | None]:
        """Each spec's launch built by an idle verify worker (one spec a call: a crash or a hang
        costs only that spec), or taken from ``prebuild``; each spec's failure, or None. ``say``
        is told how far it is every ``PROGRESS_S``."""
        self._stopping.clear()
        futures = [self._prebuilt.pop(spec.id, None) or self._threads().submit(self._build_one, spec)
                   for spec in specs]
        try:
            while True:
                done, running = concurrent.futures.wait(futures, timeout=self.progress_s or None)
                if not running:
                    break
                say(f"built {len(done)} of {len(specs)} baselines ({self.jobs} job(s))")
        except BaseException:
            self._abandon(futures)
            raise
        return [future.result() for future in futures]

    def _build_one(self, spec: LaunchSpec) -> Failure | None:
        verifier = self._idle.get()  # waits only while late verifiers start (``start_rest``)
        try:
            if self._stopping.is_set():
                return None
            outcome = self._call(verifier, jobs.COMPILE_JOB, {"spec": spec.to_json(), "root": self.root},
                                 timeout_s=BASELINE_TIMEOUT_S, cancelled=self._stopping.is_set)
        finally:
            self._idle.put(verifier)
        return None if outcome.ok else outcome.failure

    # ---------------------------------------------------------------------------- candidates

    def candidate(self, spec: LaunchSpec, variant: Variant, mode: str) -> Evaluated:
        """One candidate built, verified in ``mode`` and, if it verified, timed."""
        [evaluated] = self.candidates(spec, [(variant, mode)])
        return evaluated

    def candidates(self, spec: LaunchSpec, items: Sequence[tuple[Variant, str]],
                   verify_timeout_s: float | None = None) -> Iterator[Evaluated]:
        """``items`` ((variant, verification mode) pairs) built, verified and timed, ``jobs`` at a
        time; yielded in the order given. A generator: leaving it early (Ctrl-C, an error; close
        it) kills what is still running, so nothing outlives the round. ``verify_timeout_s``
        bounds each build and verification (default: the worker's limit); past it the candidate
        fails as a ``timeout``."""
        if not items:
            return
        self._stopping.clear()
        futures = [self._threads().submit(self._run, spec, variant, mode, time.perf_counter(), verify_timeout_s)
                   for variant, mode in items]
        try:
            for (variant, _), future in zip(items, futures):
                yield self._evaluated(spec, variant, future.result())
        finally:
            if not all(f.done() for f in futures):
                self._abandon(futures)

    def _threads(self) -> concurrent.futures.ThreadPoolExecutor:
        """One thread per verifier, each taking an idle one."""
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(self.jobs, thread_name_prefix="tritune-candidate")
        return self._pool

    def _run(self, spec: LaunchSpec, variant: Variant, mode: str, submitted: float,
             verify_timeout_s: float | None = None) -> _Ran:
        """One candidate, in a pool thread: verify on an idle verifier, then time on ``worker``."""
        payload = {"spec": spec.to_json(), "root": self.root, "variant": variant.to_json(), "mode": mode,
                   "input_sets": self.input_sets, "copy_gbps": self.copy_gbps}
        verifier = self._idle.get()  # waits only while late verifiers start (``start_rest``)
        try:
            if self._stopping.is_set():
                return _Ran(None, None, time.perf_counter() - submitted)
            limit = {} if verify_timeout_s is None else {"timeout_s": min(verify_timeout_s, verifier.timeout_s or math.inf)}
            verified = self._call(verifier, jobs.VERIFY_JOB, payload, cancelled=self._stopping.is_set, **limit,
                                  **sandboxed(variant))
        finally:
            self._idle.put(verifier)
        timed = None
        if verified.ok and verified.value["verification"]["ok"] and not self._stopping.is_set():
            timed = self._call(self.worker, jobs.TIME_JOB, payload, cancelled=self._stopping.is_set,
                               **sandboxed(variant))
        return _Ran(verified, timed, time.perf_counter() - submitted)

    def _abandon(self, futures: list[concurrent.futures.Future]) -> None:
        """The caller left the round: drop what has not started, kill what runs, wait for the rest."""
        self._stopping.set()
        for future in futures:
            future.cancel()
        for worker in self.workers:
            if worker.busy and id(worker) not in self._joining:  # a late worker's start goes on
                worker.abort()
        concurrent.futures.wait(futures)

    def _evaluated(self, spec: LaunchSpec, variant: Variant, ran: _Ran) -> Evaluated:
        verified, timed = ran.verified, ran.timed
        verify_s = _busy_seconds(verified)
        time_s = _busy_seconds(timed)
        split = {"verify_s": verify_s, "time_s": time_s, "wait_s": max(0.0, ran.seconds - verify_s - time_s)}
        done = dict(seconds=ran.seconds, split=split)
        if not verified.ok:
            failure = verified.failure
            return Evaluated(Trial(variant, False, failure=failure.kind, message=failure.message), failure=failure,
                             **done)
        verification = verified.value["verification"]
        if not verification["ok"]:
            return Evaluated(Trial(variant, False, failure=verification.get("failure") or WRONG_RESULT,
                                   message=verification.get("message", "")), verification, **done)
        if not timed.ok:
            failure = timed.failure
            return Evaluated(Trial(variant, False, failure=failure.kind, message=failure.message), verification,
                             failure=failure, **done)
        timing = timed.value["timing"]
        time_ms = timing.get("time_ms")
        if time_ms is None:
            return Evaluated(Trial(variant, False, failure=ERROR, message=timing.get("message") or "no time"),
                             verification, timing, **done)
        if self.retime is not None:
            time_ms = timing["time_ms"] = self.retime(spec, variant, time_ms)
        return Evaluated(Trial(variant, True, time_ms=time_ms), verification, timing, **done)

    # --------------------------------------------------------------------------- confirmation

    def confirm(self, spec: LaunchSpec, variant: Variant) -> tuple[Confirmation | None, Failure | None]:
        """Baseline and ``variant`` re-timed interleaved (ABBA) in one process."""
        outcome = self._exclusive(jobs.CONFIRM_JOB, {"spec": spec.to_json(), "root": self.root,
                                                     "candidate": variant.to_json()}, **sandboxed(variant))
        if not outcome.ok:
            return None, outcome.failure
        confirmation = confirmation_from_json(outcome.value)
        if self.retime is not None:
            base = self.retime(spec, Variant(), confirmation.base_ms)
            cand = self.retime(spec, variant, confirmation.cand_ms)
            confirmation = dataclasses.replace(confirmation, base_ms=base, cand_ms=cand, ratio=base / cand,
                                               samples=tuple((base, cand) for _ in confirmation.samples),
                                               spread=0.0)
        return confirmation, None

    def judge(self, spec: LaunchSpec, variant: Variant, base_ms: float, cand_ms: float, noise: float | None,
              settings: ArbiterSettings, *, timing: dict | None = None) -> tuple[Verdict, Confirmation | None]:
        """The arbiter's verdict on a verified candidate: screened on its benchmark time, then
        confirmed by interleaved re-timing (only for plausible winners); a re-timing that fails
        is a rejection (``unconfirmed``)."""
        meaningful = (timing or {}).get("meaningful") is not False  # the candidate's own timing, when given
        verdict = screen_candidate(True, base_ms, cand_ms, noise, settings, meaningful=meaningful)
        if verdict is not None:
            return verdict, None
        confirmation, failure = self.confirm(spec, variant)
        verdict = judge_candidate(True, base_ms, cand_ms, noise, confirmation, settings)
        if failure is not None:
            verdict = Verdict(ArbiterDecision.REJECT, "unconfirmed", f"re-timing failed: {failure.kind}: "
                              f"{failure.message}", base_ms / cand_ms)
        return verdict, confirmation

    # -------------------------------------------------------------------------------- profile

    def profile(self, spec: LaunchSpec, timing: dict | None, variant: Variant | None = None, *,
                budget_s: float | None = None) -> dict:
        """The profile JSON (facts, source, note, bottleneck) of ``variant`` (default baseline).
        When the profiler job itself fails, the facts are the timing alone, and the note says so.

        ``budget_s`` (the key's budget) makes ``use_ncu="auto"`` budgeted (``ncu_plan``): ncu
        runs only where its cost, measured on the first launch it profiled in this evaluator
        (``ncu_s``), is at most ``NCU_SHARE`` of the budget; where ncu cannot run at all (jailed,
        missing, no permission: ``ncu_off``) it is not tried again. Else timing + static. The
        first ncu run is cut at its share of the budget: a slower one is then known to cost at
        least that (``_learn_ncu``) and is skipped where the budget cannot afford it."""
        use_ncu, skipped = self.ncu_plan(budget_s)
        ncu_limit = NCU_TIMEOUT_S
        if self.use_ncu == "auto" and budget_s is not None:  # a slow ncu costs at most its share, then is known
            ncu_limit = min(NCU_TIMEOUT_S, NCU_SHARE * budget_s)
        payload = {"spec": spec.to_json(), "root": self.root, "timing": timing or {}, "use_ncu": use_ncu,
                   "variant": variant.to_json() if variant is not None else None, "timeout_s": ncu_limit}
        limits = sandboxed(variant) if variant is not None else {}
        if limits:
            limits["cpu_s"] = max(limits["cpu_s"], NCU_TIMEOUT_S + 120)  # the profile replays the kernel many times
        outcome = self._exclusive(PROFILE_JOB, payload, timeout_s=NCU_TIMEOUT_S + 120, **limits)
        if not outcome.ok:
            return fallback_profile(timing, f"profiler job failed ({outcome.failure.kind}: {outcome.failure.message})")
        profile = dict(outcome.value)
        if skipped:  # "skipped": this budget's choice; else what ncu would have said here
            profile["note"] = f"{skipped}: {FALLBACK}"
            profile["ncu_status"] = self.ncu_off or "skipped"
        self._learn_ncu(profile)
        return profile

    def ncu_plan(self, budget_s: float | None) -> tuple[str, str]:
        """``(use_ncu, why ncu is skipped or "")`` for a profile within ``budget_s``: under
        ``use_ncu="auto"``, "never" once ncu is known to be unavailable here, or to cost more
        than ``NCU_SHARE`` of the budget ("ncu skipped: ~12 s of a 14 s budget"); "auto" while
        its cost is not known yet (the first launch that runs it measures it)."""
        if self.use_ncu != "auto":
            return self.use_ncu, ""
        if self.ncu_off is not None:
            return "never", f"ncu unavailable here ({self.ncu_off})"
        if budget_s is not None and self.ncu_s is not None and self.ncu_s > NCU_SHARE * budget_s:
            return "never", f"ncu skipped: ~{self.ncu_s:.0f} s of a {budget_s:.0f} s budget"
        return "auto", ""

    def _learn_ncu(self, profile: dict) -> None:
        """What a profile tells of ncu here: its cost (``ncu_s``, the first measured), or that it
        cannot run in this evaluator's workers at all (``ncu_off``)."""
        status, seconds = profile.get("ncu_status"), profile.get("ncu_s")
        if status in NCU_NEVER_HERE:
            self.ncu_off = str(status)
        elif not isinstance(seconds, (int, float)):
            return
        elif profile.get("source") == "ncu" and self.ncu_s is None:
            self.ncu_s = float(seconds)
        elif status == "timeout":  # cut at its limit: it costs at least that
            self.ncu_s = max(self.ncu_s or 0.0, float(seconds))

    def _exclusive(self, job: str, payload: dict, **call: Any) -> Outcome:
        """``job`` on the timing worker, holding the GPU to itself (``loop.jobs.exclusive_job``)."""
        return self._call(self.worker, jobs.EXCLUSIVE_JOB, {"job": job, "payload": payload}, **call)


def sandboxed(variant: Variant) -> dict:
    """The per-call limits of a model's code (``Worker.call``'s ``cpu_s``/``memory_mb``); none
    for tritune's own variants."""
    if not families.by_model(variant):
        return {}
    return {"cpu_s": SANDBOX_CPU_S, "memory_mb": SANDBOX_MEMORY_MB}


def _busy_seconds(outcome: Outcome | None) -> float:
    """A job's own seconds, less what it waited for the GPU lock."""
    if outcome is None:
        return 0.0
    waited = outcome.value.get("lock_wait_s", 0.0) if outcome.ok and isinstance(outcome.value, dict) else 0.0
    return max(0.0, outcome.seconds - waited)


def fallback_profile(timing: dict | None, note: str) -> dict:
    from tritune.profile import Facts, classify

    facts = {k: v for k, v in (timing or {}).items() if k in ("time_ms", "graph_ms", "roofline", "grid")}
    return {"facts": facts, "source": "timing", "note": note, "ncu": None,
            "bottleneck": classify(Facts.from_mapping(facts)).to_json()}


def trial_from_record(variant: Variant, status: str, failure: str | None, message: str | None,
                      timings: Any, verified: bool) -> Trial:
    """The ``Trial`` of a candidate the store already holds (a resumed run does not redo it). A
    candidate the arbiter rejected after it verified and was timed stays a timed trial: the search
    moves through it exactly as it did the first time."""
    time_ms = (timings or {}).get("time_ms")
    if status in ("verified", "accepted") or (time_ms is not None and verified):
        return Trial(variant, True, time_ms=time_ms)
    return Trial(variant, False, failure=failure, message=message or "")
