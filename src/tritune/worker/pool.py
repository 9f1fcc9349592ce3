"""Run jobs in a long-lived child process, so that a bad candidate ends only that process.

A compile error, a CUDA fault (which corrupts the context for good), a hang or a segfault in a
kernel must not take the search down with it. ``Worker.call`` runs one importable function on
one picklable payload in the child and returns an ``Outcome``: the value, or a classified
``Failure`` (see ``failures``). After a timeout, a crash or a runtime fault the child's process
group is killed and a fresh child starts at the next call; after other failures it is reused.

Why ``subprocess`` and ``multiprocessing.connection`` rather than ``multiprocessing``'s spawn
context: the child must start with the job environment already set (``TRITON_INTERPRET`` is read
when a kernel is decorated, ``CUDA_VISIBLE_DEVICES`` when CUDA starts), in its own process group
(so a job's own children die with it), with its C-level stdout/stderr in a file we can read the
tail of, and without re-importing the parent's ``__main__``; a spawn ``Process`` can do none of
these. The messages still travel as pickles over ``multiprocessing`` connections; the parent
reads a child's with ``replies.load`` (bounded, and naming no class but a ``Failure``: a worker
runs untrusted code, and a pickle's classes run code where it is loaded). A reply it refuses is
a ``crash`` of that call, and the worker is killed.

What a job's code reaches: a child starts in a fresh temporary directory of its own (removed when
the child ends), so a relative path a candidate writes lands nowhere that matters; the parent's
``sys.path`` travels made absolute, and so do the path variables of its environment
(``_PATH_ENV``), so nothing that names a file means something else there. Payload paths are the
caller's to make absolute. The variables in ``config.SECRET_ENV`` (the LLM key) never reach a
child, whatever the parent or ``env`` holds: a worker runs candidates' code. ``call`` can limit a
job's CPU time and resident memory too (``limits``).

A jailed worker (``jail=``, a ``jail.Policy``) runs its child in the operating system's jail
(``jail``: files, network, processes, capabilities), its scratch directory its only writable
folder, and its ``HOME``, ``TMPDIR`` and Triton and Inductor caches there (its Triton cache
may instead be a ``SharedCache`` of its evaluator's workers, which it may write too); its environment is
an allowlist (``config.jail_environment``: what Python, CUDA, Triton, torch and tritune read,
then ``env``), not the user's; after every call, every other
process of its process group (what the job started, which cannot leave the group) is killed.

Costs: starting a child is ~0.1 s, plus ~1-2 s for each of torch/Triton it imports (``preload``
pays that at start, outside the job's time limit). A warm call costs well under a millisecond.
Stopping one is up to ``_STOP_WAIT_S`` (asked, then killed); ``close_workers`` stops many in that
time together.
"""

from __future__ import annotations

import atexit
import dataclasses
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from tritune import config, gpu
from tritune.model.failures import CRASH, TIMEOUT
from tritune.worker import replies
from tritune.worker.child import DUMP_SIGNAL, LOG_PREFIX, SCRATCH_PREFIX
from tritune.worker.failures import Failure, shorten
from tritune.worker.jail import Policy, end_strays, reads
from tritune.worker.limits import POLL_S, Limits, Meter, enforceable

DEFAULT_TIMEOUT_S = 60.0
START_TIMEOUT_S = 120.0
LOG_KB = 16  # how much of the child's output tail a failure's detail keeps
_STOP_WAIT_S = 2.0
_DUMP_WAIT_S = 0.3
_CHILD_CODE = "from tritune.worker.child import main; main()"
LOAD_JOB = "tritune.worker.child:load"  # ``Worker.extend``'s imports in a live child
_KEEP = object()  # extend(jail=...) not given: the worker's own
CACHE_PREFIX = "tritune-shared-cache-"  # ``SharedCache``
_WORKER_DEFAULT = object()  # call(timeout_s=...) not given: the worker's own limit
# Variables holding a path (or a list of them) that a child must read as the parent does
# (TRITUNE_NCU is left alone: it may be a bare name, looked up on PATH).
_PATH_ENV = (config.ENV_HOME, config.ENV_STORE, config.ENV_CAPTURE_DIR, config.ENV_TRITON_CACHE,
             config.ENV_INDUCTOR_CACHE)
_PATH_LIST_ENV = (config.ENV_PYTHONPATH, config.ENV_PATH)


@dataclasses.dataclass(frozen=True)
class Outcome:
    ok: bool
    value: Any = None
    failure: Failure | None = None
    # The job's own time when the child reported back; else the time waited for it.
    seconds: float = 0.0


class Worker:
    """A child process that runs jobs one at a time; see the module doc.

    ``env`` is merged over this process's environment before the child's interpreter starts
    (a value of ``None`` removes the variable); workers with different envs are different
    workers. ``preload`` names modules the child imports at start (e.g. ``("torch",)``), so
    their import time does not count against a job's limit. ``timeout_s=None``: no limit.
    ``jail``: the child runs jailed by that policy (its scratch folder added), see the module doc.
    ``cache``: a jailed child's Triton cache is that folder, which it may write (an evaluator's
    workers share one: ``SharedCache``), not one of its own in its scratch folder. ``warm``:
    modules imported at start after ``preload``, where a failure does not fail the start.
    """

    def __init__(
        self,
        timeout_s: float | None = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str | None] | None = None,
        *,
        preload: tuple[str, ...] = (),
        log_kb: int = LOG_KB,
        start_timeout_s: float = START_TIMEOUT_S,
        jail: Policy | None = None,
        cache: str | Path | None = None,
        warm: tuple[str, ...] = (),
    ) -> None:
        self.timeout_s = timeout_s
        self.jail = jail
        self.cache = str(Path(cache).absolute()) if cache is not None else None
        self.env = _check_env(env or {})
        self.preload = tuple(preload)
        self.warm = tuple(warm)
        self.log_kb = log_kb
        self.start_timeout_s = start_timeout_s
        self.starts = 0  # how many children this worker has started
        self._child: _Child | None = None
        self._starting: _Child | None = None  # a child whose start (handshake) is under way
        self._closing = False  # ``_detach`` began: no child is to be started from now on
        self._start_aborted = False  # ``abort`` killed the start under way: not tried again
        self._lock = threading.Lock()
        self._closed = False

    @property
    def pid(self) -> int | None:
        """The live child's process id; None before the first call and after a restart."""
        return self._child.proc.pid if self._child is not None else None

    def start(self) -> Outcome:
        """Start the child now (calls start it lazily); a failed start comes back as a Failure,
        and so does a start after ``close`` (nothing is started)."""
        with self._lock:
            if self._closed:
                return Outcome(ok=False, failure=Failure(CRASH, "not started: the worker is closed"))
            return self._ensure_child()

    def call(self, target: str, payload: Any = None, timeout_s: Any = _WORKER_DEFAULT, *,
             cpu_s: float | None = None, memory_mb: float | None = None,
             cancelled: Callable[[], bool] | None = None) -> Outcome:
        """Run ``target`` (``"package.module:function"``) on ``payload`` in the child.

        ``timeout_s`` defaults to the worker's (``None``: no limit). ``cpu_s``: the job's CPU
        time (a ``timeout`` failure past it), ``memory_mb``: the child's resident memory, in MiB
        (a ``crash`` failure past it); both are polled (``limits``) and kill the child like a
        timeout. Failures of the job come back in the Outcome; a payload that cannot be pickled
        raises here, as a caller's bug, and leaves the child as it was.

        ``cancelled``: asked once this call has the worker (it may have waited for another call),
        before a child is started for it and again before the job is sent; True: the job is not
        run and the call returns a ``crash``, as an aborted one does. A call that waited while
        ``abort`` killed the running one would otherwise start a fresh child and run its job
        (``Evaluator.interrupt``: Ctrl-C).
        """
        limit = self.timeout_s if timeout_s is _WORKER_DEFAULT else timeout_s
        limits = Limits(cpu_s, memory_mb)
        if limits and not enforceable():
            limits = Limits()
        message = bytes(ForkingPickler.dumps(("call", target, payload)))
        with self._lock:
            if self._closed:
                raise RuntimeError("worker is closed")
            if cancelled is not None and cancelled():
                return _cancelled()
            started = self._ensure_child()
            if not started.ok:
                return started
            if cancelled is not None and cancelled():  # while the child started (``abort`` found none to kill)
                return _cancelled()
            child = self._child
            try:
                return self._call(child, message, limit, limits)
            except BaseException:
                # Ctrl-C (or any error of ours) while a job runs: the child's state is unknown.
                self._discard()
                raise
            finally:
                if self.jail is not None and self._child is child:  # (a killed child's group is gone)
                    end_strays(child.proc.pid, keep=child.proc.pid)

    def extend(self, *, preload: tuple[str, ...] = (), warm: tuple[str, ...] | None = None,
               env: Mapping[str, str | None] | None = None, jail: Any = _KEEP) -> Outcome:
        """New settings for the children started from now on, and the live child brought to them.

        ``preload`` is added to the worker's own; ``warm``, ``env`` and ``jail``, where given,
        replace its own. A live child imports ``preload``, then ``warm``, now, as a start with
        them would (``child.load``: a failed ``preload`` import fails, a failed ``warm`` one is a
        line in its log), before any call that waits for the worker. Its environment and jail stay
        those it started with, but for the folder Python keeps bytecode in (``PYTHONPYCACHEPREFIX``):
        where the new ``env`` changes it, the child takes the new one if its jail lets it read
        that folder, and none otherwise (Python then reads the packages' own ``__pycache__``). A
        failed load ends the child: the next call starts one with the new settings. ``close`` and
        ``abort`` end a load under way as they end a start. For ``LocalLane``'s head start: its
        workers start while the program is captured, take the capture's libraries as it records
        them, and bring the GPU up once it is done."""
        with self._lock:
            if self._closed:
                return Outcome(ok=False, failure=Failure(CRASH, "not extended: the worker is closed"))
            self.preload = tuple(dict.fromkeys((*self.preload, *preload)))
            if warm is not None:
                self.warm = tuple(warm)
            before = self.env.get(config.ENV_PYCACHE_PREFIX)
            if env is not None:
                self.env = _check_env(env)
            if jail is not _KEEP:
                self.jail = jail
            if self._child is not None and self._child.doomed:
                self._discard()
            child = self._child
            if child is None:
                return Outcome(ok=True)
            payload: dict = {"preload": list(preload), "warm": list(self.warm)}
            after = self.env.get(config.ENV_PYCACHE_PREFIX)
            if after != before and after != child.pycache_prefix:
                payload["pycache_prefix"] = after if after is not None and child.can_read(after) else None
            message = bytes(ForkingPickler.dumps(("call", LOAD_JOB, payload)))
            self._start_aborted = False
            self._starting = child  # like a start: ``close`` and ``abort`` end it, they do not wait for it
            try:
                if self._closing:
                    self._discard()
                    return Outcome(ok=False, failure=Failure(CRASH, "not extended: the worker is closed"))
                outcome = self._call(child, message, self.start_timeout_s, Limits())
            except BaseException:
                self._discard()
                raise
            finally:
                self._starting = None
                if self.jail is not None and self._child is child:
                    end_strays(child.proc.pid, keep=child.proc.pid)
            if not outcome.ok:
                self._discard()
                if self.warm and not self._closing and not self._start_aborted:
                    self.warm = ()  # as a start that failed with them (``_ensure_child``): the next goes without
            elif "pycache_prefix" in payload:
                child.pycache_prefix = payload["pycache_prefix"]
            return outcome

    def restart(self) -> None:
        """Kill the child now; the next call starts a fresh one (a job reported a device fault
        in its value, so the context is unusable although the job itself returned)."""
        with self._lock:
            self._discard()

    @property
    def starting(self) -> bool:
        """A child is being started (its imports at start can take many seconds: ``abort`` ends it)."""
        return self._starting is not None

    @property
    def busy(self) -> bool:
        """A call is running (in some thread)."""
        return self._lock.locked()

    def abort(self) -> None:
        """Kill the child now, from any thread, without waiting for the call it runs: that call
        returns a ``crash`` at once, the next call starts a fresh child (Ctrl-C while several
        workers are busy for one caller)."""
        child = self._child
        if child is not None:
            child.doomed = True  # before the kill: a call that sees it next starts a fresh child
            child.signal_group()
        starting = self._starting
        if starting is not None:  # a start under way ends now, as a failed start (the handshake's EOF)
            self._start_aborted = True
            starting.signal_group()

    def close(self) -> None:
        """Stop the child (asking first, killing after a moment); further calls raise. Several
        workers: ``close_workers`` stops them together."""
        close_workers([self])

    def _detach(self) -> _Child | None:
        """Closed from now on (calls raise); its child, if any, handed to the caller to stop.
        Once the call that runs, if any, returned (the lock); a start under way is not waited
        for (its imports can take many seconds): it is killed."""
        self._closing = True  # a start under way, or about to be, ends now (``_ensure_child``)
        starting = self._starting
        if starting is not None:
            starting.signal_group()
        with self._lock:
            self._closed = True
            child, self._child = self._child, None
        return child

    def __enter__(self) -> "Worker":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        child = getattr(self, "_child", None)
        if child is not None:
            child.kill()

    def _ensure_child(self) -> Outcome:
        if self._child is not None and self._child.doomed:
            self._discard()
        if self._child is not None:
            return Outcome(ok=True)
        self._start_aborted = False
        started = self._start_child()
        if not started.ok and self.warm and not self._closing and not self._start_aborted:
            # A warm import that exits, crashes or hangs the child must not cost the worker: the
            # start is tried once more without them (a job that imports such a module fails alone).
            self.warm = ()
            started = self._start_child()
        return started

    def _start_child(self) -> Outcome:
        begin = time.perf_counter()
        child = _Child(self.env, self.log_kb, jailed=self.jail is not None, cache=self.cache)
        self.starts += 1
        self._starting = child
        if self._closing:  # ``_detach`` ran meanwhile (it reads ``_starting`` after setting that)
            self._starting = None
            child.kill()
            return Outcome(ok=False, failure=Failure(CRASH, "not started: the worker is closed"))
        try:
            jail = None
            if self.jail is not None:
                jail = self.jail.with_scratch(child.cwd)
                if self.cache is not None:
                    jail = jail.with_scratch(self.cache)
            child.reads = jail.read if jail is not None else None
            failure = child.handshake(self.preload, self.start_timeout_s, jail, self.warm)
        except BaseException:
            child.kill()
            raise
        finally:
            self._starting = None
        if failure is not None:
            child.kill()
            return Outcome(ok=False, failure=failure, seconds=time.perf_counter() - begin)
        self._child = child
        return Outcome(ok=True, seconds=time.perf_counter() - begin)

    def _call(self, child: "_Child", message: bytes, limit: float | None, limits: Limits) -> Outcome:
        child.clear_log()
        meter = Meter(child.proc.pid, limits) if limits else None  # its CPU time before the job
        begin = time.perf_counter()
        try:
            child.inbox.send_bytes(message)
        except (BrokenPipeError, ConnectionError, OSError):
            return self._died(child, begin, "the worker died before the job was sent")
        if meter is None:  # no limits: one wait, as fast as it gets
            if not child.outbox.poll(limit):
                return self._timed_out(child, begin, limit)
        else:
            over = self._watch(child, begin, limit, meter)
            if over is not None:
                return over
        try:
            reply = replies.load(child.outbox, "ok", "failed", length=3)
        except replies.BadReply as exc:
            return self._killed(child, begin, Failure(CRASH, f"bad reply from the worker: {exc}; worker killed"),
                                stacks=False)
        except (EOFError, ConnectionError, OSError):
            return self._died(child, begin, "the worker died during the job")
        if reply[0] == "ok":
            return Outcome(ok=True, value=reply[1], seconds=reply[2])
        failure, seconds = reply[1], reply[2]
        failure = dataclasses.replace(failure, detail=_join(failure.detail, child.log_tail()))
        if failure.restarts_worker:
            self._discard()
        return Outcome(ok=False, failure=failure, seconds=seconds)

    def _watch(self, child: "_Child", begin: float, limit: float | None, meter: Meter) -> Outcome | None:
        """Wait for the reply, checking the meter every ``POLL_S``; the failure if a limit came
        first, None once a reply (or the pipe's end) is there to read."""
        deadline = None if limit is None else begin + limit
        while True:
            wait = POLL_S if deadline is None else min(POLL_S, deadline - time.perf_counter())
            if wait <= 0:
                return self._timed_out(child, begin, limit)
            if child.outbox.poll(wait):
                return None
            failure = meter.exceeded()
            if failure is not None:
                # A spinning job's stacks say where it spun; a growing one is killed at once.
                return self._killed(child, begin, failure, stacks=failure.kind == TIMEOUT)

    def _timed_out(self, child: "_Child", begin: float, limit: float | None) -> Outcome:
        message = f"job ran past its {limit:g} s limit; worker killed"
        return self._killed(child, begin, Failure(TIMEOUT, message), stacks=True)

    def _killed(self, child: "_Child", begin: float, failure: Failure, *, stacks: bool) -> Outcome:
        if stacks:
            child.dump_stacks()
        seconds = time.perf_counter() - begin
        log = child.log_tail()  # before the kill removes the log
        self._discard()
        return Outcome(ok=False, failure=dataclasses.replace(failure, detail=log), seconds=seconds)

    def _died(self, child: "_Child", begin: float, what: str) -> Outcome:
        code = child.wait_exit()
        seconds = time.perf_counter() - begin
        log = child.log_tail()
        self._discard()
        message = shorten(f"{what}: {describe_exit(code)}")
        return Outcome(ok=False, failure=Failure(CRASH, message, log), seconds=seconds)

    def _discard(self) -> None:
        if self._child is not None:
            self._child.kill()
            self._child = None


def _cancelled() -> Outcome:
    return Outcome(ok=False, failure=Failure(CRASH, "not run: the caller cancelled it"))


class SharedCache:
    """A Triton cache folder that several jailed workers share (``Worker(cache=)``): one
    evaluator's timing and verify workers, so that what one compiles (a kernel's binary, its
    launcher ``.so``, the driver's ``cuda_utils``) the others load rather than build again: the
    ranking's builds in the verify workers are what the timing worker times, and a candidate
    verified in one worker is timed in another. Made by the parent, empty, under the temporary
    folder, named with its process id; removed by ``remove`` (the evaluator's close) or when this
    process exits, and one left by a process that was killed is removed by the next one made
    (``process_folder``).

    Its workers are one trust domain: a job that escaped the allowlist in one of them could write
    a binary another loads, but it could already forge its own worker's verdicts, which is all
    that binary could do. No other process loads from it: not the user's program, not another
    run, not another lane (each ``Evaluator`` has its own). The user's Triton cache is never
    written by a jailed worker."""

    def __init__(self) -> None:
        self.path = process_folder(CACHE_PREFIX)
        _CACHES.add(self)

    def remove(self) -> None:
        shutil.rmtree(self.path, ignore_errors=True)
        _CACHES.discard(self)


def process_folder(prefix: str, parent: str | Path | None = None) -> Path:
    """A new temporary folder named ``prefix`` + this process's id + ``-`` + random, in ``parent``
    (default the temporary folder), once the folders of that prefix left by this user's processes
    that no longer run are removed: a process killed before it could remove its own (a Ray actor,
    an out-of-memory kill) leaves it to the next one."""
    root = Path(parent or tempfile.gettempdir())
    try:
        entries = list(root.glob(f"{prefix}*-*"))
    except OSError:
        entries = []
    for entry in entries:
        pid = entry.name[len(prefix):].split("-", 1)[0]
        try:
            mine = entry.is_dir() and not entry.is_symlink() and entry.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and pid.isdigit() and not pid_alive(int(pid)):
            shutil.rmtree(entry, ignore_errors=True)
    return Path(tempfile.mkdtemp(prefix=f"{prefix}{os.getpid()}-", dir=root))


def pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


def close_workers(workers: Iterable[Worker]) -> None:
    """Close ``workers`` together: every child is asked to stop, then all are waited for at once
    (``_STOP_WAIT_S`` in all), and those still running are killed together and waited for once
    more. Closing N workers so takes one stop window, not N: one after another, a child that
    holds CUDA took ~0.5 s to exit, ~8 s for a lane's 17 workers at the end of every run (4 x H100,
    benchmarks/results/lanes: 14/23/38 s from optimize.json's end to the process's with 1/2/4
    lanes). Each worker is taken as ``close`` takes it: once the call it runs, if any, returned.
    Every guarantee of ``close`` holds for each: closing twice is safe, calls raise after. What
    is not a ``Worker`` (a test's stand-in) is closed by its own ``close``."""
    children = []
    for worker in workers:
        if isinstance(worker, Worker):
            children.append(worker._detach())
        else:
            worker.close()
    _end([child for child in children if child is not None], ask=True)


def run_isolated(
    target: str,
    payload: Any = None,
    timeout_s: float | None = DEFAULT_TIMEOUT_S,
    env: Mapping[str, str | None] | None = None,
) -> Outcome:
    """One job in a fresh child (pays the start cost each time; prefer a ``Worker`` for many)."""
    with Worker(timeout_s=timeout_s, env=env) as worker:
        return worker.call(target, payload)


def describe_exit(code: int | None) -> str:
    """``killed by SIGSEGV`` / ``exit code 3`` / ``still running`` for a Popen return code."""
    if code is None:
        return "still running"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


class _Child:
    """One child process: its pipes, its log file, and how to end it."""

    def __init__(self, env: Mapping[str, str | None], log_kb: int, *, jailed: bool = False,
                 cache: str | None = None) -> None:
        self.log_bytes = log_kb * 1024
        fd, name = tempfile.mkstemp(prefix=LOG_PREFIX, suffix=".log")
        os.close(fd)
        self.log_path = Path(name)
        self.cwd = Path(tempfile.mkdtemp(prefix=SCRATCH_PREFIX))  # the job's, thrown away
        base = None
        if jailed:  # an allowlisted environment; its temporary files and caches in the one folder it may write
            base = config.jail_environment()
            env = {**env, **_scratch_env(self.cwd, cache)}
        env = _child_env(env, base)
        # the bytecode folder it was started with, and what its jail lets it read (None: unjailed)
        self.pycache_prefix = env.get(config.ENV_PYCACHE_PREFIX)
        self.reads: tuple[str, ...] | None = None
        gpu.announce()  # "no GPU found: running under Triton's interpreter", where a command set it
        # O_APPEND: the child writes at the end even after we truncate the file between jobs.
        self.log = open(self.log_path, "ab")
        to_child_r, to_child_w = os.pipe()
        from_child_r, from_child_w = os.pipe()
        try:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", _CHILD_CODE, str(to_child_r), str(from_child_w), str(os.getpid()),
                 str(self.log_path)],
                env=env,
                cwd=self.cwd,
                stdin=subprocess.DEVNULL,
                stdout=self.log,
                stderr=subprocess.STDOUT,
                pass_fds=(to_child_r, from_child_w),
                start_new_session=True,  # own process group: killpg reaches the job's children
            )
        except BaseException:
            for fd in (to_child_w, from_child_r):
                os.close(fd)
            self.log.close()
            self.log_path.unlink(missing_ok=True)
            shutil.rmtree(self.cwd, ignore_errors=True)
            raise
        finally:
            os.close(to_child_r)
            os.close(from_child_w)
        self.inbox = Connection(to_child_w, readable=False)
        self.outbox = Connection(from_child_r, writable=False)
        self._ended = False
        self.doomed = False  # aborted: killed or about to be, never to be given another job
        _LIVE.add(self)

    def handshake(self, preload: tuple[str, ...], timeout_s: float, jail: Policy | None = None,
                  warm: tuple[str, ...] = ()) -> Failure | None:
        """Send the settings and wait for "ready"; a Failure if the child never got there."""
        try:
            self.inbox.send(("init", {"sys_path": _absolute_path(sys.path), "preload": list(preload),
                                      "warm": list(warm), "jail": jail}))
            if not self.outbox.poll(timeout_s):
                self.dump_stacks()
                return Failure(TIMEOUT, f"worker did not start within {timeout_s:g} s", self.log_tail())
            reply = replies.load(self.outbox, "ready", "failed", length=2)
        except replies.BadReply as exc:
            return Failure(CRASH, f"bad reply from the worker: {exc}", self.log_tail())
        except (EOFError, ConnectionError, OSError):
            code = self.wait_exit()
            return Failure(CRASH, f"worker died while starting: {describe_exit(code)}", self.log_tail())
        if reply[0] == "ready":
            return None
        failure: Failure = reply[1]
        return dataclasses.replace(failure, detail=_join(failure.detail, self.log_tail()))

    def can_read(self, folder: str) -> bool:
        """Whether its jail lets it read ``folder`` (a folder it was granted, or inside one)."""
        return self.reads is None or reads(self.reads, folder)

    def clear_log(self) -> None:
        os.ftruncate(self.log.fileno(), 0)

    def log_tail(self) -> str:
        try:
            with open(self.log_path, "rb") as f:
                size = f.seek(0, os.SEEK_END)
                f.seek(max(0, size - self.log_bytes))
                return f.read().decode("utf-8", errors="replace")
        except OSError:
            return ""

    def dump_stacks(self) -> None:
        """Ask faulthandler in the child for every thread's stack (lands in the log)."""
        try:
            os.kill(self.proc.pid, DUMP_SIGNAL)
        except OSError:
            return
        time.sleep(_DUMP_WAIT_S)

    def wait_exit(self, timeout_s: float = _STOP_WAIT_S) -> int | None:
        try:
            return self.proc.wait(timeout_s)
        except subprocess.TimeoutExpired:
            return None

    def ask_stop(self) -> None:
        """Send "stop" (the child exits when it reads it); no wait (``_end`` waits)."""
        try:
            self.inbox.send(("stop",))
        except (OSError, ConnectionError):
            pass

    def signal_group(self) -> None:
        """SIGKILL the child's process group and nothing else: a thread waiting on its pipe sees
        the end of file and cleans up (closing the pipe under that thread would not be safe)."""
        if self.proc.returncode is not None:  # reaped: its process id may belong to another now
            return
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def kill(self) -> None:
        """Kill the child's process group, reap the child, remove the log; safe to repeat (``_end``)."""
        _end([self], ask=False)

    def release(self) -> None:
        """What the parent holds of an ended child: its pipes, its log, its folder."""
        for conn in (self.inbox, self.outbox):
            conn.close()
        self.log.close()
        self.log_path.unlink(missing_ok=True)
        shutil.rmtree(self.cwd, ignore_errors=True)
        _LIVE.discard(self)


def _child_env(overrides: Mapping[str, str | None], base: Mapping[str, str] | None = None) -> dict[str, str]:
    """``overrides`` over ``base`` (default: this process's environment). PYTHONUNBUFFERED: a
    print just before a segfault still reaches the log. The secrets go last, so that no override
    can put them back."""
    env = config.environment({config.ENV_UNBUFFERED: "1", **overrides, **dict.fromkeys(config.SECRET_ENV)},
                             environ=base)
    for key in _PATH_ENV:
        if env.get(key):
            env[key] = os.path.abspath(os.path.expanduser(env[key]))
    for key in _PATH_LIST_ENV:
        if env.get(key):
            # an empty entry means the current directory, here as in the parent
            env[key] = os.pathsep.join(os.path.abspath(p) for p in env[key].split(os.pathsep))
    return env


def _scratch_env(scratch: Path, cache: str | None = None) -> dict[str, str]:
    """A jailed child's home, temporary folder and caches, in its scratch folder (its Triton cache
    in ``cache`` when given, ``SharedCache``): the user's Triton cache holds launcher ``.so``
    files that later processes load, and a jailed job must not write there (nor can it: the
    jail lets it write nowhere else)."""
    return {config.ENV_TMPDIR: str(scratch), config.ENV_USER_HOME: str(scratch),
            config.ENV_TRITON_CACHE: cache or str(scratch / "triton-cache"),
            config.ENV_INDUCTOR_CACHE: str(scratch / "inductor-cache"),
            # Inductor's compile pool would outlive the call, and be killed after it: compile in the worker
            config.ENV_COMPILE_THREADS: "1"}


def _absolute_path(entries: list) -> list:
    """``sys.path`` with relative entries (``''`` is the current directory) made absolute: the child
    runs elsewhere."""
    return [os.path.abspath(p) if isinstance(p, str) else p for p in entries]


def _check_env(env: Mapping[str, str | None]) -> dict[str, str | None]:
    for key, value in env.items():
        if not isinstance(key, str) or not (value is None or isinstance(value, str)):
            raise TypeError(f"worker env entries must be str -> str or None, got {key!r}: {value!r}")
    return dict(env)


def _join(detail: str, log: str) -> str:
    if not log.strip():
        return detail
    return f"{detail}\n--- worker output (tail) ---\n{log}" if detail else log


def _end(children: list[_Child], *, ask: bool) -> None:
    """End ``children`` (each once: safe to repeat): asked to stop and waited for when ``ask``,
    then those still running killed (their process groups) and reaped, then released. Each step
    is taken for all of them before the next, and each wait is one deadline shared by all, so
    ending N children costs what ending the slowest does (``close_workers``)."""
    children = [child for child in children if not child._ended]
    if ask:  # interrupted here (Ctrl-C), they are not ended yet: ``_kill_all`` still kills them
        for child in children:
            child.ask_stop()
        _wait_all(children)
    for child in children:
        child._ended = True
        child.signal_group()
    _wait_all(children)
    for child in children:
        child.release()


def _wait_all(children: list[_Child], timeout_s: float = _STOP_WAIT_S) -> None:
    """Each child waited for until one deadline, ``timeout_s`` from now, for all."""
    deadline = time.monotonic() + timeout_s
    for child in children:
        child.wait_exit(max(0.0, deadline - time.monotonic()))


_LIVE: set[_Child] = set()
_CACHES: set[SharedCache] = set()


@atexit.register
def _kill_all() -> None:
    """No child outlives this process, whatever the caller forgot to close (killed together), and
    no shared cache is left behind."""
    _end(list(_LIVE), ask=False)
    for cache in list(_CACHES):
        cache.remove()
