"""classify() on representative fact sets (with and without ncu), stall-name parsing, knob ordering,
and hints_from_delta on TritonForge's own examples."""

from __future__ import annotations

import pytest

from tritune.profile import (FAMILIES, KINDS, Facts, classify, dominant_stall, hints_from_delta, order_knobs,
                             stall_reason, stall_shares)


def actions(result) -> list[str]:
    return [h.action for h in (result.hints if hasattr(result, "hints") else result)]


# ------------------------------------------------------------------------------------- classify

def test_a_microsecond_kernel_is_launch_bound_whatever_else_it_shows():
    result = classify({"median_ms": 0.0077, "roofline": 0.2, "sol_memory_pct": 20, "sol_compute_pct": 5})
    assert result.kind == "launch-bound" and "7.7 us" in result.reason
    assert actions(result)[0] == "launch_overhead"


def test_graph_time_well_under_the_median_is_launch_bound():
    assert classify(Facts(duration_ms=0.05, graph_ms=0.02, roofline=0.3)).kind == "launch-bound"
    assert classify(Facts(duration_ms=0.05, graph_ms=0.045, roofline=0.3)).kind != "launch-bound"


def test_near_the_roofline_only_fewer_bytes_help():
    result = classify(Facts(duration_ms=0.4, roofline=0.86))
    assert result.kind == "memory-near-roofline"
    assert result.proposers[0] == "passes" and "stop" in actions(result)
    assert classify(Facts(duration_ms=0.4, sol_memory_pct=91, sol_compute_pct=20)).kind == "memory-near-roofline"


def test_far_from_the_roofline_without_ncu_says_it_assumed_and_what_is_missing():
    result = classify(Facts(duration_ms=0.4, roofline=0.3, occupancy=0.5))
    assert result.kind == "memory-far-from-roofline"
    assert "ncu" in result.missing and "no ncu" in result.reason and "assumed" in result.reason
    assert result.proposers[0] == "inductor-blocks" and "increase_block" in actions(result)


def test_a_looped_reduction_whose_row_fits_gets_the_single_iteration_hint():
    facts = dict(duration_ms=0.4, roofline=0.3, reduction=True, r0_numel=768, r0_block=128)
    assert actions(classify(facts))[0] == "single_iteration_reduction"
    assert "single_iteration_reduction" not in actions(classify({**facts, "r0_numel": 50000}))  # row too long
    assert "single_iteration_reduction" not in actions(classify({**facts, "r0_block": 1024}))  # already one pass
    assert "single_iteration_reduction" not in actions(classify({**facts, "r0_block": 768}))  # exactly one pass


def test_ncu_low_utilisation_with_memory_stalls_is_latency_bound():
    # TritonForge's GEMV case: memory 52%, compute 6%, occupancy 37.5%
    stalls = {"smsp__pcsamp_warps_issue_stalled_long_scoreboard": 700, "smsp__pcsamp_warps_issue_stalled_barrier": 100,
              "smsp__pcsamp_warps_issue_stalled_selected": 200}
    result = classify(Facts(duration_ms=0.4, sol_memory_pct=52, sol_compute_pct=6, achieved_occupancy_pct=37.5,
                            stalls=stalls))
    assert result.kind == "latency-bound" and "70% of stalls are memory" in result.reason
    assert {"more_warps", "more_stages"} <= set(actions(result)) and "ncu" not in result.missing


def test_barrier_stalls_ask_for_fewer_warps():
    result = classify(Facts(duration_ms=0.4, sol_memory_pct=30, sol_compute_pct=20, stalls={"barrier": 8, "wait": 2}))
    assert result.kind == "latency-bound" and "fewer_warps" in actions(result)


def test_low_static_occupancy_from_registers_asks_for_maxnreg():
    result = classify(Facts(duration_ms=0.4, roofline=0.3, occupancy=0.125, occupancy_limiter="registers",
                            registers=168))
    assert result.kind == "latency-bound" and "maxnreg" in actions(result) and "registers" in result.reason
    shared = classify(Facts(duration_ms=0.4, roofline=0.3, occupancy=0.125, occupancy_limiter="shared"))
    assert "fewer_stages" in actions(shared) and "maxnreg" not in actions(shared)


def test_spills_are_latency_bound_with_the_spill_hint():
    result = classify({"median_ms": 0.4, "roofline": 0.3, "occupancy": 0.5, "spills": 96})
    assert result.kind == "latency-bound" and actions(result)[0] == "fix_spills" and "96 bytes" in result.reason


def test_compute_sol_above_memory_is_compute_bound():
    result = classify(Facts(duration_ms=0.4, sol_memory_pct=35, sol_compute_pct=78))
    assert result.kind == "compute-bound" and "fast_math" in actions(result)
    assert classify(Facts(duration_ms=0.4, sol_memory_pct=70, sol_compute_pct=65)).kind == "memory-far-from-roofline"


def test_too_few_programs_for_the_sms_is_a_tail_effect():
    result = classify({"median_ms": 0.4, "roofline": 0.3, "grid": [66, 1, 1], "sm_count": 132})
    assert result.kind == "tail-effect" and "50% of the GPU idles" in result.reason
    assert actions(result)[0] == "decrease_block"
    # at the roofline already, a small grid is not worth reshaping
    assert classify({"median_ms": 0.4, "roofline": 0.85, "grid": [66], "sm_count": 132}).kind == "memory-near-roofline"


def test_a_small_last_wave_is_a_tail_effect_but_many_waves_are_not():
    tail = classify(Facts(duration_ms=0.4, roofline=0.3, programs=140, sm_count=132, blocks_per_sm=1))
    assert tail.kind == "tail-effect" and "whole_waves" in actions(tail)
    many = classify(Facts(duration_ms=0.4, roofline=0.3, programs=140 * 8, sm_count=132, blocks_per_sm=1))
    assert many.kind == "memory-far-from-roofline"
    full = classify(Facts(duration_ms=0.4, roofline=0.3, programs=264, sm_count=132, blocks_per_sm=1))
    assert full.kind == "memory-far-from-roofline"  # exactly two whole waves
    one = classify(Facts(duration_ms=0.4, roofline=0.3, programs=200, sm_count=132, blocks_per_sm=2))
    assert one.kind == "memory-far-from-roofline"  # under one wave, yet every SM has a program: no tail


def test_nothing_known_is_unknown_with_every_family():
    result = classify({})
    assert result.kind == "unknown" and set(result.proposers) == set(FAMILIES)
    assert {"ncu", "duration_ms", "roofline"} <= set(result.missing)


def test_every_result_uses_known_kinds_families_and_hint_texts():
    for facts in ({}, {"median_ms": 0.001}, {"roofline": 0.9}, {"roofline": 0.2}, {"sol_compute_pct": 90},
                  {"roofline": 0.2, "spills": 8}, {"programs": 3, "sm_count": 132}):
        result = classify(facts)
        assert result.kind in KINDS and set(result.proposers) <= set(FAMILIES) and result.hints
        assert all(h.text for h in result.hints) and result.to_json()["kind"] == result.kind


def test_facts_from_mapping_ignores_unknown_keys_and_prefers_explicit_names():
    facts = Facts.from_mapping({"time_ms": 0.5, "median_ms": 0.6, "grid": [4, 2, 1], "kernel": "k", "failure": None})
    assert facts.duration_ms == 0.5 and facts.programs == 8
    assert Facts.from_mapping({"duration_ms": 0.2, "time_ms": 0.5}).duration_ms == 0.2


# --------------------------------------------------------------------------------------- stalls

def test_stall_names_from_ncu_metrics_and_section_labels():
    assert stall_reason("smsp__pcsamp_warps_issue_stalled_long_scoreboard") == "long_scoreboard"
    assert stall_reason("smsp__average_warp_latency_issue_stalled_barrier_per_warp_active.pct") == "barrier"
    assert stall_reason("smsp__pcsamp_warps_issue_stalled_math_pipe_throttle_not_issued") == "math_pipe_throttle"
    assert stall_reason("Stall Long Scoreboard") == "long_scoreboard"


def test_stall_shares_group_and_normalise():
    shares = stall_shares({"long_scoreboard": 6, "lg_throttle": 2, "barrier": 2, "bogus": 0, "nothing": None})
    assert shares == pytest.approx({"memory": 0.8, "sync": 0.2})
    assert dominant_stall({"long_scoreboard": 6, "barrier": 4}) == ("memory", pytest.approx(0.6))
    assert dominant_stall(None) == (None, 0.0) and stall_shares({}) == {}


def test_order_knobs_puts_the_bottlenecks_knobs_first():
    latency = classify(Facts(duration_ms=0.4, roofline=0.3, spill_bytes=8))
    assert order_knobs(latency, ["XBLOCK", "R0_BLOCK", "num_warps", "num_stages"])[:2] == ["num_warps", "num_stages"]
    memory = classify(Facts(duration_ms=0.4, roofline=0.3))
    assert order_knobs(memory, ["num_warps", "num_stages", "R0_BLOCK", "XBLOCK"]) == \
        ["XBLOCK", "R0_BLOCK", "num_warps", "num_stages"]


# ---------------------------------------------------------------------------------------- deltas

def test_tritonforge_round_3_occupancy_up_but_slower_says_revert():
    # Table 5: smaller tiles, occupancy 12.5% -> 18.8%, kernel 4.18 -> 6.24 ms
    hints = hints_from_delta({"duration_ms": 4.18, "achieved_occupancy_pct": 12.5},
                             {"duration_ms": 6.24, "achieved_occupancy_pct": 18.8})
    assert actions(hints) == ["revert"]


def test_faster_with_more_memory_throughput_keeps_the_direction():
    hints = hints_from_delta(Facts(duration_ms=1.74, sol_memory_pct=52), Facts(duration_ms=1.0, sol_memory_pct=90))
    assert "keep_direction" in actions(hints)


def test_reaching_the_roofline_says_stop_first():
    hints = hints_from_delta(Facts(duration_ms=1.0, roofline=0.5), Facts(duration_ms=0.6, roofline=0.85))
    assert actions(hints)[0] == "stop"


def test_new_spills_and_rising_memory_stalls_give_their_hints():
    before = Facts(duration_ms=1.0, spill_bytes=0, stalls={"long_scoreboard": 3, "wait": 7})
    after = Facts(duration_ms=1.1, spill_bytes=64, stalls={"long_scoreboard": 6, "wait": 4})
    assert {"fix_spills", "more_stages"} <= set(actions(hints_from_delta(before, after)))


def test_falling_occupancy_without_a_gain_asks_about_register_pressure():
    hints = hints_from_delta(Facts(duration_ms=1.0, occupancy=0.5), Facts(duration_ms=1.05, occupancy=0.25))
    assert "maxnreg" in actions(hints)
    assert "maxnreg" not in actions(hints_from_delta(Facts(duration_ms=1.0, occupancy=0.5),
                                                     Facts(duration_ms=0.8, occupancy=0.25)))


def test_a_flat_change_says_switch_family_and_a_big_one_does_not():
    assert actions(hints_from_delta(Facts(duration_ms=1.0), Facts(duration_ms=1.01))) == ["switch_family"]
    assert "switch_family" not in actions(hints_from_delta(Facts(duration_ms=1.0), Facts(duration_ms=0.8)))


def test_becoming_launch_bound_is_reported():
    hints = hints_from_delta(Facts(duration_ms=0.02), Facts(duration_ms=0.008))
    assert "launch_overhead" in actions(hints)


def test_no_facts_no_hints():
    assert hints_from_delta({}, {}) == ()
