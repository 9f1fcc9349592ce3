"""Read an ``optimize.json`` as the loop's ``RunResults`` and view each kernel as ``KernelFacts``.

The file's contract and its checks belong to the loop (``tritune.model.results``): a missing,
null or mistyped field is normalized there, and a file that is not an optimize results file is a
one-line ``ReportError`` (the loop's ``ResultsError``). ``KernelFacts`` adds what the report
derives from a kernel's result: whether it counts as improved at the run's bar, the speedup
applied in the program, the time that then runs, the roofline from the floor where the record
has none.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Mapping

from tritune.model.results import CandidateLine
from tritune.model.results import KernelResult, ResultsError as ReportError, RunResults, mapping, number, text

__all__ = ["KernelFacts", "ReportError", "kernel_facts", "load_results", "mapping", "text"]


def load_results(results: RunResults | Mapping[str, Any] | str | Path) -> RunResults:
    """The results, checked: a ``RunResults`` as is, a dict through ``from_json``; a path may name
    the file or the directory holding ``optimize.json``."""
    if isinstance(results, RunResults):
        return results
    if isinstance(results, Mapping):
        return RunResults.from_json(dict(results))
    return RunResults.load(results)


# ---------------------------------------------------------------------------------- per kernel

@dataclasses.dataclass(frozen=True)
class KernelFacts:
    """One kernel record, normalized. ``improved``: accepted and speedup >= the threshold (the
    decision is applied); ``applied_speedup`` is its speedup then and 1.0 otherwise (the original
    kernel runs); ``after_ms`` is the time that then runs per launch."""

    id: str
    kernel: str
    kind: str
    category: str
    count: int
    ran: bool  # the baseline was timed, so the kernel was optimized
    failure: str | None  # why the baseline could not run
    message: str
    baseline_ms: float | None
    best_ms: float | None
    speedup: float | None
    accepted: bool
    improved: bool
    applied_speedup: float | None  # None when the kernel did not run
    after_ms: float | None
    floor_ms: float | None
    roofline_before: float | None
    roofline_after: float | None
    decision: str
    bottleneck: str
    finish: str
    finish_reason: str
    wall_s: float | None
    candidates: tuple[CandidateLine, ...]
    time_share: float | None = None  # this key's share of the program's kernel time
    won_by: tuple[str, ...] = ()  # the knobs the decision changed

    @property
    def label(self) -> str:
        return self.id or self.kernel or "?"

    @property
    def total_before_ms(self) -> float | None:
        return None if self.baseline_ms is None else self.baseline_ms * self.count

    @property
    def total_after_ms(self) -> float | None:
        return None if self.after_ms is None else self.after_ms * self.count


def kernel_facts(record: KernelResult | Mapping[str, Any], threshold: float) -> KernelFacts:
    k = record if isinstance(record, KernelResult) else KernelResult.from_json(record)
    speedup = k.speedup
    if k.accepted and speedup is None and k.baseline_ms is not None and k.best_ms is not None:
        speedup = k.baseline_ms / k.best_ms  # an accepted record without its confirmed ratio: the benchmark's
    ran = k.ran
    improved = ran and k.accepted and speedup is not None and speedup >= threshold
    applied = (speedup if improved else 1.0) if ran else None
    after = _after_ms(k.baseline_ms, k.best_ms, speedup) if improved else k.baseline_ms
    return KernelFacts(
        id=k.id, kernel=k.kernel, kind=k.kind, category=k.category, count=k.launches, ran=ran,
        failure=k.failure if k.failure else (None if ran else "no_baseline"), message=k.message,
        baseline_ms=k.baseline_ms, best_ms=k.best_ms, speedup=speedup, accepted=k.accepted, improved=improved,
        applied_speedup=applied, after_ms=after, floor_ms=k.floor_ms,
        roofline_before=_roofline(k.roofline_before, k.floor_ms, k.baseline_ms),
        roofline_after=_roofline(k.roofline_after, k.floor_ms, after),
        decision=k.decision or "", bottleneck=text(mapping(k.bottleneck).get("kind")),
        finish=k.finish or "", finish_reason=k.finish_reason, wall_s=k.wall_s,
        candidates=tuple(k.candidates), time_share=k.time_share, won_by=tuple(k.won_by),
    )


def _after_ms(baseline: float | None, best: float | None, speedup: float) -> float | None:
    """The measured best time; baseline / speedup when the record has none."""
    if best is not None:
        return best
    return None if baseline is None else baseline / speedup


def _roofline(value: Any, floor: float | None, time_ms: float | None) -> float | None:
    """The recorded fraction of copy bandwidth; floor / time when the record has none."""
    recorded = number(value)
    if recorded is not None:
        return recorded
    return floor / time_ms if floor is not None and time_ms is not None else None
