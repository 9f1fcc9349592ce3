"""The loop's hands: baseline, candidate, confirmation and profile, each in an isolated worker.

``Evaluator`` owns one warm worker process (``tritune.worker``) and turns its outcomes into
plain records. A candidate that faults, hangs or crashes ends only the worker's child (the next
call starts a fresh one) and comes back as a ``Trial`` with the failure kind, so the loop goes on
(seed 004's remediation: classify, record, move on; the proposers learn from the kind).

Tests substitute the timing (``Evaluator.retime``): on the CPU the interpreter's times measure
numpy, and the loop's decisions must still be exercised end to end. Building and verifying are
never substituted.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any, Callable

from tritune.arbiter.confirm import Confirmation, confirmation_from_json
from tritune.arbiter.rules import ArbiterSettings, Verdict, judge_candidate, screen_candidate
from tritune.arbiter.rules import Decision as ArbiterDecision
from tritune.capture.spec import LaunchSpec
from tritune.loop import jobs
from tritune.replay import Variant
from tritune.search.proposers import Trial
from tritune.worker import Worker
from tritune.worker.failures import Failure

PROFILE_JOB = "tritune.profile.runner:profile_job"
NCU_TIMEOUT_S = 180.0  # ncu replays the kernel once per metric pass: seconds for a small kernel, minutes for a big one
CANDIDATE_TIMEOUT_S = 600.0  # compile + 3 verified input sets + do_bench twice + a graph
BASELINE_TIMEOUT_S = 120.0  # per launch in a batched baseline call: compile + do_bench twice + a graph
PRELOAD = ("torch", "triton")


@dataclasses.dataclass
class Evaluated:
    """A candidate after build, verify and bench: the trial for the proposers, plus the records."""

    trial: Trial
    verification: dict | None = None
    timing: dict | None = None
    seconds: float = 0.0
    failure: Failure | None = None  # the worker's failure (with its detail), when the job failed


class Evaluator:
    def __init__(self, root: str | Path, *, timeout_s: float = CANDIDATE_TIMEOUT_S, input_sets: int = 3,
                 copy_gbps: float | None = None, use_ncu: str = "auto",
                 retime: Callable[[LaunchSpec, Variant, float], float] | None = None,
                 worker: Worker | None = None) -> None:
        self.root = str(root)
        self.input_sets = input_sets
        self.copy_gbps = copy_gbps
        self.use_ncu = use_ncu
        self.retime = retime  # tests only: (spec, variant, measured_ms) -> ms to use instead
        self.worker = worker or Worker(timeout_s, preload=PRELOAD)

    def close(self) -> None:
        self.worker.close()

    # ------------------------------------------------------------------------------ baseline

    def baseline(self, spec: LaunchSpec) -> tuple[dict | None, Failure | None]:
        """The captured launch timed (do_bench median twice: the noise; graph; roofline)."""
        outcome = self.worker.call(jobs.BASELINE_JOB, {"spec": spec.to_json(), "root": self.root,
                                                       "methods": list(jobs.BENCH_METHODS),
                                                       "copy_gbps": self.copy_gbps})
        if not outcome.ok:
            return None, outcome.failure
        timing = dict(outcome.value)
        if self.retime is not None and timing.get("time_ms"):
            timing["time_ms"] = self.retime(spec, Variant(), timing["time_ms"])
        return timing, None

    def baselines(self, specs: list[LaunchSpec]) -> dict[str, tuple[dict | None, Failure | None]]:
        """Every spec's baseline timed, by spec id, in as few worker calls as it takes: one, unless
        a launch faults the device (the worker restarts and the rest go in the next call) or the
        call itself fails (the first spec not yet timed is then timed alone, so a launch that
        crashes or hangs the worker costs only itself)."""
        found: dict[str, tuple[dict | None, Failure | None]] = {}
        pending = list(specs)
        while pending:
            payload = {"specs": [s.to_json() for s in pending], "root": self.root, "copy_gbps": self.copy_gbps}
            outcome = self.worker.call(jobs.BASELINES_JOB, payload,
                                       timeout_s=BASELINE_TIMEOUT_S * len(pending))
            if not outcome.ok:
                first, pending = pending[0], pending[1:]
                found[first.id] = self.baseline(first)
                continue
            for spec_id, timing, failure in outcome.value["timings"]:
                failure = Failure.from_json(failure) if failure is not None else None
                if timing is not None and self.retime is not None and timing.get("time_ms"):
                    spec = next(s for s in pending if s.id == spec_id)
                    timing["time_ms"] = self.retime(spec, Variant(), timing["time_ms"])
                found[spec_id] = (timing, failure)
            if outcome.value["fault"]:
                self.worker.restart()
            pending = [s for s in pending if s.id not in found]
        return found

    # ----------------------------------------------------------------------------- candidate

    def candidate(self, spec: LaunchSpec, variant: Variant, mode: str) -> Evaluated:
        payload = {"spec": spec.to_json(), "root": self.root, "variant": variant.to_json(), "mode": mode,
                   "input_sets": self.input_sets, "copy_gbps": self.copy_gbps}
        outcome = self.worker.call(jobs.CANDIDATE_JOB, payload)
        if not outcome.ok:
            failure = outcome.failure
            return Evaluated(Trial(variant, False, failure=failure.kind, message=failure.message),
                             seconds=outcome.seconds, failure=failure)
        verification, timing = outcome.value["verification"], outcome.value["timing"]
        if not verification["ok"]:
            return Evaluated(Trial(variant, False, failure=verification.get("failure") or "wrong_result",
                                   message=verification.get("message", "")), verification, None, outcome.seconds)
        time_ms = timing.get("time_ms") if timing else None
        if time_ms is None:
            return Evaluated(Trial(variant, False, failure="error", message=timing.get("message") or "no time"),
                             verification, timing, outcome.seconds)
        if self.retime is not None:
            time_ms = timing["time_ms"] = self.retime(spec, variant, time_ms)
        return Evaluated(Trial(variant, True, time_ms=time_ms), verification, timing, outcome.seconds)

    # --------------------------------------------------------------------------- confirmation

    def confirm(self, spec: LaunchSpec, variant: Variant) -> tuple[Confirmation | None, Failure | None]:
        """Baseline and ``variant`` re-timed interleaved (ABBA) in one process."""
        outcome = self.worker.call(jobs.CONFIRM_JOB, {"spec": spec.to_json(), "root": self.root,
                                                      "candidate": variant.to_json()})
        if not outcome.ok:
            return None, outcome.failure
        confirmation = confirmation_from_json(outcome.value)
        if self.retime is not None:
            base = self.retime(spec, Variant(), confirmation.base_ms)
            cand = self.retime(spec, variant, confirmation.cand_ms)
            confirmation = dataclasses.replace(confirmation, base_ms=base, cand_ms=cand, ratio=base / cand,
                                               samples=tuple((base, cand) for _ in confirmation.samples),
                                               spread=0.0)
        return confirmation, None

    def judge(self, spec: LaunchSpec, variant: Variant, base_ms: float, cand_ms: float, noise: float | None,
              settings: ArbiterSettings) -> tuple[Verdict, Confirmation | None]:
        """The arbiter's verdict on a verified candidate: screened on its benchmark time, then
        confirmed by interleaved re-timing (only for plausible winners); a re-timing that fails
        is a rejection (``unconfirmed``)."""
        verdict = screen_candidate(True, base_ms, cand_ms, noise, settings)
        if verdict is not None:
            return verdict, None
        confirmation, failure = self.confirm(spec, variant)
        verdict = judge_candidate(True, base_ms, cand_ms, noise, confirmation, settings)
        if failure is not None:
            verdict = Verdict(ArbiterDecision.REJECT, "unconfirmed", f"re-timing failed: {failure.kind}: "
                              f"{failure.message}", base_ms / cand_ms)
        return verdict, confirmation

    # -------------------------------------------------------------------------------- profile

    def profile(self, spec: LaunchSpec, timing: dict | None, variant: Variant | None = None) -> dict:
        """The profile JSON (facts, source, note, bottleneck) of ``variant`` (default baseline).
        When the profiler job itself fails, the facts are the timing alone, and the note says so."""
        payload = {"spec": spec.to_json(), "root": self.root, "timing": timing or {}, "use_ncu": self.use_ncu,
                   "variant": variant.to_json() if variant is not None else None, "timeout_s": NCU_TIMEOUT_S}
        outcome = self.worker.call(PROFILE_JOB, payload, timeout_s=NCU_TIMEOUT_S + 120)
        if outcome.ok:
            return dict(outcome.value)
        return fallback_profile(timing, f"profiler job failed ({outcome.failure.kind}: {outcome.failure.message})")


def fallback_profile(timing: dict | None, note: str) -> dict:
    from tritune.profile import Facts, classify

    facts = {k: v for k, v in (timing or {}).items() if k in ("time_ms", "graph_ms", "roofline", "grid")}
    return {"facts": facts, "source": "timing", "note": note, "ncu": None,
            "bottleneck": classify(Facts.from_mapping(facts)).to_json()}


def trial_from_record(variant: Variant, status: str, failure: str | None, message: str | None,
                      timings: Any, verified: bool) -> Trial:
    """The ``Trial`` of a candidate the store already holds (a resumed run does not redo it). A
    candidate the arbiter rejected after it verified and was timed stays a timed trial: the search
    moves through it exactly as it did the first time."""
    time_ms = (timings or {}).get("time_ms")
    if status in ("verified", "accepted") or (time_ms is not None and verified):
        return Trial(variant, True, time_ms=time_ms)
    return Trial(variant, False, failure=failure, message=message or "")
