"""Per-call CPU-time and memory limits on a worker's child, enforced by the parent.

A candidate whose code came from a model may spin or allocate without end; the wall-clock
timeout alone lets it hold a core or the machine's memory until then. While a call with limits
runs, the parent polls the child every ``POLL_S``:

- CPU time: ``utime + stime`` of ``/proc/PID/stat`` (the child process itself, all its threads),
  counted from the call's start, so the preload and earlier jobs do not count;
- memory: ``VmRSS`` of ``/proc/PID/status``, the child's whole resident set (the modules it
  preloaded included: torch and Triton are about 0.5 GiB of it).

Past a limit the parent kills the child's process group, as after a timeout. Why poll rather
than ``setrlimit`` in the child: ``RLIMIT_CPU`` counts the child's whole life, not one call, and
``RLIMIT_AS`` caps address space, which CUDA reserves by the gigabyte without using it.

What polling cannot see: a job can overshoot by what it burns or allocates within one poll
(50 ms), the CPU time and memory of the job's own subprocesses (they die with the group, but are
not counted), and GPU memory. Without ``/proc`` (not Linux) nothing can be measured: calls run
with the wall-clock limit only, and the first such call says so on stderr.
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

from tritune.model.failures import CRASH, TIMEOUT
from tritune.worker.failures import Failure

POLL_S = 0.05
PROC = Path("/proc")
_TICKS_PER_S = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
_warned = False


@dataclasses.dataclass(frozen=True)
class Limits:
    cpu_s: float | None = None
    memory_mb: float | None = None

    def __post_init__(self) -> None:
        for name in ("cpu_s", "memory_mb"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be positive, got {value!r}")

    def __bool__(self) -> bool:
        return self.cpu_s is not None or self.memory_mb is not None


def enforceable() -> bool:
    """Whether this system lets the parent read a child's CPU time and memory; warns once if not."""
    global _warned
    if (PROC / "self" / "stat").exists():
        return True
    if not _warned:
        _warned = True
        print("tritune: worker CPU-time and memory limits need /proc (Linux); only the wall-clock "
              "limit applies here", file=sys.stderr)
    return False


class Meter:
    """The limits of one call on the child ``pid``; ``exceeded()`` after each poll."""

    def __init__(self, pid: int, limits: Limits) -> None:
        self.pid, self.limits = pid, limits
        self.cpu_start = cpu_seconds(pid) or 0.0

    def exceeded(self) -> Failure | None:
        """The failure to report if a limit is passed now, else None (also when the child is gone:
        the call sees its end on the pipe)."""
        if self.limits.cpu_s is not None:
            used = cpu_seconds(self.pid)
            if used is not None and used - self.cpu_start > self.limits.cpu_s:
                return Failure(TIMEOUT, f"CPU-time limit of {self.limits.cpu_s:g} s exceeded")
        if self.limits.memory_mb is not None:
            resident = resident_mib(self.pid)
            if resident is not None and resident > self.limits.memory_mb:
                return Failure(CRASH, f"memory limit of {self.limits.memory_mb:g} MiB exceeded "
                                      f"(resident {resident:.1f} MiB)")
        return None


def cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of process ``pid`` so far; None if it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    # The command name (field 2) is in parentheses and may hold spaces: count from after it.
    fields = text.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / _TICKS_PER_S  # fields 14 and 15: utime, stime


def resident_mib(pid: int) -> float | None:
    """Resident memory of process ``pid`` in MiB; None if it is gone (a zombie has no VmRSS)."""
    try:
        text = (PROC / str(pid) / "status").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024  # in kB
    return None
