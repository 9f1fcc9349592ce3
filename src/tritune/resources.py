"""What this machine can give a command's workers: usable cores and memory, and ``--jobs``
bounded by them (``bound_jobs``).

A verify worker compiles (CPU-bound) and holds torch, Triton and, on a GPU, a CUDA context: more
workers than cores only queue on the cores, and more than the memory holds swap or are killed.
``tritune optimize --jobs 500`` started about 224 workers at once, used 17 GB and printed nothing
for minutes; ``--jobs 40`` ran 3x slower than the default. A round also never builds more than
``--max-candidates`` candidates, so workers past that would sit idle. Standard library only.
"""

from __future__ import annotations

import os
from typing import NamedTuple

# One worker's memory, rounded up: a process that imported torch and Triton and compiled and ran
# four configurations of a small kernel held 699 MB on an H200 host (torch 2.11+cu130, measured
# 2026-11-29); 276 MB on the CPU under the interpreter. A larger kernel's compile takes more.
WORKER_BYTES = 1 << 30
MEMINFO = "/proc/meminfo"


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity, e.g. a container's cpuset)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def available_memory(meminfo: str = MEMINFO) -> int | None:
    """Bytes of memory available for new processes without swapping (``MemAvailable``), else the
    free pages (``sysconf``); None where neither says."""
    try:
        with open(meminfo) as handle:
            for line in handle:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (AttributeError, ValueError, OSError):
        return None


class Jobs(NamedTuple):
    jobs: int
    lowered: str | None  # why ``jobs`` is below what was asked (one phrase), or None


def bound_jobs(asked: int, *, lanes: int = 1, round_most: int | None = None, cores: int | None = None,
               memory: int | None = -1) -> Jobs:
    """``asked`` verify workers per lane, at most: the usable cores shared by ``lanes``; as many
    as the available memory holds at ``WORKER_BYTES`` each, with each lane's timing worker; and
    ``round_most``, the candidates a round can build. At least 1. ``cores``, ``memory``: tests'
    stand-ins for this machine's (``memory`` None: unknown, not bounded)."""
    lanes = max(1, lanes)
    cores = usable_cores() if cores is None else cores
    memory = available_memory() if memory == -1 else memory
    shared = f" shared by {lanes} lanes" if lanes > 1 else ""
    bounds = [(max(1, cores // lanes), f"{cores} usable CPU core(s){shared}")]
    if memory is not None:
        workers = memory // WORKER_BYTES // lanes - 1  # less each lane's timing worker
        bounds.append((max(1, workers), f"{memory / 2**30:.1f} GiB of memory available{shared}, "
                                        f"about {WORKER_BYTES / 2**30:.0f} GiB a worker"))
    if round_most is not None:
        bounds.append((max(1, round_most), f"a round builds at most {round_most} candidate(s) (--max-candidates)"))
    most, why = min(bounds, key=lambda bound: bound[0])
    return Jobs(most, why) if asked > most else Jobs(asked, None)
