"""The launch-configuration space and the coordinate-descent proposer, on hand-built specs."""

from __future__ import annotations

from tritune.capture.spec import ArgSpec, LaunchSpec
from tritune.replay import Variant
from tritune.search import LaunchConfigSearch, PassSetProposer, Trial, config_of, knobs, variant_of


def spec(**changes) -> LaunchSpec:
    fields = dict(
        kernel="add_kernel", kind="jit", module="m", source_file="m.py", source="sources/m.py", source_hash="0" * 64,
        args=[ArgSpec("x_ptr", "tensor", shape=[4096], stride=[1], dtype="float32"),
              ArgSpec("n", "scalar", value=4096, type="int"), ArgSpec("BLOCK", "constexpr"),
              ArgSpec("BLOCK_N", "constexpr")],
        constexprs={"BLOCK": 1024, "BLOCK_N": 512}, options={}, grid=[4],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}, {"const": 1}, {"const": 1}]},
    )
    fields.update(changes)
    return LaunchSpec(**fields)


def inductor_red(r0_numel=512, r0_block=64) -> LaunchSpec:
    return spec(kernel="triton_red_fused_sum_0", kind="inductor",
                args=[ArgSpec("in_ptr0", "tensor", shape=[64, r0_numel], stride=[r0_numel, 1], dtype="float32"),
                      ArgSpec("xnumel", "scalar", value=64, type="int"),
                      ArgSpec("r0_numel", "scalar", value=r0_numel, type="int"),
                      ArgSpec("XBLOCK", "constexpr"), ArgSpec("R0_BLOCK", "constexpr")],
                constexprs={"XBLOCK": 1, "R0_BLOCK": r0_block}, options={"num_warps": 2, "num_stages": 1},
                grid=[64], grid_rule={"kind": "inductor", "grid_type": "Grid1D"})


def names(variants) -> list[str]:
    return [v.describe() for v in variants]


def test_knobs_are_grid_blocks_and_launch_options_not_other_constexprs():
    found = {k.name: k for k in knobs(spec())}
    assert list(found) == ["BLOCK", "num_warps", "num_stages"]  # BLOCK_N does not move the grid
    assert found["BLOCK"].values == (64, 128, 256, 512, 1024, 2048, 4096, 8192)
    assert (found["num_warps"].current, found["num_stages"].current) == (4, 3)  # Triton's defaults
    unexplained = spec(extra={"grid_unexplained": ["BLOCK"]})
    assert [k.name for k in knobs(unexplained)] == ["num_warps", "num_stages"]
    assert [k.name for k in knobs(spec(grid_rule=None))] == ["num_warps", "num_stages"]


def test_inductor_looped_reduction_may_become_a_single_iteration():
    found = {k.name: k for k in knobs(inductor_red(r0_numel=512, r0_block=64))}
    assert found["R0_BLOCK"].values[-1] == 512 and found["R0_BLOCK"].current == 64
    assert found["XBLOCK"].current == 1 and found["num_warps"].current == 2
    persistent = inductor_red()
    persistent.kernel = "triton_per_fused_sum_0"
    assert "R0_BLOCK" not in {k.name for k in knobs(persistent)}


def test_descent_proposes_one_knob_at_a_time_then_moves_to_the_best():
    s, search = spec(), LaunchConfigSearch()
    first = search.propose(s, [], limit=8)
    assert names(first) == ["BLOCK=512", "BLOCK=2048"]
    trials = [Trial(Variant(), True, 1.0), Trial(first[0], True, 1.2), Trial(first[1], True, 0.8)]
    assert names(search.propose(s, trials, limit=8)) == ["BLOCK=4096"]  # from the new best, 1024 was tried
    trials.append(Trial(Variant(constexprs={"BLOCK": 4096}), True, 0.9))
    assert names(search.propose(s, trials, limit=8)) == ["num_warps=2, BLOCK=2048", "num_warps=8, BLOCK=2048"]


def test_wrong_or_failed_variants_never_become_the_best():
    s, search = spec(), LaunchConfigSearch()
    trials = [Trial(Variant(), True, 1.0), Trial(Variant(constexprs={"BLOCK": 2048}), False, 0.1, "wrong_result")]
    assert search.best(s, trials) == {"BLOCK": 1024, "num_warps": 4, "num_stages": 3}


def test_a_resource_failure_rules_out_every_bigger_value():
    s, search = spec(), LaunchConfigSearch()
    oom = "OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448"
    trials = [Trial(Variant(), True, 1.0),
              Trial(Variant(constexprs={"BLOCK": 2048}), True, 0.8),
              Trial(Variant(constexprs={"BLOCK": 4096}), False, None, "compile_error", oom),
              Trial(Variant(options={"num_warps": 2}, constexprs={"BLOCK": 2048}), True, 0.9),
              Trial(Variant(options={"num_warps": 8}, constexprs={"BLOCK": 2048}), True, 0.7)]
    # From the new best (BLOCK=2048, 8 warps) BLOCK=4096 is a new configuration, but it failed for
    # resources with 4 warps: the bigger form is not retried, only the smaller one.
    assert names(search.propose(s, trials, limit=8)) == ["num_warps=8"]  # BLOCK back to 1024
    assert search.ceilings(s, trials) == {"BLOCK": 4096}
    other = [*trials[:2], Trial(Variant(constexprs={"BLOCK": 4096}), False, None, "compile_error", "SyntaxError"),
             *trials[3:]]
    assert LaunchConfigSearch().ceilings(s, other) == {}
    assert "num_warps=8, BLOCK=4096" in names(LaunchConfigSearch().propose(s, other, limit=8))


def test_search_ends_when_no_neighbour_is_left():
    s = spec(constexprs={"BLOCK": 16, "BLOCK_N": 512}, grid=[256])  # the smallest block
    search, trials = LaunchConfigSearch(), [Trial(Variant(), True, 1.0)]
    for _ in range(40):
        batch = search.propose(s, trials, limit=8)
        if not batch:
            break
        trials += [Trial(v, True, 2.0) for v in batch]  # nothing beats the baseline
    assert batch == [] and len(trials) == 1 + 1 + 2 + 2  # BLOCK up; warps down/up; stages down/up


def test_order_and_limit():
    proposed = LaunchConfigSearch(order=["num_warps"]).propose(spec(), [], limit=1)
    assert names(proposed) == ["num_warps=2"]


def test_config_round_trip():
    s = inductor_red()
    v = variant_of(s, {"R0_BLOCK": 512, "num_warps": 8})
    assert v.constexprs == {"R0_BLOCK": 512} and v.options == {"num_warps": 8}
    assert config_of(s, v) == {"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 8, "num_stages": 1}


def test_pass_sets_exact_by_default_fast_math_only_when_allowed():
    s = spec()
    assert names(PassSetProposer().propose(s, [], 4)) == ["passes=exact"]
    fast = PassSetProposer(fast_math=True).propose(s, [], 4)
    assert names(fast) == ["passes=exact", "passes=fast fast-math"]
    assert PassSetProposer().propose(s, [Trial(fast[0], True, 1.0)], 4) == []
