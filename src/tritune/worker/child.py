"""The worker's child process: receive jobs, run them one at a time, send back what happened.

Started by ``tritune.worker.pool`` as ``python -c "...main()" READ_FD WRITE_FD PARENT_PID LOG`` with
the job environment already in place (no secrets in it), stdout/stderr going to the worker's log
file (LOG), its own process group, and a fresh temporary directory as its working directory. The
parent removes both when the child ends; a child whose parent died (killed: a Ray lane's actor,
an optimize run) removes them itself as it exits. Protocol
(pickled tuples over ``multiprocessing.connection``)::

    parent -> child   ("init", {"sys_path": [...], "preload": [...], "warm": [...], "jail": Policy | None})
    child  -> parent  ("ready", pid)  |  ("failed", Failure)
    parent -> child   ("call", "package.module:function", payload)  |  ("stop",)
    child  -> parent  ("ok", value, seconds)  |  ("failed", Failure, seconds)

A jailed child (``jail``) enters its jail as soon as it has its settings: before its first
thread (Landlock binds the thread that restricts itself and what it starts), before the preload
imports and any job. A jail that cannot be entered fails the start. ``warm`` names modules
imported after ``preload`` whose failure does not fail the start (one line in the log): the
libraries a capture's kernel files import, whose import a job would pay otherwise.

This module imports only the standard library, ``failures`` and ``jail`` (ctypes), so nothing
heavy is loaded before the job asks for it.
"""

from __future__ import annotations

import atexit
import contextlib
import faulthandler
import importlib
import os
import shutil
import signal
import sys
import threading
import time
from multiprocessing.connection import Connection
from typing import Any, Callable

from tritune.model.failures import ERROR
from tritune.worker.failures import Failure, from_exception, shorten, traceback_tail

# The parent sends this signal before killing a job that ran out of time: faulthandler then
# prints where every thread was, which becomes the timeout's detail.
DUMP_SIGNAL = signal.SIGUSR1
_ORPHAN_POLL_S = 0.5
SCRATCH_PREFIX = "tritune-worker-cwd-"  # the child's working directory, made by the parent
LOG_PREFIX = "tritune-worker-"  # the child's log file, made by the parent


def main() -> None:
    read_fd, write_fd, parent_pid = (int(arg) for arg in sys.argv[1:4])
    leftovers = (os.getcwd(), *sys.argv[4:5])  # the parent's to remove, unless it is gone
    for fd in (read_fd, write_fd):
        os.set_inheritable(fd, False)  # a job's own subprocesses must not hold our pipes open
    faulthandler.enable(all_threads=True)  # a segfault's Python stack goes to the log
    faulthandler.register(DUMP_SIGNAL, all_threads=True)
    inbox, outbox = Connection(read_fd, writable=False), Connection(write_fd, readable=False)
    if not _init(inbox, outbox, lambda: _exit_when_orphaned(parent_pid, leftovers)):
        return
    while True:
        try:
            message = inbox.recv()
        except (EOFError, OSError):
            _remove(leftovers)
            return  # the parent is gone
        if message[0] == "stop":
            _stop()
        _, target, payload = message
        _reply(outbox, *_run(target, payload))


def _stop() -> None:
    """Exit now: the exit functions the jobs registered run (``atexit``: a replay's variant folder
    removed, a recorder's files written, ``weakref.finalize``), what they printed is flushed to the
    log, then no interpreter teardown (a worker that imported torch spends most of a second in it,
    its exit functions milliseconds, and the parent kills the worker's process group right after)."""
    try:
        atexit._run_exitfuncs()  # each one's exception is printed and the next runs, as at a normal exit
    finally:
        _flush()
        os._exit(0)


def _init(inbox: Connection, outbox: Connection, start_threads: Callable[[], None]) -> bool:
    _, settings = inbox.recv()
    if settings.get("jail") is not None:
        from tritune.worker import jail

        try:
            jail.enter(settings["jail"])
        except jail.JailError as exc:
            outbox.send(("failed", Failure(ERROR, shorten(str(exc)))))
            return False
    start_threads()
    # The parent's path first (made absolute), so jobs import from where the parent does (tests/,
    # a checkout); not our own '' (``python -c``'s): it is the scratch directory a job writes in.
    own = [p for p in sys.path if p not in settings["sys_path"] and p != ""]
    sys.path[:] = list(settings["sys_path"]) + own
    try:
        _import(settings["preload"], settings.get("warm", ()))
    except BaseException as exc:  # noqa: BLE001 - reported to the parent, which gives up
        failure = Failure(ERROR, shorten(f"preload failed: {from_exception(exc).message}"),
                          traceback_tail(exc))
        outbox.send(("failed", failure))
        return False
    outbox.send(("ready", os.getpid()))
    return True


def _import(preload: Any, warm: Any) -> None:
    """``preload`` imported (a failure raises), then ``warm`` (a failure is one line in the log)."""
    for name in preload:
        importlib.import_module(name)
    for name in warm:
        try:
            importlib.import_module(name)
        except BaseException as exc:  # noqa: BLE001 - SystemExit too: the job that needs it reports its own failure
            print(f"tritune worker: warm import of {name} failed: {from_exception(exc).message}", flush=True)


def load(payload: dict) -> None:
    """The job ``Worker.extend`` sends a live child (``LOAD_JOB``): what a start with the new
    settings would have imported, imported now, as ``_init`` does (``preload``, then ``warm``);
    first, where ``payload`` says so, the folder Python reads and writes bytecode in
    (``pycache_prefix``: None for the packages' own ``__pycache__``), which the child's
    environment set at its start."""
    if "pycache_prefix" in payload:
        sys.pycache_prefix = payload["pycache_prefix"]
    _import(payload.get("preload", ()), payload.get("warm", ()))


def _run(target: str, payload: Any) -> tuple:
    start = time.perf_counter()
    try:
        fn = resolve(target)
    except Exception as exc:  # noqa: BLE001
        failure = Failure(ERROR, shorten(f"cannot load job {target}: {from_exception(exc).message}"),
                          traceback_tail(exc))
        return ("failed", failure, time.perf_counter() - start)
    try:
        value = plain(fn(payload))
    except BaseException as exc:  # noqa: BLE001 - SystemExit and the like are job failures too
        return ("failed", from_exception(exc), time.perf_counter() - start)
    finally:
        _flush()
    return ("ok", value, time.perf_counter() - start)


_PLAIN = (bool, int, float, complex, str, bytes, bytearray, list, tuple, dict, set, frozenset)


def plain(value: Any) -> Any:
    """``value`` with every instance of a subclass of a builtin value type made that type
    (``torch.__version__`` a str, ``torch.Size`` and named tuples tuples, ``OrderedDict`` a
    dict) and numpy's scalars plain ones, through containers: the parent reads replies that name
    no class (``replies``). Anything else is left as it is, for the parent to refuse by name."""
    kind = type(value)
    if value is None or kind in (bool, int, float, complex, str, bytes):
        return value
    if kind.__module__ == "numpy" and getattr(value, "shape", None) == () and hasattr(value, "item"):
        return plain(value.item())  # a numpy scalar
    if isinstance(value, (list, tuple)):
        items = [plain(item) for item in value]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        return {plain(key): plain(item) for key, item in value.items()}
    if isinstance(value, (set, frozenset)):
        return (frozenset if isinstance(value, frozenset) else set)(plain(item) for item in value)
    for base in _PLAIN:
        if isinstance(value, base):
            return base(value)
    return value


def resolve(target: str) -> Callable[[Any], Any]:
    """The function named ``package.module:function`` (a dotted attribute path after the colon)."""
    module_name, sep, attr = target.partition(":")
    if not sep or not module_name or not attr:
        raise ValueError(f"job {target!r} is not of the form 'package.module:function'")
    obj: Any = importlib.import_module(module_name)
    for part in attr.split("."):
        obj = getattr(obj, part)
    if not callable(obj):
        raise TypeError(f"job {target!r} is not callable")
    return obj


def _reply(outbox: Connection, *message: Any) -> None:
    try:
        outbox.send(message)
    except Exception as exc:  # noqa: BLE001 - pickling fails before anything is written
        if message[0] != "ok":
            raise
        failure = Failure(ERROR, shorten(f"job result cannot be sent: {from_exception(exc).message}"),
                          traceback_tail(exc))
        outbox.send(("failed", failure, message[2]))


def _remove(leftovers: tuple[str, ...]) -> None:
    """The working directory and the log the parent made for this child (by their names only:
    nothing else is removed), once the parent is gone."""
    scratch, *log = leftovers
    if os.path.basename(scratch).startswith(SCRATCH_PREFIX):
        shutil.rmtree(scratch, ignore_errors=True)
    for path in log:
        if os.path.basename(path).startswith(LOG_PREFIX):
            with contextlib.suppress(OSError):
                os.unlink(path)


def _flush() -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:  # noqa: BLE001 - a job may have closed or replaced the stream
            pass


def _exit_when_orphaned(parent_pid: int, leftovers: tuple[str, ...]) -> None:
    """Exit when the parent dies mid-job (a hung job never reads the closed pipe), removing what
    the parent would have (``_remove``)."""

    def watch() -> None:
        while os.getppid() == parent_pid:
            time.sleep(_ORPHAN_POLL_S)
        _remove(leftovers)
        os._exit(1)

    threading.Thread(target=watch, name="tritune-orphan-watch", daemon=True).start()
