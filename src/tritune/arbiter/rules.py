"""The arbiter's rules: accept or reject one candidate, continue or finish the search of one kernel.

TritonForge's Performance-Arbitrator (seed 002, Algorithm 1 line 10) decides ``accept``,
``continue`` or ``finish`` from the new report, the best so far and thresholds. Here that is two
pure functions, so every rule is tested on synthetic numbers without a GPU:

- ``judge_candidate`` -> ACCEPT or REJECT. A candidate is accepted only when all of these hold:
  it verified; its benchmark speedup is >= ``threshold`` (1.05x, TritonForge's bar and
  DESIGN.md's); its gain is larger than the measured noise (the baseline timed twice: "a
  difference below that spread is noise"); and the interleaved re-timing (``confirm``) agrees:
  meaningful timings, ratio >= ``threshold``, gain larger than both the noise and the spread of
  the confirmation's own per-round ratios. The benchmark alone is not trusted because baseline
  and candidate were timed minutes apart in different workers: clock and thermal drift between
  them can fake a few percent.
- ``next_step`` -> CONTINUE or FINISH: within ``roofline_target`` of the memory roofline (nothing
  left worth a round), the round cap (8, TritonForge's limit), the search space exhausted, or
  diminishing returns (``patience`` rounds in a row each gaining less than ``min_gain``;
  TritonForge's Fig. 2b: later rounds rarely succeed once progress stalls).

``baseline_ms`` in ``judge_candidate`` is the time the candidate must beat: the original kernel's,
or the best accepted so far (TritonForge compares with the best-so-far report R*); the loop picks.
Every verdict carries a stable ``code`` (for the decision store and the report's tallies) and a
one-line ``reason`` a person reads.
"""

from __future__ import annotations

import dataclasses
import enum
import math
from typing import Any, Sequence

from tritune.model.settings import ArbiterSettings


class Decision(str, enum.Enum):
    ACCEPT = "accept"
    REJECT = "reject"
    CONTINUE = "continue"
    FINISH = "finish"


@dataclasses.dataclass(frozen=True)
class Verdict:
    decision: Decision
    code: str  # stable slug: "accepted", "unverified", "below_threshold", "round_cap", ...
    reason: str  # one line for a person
    speedup: float | None = None  # benchmark speedup (judge_candidate)
    confirmed_speedup: float | None = None  # interleaved ratio (judge_candidate)

    @property
    def accepted(self) -> bool:
        return self.decision is Decision.ACCEPT

    @property
    def finished(self) -> bool:
        return self.decision is Decision.FINISH

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "decision": self.decision.value}


@dataclasses.dataclass(frozen=True)
class Round:
    """One finished round of the loop: best verified time before it and after it."""

    start_ms: float
    best_ms: float
    accepted: int = 0  # candidates accepted in the round (informational)
    # the round tried configs the search takes as given, not as a step of its own (an Inductor
    # kernel's max-autotune configs, ``search.inductor_configs``): never counted as flat, so the
    # loop does not finish for diminishing returns before they are all tried
    seeded: bool = False

    @property
    def gain(self) -> float:
        """Relative improvement of the best time in this round (0.05 = 5% faster)."""
        if self.best_ms <= 0 or not math.isfinite(self.best_ms):
            return 0.0
        return self.start_ms / self.best_ms - 1.0


# ------------------------------------------------------------------------------------ candidates

def screen_candidate(verified: bool, baseline_ms: float | None, candidate_ms: float | None,
                     noise: float | None, settings: ArbiterSettings = ArbiterSettings(), *,
                     meaningful: bool = True) -> Verdict | None:
    """The checks that need no confirmation: a REJECT verdict, or None when the candidate is worth
    the interleaved re-timing (so the loop spends confirmation time only on plausible winners).
    ``meaningful=False``: the candidate was timed on the CPU interpreter; with
    ``require_meaningful`` that decides it, whatever the times say (they measure numpy)."""
    if not verified:
        return _reject("unverified", "did not pass verification: never accepted, whatever its speed")
    if settings.require_meaningful and not meaningful:
        return _reject("not_meaningful", "timed on the CPU interpreter: such times decide nothing")
    if not (_positive(baseline_ms) and _positive(candidate_ms)):
        return _reject("bad_timing", f"no usable times (baseline {baseline_ms!r} ms, candidate {candidate_ms!r} ms)")
    speedup = baseline_ms / candidate_ms
    if speedup < settings.threshold:
        return _reject("below_threshold", f"{speedup:.3f}x is below the {settings.threshold:.2f}x bar",
                       speedup=speedup)
    if noise is not None and speedup - 1.0 <= noise:
        return _reject("inside_noise", f"{_pct(speedup - 1)} gain is inside the measured noise ({_pct(noise)})",
                       speedup=speedup)
    return None


def judge_candidate(verified: bool, baseline_ms: float | None, candidate_ms: float | None,
                    noise: float | None, confirmation: Any, settings: ArbiterSettings = ArbiterSettings()) -> Verdict:
    """ACCEPT or REJECT one candidate (module docstring). ``noise`` is the baseline's relative
    spread when timed twice (0.02 = 2%; None when unmeasured); ``confirmation`` is
    ``confirm()``'s ``Confirmation`` or None (not confirmed: rejected)."""
    screened = screen_candidate(verified, baseline_ms, candidate_ms, noise, settings)
    if screened is not None:
        return screened
    speedup = baseline_ms / candidate_ms
    if confirmation is None:
        return _reject("unconfirmed", "not confirmed by interleaved re-timing", speedup=speedup)
    ratio = confirmation.ratio
    if settings.require_meaningful and not confirmation.meaningful:
        return _reject("not_meaningful", f"confirmation timings are not meaningful ({confirmation.timer} timer)",
                       speedup=speedup, confirmed=ratio)
    if not _positive(ratio):
        return _reject("bad_timing", f"confirmation ratio {ratio!r} is unusable", speedup=speedup)
    if ratio < settings.threshold:
        return _reject("confirmation_disagrees", f"benchmark said {speedup:.3f}x, interleaved re-timing "
                       f"{ratio:.3f}x (< {settings.threshold:.2f}x)", speedup=speedup, confirmed=ratio)
    floor = max(noise or 0.0, confirmation.spread)
    if ratio - 1.0 <= floor:
        return _reject("inside_noise", f"confirmed gain {_pct(ratio - 1)} is inside the noise ({_pct(floor)}: "
                       "baseline spread or the confirmation's own)", speedup=speedup, confirmed=ratio)
    return Verdict(Decision.ACCEPT, "accepted", f"verified, {speedup:.3f}x, confirmed {ratio:.3f}x "
                   f"(noise {_pct(floor)})", speedup, ratio)


NOT_FINAL = ("below_threshold", "inside_noise")  # a slow or noisy timing, not a verdict on the candidate


def beats_held(verdict: Verdict, held_ratio: float | None, noise: float | None,
               settings: ArbiterSettings = ArbiterSettings(), held: str = "the accepted") -> Verdict:
    """An accepted ``verdict`` stands only if it beats a decision already held (its confirmed
    ``held_ratio``) by more than the noise; else REJECT ``not_better``."""
    if not verdict.accepted or held_ratio is None:
        return verdict
    if verdict.confirmed_speedup > held_ratio * (1 + max(noise or 0.0, settings.min_gain)):
        return verdict
    return _reject("not_better", f"confirmed {verdict.confirmed_speedup:.3f}x does not beat {held} "
                   f"{held_ratio:.3f}x by more than the noise", speedup=verdict.speedup,
                   confirmed=verdict.confirmed_speedup)


# ----------------------------------------------------------------------------------------- loop

def next_step(history: Sequence[Round], settings: ArbiterSettings = ArbiterSettings(),
              roofline_fraction: float | None = None, *, exhausted: bool = False) -> Verdict:
    """CONTINUE or FINISH after the rounds in ``history`` (oldest first). ``roofline_fraction``
    is the best variant's achieved bandwidth over copy bandwidth (None: unknown, e.g. on the CPU);
    ``exhausted``: the proposers have nothing left to try."""
    rounds = len(history)
    if roofline_fraction is not None and roofline_fraction >= settings.roofline_target:
        return _finish("roofline", f"at {_pct(roofline_fraction)} of copy bandwidth, within the "
                       f"{_pct(settings.roofline_target)} target: little left to gain")
    if rounds >= settings.max_rounds:
        return _finish("round_cap", f"{rounds} rounds done, the cap is {settings.max_rounds}")
    if exhausted:
        return _finish("exhausted", "the search space is exhausted: no untried candidate left")
    flat = _flat_rounds(history, settings.min_gain)
    if flat >= settings.patience:
        return _finish("diminishing_returns", f"{flat} rounds in a row each gained < {_pct(settings.min_gain)}")
    return Verdict(Decision.CONTINUE, "continue", f"round {rounds + 1} of at most {settings.max_rounds}")


def _flat_rounds(history: Sequence[Round], min_gain: float) -> int:
    """Rounds at the end of ``history`` that each gained less than ``min_gain``, back to the last
    seeded round (``Round.seeded``)."""
    count = 0
    for done in reversed(history):
        if done.gain >= min_gain or done.seeded:
            break
        count += 1
    return count


# -------------------------------------------------------------------------------------- helpers

def _reject(code: str, reason: str, *, speedup: float | None = None, confirmed: float | None = None) -> Verdict:
    return Verdict(Decision.REJECT, code, reason, speedup, confirmed)


def _finish(code: str, reason: str) -> Verdict:
    return Verdict(Decision.FINISH, code, reason)


def _positive(value: Any) -> bool:
    return isinstance(value, (int, float)) and math.isfinite(value) and value > 0


def _pct(fraction: float) -> str:
    return f"{100 * fraction:.1f}%"
