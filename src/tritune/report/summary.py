"""The report's numbers, as one JSON-able dict (``summarize``), in TritonForge's terms.

TritonForge (seed 002, §4.2 and Table 1) calls a kernel *successful* when its speedup is >= 1.05x
(here the run's ``settings.threshold``), gives the success rate over the kernels that ran, and the
average speedup over the successful ones only. Those two numbers hide the overall effect, so the
summary adds the geometric mean over every kernel that ran, a kernel not improved counting 1.0x
(its original runs), and the time sums: per launch, and weighted by how often each launch ran in
the captured program (``count``) -- the weighted sum is what the program spends.

Candidates are tallied two ways that do not overlap: ``failures``, those that broke (a worker
failure kind: compile_error, runtime_fault, timeout, crash, error, wrong_result), and
``rejected_reasons``, those that ran and verified but that the arbiter turned down, by its code
(below_threshold, inside_noise, unconfirmed, ...) or, without one, their message's first line.

The roofline sums use only kernels with a floor, and leave out a kernel whose baseline already
beats its floor (``floor_ms > baseline_ms``): its byte count was an over-estimate (a gather or a
slice reads part of a tensor), the same rule ``tritune bench`` applies.
"""

from __future__ import annotations

import collections
import math
import statistics
from pathlib import Path
from typing import Any, Iterable, Mapping

from tritune.model.failures import KINDS as FAILURE_KINDS
from tritune.model.results import CandidateLine, RunResults
from tritune.report.load import KernelFacts, kernel_facts, load_results, text

CATEGORY_ORDER = ("elementwise", "reduction", "scan", "matmul", "attention", "other")
KIND_ORDER = ("jit", "autotune", "heuristics", "inductor")
REASON_CHARS = 80  # a rejected candidate without a failure code is tallied by its message, cut here


def facts_of(results: RunResults | Mapping[str, Any]) -> list[KernelFacts]:
    results = load_results(results)
    return [kernel_facts(record, results.threshold) for record in results.kernels]


def summarize(results: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """Every figure the report shows (module docstring); ``results`` is the dict or its path."""
    results = load_results(results)
    facts = facts_of(results)
    ran = [k for k in facts if k.ran]
    improved = [k for k in ran if k.improved]
    walls = [k.wall_s for k in facts if k.wall_s is not None]
    return {
        "gpu": text(results.target.get("gpu")) or None,
        "meaningful": results.meaningful,
        "threshold": results.threshold,
        **group_stats(facts),
        "sum_before_ms": _sum(k.baseline_ms for k in ran),
        "sum_after_ms": _sum(k.after_ms for k in ran),
        "weighted_before_ms": _sum(k.total_before_ms for k in ran),
        "weighted_after_ms": _sum(k.total_after_ms for k in ran),
        "program_speedup": _ratio(_sum(k.total_before_ms for k in ran), _sum(k.total_after_ms for k in ran)),
        "roofline": roofline_sums(ran),
        "wall_s": {
            "total": sum(walls) if walls else None,
            "median": statistics.median(walls) if walls else None,
            "per_kernel": [{"id": k.label, "wall_s": k.wall_s}
                           for k in sorted(facts, key=lambda k: -(k.wall_s or 0.0))],
        },
        "improved_ids": [k.label for k in improved],
        "baseline_failures": tally(k.failure for k in facts if not k.ran),
        "candidates": tally(c.status or "unknown" for k in facts for c in k.candidates),
        "failures": tally(c.failure for k in facts for c in k.candidates if broke(c)),
        "rejected_reasons": tally(rejected_reason(c) for k in facts for c in k.candidates),
        "notes": candidate_notes(facts),
        "held_elsewhere": held_elsewhere(results),
        "program": program_figures(results),
        "lanes": [lane.to_json() for lane in results.lanes],
        "by_category": grouped(facts, lambda k: k.category, CATEGORY_ORDER),
        "by_kind": grouped(facts, lambda k: k.kind, KIND_ORDER),
    }


def candidate_notes(facts: list[KernelFacts]) -> list[str]:
    """One line per note of a candidate's verification (a large increase of peak device memory):
    reported so the user sees it, not rejections."""
    return [f"{k.label}: {c.variant}: {note}" for k in facts for c in k.candidates for note in c.notes]


def held_elsewhere(results: RunResults) -> dict[str, int]:
    """Candidates another optimize process on the same store was evaluating when this run
    proposed them: ``waited`` for (then used or evaluated here), ``busy`` when still held as the
    kernel's budget ran out (not evaluated by this run)."""
    return {"waited": sum(k.waited for k in results.kernels), "busy": sum(k.busy for k in results.kernels)}


def program_figures(results: RunResults) -> dict[str, Any]:
    """The whole program's view: its kernel time (every key's launches x baseline), the share of
    it the run covered, the gain expected from the decisions (Amdahl), and the keys in share
    order with each one's share before and after (``after``: share / speedup of an improved
    key), for the Amdahl plot."""
    applied = {k.key_sha: k for k in results.kernels}
    keys = []
    for t in results.timed:
        k = applied.get(t.key_sha)
        speedup = k.speedup if k is not None and k.improved(results.threshold) else 1.0
        keys.append({"id": t.id, "kernel": t.kernel, "launches": t.launches, "baseline_ms": t.baseline_ms,
                     "share": t.time_share, "optimized": k is not None and k.ran,
                     "after": None if t.time_share is None else t.time_share / speedup})
    return {"kernel_ms": results.program_ms, "coverage": results.coverage, "cover": results.cover,
            "expected_gain": results.expected_gain, "keys": keys}


def group_stats(facts: list[KernelFacts]) -> dict[str, Any]:
    """TritonForge's Table 1 figures for one group of kernels (the whole run, a category, a kind)."""
    ran = [k for k in facts if k.ran]
    improved = [k for k in ran if k.improved]
    return {
        "kernels": len(facts),
        "optimized": len(ran),
        "improved": len(improved),
        "success_rate": len(improved) / len(ran) if ran else None,
        "geomean_speedup": geomean(k.applied_speedup for k in ran),
        "mean_speedup_on_success": statistics.fmean(k.speedup for k in improved) if improved else None,
    }


def grouped(facts: list[KernelFacts], key, order: tuple[str, ...]) -> list[dict[str, Any]]:
    """One ``group_stats`` row per group present, known names in ``order`` first, then the rest."""
    groups: dict[str, list[KernelFacts]] = collections.defaultdict(list)
    for k in facts:
        groups[key(k)].append(k)
    names = [n for n in order if n in groups] + sorted(n for n in groups if n not in order)
    return [{"name": name, **group_stats(groups[name])} for name in names]


def roofline_sums(ran: list[KernelFacts]) -> dict[str, Any]:
    """Count-weighted time before/after and the floor, over the kernels with a credible floor."""
    with_floor = [k for k in ran if k.floor_ms is not None]
    used = [k for k in with_floor if k.floor_ms <= k.baseline_ms]
    floor = _sum(k.floor_ms * k.count for k in used)
    before = _sum(k.total_before_ms for k in used)
    after = _sum(k.total_after_ms for k in used)
    return {
        "kernels": len(used),
        "excluded": len(with_floor) - len(used),
        "floor_ms": floor,
        "before_ms": before,
        "after_ms": after,
        "before_x_floor": _ratio(before, floor),
        "after_x_floor": _ratio(after, floor),
    }


def geomean(values: Iterable[float | None]) -> float | None:
    logs = [math.log(v) for v in values if v is not None and v > 0]
    return math.exp(math.fsum(logs) / len(logs)) if logs else None


def tally(values: Iterable[str | None]) -> dict[str, int]:
    """Counts of the non-empty values, most frequent first (ties by name)."""
    counts = collections.Counter(v for v in values if v)
    return dict(sorted(counts.items(), key=lambda item: (-item[1], item[0])))


def broke(candidate: CandidateLine) -> bool:
    """The candidate failed to build, run or verify (a worker failure kind), as opposed to running
    and losing to the arbiter (below_threshold, inside_noise, ...)."""
    return candidate.failure in FAILURE_KINDS


def rejected_reason(candidate: CandidateLine) -> str | None:
    """Why the arbiter turned down a candidate that ran, or None (it broke, won, or was never judged).

    The loop marks a candidate ``rejected`` with the verdict's code as ``failure`` when a re-timing
    turned it down (unconfirmed, confirmation_disagrees), but leaves one judged below the bar or
    inside the noise ``verified``, with the code in ``verdict``: both count here. ``superseded``
    (accepted, then beaten by a later candidate) is no rejection."""
    if broke(candidate) or candidate.status == "accepted":
        return None
    verdict = (candidate.verdict or "").strip()
    if verdict in ("accepted", "superseded"):
        return None
    if candidate.status != "rejected":
        return verdict or None
    message = candidate.message.strip().splitlines()
    return ((candidate.failure or "").strip() or verdict or (message[0][:REASON_CHARS] if message else "")
            or "unspecified")


def _sum(values: Iterable[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return math.fsum(present) if present else None


def _ratio(top: float | None, bottom: float | None) -> float | None:
    return top / bottom if top is not None and bottom else None
