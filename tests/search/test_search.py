"""The launch-configuration space and the coordinate-descent proposer, on hand-built specs."""

from __future__ import annotations

import dataclasses

from conftest import kernel_hash
from tritune.analyze.occupancy import theoretical_occupancy
from tritune.analyze.targets import SPECS
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.search import LaunchConfigSearch, PassSetProposer, config_of, knobs, variant_of
from tritune.search.space import maxnreg_steps


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
    assert list(found) == ["BLOCK", "num_warps", "num_stages", "maxnreg"]  # BLOCK_N does not move the grid
    assert found["BLOCK"].values == (64, 128, 256, 512, 1024, 2048, 4096, 8192)
    assert (found["num_warps"].current, found["num_stages"].current) == (4, 3)  # Triton's defaults
    unexplained = spec(extra={"grid_unexplained": ["BLOCK"]})
    assert [k.name for k in knobs(unexplained)] == ["num_warps", "num_stages", "maxnreg"]
    assert [k.name for k in knobs(spec(grid_rule=None))] == ["num_warps", "num_stages", "maxnreg"]


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
    assert search.best(s, trials) == {"BLOCK": 1024, "num_warps": 4, "num_stages": 3, "maxnreg": None}


def test_a_slower_neighbour_is_not_walked_from_when_the_baseline_time_is_known():
    # the loop never records the captured launch as a trial: without its time, the fastest of
    # the slower neighbours became the best and the descent walked away from the baseline
    s = spec()
    trials = [Trial(Variant(constexprs={"BLOCK": 512}), True, 1.2),
              Trial(Variant(constexprs={"BLOCK": 2048}), True, 1.1)]
    assert LaunchConfigSearch().best(s, trials)["BLOCK"] == 2048
    assert LaunchConfigSearch(baseline_ms=1.0).best(s, trials)["BLOCK"] == 1024
    assert names(LaunchConfigSearch(baseline_ms=1.0).propose(s, trials, limit=8)) == ["num_warps=2", "num_warps=8"]
    trials.append(Trial(Variant(constexprs={"BLOCK": 4096}), True, 0.9))
    assert LaunchConfigSearch(baseline_ms=1.0).best(s, trials)["BLOCK"] == 4096


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
    # only Triton's OutOfResources is a resource failure, not a message that mentions resources
    wordy = "CompilationError: at 3:4: shared memory and registers in the message"
    assert LaunchConfigSearch().ceilings(s, [*trials[:2], dataclasses.replace(trials[2], message=wordy)]) == {}
    # CUDA refusing the launch for registers x threads is a resource failure too, from a worker's fault
    launch = dataclasses.replace(trials[2], failure="runtime_fault",
                                 message="RuntimeError: Triton Error [CUDA]: too many resources requested for launch")
    assert LaunchConfigSearch().ceilings(s, [*trials[:2], launch]) == {"BLOCK": 4096}
    fault = dataclasses.replace(launch, message="RuntimeError: Triton Error [CUDA]: an illegal memory access")
    assert LaunchConfigSearch().ceilings(s, [*trials[:2], fault]) == {}
    assert "num_warps=8, BLOCK=4096" in names(LaunchConfigSearch().propose(s, other, limit=8))


def test_search_ends_when_no_neighbour_is_left():
    s = spec(constexprs={"BLOCK": 16, "BLOCK_N": 512}, grid=[256])  # the smallest block
    search, trials = LaunchConfigSearch(), [Trial(Variant(), True, 1.0)]
    for _ in range(40):
        batch = search.propose(s, trials, limit=8)
        if not batch:
            break
        trials += [Trial(v, True, 2.0) for v in batch]  # nothing beats the baseline
    # BLOCK up; warps down/up; stages down/up; maxnreg from unset down to the first cap
    assert batch == [] and len(trials) == 1 + 1 + 2 + 2 + 1
    assert trials[-1].variant.options == {"maxnreg": 168}


def test_order_and_limit():
    proposed = LaunchConfigSearch(order=["num_warps"]).propose(spec(), [], limit=1)
    assert names(proposed) == ["num_warps=2"]


def test_config_round_trip():
    s = inductor_red()
    v = variant_of(s, {"R0_BLOCK": 512, "num_warps": 8})
    assert v.constexprs == {"R0_BLOCK": 512} and v.options == {"num_warps": 8}
    assert config_of(s, v) == {"XBLOCK": 1, "R0_BLOCK": 512, "num_warps": 8, "num_stages": 1, "maxnreg": None}


def test_pass_sets_exact_by_default_fast_math_only_when_allowed():
    s = spec()
    assert names(PassSetProposer().propose(s, [], 4)) == ["passes=exact"]
    fast = PassSetProposer(fast_math=True).propose(s, [], 4)
    assert names(fast) == ["passes=exact", "passes=fast fast-math"]
    assert PassSetProposer().propose(s, [Trial(fast[0], True, 1.0)], 4) == []


# ------------------------------------------------------------------------------------ maxnreg

def test_maxnreg_is_the_last_knob_unset_at_the_top_of_occupancy_steps():
    found = {k.name: k for k in knobs(spec())}
    assert list(found)[-3:] == ["num_warps", "num_stages", "maxnreg"]
    reg = found["maxnreg"]
    assert reg.kind == "option" and reg.current is None
    assert reg.values == (32, 40, 48, 56, 64, 72, 80, 96, 128, 168, None)  # None: unset, the top
    assert reg.neighbours(None) == [168] and reg.neighbours(32) == [40]
    captured = {k.name: k for k in knobs(spec(options={"maxnreg": 100}))}["maxnreg"]
    assert captured.current == 100 and captured.neighbours(100) == [96, 128]


def test_every_maxnreg_step_buys_one_more_block_of_four_warps():
    # Each step is the largest cap at its block count: one register more loses a block.
    sm = SPECS[90]
    blocks = [theoretical_occupancy(sm, registers=r, num_warps=4, shared_bytes=0).blocks_per_sm
              for r in maxnreg_steps()]
    fewer = [theoretical_occupancy(sm, registers=r + 1, num_warps=4, shared_bytes=0).blocks_per_sm
             for r in maxnreg_steps()]
    assert blocks == [16, 12, 10, 9, 8, 7, 6, 5, 4, 3]
    assert all(f < b for f, b in zip(fewer, blocks))
    assert theoretical_occupancy(sm, registers=255, num_warps=4, shared_bytes=0).blocks_per_sm == 2


def test_known_register_count_offers_only_caps_below_it():
    trimmed = {k.name: k for k in knobs(spec(), registers=70)}["maxnreg"]
    assert trimmed.values == (32, 40, 48, 56, 64, None) and trimmed.neighbours(None) == [64]
    assert {k.name: k for k in knobs(spec(), registers=32)}["maxnreg"].values == (None,)
    proposed = LaunchConfigSearch(order=["maxnreg"], registers=70).propose(spec(), [], limit=2)
    assert names(proposed) == ["maxnreg=64"]
    # a best found with the full ladder (maxnreg=128) is off the trimmed one: nearest on each side
    trials = [Trial(Variant(), True, 1.0), Trial(Variant(options={"maxnreg": 128}), True, 0.5)]
    assert names(LaunchConfigSearch(order=["maxnreg"], registers=70).propose(spec(), trials, 4)) == ["maxnreg=64"]


def test_descent_steps_maxnreg_down_from_unset_and_on_from_a_better_cap():
    s, search = spec(), LaunchConfigSearch(order=["maxnreg"])
    assert names(search.propose(s, [], limit=4)) == ["maxnreg=168"]
    trials = [Trial(Variant(), True, 1.0), Trial(Variant(options={"maxnreg": 168}), True, 0.9)]
    assert names(search.propose(s, trials, limit=4)) == ["maxnreg=128"]  # unset was tried
    assert variant_of(s, {"maxnreg": None}).is_baseline  # unset again is the captured launch
    captured = spec(options={"maxnreg": 64})
    assert variant_of(captured, {"maxnreg": None}).options == {"maxnreg": None}  # unset a captured cap


def test_resource_failures_and_unset_maxnreg_compare_without_type_errors():
    oom = "OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448"
    s, search = spec(), LaunchConfigSearch()
    trials = [Trial(Variant(), True, 1.0),
              Trial(Variant(options={"maxnreg": 128}), True, 0.8),
              Trial(Variant(options={"maxnreg": 128}, constexprs={"BLOCK": 2048}), False, None, "compile_error", oom)]
    # a cap is below unset: setting one is never "bigger", so maxnreg gets no ceiling; BLOCK does
    assert search.ceilings(s, trials) == {"BLOCK": 2048}
    assert names(search.propose(s, trials, limit=8)) == ["maxnreg=128, BLOCK=512"]
    # a captured cap: a failure at a bigger cap, or unset, rules out every bigger value and unset
    capped = spec(options={"maxnreg": 64})
    def failed_at(value):
        return Trial(Variant(options={"maxnreg": value}), False, None, "compile_error", "out of resource: registers")

    def proposed(trials):
        return names(LaunchConfigSearch(order=["maxnreg"]).propose(capped, trials, limit=8))

    assert proposed([Trial(Variant(), True, 1.0)]) == ["maxnreg=56", "maxnreg=72"]
    assert search.ceilings(capped, [failed_at(72)]) == {"maxnreg": 72}
    assert proposed([Trial(Variant(), True, 1.0), failed_at(72)]) == ["maxnreg=56"]
    assert search.ceilings(capped, [failed_at(None)]) == {"maxnreg": None}
    assert search.ceilings(capped, [failed_at(None), failed_at(128), failed_at(32)]) == {"maxnreg": 128}
    # from a best at 168, unset is a neighbour only until unset failed
    best_168 = [Trial(Variant(), True, 1.0), Trial(Variant(options={"maxnreg": 168}), True, 0.5)]
    assert proposed(best_168) == ["maxnreg=128", "maxnreg=None"]
    assert proposed([*best_168, failed_at(None)]) == ["maxnreg=128"]


def test_triton_takes_maxnreg_as_a_cuda_launch_option():
    # Replay passes variant options as keywords to JITFunction.run, which hands them to the CUDA
    # backend's parse_options, as triton.compile does with ``options``: CUDAOptions.maxnreg
    # becomes the PTX .maxnreg directive. Fails if Triton renames or drops the option.
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    from kernels import SIGNATURES, divide_chain

    signature, constexprs = SIGNATURES["divide_chain"]
    source = ASTSource(divide_chain, signature=signature, constexprs=constexprs)
    compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options={"maxnreg": 40})
    assert compiled.metadata.maxnreg == 40 and ".maxnreg 40" in compiled.asm["ptx"]


def test_a_maxnreg_variant_replays_under_the_interpreter(tmp_path, monkeypatch):
    # The interpreter drops launch options it does not know: a maxnreg variant runs (and times
    # the same) on the CPU, so the loop needs no special case for it there.
    import shutil
    from pathlib import Path

    import torch

    from tritune.capture.spec import read_launches, write_launches
    from tritune.replay import Replay, make_args

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    kernels = Path(__file__).parents[1] / "programs" / "replay_kernels.py"
    (tmp_path / "sources").mkdir()
    shutil.copy(kernels, tmp_path / "sources" / "replay_kernels.py")
    n = 300
    tensors = [ArgSpec(name, "tensor", shape=[n], stride=[1], dtype="float32", device="cuda:0",
                       written=name == "out_ptr") for name in ("x_ptr", "y_ptr", "out_ptr")]
    write_launches(tmp_path, [spec(kernel="add_kernel", module="replay_kernels", source_file=str(kernels),
                                   source="sources/replay_kernels.py", grid=[3], constexprs={"BLOCK": 128},
                                   source_hash=kernel_hash(kernels.read_text(), "add_kernel"),
                                   args=[*tensors, ArgSpec("n", "scalar", value=n, type="int"),
                                         ArgSpec("BLOCK", "constexpr")])])
    [captured] = read_launches(tmp_path)
    variant = variant_of(captured, {"maxnreg": 40})
    args = make_args(captured, tmp_path)
    Replay(captured, variant, root=tmp_path)(args)
    assert variant.options == {"maxnreg": 40}
    assert torch.equal(args["out_ptr"], args["x_ptr"] + args["y_ptr"])


# ------------------------------------------------------------------------- which knobs changed

def test_changed_knobs_names_what_differs_from_the_captured_launch():
    from tritune.search import changed_knobs

    red = inductor_red(r0_numel=512, r0_block=64)  # XBLOCK 1, R0_BLOCK 64, 2 warps, 1 stage
    assert changed_knobs(red, Variant()) == []
    # in the space's order whatever the variant's, and a value equal to the captured one is no change
    turned = Variant(options={"maxnreg": 128, "num_warps": 4, "num_stages": 1}, constexprs={"R0_BLOCK": 512, "XBLOCK": 1})
    assert changed_knobs(red, turned) == ["R0_BLOCK", "num_warps", "maxnreg"]
    assert changed_knobs(spec(), Variant(options={"num_stages": 3, "num_warps": 8})) == ["num_warps"]  # 3: the default
    assert changed_knobs(spec(), Variant(options={"enable_fp_fusion": False})) == ["enable_fp_fusion"]
    assert changed_knobs(spec(), Variant(passes=("exact",))) == ["pass:exact"]
    assert changed_knobs(spec(), Variant(passes=("fast",), fast_math=True)) == ["pass:fast fast-math"]


def test_changed_knobs_of_source_rewrites_come_from_the_knobs_their_proposers_set():
    from tritune.search import changed_knobs
    from tritune.search.looped_reduction import KNOBS

    hints = Variant(name="any name", source="...", knobs=("evict:load0=evict_last", "evict:load2=evict_first"))
    assert changed_knobs(spec(), hints) == ["evict:load0=evict_last", "evict:load2=evict_first"]
    looped = Variant(name="looped reduction: R0_BLOCK=128", source="...", options={"num_warps": 8}, knobs=KNOBS)
    assert changed_knobs(spec(), looped) == ["num_warps", "persistent->looped", "R0_BLOCK"]
    # a name is never read back: a source without knobs is "source", whatever it is called
    assert changed_knobs(spec(), Variant(name="cache hints: load0 evict_last", source="...")) == ["source"]
    assert changed_knobs(spec(), Variant(name="someone's kernel", source="...")) == ["source"]


def test_a_variant_without_knobs_keeps_its_json_and_one_with_them_round_trips():
    assert "knobs" not in Variant(name="b", constexprs={"BLOCK": 64}).to_json()
    turned = Variant(name="h", source="...", knobs=["evict:load0=evict_first"])
    assert turned.knobs == ("evict:load0=evict_first",) and Variant.from_json(turned.to_json()) == turned


REDUCTION = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(in_out_ptr0, out_ptr0, n, BLOCK: tl.constexpr):
    offs = tl.arange(0, BLOCK)
    a = tl.load(in_out_ptr0 + offs, eviction_policy="evict_last")
    tl.store(out_ptr0, tl.sum(a, 0))
    b = tl.load(in_out_ptr0 + offs, eviction_policy="evict_first")
    tl.store(in_out_ptr0 + offs, b * 2)
'''


def noalias_spec(tmp_path, overlapping, text=REDUCTION) -> tuple[LaunchSpec, PassSetProposer]:
    (tmp_path / "sources").mkdir(exist_ok=True)
    (tmp_path / "sources" / "m.py").write_text(text)
    extra = {} if overlapping is None else {"overlapping": overlapping}
    return spec(extra=extra), PassSetProposer(root=tmp_path)


def test_the_noalias_pass_set_only_for_disjoint_captured_arguments(tmp_path):
    disjoint, proposer = noalias_spec(tmp_path, [])
    proposed = proposer.propose(disjoint, [], 4)
    assert names(proposed) == ["passes=exact", "passes=exact+noalias, assumes noalias"]
    # the assumption by its one name: in the pass list the compiler hook reads, and in assumes, the guard
    assert proposed[1].passes == ("exact", "noalias") and proposed[1].assumes == ("noalias",)
    assert proposer.propose(disjoint, [Trial(v, True, 1.0) for v in proposed], 4) == []
    for overlapping in ([["in_out_ptr0", "out_ptr0"]], None):  # overlapping, or a capture that did not record it
        found, proposer = noalias_spec(tmp_path, overlapping)
        assert names(proposer.propose(found, [], 4)) == ["passes=exact"]


def test_the_noalias_pass_set_only_where_a_pointer_is_loaded_twice_around_a_store(tmp_path):
    once = REDUCTION.replace('b = tl.load(in_out_ptr0 + offs, eviction_policy="evict_first")', "b = a")
    for text in (once, REDUCTION.replace("tl.store(", "tl.debug_barrier() or (")):
        found, proposer = noalias_spec(tmp_path, [], text)
        assert names(proposer.propose(found, [], 4)) == ["passes=exact"]
    found, _ = noalias_spec(tmp_path, [])
    assert names(PassSetProposer().propose(found, [], 4)) == ["passes=exact"]  # m.py is not on this machine
