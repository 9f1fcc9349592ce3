"""The tasks of ``benchmarks/e2e.py`` and their bookkeeping: which ran, which are done, which run
next within a call's time limit. No GPU, no subprocess here: the runner is given (tests give a fake).
"""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import time
from typing import Callable, Iterable

COMPILE_MODES = ("default", "coordinate_descent", "max_autotune")
TUNED = {"default": "tritune", "coordinate_descent": "coordinate_descent+tritune"}
RESERVE_S = 20  # kept free at the end of a call: results, logs, the state archive
MAX_FAILURES = 2  # a task cut at a call's limit is not a failure: it needs more time, which it asks for next


@dataclasses.dataclass(frozen=True)
class Task:
    stage: str  # modes | optimize | measure
    mode: str   # a compile mode

    @property
    def name(self) -> str:
        return f"{self.stage}:{self.mode}"

    @property
    def needs(self) -> "Task | None":
        return Task("optimize", self.mode) if self.stage == "measure" else None


ORDER = (Task("modes", "default"), Task("modes", "coordinate_descent"), Task("optimize", "default"),
         Task("measure", "default"), Task("optimize", "coordinate_descent"), Task("measure", "coordinate_descent"),
         Task("modes", "max_autotune"))
STAGES = {"all": ORDER, "report": (), **{stage: tuple(t for t in ORDER if t.stage == stage)
                                         for stage in ("modes", "optimize", "measure")}}


@dataclasses.dataclass
class Outcome:
    status: str  # done | skipped | failed | cut (at the call's limit) | partial (optimize, to be resumed)
    seconds: float
    note: str = ""
    fields: dict = dataclasses.field(default_factory=dict)  # merged into the task's entry


# ---------------------------------------------------------------------------------- bookkeeping

class Progress:
    """``STATE/MODEL/progress.json``: every task's status, attempts, seconds, result; every call."""

    def __init__(self, path: pathlib.Path, model: str):
        self.path = path
        self.data = json.loads(path.read_text()) if path.exists() else {"model": model, "calls": [], "tasks": {}}

    def entry(self, task: Task) -> dict:
        return self.data["tasks"].setdefault(task.name, {"status": "pending", "failures": 0, "calls": 0,
                                                         "seconds": 0.0, "note": ""})

    def save(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.data, indent=1, default=str))
        os.replace(tmp, self.path)


def is_final(entry: dict) -> bool:
    return entry["status"] in ("done", "skipped") or entry["failures"] >= MAX_FAILURES


def run_tasks(tasks: Iterable[Task], progress: Progress, runner, *, limit_s: float,
              clock: Callable[[], float] = time.monotonic, log: Callable[[str], None] = print) -> list[str]:
    """Run what is not final yet, in order, each only if it fits before ``limit_s``; returns the
    names run. A task that does not fit is passed over (a later, shorter one may fit)."""
    start, ran = clock(), []
    for task in tasks:
        entry = progress.entry(task)
        if is_final(entry):
            continue
        if task.needs is not None:
            needed = progress.entry(task.needs)
            if needed["status"] != "done":
                if is_final(needed):
                    entry.update(status="skipped", note=f"{task.needs.name} {needed['status']}: nothing to measure")
                else:
                    entry["note"] = f"waits for {task.needs.name}"
                progress.save()
                continue
        left = limit_s - (clock() - start) - RESERVE_S
        need = runner.need(task, entry)
        if left < need:
            entry["note"] = f"not started in this call: needs ~{need:.0f} s, {max(left, 0):.0f} s were left"
            log(f"{task.name}: {entry['note']}")
            progress.save()
            continue
        log(f"{task.name}: starting ({left:.0f} s left in this call)")
        outcome = runner.run(task, entry, min(runner.cap(task), left))
        entry["calls"] += 1
        entry["seconds"] += outcome.seconds
        entry["failures"] += outcome.status == "failed"
        entry.update(status=outcome.status, note=outcome.note, **outcome.fields)
        progress.save()
        ran.append(task.name)
        log(f"{task.name}: {outcome.status} in {outcome.seconds:.0f} s {outcome.note}".rstrip())
    return ran
