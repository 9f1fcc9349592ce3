"""The arbiter's rules on synthetic numbers: each acceptance condition and each finish criterion."""

from __future__ import annotations

import math

import pytest

from tritune.arbiter import (Confirmation, Decision, Round, beats_held, judge_candidate, next_step,
                             screen_candidate)
from tritune.model.settings import ArbiterSettings

BASE_MS = 1.0


def confirmation(ratio: float, spread: float = 0.005, meaningful: bool = True) -> Confirmation:
    return Confirmation(ratio=ratio, base_ms=BASE_MS, cand_ms=BASE_MS / ratio, spread=spread,
                        samples=((BASE_MS, BASE_MS / ratio),) * 6, order=("AB", "BA") * 3, meaningful=meaningful,
                        timer="scripted")


def judge(speedup: float, *, verified: bool = True, noise: float | None = 0.01, confirmed: float | None = None,
          spread: float = 0.005, meaningful: bool = True, settings: ArbiterSettings = ArbiterSettings()):
    conf = confirmation(confirmed if confirmed is not None else speedup, spread, meaningful)
    return judge_candidate(verified, BASE_MS, BASE_MS / speedup, noise, conf, settings)


# ------------------------------------------------------------------------------------ candidates

def test_accepts_a_verified_confirmed_candidate_at_1_06x():
    verdict = judge(1.06)
    assert verdict.decision is Decision.ACCEPT and verdict.accepted and verdict.code == "accepted"
    assert verdict.speedup == pytest.approx(1.06) and verdict.confirmed_speedup == pytest.approx(1.06)


def test_rejects_1_04x_as_below_the_bar():
    verdict = judge(1.04)
    assert verdict.decision is Decision.REJECT and verdict.code == "below_threshold"
    assert "1.040x" in verdict.reason and "1.05x" in verdict.reason


def test_the_bar_sits_exactly_at_the_threshold():
    assert judge(1.05).accepted
    assert judge(1.0499).code == "below_threshold"


def test_rejects_an_unverified_candidate_even_at_2x():
    verdict = judge(2.0, verified=False)
    assert verdict.code == "unverified" and not verdict.accepted


def test_rejects_when_the_confirmation_disagrees():
    verdict = judge(1.20, confirmed=1.02)
    assert verdict.code == "confirmation_disagrees"
    assert verdict.speedup == pytest.approx(1.20) and verdict.confirmed_speedup == pytest.approx(1.02)


def test_rejects_a_gain_inside_the_baseline_noise():
    assert judge(1.06, noise=0.08).code == "inside_noise"  # 6% gain, baseline scatters 8%
    assert judge(1.10, noise=0.08).accepted


def test_rejects_a_confirmed_gain_inside_the_confirmations_own_spread():
    verdict = judge(1.07, noise=0.01, confirmed=1.07, spread=0.09)
    assert verdict.code == "inside_noise" and "9.0%" in verdict.reason


def test_rejects_without_confirmation_and_on_meaningless_timings():
    assert judge_candidate(True, BASE_MS, BASE_MS / 1.5, 0.01, None).code == "unconfirmed"
    assert judge(1.5, meaningful=False).code == "not_meaningful"
    assert judge(1.5, meaningful=False, settings=ArbiterSettings(require_meaningful=False)).accepted


def test_rejects_unusable_times():
    for base, cand in ((None, 1.0), (1.0, 0.0), (1.0, math.nan), (-1.0, 1.0)):
        assert judge_candidate(True, base, cand, 0.01, confirmation(1.5)).code == "bad_timing"


def test_unknown_noise_is_not_a_reason_to_reject():
    assert judge(1.06, noise=None).accepted


def test_screen_lets_only_plausible_winners_through_to_confirmation():
    assert screen_candidate(True, 1.0, 1.0 / 1.2, 0.01) is None
    assert screen_candidate(False, 1.0, 0.5, 0.01).code == "unverified"
    assert screen_candidate(True, 1.0, 1.0 / 1.03, 0.01).code == "below_threshold"
    assert screen_candidate(True, 1.0, 1.0 / 1.06, 0.08).code == "inside_noise"  # not worth confirming


def test_threshold_is_configurable():
    strict = ArbiterSettings(threshold=1.10)
    assert judge(1.08, settings=strict).code == "below_threshold"
    assert judge(1.12, settings=strict).accepted


def test_settings_refuse_a_threshold_that_would_accept_slowdowns():
    with pytest.raises(ValueError, match="below 1.0"):
        ArbiterSettings(threshold=0.9)


def test_verdict_serialises_with_its_decision_name():
    body = judge(1.06).to_json()
    assert body["decision"] == "accept" and body["code"] == "accepted"



# ------------------------------------------------------------------------ against a held decision

def test_a_slower_accepted_candidate_does_not_replace_a_held_faster_decision():
    """README: a decision already held is replaced only by a faster one. 1.20x is accepted on its
    own, but not over a held 1.50x."""
    accepted = judge(1.20)
    assert accepted.accepted
    verdict = beats_held(accepted, 1.50, noise=0.01)
    assert verdict.decision is Decision.REJECT and verdict.code == "not_better"
    assert verdict.confirmed_speedup == pytest.approx(1.20)
    assert "1.200x does not beat the accepted 1.500x" in verdict.reason
    assert beats_held(judge(1.50), 1.50, noise=0.01).code == "not_better"  # a tie replaces nothing


def test_a_faster_candidate_replaces_a_held_decision_only_beyond_the_noise():
    faster = judge(1.80)
    assert beats_held(faster, 1.50, noise=0.01) is faster
    assert beats_held(judge(1.52), 1.50, noise=0.02).code == "not_better"  # 1.3% faster: inside 2% noise
    assert beats_held(judge(1.52), 1.50, noise=None).accepted  # beyond min_gain (1%) when the noise is unknown
    assert beats_held(judge(1.51), 1.50, noise=None).code == "not_better"  # 0.7%: below min_gain


def test_nothing_held_or_a_rejected_verdict_passes_through_unchanged():
    accepted, rejected = judge(1.20), judge(1.04)
    assert beats_held(accepted, None, noise=0.01) is accepted
    assert beats_held(rejected, 1.50, noise=0.01) is rejected and rejected.code == "below_threshold"


# ----------------------------------------------------------------------------------------- loop

def improving(n: int, gain: float = 0.10) -> list[Round]:
    rounds, t = [], 1.0
    for _ in range(n):
        rounds.append(Round(start_ms=t, best_ms=t / (1 + gain)))
        t /= 1 + gain
    return rounds


def test_continues_while_rounds_improve():
    verdict = next_step(improving(3), ArbiterSettings(), roofline_fraction=0.4)
    assert verdict.decision is Decision.CONTINUE and "round 4 of at most 8" in verdict.reason


def test_continues_before_the_first_round():
    assert next_step([], ArbiterSettings(), None).decision is Decision.CONTINUE


def test_finishes_at_round_8():
    assert next_step(improving(7), ArbiterSettings(), 0.4).decision is Decision.CONTINUE
    verdict = next_step(improving(8), ArbiterSettings(), 0.4)
    assert verdict.finished and verdict.code == "round_cap"
    assert next_step(improving(3), ArbiterSettings(max_rounds=3), 0.4).code == "round_cap"


def test_finishes_after_patience_flat_rounds():
    flat = Round(start_ms=0.5, best_ms=0.5 / 1.005)  # 0.5% < min_gain 1%
    assert next_step(improving(2) + [flat], ArbiterSettings(), 0.4).decision is Decision.CONTINUE
    verdict = next_step(improving(2) + [flat, flat], ArbiterSettings(), 0.4)
    assert verdict.code == "diminishing_returns" and "2 rounds" in verdict.reason
    # an improving round in between resets the count
    assert next_step([flat] + improving(1) + [flat], ArbiterSettings(), 0.4).decision is Decision.CONTINUE
    assert next_step([flat] * 3, ArbiterSettings(patience=4), 0.4).decision is Decision.CONTINUE


def test_rounds_that_tried_seeds_are_not_flat():
    """An Inductor kernel's max-autotune configs come two a round: three flat rounds of them must
    not end the key after the second."""
    seeded = Round(start_ms=0.5, best_ms=0.5, seeded=True)
    flat = Round(start_ms=0.5, best_ms=0.5)
    assert next_step([seeded, seeded], ArbiterSettings(), 0.4).decision is Decision.CONTINUE
    assert next_step([seeded, seeded, seeded, flat], ArbiterSettings(), 0.4).decision is Decision.CONTINUE
    verdict = next_step([seeded, seeded, seeded, flat, flat], ArbiterSettings(), 0.4)
    assert verdict.code == "diminishing_returns"  # the patience counts from the last seeded round


def test_a_round_gaining_min_gain_counts_as_progress():
    just = Round(start_ms=1.0101, best_ms=1.0)
    assert next_step([just, just], ArbiterSettings(), 0.4).decision is Decision.CONTINUE


def test_finishes_within_the_roofline_target():
    verdict = next_step(improving(1), ArbiterSettings(), roofline_fraction=0.92)
    assert verdict.code == "roofline" and "92.0%" in verdict.reason
    assert next_step(improving(1), ArbiterSettings(), roofline_fraction=0.85).decision is Decision.CONTINUE
    assert next_step([], ArbiterSettings(roofline_target=0.8), roofline_fraction=0.85).code == "roofline"


def test_finishes_when_the_search_space_is_exhausted():
    assert next_step(improving(1), ArbiterSettings(), 0.4, exhausted=True).code == "exhausted"


def test_interpreter_times_are_screened_out_whatever_they_say():
    """Slower or faster on numpy, an interpreter-timed candidate is rejected as not meaningful
    before any re-timing (an order that once depended on the CPU's wall clock)."""
    for cand_ms in (2.0, 0.5):
        verdict = screen_candidate(True, 1.0, cand_ms, 0.01, ArbiterSettings(), meaningful=False)
        assert verdict is not None and verdict.code == "not_meaningful"
    assert screen_candidate(True, 1.0, 0.5, 0.01, ArbiterSettings(require_meaningful=False), meaningful=False) is None
