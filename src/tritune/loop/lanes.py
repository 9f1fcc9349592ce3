"""Lanes: where ``optimize`` runs its keys (``tritune optimize --workers N``, ``--devices 0,2,3``).

A *lane* takes one job at a time: its start (the target it optimizes for, from its own worker),
a chunk of the ranking's baselines, then one key after another (``KeyJob`` -> the KernelResult
JSON that ``KernelLoop.run`` returns). ``LocalLane`` is one GPU of this host: its own
``Evaluator``, whose workers all run with ``CUDA_VISIBLE_DEVICES`` set to that GPU (nothing set
under the interpreter), and its own connection to the decision store, opened in the thread that
runs the key (sqlite3 connections stay in the thread that made them). Another kind of lane (Ray,
``optimize --ray``, ``loop.ray_lanes.RayLane``) is one more class with the same methods (``Lane``).

``LanePool`` drives the lanes for the session (``loop.session``), which decides what to hand
out. Each lane has a thread of its own that runs its jobs; the caller's thread alone hands jobs
out and handles what comes back (results, the store's run, ``optimize.json``), so its
bookkeeping needs no lock. With a single lane there is no thread: the job runs in the caller's
thread, exactly as before lanes existed (a Ctrl-C goes through the loop as it always did).
A ``LocalLane``'s verify workers start beside its timing worker (``start``), and a run's lanes
are closed at once (``close_lanes``), each stopping its workers together (``close_workers``):
one after another, closing cost ~8 s a lane on a GPU (4 x H100: 14/23/38 s from the key phase's
end to the process's with 1/2/4 lanes, benchmarks/results/lanes).

A lane that raises ``LaneDied`` is done: its job goes back to the session (a key to the queue,
for another lane of its kind), the pool records why (``LaneLine.died``), and the run goes on
with the others. ``LocalLane`` dies when a worker's process cannot be started again
(``evaluate.WorkerLost``: a GPU that faults whenever a context is made counts, since its
workers bring the GPU up at start, ``loop.device_ready``). Ctrl-C (in the caller's thread)
interrupts every lane (``Lane.interrupt``): what they run is killed, nothing it returned is
recorded, and the run is left resumable as before.

Which GPUs (``lane_devices``): one lane per GPU this host shows, counted by a worker that asks
the CUDA driver (``jobs.DEVICES_JOB``) so that the parent never initialises CUDA; ``--devices``
picks them by index (counted within ``CUDA_VISIBLE_DEVICES`` when that is set); ``--workers N``
takes the first N. Under ``TRITON_INTERPRET=1`` there is no GPU: one lane by default, ``--workers N`` runs
N interpreter lanes (CI tests the scheduling so). A lone lane without ``--devices`` sets no
``CUDA_VISIBLE_DEVICES``: its workers see what the parent sees, as before.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import queue
import subprocess
import threading
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple, Protocol, Sequence

from tritune import config
from tritune.llm.family import LLMSession
from tritune.loop.evaluate import CANDIDATE_TIMEOUT_S, PRELOAD, Evaluator, Interrupted, WorkerLost
from tritune.loop.jobs import DEVICES_JOB, TargetUnknown, ask_target
from tritune.loop.kernel import KernelLoop
from tritune.model.key import DecisionKey
from tritune.model.launch import LaunchSpec
from tritune.model.results import KernelResult, LaneLine
from tritune.model.settings import LoopSettings
from tritune.model.target import Target
from tritune.replay.warm import imports_of, kernel_imports
from tritune.store import DecisionStore
from tritune.store.signing import Signer
from tritune.worker import SharedCache, Worker, bytecode, jail
from tritune.worker.failures import Failure
from tritune.worker.jail import Policy

READY_MODULE = "tritune.loop.device_ready"  # preloaded by a lane's workers: the GPU comes up at start
HASH_MODULE = "tritune.worker.triton_hash"  # preloaded first: Triton's self-hash taken while torch imports
# verify workers a lane waits for at its start (``LocalLane.start``): a round's candidates
# (``LoopSettings.per_round``); the others start after, in the background
FIRST_VERIFIERS = 4
DEVICES_TIMEOUT_S = 120.0
JOIN_S = 30.0  # after Ctrl-C, how long the lanes' threads are waited for, in all (an LLM request may still run)
POLL_S = 0.5
WATCH_S = 1.0  # how often a head start looks at what the capture under way has recorded


class LaneDied(RuntimeError):
    """The lane can take no more jobs; the one it was running goes back to the session."""


class LaneError(ValueError):
    """``--workers``/``--devices`` cannot be met on this host; the message is one line."""


@dataclasses.dataclass
class KeyJob:
    """One key for a lane: everything ``KernelLoop`` needs besides the store and the evaluator,
    which are the lane's."""

    spec: LaunchSpec
    key: DecisionKey
    settings: LoopSettings  # ``budget_s`` is this key's budget (``session.budget_for``)
    run_id: int
    store_path: str
    root: str  # the capture's folder (the lane's evaluator was made for it)
    category: str = "other"
    # The ranking's (timing, failure) (``KernelLoop``'s ``baseline``): a failure, or the one
    # median the loop starts from; None: the loop times it first.
    baseline: tuple[dict | None, Failure | None] | None = None
    # The key's siblings' timeouts (``KernelLoop``'s ``sibling_timeouts``): None, the lane's store has them.
    sibling_timeouts: dict[str, str] | None = None
    # The store's configs for the key (``search.prior``): None, the lane's store has them.
    prior: tuple[dict, ...] | None = None
    # In-process only: a remote lane gets none of these (tests plant families; --llm; log lines).
    families: list | None = None
    llm: LLMSession | None = None
    log: Callable[[str], None] | None = None

    @property
    def budget_s(self) -> float:
        return self.settings.budget_s


class Lane(Protocol):
    """What the session needs of a lane. Every method but ``interrupt`` is called from the
    lane's own thread (the caller's, with one lane); ``start``, ``baselines`` and ``run_key``
    raise ``LaneDied`` when the lane can do no more."""

    name: str  # "cuda:0", "interpreter:1"; later "ray:<node>/<gpu>"

    @property
    def gpu(self) -> str:
        """The GPU's name (``target.gpu``), known once ``start`` returned."""

    @property
    def target(self) -> Target | None:
        """What ``jobs.target_job`` reports from the lane's own worker (gpu, capability,
        triton_version, copy_gbps, meaningful, ...); None before ``start``."""

    def start(self, prebuild: Sequence[LaunchSpec] = ()) -> Target:
        """Find the target (decisions are keyed by its GPU name and capability) and return it.
        ``prebuild``: launches the ranking will ask for, which the lane may start building."""

    def baselines(self, specs: list[LaunchSpec], log: Callable[[str], None] | None = None
                  ) -> dict[str, tuple[dict | None, Failure | None]]:
        """The ranking's timings of ``specs``, by spec id (``Evaluator.baselines``)."""

    def run_key(self, job: KeyJob) -> KernelResult:
        """``KernelLoop(...).run()`` for the key."""

    def interrupt(self) -> None:
        """From another thread: stop what runs now; the call running raises, nothing it did
        after is recorded. The lane is not used again."""

    def close(self) -> None:
        """Free what the lane holds (its workers)."""


class LocalLane:
    """One GPU of this host (``device``: its ``CUDA_VISIBLE_DEVICES`` value, None: what the parent
    sees, or the interpreter). ``evaluator``: use that one instead (tests: scripted times, warm
    workers); it is the caller's to close. ``signer``: the store's signer instead of this user's
    (a Ray lane's temporary store, ``loop.ray_lanes``). ``head``: made before the capture in
    ``root`` is (``HeadStart``): its workers import torch and Triton at ``head_start``, and take
    the capture's libraries and the GPU at ``start``."""

    def __init__(self, device: str | None, root: str | Path, *, index: int = 0, jobs: int = 1,
                 use_ncu: str = "auto", evaluator: Evaluator | None = None, signer: Signer | None = None,
                 jail: Policy | None = None, head: bool = False) -> None:
        self.device, self.index, self.signer = device, index, signer
        self._owned = evaluator is None
        self._bytecode = None  # where its jailed workers read bytecode (``worker.bytecode``), if anywhere
        self._filling: subprocess.Popen | None = None
        self._policy = jail
        self._head = head and self._owned
        self._heading: list[concurrent.futures.Future] = []  # ``head_start``'s starts
        self.head_started: float | None = None  # when (``time.monotonic``) ``head_start`` started them
        self._warmer: concurrent.futures.ThreadPoolExecutor | None = None  # ``warm_up``'s imports
        if evaluator is None:
            warm = () if self._head else kernel_imports(root)
            env, jail = self._environment(root, bytecode.FIRST_FILL if self._head else warm, grant=self._head)
            cache = SharedCache() if jail is not None else None  # the lane's workers build a launch once
            preload = (HASH_MODULE, *PRELOAD) if self._head else (HASH_MODULE, *PRELOAD, READY_MODULE)
            worker = Worker(CANDIDATE_TIMEOUT_S, env=env, preload=preload, jail=jail,
                            cache=cache.path if cache is not None else None, warm=warm)
            evaluator = Evaluator(root, use_ncu=use_ncu, jobs=jobs, worker=worker, cache=cache)
        self.evaluator = evaluator
        self._target: Target | None = None

    def _environment(self, root: str | Path, modules: Sequence[str], *, grant: bool = False
                     ) -> tuple[dict, Policy | None]:
        """Its workers' environment and jail: the lane's GPU, and the bytecode folder where the
        jail may grant it (``with_read``; it is filled after the ranking) and it is usable for
        ``modules`` (``bytecode.usable``). ``grant``: the jail reads the folder even where it is
        not usable yet (a head lane's workers, made before the capture has filled it: they take
        it once the capture is there, ``Worker.extend``)."""
        env: dict = {} if self.device is None else {config.ENV_VISIBLE_DEVICES: self.device}
        policy = self._policy
        folder = bytecode.prefix() if policy is not None else None
        granted = policy.with_read(folder) if folder is not None else None
        if granted is not None and granted.read != policy.read:
            self._bytecode = folder
            usable = bytecode.usable(folder, modules, Path(root))
            if usable or grant:
                policy = granted
            if usable:
                env[config.ENV_PYCACHE_PREFIX] = str(folder)
        return env, policy

    def head_start(self) -> None:
        """Its timing worker and its first verify workers started now, in the background, with
        torch and Triton (``head``; nothing otherwise): the program is captured meanwhile."""
        if not self._head or self._heading:
            return
        self.head_started = time.monotonic()
        starter = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="tritune-head")
        self._heading = [*self.evaluator.start_verifiers(FIRST_VERIFIERS), starter.submit(self.evaluator.worker.start)]
        starter.shutdown(wait=False)

    def warm_up(self, modules: Sequence[str]) -> None:
        """While the program is still captured: the libraries its kernel files import so far
        (``modules``, ``replay.warm``) imported in the head lane's workers, in the background
        (``Worker.extend``; a worker still starting takes them once started). Nothing once
        ``start`` began."""
        if not self._head:
            return
        workers = self.evaluator.workers
        if self._warmer is None:
            self._warmer = concurrent.futures.ThreadPoolExecutor(len(workers), thread_name_prefix="tritune-warm")
        for worker in workers:
            self._warmer.submit(worker.extend, warm=tuple(modules))

    @property
    def name(self) -> str:
        """``cuda:INDEX``, or ``interpreter:INDEX`` when its workers interpret (as its target says
        once started: a test's workers may interpret while this process does not)."""
        interpreted = self._target.interpreted if self._target else config.interpreting()
        return f"{'interpreter' if interpreted else 'cuda'}:{self.index}"

    @property
    def gpu(self) -> str:
        return self._target.gpu if self._target else ""

    @property
    def jobs(self) -> int:
        """Its verify workers (``--jobs``)."""
        return self.evaluator.jobs

    @property
    def target(self) -> Target | None:
        return self._target

    def start(self, prebuild: Sequence[LaunchSpec] = ()) -> Target:
        """The target, from the timing worker (``TARGET_JOB``). Its first ``FIRST_VERIFIERS``
        verify workers start beside the timing worker's start (``Evaluator.start_verifiers``),
        not after it at the ranking's first build, and the target job waits for them: the copy
        bandwidth it measures is not measured while they bring the GPU up. Then they build
        ``prebuild`` (``Evaluator.prebuild``: compiles, and each binary loaded, no launch) while
        the target job runs: ~0.4 s of a short run's fixed costs. The others start
        after the target job, in the background (``Evaluator.start_rest``), and take work as
        each is ready. A start that fails is tried again by the first call that needs the
        worker, as before (for the timing worker that is one try more: the target's call tries
        again). A lane that cannot start stops them again at once: it takes no job, and they
        would hold their memory (and the GPU's) until the run's end."""
        try:
            if self._head:
                self._finish_head()
            starting = self.evaluator.start_verifiers(FIRST_VERIFIERS) if self._owned else []
            if starting:
                self.evaluator.worker.start()
                concurrent.futures.wait(starting)
            if self._owned and prebuild:
                self.evaluator.prebuild(prebuild)
            target = self._start()
            if self._owned:
                self.evaluator.start_rest()
            return target
        except LaneDied:
            self.close()
            raise

    def _finish_head(self) -> None:
        """A head lane's workers given what a lane made after the capture gives its own: the
        capture's libraries (``replay.warm``), the GPU brought up, the bytecode folder where it
        is usable for them (``_environment``): imported in the workers ``head_start`` started,
        at once (``Worker.extend``), the settings of those it did not. A worker whose start or
        extension failed starts again at its first call, with them. Interrupted (Ctrl-C), the
        workers' imports are stopped, not waited for."""
        self._head = False
        warm = kernel_imports(self.evaluator.root)
        env, policy = self._environment(self.evaluator.root, warm)
        workers = self.evaluator.workers
        pool = concurrent.futures.ThreadPoolExecutor(len(workers), thread_name_prefix="tritune-head")
        try:
            if self._warmer is not None:
                self._warmer.shutdown(wait=True, cancel_futures=True)
            concurrent.futures.wait(self._heading)
            concurrent.futures.wait([pool.submit(w.extend, preload=(READY_MODULE,), warm=warm, env=env, jail=policy)
                                     for w in workers])
        except BaseException:
            for worker in workers:
                worker.abort()
            raise
        finally:
            pool.shutdown(wait=False)

    def _start(self) -> Target:
        try:
            target = ask_target(lambda job, payload: self._guard(self.evaluator.call, job, payload))
        except TargetUnknown as exc:
            raise LaneDied(str(exc)) from None
        if self.device is not None and not config.interpreting() and not target.meaningful:
            raise LaneDied(f"{config.ENV_VISIBLE_DEVICES}={self.device}: its workers see no GPU")
        if self.evaluator.copy_gbps is None:
            self.evaluator.copy_gbps = target.copy_gbps
        self._target = target
        return target

    def _fill_bytecode(self) -> None:
        """What the timing worker and this process imported, compiled for the next run's workers
        (``worker.bytecode``) in the background; nothing where the packages carry their own
        bytecode. Optional: a failure of it is no failure of the lane."""
        if self._bytecode is None or self._filling is not None:
            return
        try:
            outcome = self.evaluator.call(bytecode.IMPORTED_JOB, {})
            files = list(outcome.value) if outcome.ok and isinstance(outcome.value, list) else []
            self._filling = bytecode.fill(self._bytecode, files + bytecode.imported())
        except Exception:  # noqa: BLE001 - a lost worker's next call says so; a folder gone: no bytecode
            return

    def baselines(self, specs: list[LaunchSpec], log: Callable[[str], None] | None = None
                  ) -> dict[str, tuple[dict | None, Failure | None]]:
        """The ranking (``Evaluator.baselines``); then, the timing worker having imported what
        timing needs, the bytecode fill (``_fill_bytecode``)."""
        found = self._guard(self.evaluator.baselines, specs, log=log)
        if self._owned:
            self._fill_bytecode()
        return found

    def run_key(self, job: KeyJob) -> KernelResult:
        with DecisionStore(job.store_path, signer=self.signer) as store:  # this thread's own connection
            loop = KernelLoop(job.spec, job.key, store=store, run_id=job.run_id, evaluator=self.evaluator,
                              settings=job.settings, category=job.category, log=job.log, families=job.families,
                              baseline=job.baseline, llm=job.llm, sibling_timeouts=job.sibling_timeouts,
                              prior=job.prior)
            return self._guard(loop.run)

    def interrupt(self) -> None:
        self.evaluator.interrupt()

    def close(self) -> None:
        self._head = False  # no more ``warm_up``
        if self._warmer is not None:
            self._warmer.shutdown(wait=False, cancel_futures=True)  # a running one ends with its worker
        if self._owned:
            self.evaluator.close()
        bytecode.stop(self._filling)  # the next run goes on from what it wrote

    def _guard(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except WorkerLost as exc:
            raise LaneDied(str(exc)) from None


def close_lanes(lanes: Sequence[Lane]) -> None:
    """Every lane's ``close``, at once (a thread each; none for a single lane), so that a run's
    lanes take one lane's closing time, not the sum (~8 s a local lane on a GPU before its workers
    were stopped together, ``close_workers``; a Ray lane waits for its actor). An error of one
    lane's ``close`` is raised once every lane closed."""
    if len(lanes) <= 1:
        for lane in lanes:
            lane.close()
        return
    with concurrent.futures.ThreadPoolExecutor(len(lanes), thread_name_prefix="tritune-close") as threads:
        closing = [threads.submit(lane.close) for lane in lanes]
    for future in closing:
        future.result()


# ----------------------------------------------------------------------------- which GPUs

class Device(NamedTuple):
    index: int  # as the user counts (``--devices``), within CUDA_VISIBLE_DEVICES when set
    visible: str | None  # what the lane's CUDA_VISIBLE_DEVICES is set to (None: left as it is)


def visible_gpus() -> list[dict]:
    """The GPUs this host shows (``[{"name", "capability"}]``), asked of a worker: the parent never
    initialises CUDA. The worker asks the CUDA driver (``worker.cuda_driver``), not torch: ~0.5 s
    rather than torch's import (5.3 s on an H200 host), before every run's first lane."""
    with Worker(DEVICES_TIMEOUT_S) as worker:
        outcome = worker.call(DEVICES_JOB, {})
    if not outcome.ok:
        raise LaneError(f"cannot tell which GPUs this host has: {outcome.failure.kind}: {outcome.failure.message}")
    return list(outcome.value)


def lane_devices(workers: int | None = None, devices: Sequence[int] | None = None, *,
                 gpus: Callable[[], list[dict]] | None = None) -> list[Device]:
    """The lanes' devices for ``--workers``/``--devices`` (module docstring); ``LaneError`` for
    values this host cannot meet. ``gpus`` asks the host (default ``visible_gpus``)."""
    if workers is not None and workers < 1:
        raise LaneError(f"--workers must be at least 1, not {workers}")
    if devices is not None and len(set(devices)) != len(devices):
        raise LaneError(f"--devices {','.join(map(str, devices))}: a GPU is named twice")
    if config.interpreting():
        if devices:
            raise LaneError("--devices picks GPUs, and under TRITON_INTERPRET=1 there are none: "
                            "--workers N runs N interpreter lanes")
        return [Device(i, None) for i in range(workers or 1)]
    found = (gpus or visible_gpus)()
    visible = config.visible_devices()
    ids = visible[:len(found)] if visible is not None else [str(i) for i in range(len(found))]
    shown = f"{len(found)} GPU(s)" + (f" ({', '.join(map(str, range(len(found))))})" if found else "")
    if devices:
        missing = [d for d in devices if not 0 <= d < len(found)]
        if missing:
            raise LaneError(f"--devices {missing[0]}: no such GPU; this host shows {shown}")
        if workers is not None and workers > len(devices):
            raise LaneError(f"--workers {workers} is more than the {len(devices)} GPU(s) --devices names")
        return [Device(d, ids[d]) for d in list(devices)[:workers or len(devices)]]
    if workers is not None and workers > max(1, len(found)):
        raise LaneError(f"--workers {workers}: this host shows {shown}, and a lane is one GPU "
                        "(TRITON_INTERPRET=1 runs interpreter lanes)")
    count = workers or max(1, len(found))
    if count == 1:
        return [Device(0, None)]
    return [Device(i, ids[i]) for i in range(count)]


def local_lanes(root: str | Path, settings: LoopSettings, devices: Sequence[Device]) -> list[LocalLane]:
    """A ``LocalLane`` per device, each with ``settings.jobs`` verify workers, jailed
    (``worker.jail.for_workers``: a run with ``--llm`` is refused where the jail is missing,
    ``LaneError``, unless ``settings.unsafe_no_jail``)."""
    try:
        policy = jail.for_workers(root, untrusted=settings.llm is not None, unsafe_no_jail=settings.unsafe_no_jail)
    except jail.JailUnavailable as exc:
        raise LaneError(str(exc)) from None
    return [LocalLane(d.visible, root, index=d.index, jobs=settings.jobs, use_ncu=settings.use_ncu, jail=policy)
            for d in devices]


class HeadStart:
    """A run's lanes started while its program is captured (``tritune optimize -- COMMAND``): made
    on the capture's folder before the program runs (``LocalLane(head=True)``), their workers
    import torch and Triton beside the program, then, as its processes record launches
    (``capture.recorder.Recorded``, looked at every ``WATCH_S``), the libraries of the kernel
    files recorded so far (``replay.warm``, ``LocalLane.warm_up``). A run's start otherwise pays
    both after the capture: a library's import alone took 4 s (Liger) to 20 s (fla) in each fresh
    worker on an H200 host, most of a short run's fixed costs.

    Their jail is decided before the capture holds anything, so it names only the program folder
    the command line shows (``program_dirs``: a Python script's folder, ``boot.script_folder``):
    the folders of the kernel files (``jail.program_folders``) are known only after. ``lanes(root)``
    hands the lanes over when the jail the capture asks for (``local_lanes``) reaches what
    theirs does (``jail.same_reach``): the kernel files lie where every worker may read anyway
    (a library, Inductor's kernels, a program under a folder on this process's path). Otherwise
    it closes them and says so, and the run makes its own as it always did. The one grant a head
    lane's workers hold that the run's own may not is the bytecode folder, which they read from
    their start (it holds what tritune compiled from the folders every worker reads:
    ``worker.bytecode``)."""

    def __init__(self, capture_dir: str | Path, settings: LoopSettings, devices: Sequence[Device],
                 program_dirs: Sequence[str] = ()) -> None:
        self.root = Path(capture_dir).absolute()
        self.root.mkdir(parents=True, exist_ok=True)  # the jail reads what exists
        self._settings = settings
        self.policy = jail.for_workers(self.root, untrusted=settings.llm is not None,
                                       unsafe_no_jail=settings.unsafe_no_jail, program_dirs=tuple(program_dirs))
        self._lanes: list[LocalLane] = []
        self._done = threading.Event()
        self._watcher: threading.Thread | None = None
        try:
            for d in devices:
                self._lanes.append(LocalLane(d.visible, self.root, index=d.index, jobs=settings.jobs,
                                             use_ncu=settings.use_ncu, jail=self.policy, head=True))
            for lane in self._lanes:
                lane.head_start()
            self._watcher = threading.Thread(target=self._watch, name="tritune-head-watch", daemon=True)
            self._watcher.start()
        except BaseException:
            self.close()
            raise

    def _watch(self) -> None:
        """Until the capture ends: the libraries of the kernel files recorded so far, to the lanes
        as they grow (each file's imports read once)."""
        from tritune.capture.recorder import Recorded  # its module's import registers at-exit hooks

        recording, parsed = Recorded(self.root), {}
        sent: tuple[str, ...] = ()
        while not self._done.wait(WATCH_S):
            try:
                if not recording.look(self._done.is_set):
                    continue
                modules = imports_of(self.root, recording.sources, parsed)
                if modules and not set(modules) <= set(sent):
                    sent = modules
                    for lane in self._lanes:
                        lane.warm_up(modules)
            except Exception:  # noqa: BLE001 - an optimisation: the run's start imports them anyway
                continue

    def _stop_watching(self) -> None:
        self._done.set()
        if self._watcher is not None:
            self._watcher.join()

    def lanes(self, root: str | Path) -> list[LocalLane] | None:
        """The lanes, for a run on the capture in ``root``, or None (closed) where they cannot
        serve it (the class doc). The caller closes those it got."""
        self._stop_watching()
        why = None
        if Path(root).absolute() != self.root:
            why = f"the run is on another capture ({root})"
        else:
            try:
                late = jail.for_workers(root, untrusted=self._settings.llm is not None,
                                        unsafe_no_jail=self._settings.unsafe_no_jail)
            except jail.JailUnavailable as exc:
                late, why = None, str(exc)
            if why is None and not jail.same_reach(self.policy, late):
                why = ("the capture's kernel files lie in a folder they were not jailed to read (`python -m "
                       "tritune`, run from a folder that holds them, puts it on their path)")
        lanes, self._lanes = self._lanes, []
        if why is not None:
            jail.say(f"tritune optimize: the workers started beside the capture are not used: {why}; starting others")
            close_lanes(lanes)
            return None
        return lanes

    def close(self) -> None:
        """Those not handed over, closed."""
        self._stop_watching()
        lanes, self._lanes = self._lanes, []
        close_lanes(lanes)


# ------------------------------------------------------------------------------- the pool

@dataclasses.dataclass
class Task:
    """One job for a lane: ``run(lane)`` in the lane's thread; ``what`` is the session's."""

    what: Any
    run: Callable[[Lane], Any]


class _Event(NamedTuple):
    lane: Any
    task: Task
    status: str  # "ok" | "died" | "error" | "interrupted"
    value: Any  # the job's value, or the exception
    seconds: float


class LanePool:
    """The lanes of a run, each driven by a thread of its own (none with a single lane)."""

    def __init__(self, lanes: Sequence[Lane]) -> None:
        if not lanes:
            raise ValueError("a pool needs at least one lane")
        self.lanes = list(lanes)
        self.live = list(lanes)
        self.inline = len(lanes) == 1
        self._lines = {id(lane): LaneLine(name=lane.name) for lane in lanes}
        self._ended: dict[int, float] = {}  # lane -> when it died
        self._began = time.monotonic()
        self._events: queue.Queue[_Event] = queue.Queue()
        self._threads: dict[int, tuple[threading.Thread, queue.Queue]] = {}

    # ------------------------------------------------------------------------------- driving

    def drive(self, take: Callable[[Lane], Task | None], done: Callable[[Lane, Task, Any], None],
              lost: Callable[[Lane, Task, LaneDied], None]) -> None:
        """Hand ``take(lane)``'s tasks to idle lanes, lowest lane first, until no task runs and
        ``take`` has none for any idle lane. ``done`` gets each value, ``lost`` each task whose
        lane died (that lane takes nothing more); both run in this thread. A job's other
        exception is raised here, after every lane was interrupted; so is Ctrl-C."""
        idle = list(self.live)
        running = 0
        try:
            while True:
                for lane in list(idle):
                    task = take(lane)
                    if task is None:
                        continue
                    idle.remove(lane)
                    running += 1
                    self._dispatch(lane, task)
                if not running:
                    return
                event = self._next_event()
                running -= 1
                self.line(event.lane).busy_s += event.seconds
                if event.status == "ok":
                    done(event.lane, event.task, event.value)
                    idle = [lane for lane in self.live if lane in idle or lane is event.lane]
                elif event.status == "died":
                    self._bury(event.lane, event.value)
                    lost(event.lane, event.task, event.value)
                else:  # an error of the job (or an interruption nobody asked for): the run stops
                    raise event.value
        except BaseException:
            if not self.inline:  # inline, the exception came out of the one job there was
                self.interrupt()
            raise

    def start(self, prebuild: Sequence[LaunchSpec] = ()) -> list[tuple[Lane, LaneDied]]:
        """Every lane's ``start``, at once (``prebuild`` passed on); the lanes that could not
        start, with why."""
        waiting, failed = list(self.live), []

        def take(lane: Lane) -> Task | None:
            if lane not in waiting:
                return None
            waiting.remove(lane)
            return Task(None, lambda lane: lane.start(prebuild))

        self.drive(take, lambda lane, task, value: None, lambda lane, task, exc: failed.append((lane, exc)))
        for lane in self.live:
            self.line(lane).gpu = lane.gpu
        return failed

    def _dispatch(self, lane: Lane, task: Task) -> None:
        if self.inline:
            self._events.put(self._run(lane, task, inline=True))
            return
        if id(lane) not in self._threads:
            inbox: queue.Queue[Task | None] = queue.Queue()
            thread = threading.Thread(target=self._serve, args=(lane, inbox), name=f"tritune-lane-{lane.name}",
                                      daemon=True)
            self._threads[id(lane)] = (thread, inbox)
            thread.start()
        self._threads[id(lane)][1].put(task)

    def _serve(self, lane: Lane, inbox: queue.Queue) -> None:
        while True:
            task = inbox.get()
            if task is None:
                return
            self._events.put(self._run(lane, task, inline=False))

    def _run(self, lane: Lane, task: Task, *, inline: bool) -> _Event:
        begin = time.monotonic()
        try:
            value, status = task.run(lane), "ok"
        except LaneDied as exc:
            value, status = exc, "died"
        except Interrupted as exc:
            if inline:
                raise
            value, status = exc, "interrupted"
        except BaseException as exc:  # noqa: BLE001 - raised in the caller's thread (``drive``)
            if inline:
                raise
            value, status = exc, "error"
        return _Event(lane, task, status, value, time.monotonic() - begin)

    def _next_event(self) -> _Event:
        while True:  # a timeout, so that Ctrl-C reaches this thread while it waits
            try:
                return self._events.get(timeout=POLL_S)
            except queue.Empty:
                continue

    def _bury(self, lane: Lane, exc: LaneDied) -> None:
        self.line(lane).died = str(exc) or type(exc).__name__
        self._ended[id(lane)] = time.monotonic()
        self.live.remove(lane)
        self._stop_thread(lane)

    # ---------------------------------------------------------------------------- accounting

    def line(self, lane: Lane) -> LaneLine:
        return self._lines[id(lane)]

    def lines(self) -> list[LaneLine]:
        """Every lane's line, its idle time up to now (or its death)."""
        now = time.monotonic()
        for lane in self.lanes:
            line = self.line(lane)
            line.name, line.gpu = lane.name, line.gpu or lane.gpu
            line.idle_s = max(0.0, self._ended.get(id(lane), now) - self._began - line.busy_s)
        return [dataclasses.replace(self.line(lane)) for lane in self.lanes]

    # ------------------------------------------------------------------------------- the end

    def interrupt(self) -> None:
        """Every live lane interrupted, and their threads waited for (``JOIN_S`` at most, in all)."""
        for lane in self.live:
            lane.interrupt()
        self.close()

    def close(self) -> None:
        """The lanes' threads told to end and waited for, ``JOIN_S`` at most in all (not each: a
        lane that does not stop, e.g. on an LLM request, must not make Ctrl-C wait once per lane);
        the lanes themselves are the caller's."""
        until = time.monotonic() + JOIN_S
        for lane in self.lanes:
            self._stop_thread(lane, until)

    def _stop_thread(self, lane: Lane, until: float | None = None) -> None:
        found = self._threads.pop(id(lane), None)
        if found is None:
            return
        thread, inbox = found
        inbox.put(None)
        if thread is not threading.current_thread():
            thread.join(JOIN_S if until is None else max(0.0, until - time.monotonic()))
