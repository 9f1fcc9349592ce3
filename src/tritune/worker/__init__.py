"""Isolation: every candidate builds and runs in a worker process with a time limit.

``Worker(timeout_s, env)`` keeps one child process warm and runs jobs (importable functions of
one picklable payload) in it; ``call`` returns an ``Outcome`` with the value or a classified
``Failure``. A compile error or an exception leaves the child in use; a CUDA fault, a timeout or
a crash ends it and the next call starts a fresh one. ``run_isolated`` is the one-shot form.

- ``failures``  the failure kinds and how an exception maps to one
- ``pool``      the parent side: ``Worker``, ``Outcome``, ``run_isolated``, ``close_workers``,
                ``SharedCache`` (one Triton cache for an evaluator's jailed workers)
- ``child``     the child's loop (stdlib only, so the job's environment decides what loads)
- ``jail``      the operating system's jail of a worker that runs code tritune did not write
                (``landlock``, ``seccomp``: the ctypes calls under it)
"""

from tritune.model.failures import COMPILE_ERROR, CRASH, ERROR, KINDS, RUNTIME_FAULT, TIMEOUT, WRONG_RESULT
from tritune.worker.failures import Failure, classify
from tritune.worker.pool import Outcome, SharedCache, Worker, close_workers, describe_exit, run_isolated

__all__ = [
    "COMPILE_ERROR",
    "CRASH",
    "ERROR",
    "KINDS",
    "RUNTIME_FAULT",
    "TIMEOUT",
    "WRONG_RESULT",
    "Failure",
    "Outcome",
    "SharedCache",
    "Worker",
    "classify",
    "close_workers",
    "describe_exit",
    "run_isolated",
]
