"""One GPU shared between processes: many may verify on it at once, one times it alone.

A cross-process readers-writer lock on two files (``fcntl.flock``), one pair per GPU:

- ``shared()``     around GPU work whose speed nobody measures (verification runs, inputs made):
                   any number of holders at once.
- ``exclusive()``  around timing: no other process launches on the GPU until it is released.

Writers go first. With ``flock`` alone a writer waiting for ``LOCK_EX`` can starve while readers
keep overlapping (Linux grants a new ``LOCK_SH`` whatever waits), and N verifying workers overlap
most of the time. So a second file, the gate, is taken ``LOCK_EX`` by a writer before it waits for
the main lock and passed through (``LOCK_SH``, released at once) by a reader before it takes its
shared lock: a waiting writer stops new readers at the gate, the readers inside finish, the writer
runs. No deadlock: a reader never waits on the gate while holding the main lock, and a reader
holds the gate only while the main lock is free of writers (a writer holds the gate throughout).

The kernel drops a ``flock`` when its file closes, so a holder that crashes or is killed (a
faulting candidate, a timeout's SIGKILL) never leaves the GPU locked. ``flock`` conflicts between
open files, not processes, so two ``GpuLock`` objects in one process exclude each other too (tests
use that). One object is not re-entrant: it holds one mode at a time.

Standard library only: the worker's child imports it before anything heavy.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time
from pathlib import Path
from typing import ContextManager, Iterator


class GpuLock:
    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.gate_path = self.path.with_name(self.path.name + ".gate")
        self.waited_s = 0.0  # total time spent waiting to acquire, for the caller's accounting
        self._main: int | None = None
        self._gate: int | None = None
        self._mode: str | None = None

    @property
    def mode(self) -> str | None:
        """``"shared"``, ``"exclusive"`` or None (not held)."""
        return self._mode

    def acquire(self, exclusive: bool, *, blocking: bool = True) -> bool:
        """Take the lock; ``blocking=False``: return False at once instead of waiting."""
        if self._mode is not None:
            raise RuntimeError(f"{self.path}: already held ({self._mode}); GpuLock is not re-entrant")
        self._open()
        nb = 0 if blocking else fcntl.LOCK_NB
        begin = time.perf_counter()
        try:
            if exclusive:
                if not _lock(self._gate, fcntl.LOCK_EX | nb):
                    return False
                got = False
                try:
                    got = _lock(self._main, fcntl.LOCK_EX | nb)
                finally:
                    if not got:  # refused, or interrupted while waiting: open the gate again
                        fcntl.flock(self._gate, fcntl.LOCK_UN)
                if not got:
                    return False
            else:
                if not _lock(self._gate, fcntl.LOCK_SH | nb):
                    return False
                try:
                    if not _lock(self._main, fcntl.LOCK_SH | nb):
                        return False
                finally:
                    fcntl.flock(self._gate, fcntl.LOCK_UN)
        finally:
            self.waited_s += time.perf_counter() - begin
        self._mode = "exclusive" if exclusive else "shared"
        return True

    def release(self) -> None:
        if self._mode is None:
            return
        fcntl.flock(self._main, fcntl.LOCK_UN)
        if self._mode == "exclusive":
            fcntl.flock(self._gate, fcntl.LOCK_UN)
        self._mode = None

    def shared(self) -> ContextManager[None]:
        return self._held(False)

    def exclusive(self) -> ContextManager[None]:
        return self._held(True)

    @contextlib.contextmanager
    def _held(self, exclusive: bool) -> Iterator[None]:
        self.acquire(exclusive)
        try:
            yield
        finally:
            self.release()

    def close(self) -> None:
        self.release()
        for fd in (self._main, self._gate):
            if fd is not None:
                os.close(fd)
        self._main = self._gate = None

    def _open(self) -> None:
        if self._main is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # O_CLOEXEC: a job's own subprocesses (ncu) must not keep the lock alive after we die
            flags = os.O_RDWR | os.O_CREAT | os.O_CLOEXEC
            self._main = os.open(self.path, flags, 0o600)
            self._gate = os.open(self.gate_path, flags, 0o600)


def _lock(fd: int, operation: int) -> bool:
    try:
        fcntl.flock(fd, operation)
    except BlockingIOError:
        return False
    return True
