"""The config search's first group far from the roofline: it spans the space, then the descent refines."""

from __future__ import annotations

from test_search_cost import inductor_softmax, vector_add
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.search import Context, LaunchConfigSearch, config_of, variant_of
from tritune.search.proposers import FAR_FROM_ROOFLINE, SPAN_SIZE, _may_loop

OOM = "OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448"
ADD = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs) + tl.load(y_ptr + offs), mask=offs < n)
'''


def context(spec, roofline, trials=(), root=None) -> Context:
    facts = {"registers": 20} if roofline is None else {"registers": 20, "roofline": roofline}
    return Context(spec, list(trials), root=root, profile={"facts": facts}, registers=20, baseline_ms=1.0)


def proposed(ctx: Context, limit: int = 64) -> list[Variant]:
    return LaunchConfigSearch().propose_in(ctx, limit)


def values(variants, knob: str = "BLOCK") -> list:
    return [v.constexprs.get(knob, 16) if knob == "BLOCK" else v.options.get(knob) for v in variants]


def test_a_far_off_launch_spans_x4_x16_x64_in_its_first_round_best_estimate_first():
    spec = vector_add()  # BLOCK=16 over 64M elements: ~7% of the roofline on an H200
    first = proposed(context(spec, 0.07))
    assert {64, 256, 1024} <= set(values(first))  # x4, x16, x64 (/4 is under the ladder's 16)
    assert 32 not in values(first)  # no one-step neighbour before the span is done
    assert values(first)[0] == 1024 and len(first) <= SPAN_SIZE
    assert LaunchConfigSearch().first_round_size(context(spec, 0.07)) == len(first)
    # the loop takes a round at a time: the same configs, in the same order
    assert [v.key() for v in proposed(context(spec, 0.07), limit=4)] == [v.key() for v in first[:4]]


def test_a_launch_near_its_roofline_or_with_none_known_gets_its_neighbours_only():
    spec = vector_add()
    for roofline in (FAR_FROM_ROOFLINE, 0.8, None):  # None: the interpreter's times give no roofline
        assert [v.describe() for v in proposed(context(spec, roofline))] == ["BLOCK=32"]
        assert LaunchConfigSearch().first_round_size(context(spec, roofline)) == 0
    # far, but launch-bound: its time is the launch's, no block size moves it
    launch_bound = context(spec, 0.07)
    launch_bound = Context(spec, profile={**launch_bound.profile, "bottleneck": {"kind": "launch-bound"}})
    assert [v.describe() for v in proposed(launch_bound)] == ["BLOCK=32"]


def test_the_span_goes_down_by_4_where_the_ladder_allows_and_not_past_a_resource_ceiling():
    spec = vector_add(block=1024)
    assert {256, 4096} <= set(values(proposed(context(spec, 0.1))))  # /4 and x4 (x16 is past 8192)
    failed = [Trial(Variant(constexprs={"BLOCK": 4096}), False, None, "compile_error", OOM)]
    assert max(values(proposed(context(spec, 0.1, failed)))) < 4096


def test_warps_follow_the_block_and_no_warp_is_left_without_elements():
    spec = vector_add()  # captured with 4 warps on 16 elements
    first = proposed(context(spec, 0.07))
    warps = {}
    for variant in first:
        config = config_of(spec, variant)
        warps.setdefault(config["BLOCK"], set()).add(config["num_warps"])
        # no new warp without elements; the captured shape may halve its own (fewer idle ones)
        assert config["BLOCK"] >= config["num_warps"] * 32 or config["num_warps"] in (1, 2) and config["BLOCK"] == 16
    assert warps[16] == {1, 2} and warps[1024] == {2, 4, 8}  # 1024 elements: 4 warps matched, halved, doubled
    assert max(warps[64]) < min(warps[1024]) + 1


def test_the_span_keeps_the_captured_shapes_warps_one_step_either_way():
    """Warps matched to the tile can all lie far from the captured ones (a tile of 4096 elements
    matches 16, spreads 8 to 32): the captured shape's own halved and doubled warps, a descent's
    first steps, are in the first round whatever the cost model ranks, and the round keeps its size."""
    spec = vector_add(block=4096, warps=4)
    first = [config_of(spec, v) for v in proposed(context(spec, 0.1))]
    assert {"BLOCK": 4096, "num_warps": 2} in [{k: c[k] for k in ("BLOCK", "num_warps")} for c in first]
    assert {"BLOCK": 4096, "num_warps": 8} in [{k: c[k] for k in ("BLOCK", "num_warps")} for c in first]
    assert len(first) <= SPAN_SIZE


def test_the_descent_refines_around_the_fastest_spanning_candidate():
    spec = vector_add()
    first = proposed(context(spec, 0.07))
    fastest = variant_of(spec, {"BLOCK": 1024, "num_warps": 4})
    trials = [Trial(v, True, 0.15 if v.key() == fastest.key() else 0.5) for v in first]
    assert fastest.key() in {v.key() for v in first}
    after = proposed(context(spec, 0.07, trials))
    assert [v.describe() for v in after] == ["BLOCK=512", "BLOCK=2048"]  # one step either side of 1024, 4 warps
    assert LaunchConfigSearch().first_round_size(context(spec, 0.07, trials)) == 0


def test_the_span_counts_as_seeded_rounds_for_the_arbiter():
    # the loop's patience stops after flat rounds unless they tried seeds: a span over several
    # rounds must not be cut after two (``loop.kernel._seeded`` asks ``seed_configs``)
    from tritune.loop.kernel import _seeded
    from tritune.search import Family

    spec = vector_add()
    family = Family(LaunchConfigSearch.name, LaunchConfigSearch(), lambda v: "tolerance", reads_context=True)
    far, near = context(spec, 0.07), context(spec, 0.8)
    span = proposed(far)
    assert _seeded(spec, far, [(span[-1], family)])
    assert not _seeded(spec, near, [(span[-1], family)])


def test_stages_spread_only_for_a_kernel_that_loops(tmp_path):
    spec = inductor_softmax()  # Inductor's looped reduction; its source is not on this machine
    configs = [config_of(spec, v) for v in proposed(context(spec, 0.05))]
    assert {c["num_stages"] for c in configs} == {1, 3}  # captured at 1: two steps up (none below)
    # every block knob spans (x16, x64), the cost model keeping the best ``SPAN_SIZE``
    assert {c["R0_BLOCK"] for c in configs} >= {256, 1024} and {c["XBLOCK"] for c in configs} >= {16, 64}
    assert configs[0]["R0_BLOCK"] == 1024 and len(configs) == SPAN_SIZE  # a row an iteration ranks first
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "m.py").write_text(ADD)
    add = vector_add()
    assert {config_of(add, v)["num_stages"] for v in proposed(context(add, 0.07, root=tmp_path))} == {3}
    assert {config_of(add, v)["num_stages"] for v in proposed(context(add, 0.07))} == {1, 3, 5}
    looped = ADD.replace("    offs =", "    for i in range(2):\n        offs =")
    assert not _may_loop(ADD, "add_kernel") and _may_loop(looped, "add_kernel")
    assert _may_loop(None, "add_kernel") and _may_loop(ADD, "other_kernel")


def test_the_loop_builds_the_whole_span_in_its_first_round_and_per_round_near_the_roofline():
    from types import SimpleNamespace

    from tritune.loop.kernel import KernelLoop
    from tritune.model.settings import LoopSettings
    from tritune.search.family import Family

    spec = vector_add()
    families = [Family(LaunchConfigSearch.name, LaunchConfigSearch(), lambda v: "tolerance", reads_context=True),
                Family("passes", None, lambda v: "bitwise")]
    loop = SimpleNamespace(settings=LoopSettings(per_round=4))
    far = KernelLoop._round_size(loop, context(spec, 0.07), families)
    assert far == LaunchConfigSearch().first_round_size(context(spec, 0.07)) + 1 > 4  # the span, and passes' slot
    assert KernelLoop._round_size(loop, context(spec, 0.8), families) == 4
    assert KernelLoop._round_size(loop, context(spec, 0.07), families[1:]) == 4  # no config search: per_round


def test_after_the_span_the_rounds_are_per_round_again():
    from types import SimpleNamespace

    from tritune.loop.kernel import KernelLoop
    from tritune.model.settings import LoopSettings
    from tritune.search.family import Family

    spec = vector_add()
    tried = [Trial(v, True, 1.0) for v in proposed(context(spec, 0.07))]
    families = [Family(LaunchConfigSearch.name, LaunchConfigSearch(), lambda v: "tolerance", reads_context=True),
                *(Family(f"other{i}", None, lambda v: "bitwise") for i in range(5))]
    loop = SimpleNamespace(settings=LoopSettings(per_round=4))
    assert KernelLoop._round_size(loop, context(spec, 0.07, trials=tried), families) == 4
