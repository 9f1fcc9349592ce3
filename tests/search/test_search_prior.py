"""Store-seeded starts (``search.prior``, ``store.priors``): a kernel source decided before starts
from its decided config, a new kernel from what won on its category and size on this GPU; only
this user's signed, usable decisions seed; configs illegal here are dropped. Store-level, on
hand-built specs: no kernel runs."""

from __future__ import annotations

import dataclasses
import sqlite3

import pytest

from tritune.loop.families import Family
from tritune.loop.kernel import KernelLoop
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.model.settings import LoopSettings
from tritune.model.target import Target
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.search import LaunchConfigSearch, config_of
from tritune.search.family import Context
from tritune.search.prior import from_prior, knob_roles, prior_configs, traits
from tritune.store import DecisionStore, key_for, size_class
from tritune.store.signing import Signer

H200 = Target("NVIDIA H200", 90, "3.6.0")
MINE, THEIRS = Signer(b"m" * 32), Signer(b"t" * 32)
PASSED = {"ok": True, "mode": "tolerance", "checks": []}


def vector(n=1 << 20, block=64, name="add_kernel", source="a", block_name="BLOCK", dtype="float32") -> LaunchSpec:
    """A hand-written 1-D kernel: the grid is cdiv(n, <block_name>)."""
    return LaunchSpec(
        kernel=name, kind="jit", module="m", source_file="m.py", source="sources/m.py", source_hash=source * 64,
        args=[ArgSpec("x_ptr", "tensor", shape=[n], stride=[1], dtype=dtype),
              ArgSpec("n", "scalar", value=n, type="int"), ArgSpec(block_name, "constexpr")],
        constexprs={block_name: block}, options={}, grid=[-(-n // block)],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": block_name}]})


def pointwise(n=1 << 20) -> LaunchSpec:
    """An Inductor pointwise kernel: its block is Inductor's XBLOCK."""
    return LaunchSpec(
        kernel="triton_poi_fused_add_0", kind="inductor", module="m", source_file="m.py", source="sources/m.py",
        source_hash="c" * 64, args=[ArgSpec("in_ptr0", "tensor", shape=[n], stride=[1], dtype="float32"),
                                    ArgSpec("xnumel", "scalar", value=n, type="int"), ArgSpec("XBLOCK", "constexpr")],
        constexprs={"XBLOCK": 256}, options={"num_warps": 4, "num_stages": 1}, grid=[n // 256],
        grid_rule={"kind": "inductor", "grid_type": "Grid1D"})


@pytest.fixture
def store(tmp_path):
    with DecisionStore(tmp_path / "store.db", signer=MINE) as opened:
        yield opened


def decide(store, spec, config, *, category="elementwise", speedup=2.0, with_traits=True, target=H200, run=None):
    """A verified candidate of ``spec`` setting ``config``, promoted to its key's decision."""
    key = key_for(spec, target)
    variant = dataclasses.replace(Variant(), constexprs={k: v for k, v in config.items() if k in spec.constexprs},
                                  options={k: v for k, v in config.items() if k not in spec.constexprs})
    run = store.start_run({}) if run is None else run
    cand = store.add_candidate(run, key, variant)
    store.claim(cand.id, run)
    store.finish_candidate(cand.id, "verified", verification=PASSED, timings={"time_ms": 1.0})
    store.set_decision(key, variant, baseline_ms=speedup, best_ms=1.0,
                       traits=traits(spec, key, category, variant) if with_traits else None)
    return key


def prior(store, spec, category="elementwise", target=H200):
    return prior_configs(store, key_for(spec, target), spec, category)


def changed(spec, configs):
    """What each config changes from the captured launch (shorter to read than whole configs)."""
    start = config_of(spec, Variant())
    return [{k: v for k, v in c.items() if start[k] != v} for c in configs]


# ----------------------------------------------------------------------- the same source

def test_a_source_decided_on_one_shape_seeds_its_search_on_another(store):
    decide(store, vector(n=1 << 20), {"BLOCK": 1024, "num_warps": 8})
    other_shape = vector(n=1 << 26, block=16)  # another key: another bucket, and launched at BLOCK=16
    configs = prior(store, other_shape)
    # BLOCK=1024 is x64 from 16: outside the descent's window, still a legal grid block
    assert changed(other_shape, configs) == [{"BLOCK": 1024, "num_warps": 8}]
    context = Context(other_shape, [], prior=tuple(configs), baseline_ms=1.0)
    first = LaunchConfigSearch.for_context(context).propose(other_shape, [], 4)[0]
    assert first.constexprs == {"BLOCK": 1024} and first.options == {"num_warps": 8}
    assert from_prior(other_shape, configs, first)
    assert prior(store, vector(n=1 << 20)) == []  # its own key: its decision is the loop's to resume


def test_the_most_confident_decision_of_the_source_comes_first_and_another_gpu_kind_is_not_used(store):
    decide(store, vector(n=1 << 20), {"BLOCK": 512}, speedup=1.2)
    decide(store, vector(n=1 << 22), {"BLOCK": 2048}, speedup=3.0)
    decide(store, vector(n=1 << 24), {"BLOCK": 4096}, speedup=5.0, target=dataclasses.replace(H200, gpu="NVIDIA H100"))
    another_run_kind = dataclasses.replace(H200, triton_version="3.5.0")  # another Triton on the same GPU kind: used
    decide(store, vector(n=1 << 18), {"num_warps": 2}, speedup=1.5, target=another_run_kind)
    spec = vector(n=1 << 16)
    assert changed(spec, prior(store, spec)) == [{"BLOCK": 2048}, {"num_warps": 2}, {"BLOCK": 512}]


def test_a_decision_from_before_traits_seeds_its_source_from_its_variant(store):
    decide(store, vector(n=1 << 20), {"BLOCK": 256, "num_stages": 2}, with_traits=False)
    spec = vector(n=1 << 16)
    assert changed(spec, prior(store, spec)) == [{"BLOCK": 256, "num_stages": 2}]
    assert prior(store, vector(source="b")) == []  # no traits: it seeds no other source


# --------------------------------------------------------------------- category and size

def test_a_new_kernel_starts_from_the_configs_that_won_most_on_its_category_and_size(store):
    won = [(512, 2.0), (1024, 2.0), (256, 1.5), (1024, 2.0), (2048, 3.0), (512, 2.0), (1024, 2.0)]
    for i, (block, speedup) in enumerate(won):
        decide(store, vector(source="0123456"[i], block_name="BLOCK_SIZE"), {"BLOCK_SIZE": block, "num_warps": 8},
               speedup=speedup)
    decide(store, vector(source="r"), {"BLOCK": 4096}, category="reduction")  # another category
    decide(store, vector(n=1 << 30, source="h"), {"BLOCK": 8192})  # far larger: another size class
    new = vector(source="n", block=16)  # BLOCK here is the others' BLOCK_SIZE: the same role (grid0)
    assert knob_roles(new)["BLOCK"] == knob_roles(vector(block_name="BLOCK_SIZE"))["BLOCK_SIZE"] == "grid0"
    assert changed(new, prior(store, new)) == [{"BLOCK": 1024, "num_warps": 8}, {"BLOCK": 512, "num_warps": 8},
                                               {"BLOCK": 2048, "num_warps": 8}]  # by count, then speedup (not 256)
    assert prior(store, new, category="scan") == [] and prior(store, new, category="other") == []


def test_sizes_within_one_class_count_and_a_kernel_without_tensors_has_no_size():
    assert size_class(key_for(vector(n=1 << 20), H200)) == 22  # 4 MiB
    assert size_class(key_for(vector(n=1000, dtype="float16"), H200)) == 11  # 1024 x 2 bytes, bucketed
    empty = dataclasses.replace(vector(), args=[ArgSpec("n", "scalar", value=3, type="int")])
    assert size_class(key_for(empty, H200)) is None


def test_inductor_blocks_and_user_blocks_are_different_knobs_and_register_caps_stay_home(store):
    poi = pointwise()
    decide(store, poi, {"XBLOCK": 1024, "num_warps": 8, "maxnreg": 64})
    assert knob_roles(poi)["XBLOCK"] == "XBLOCK"
    user = vector(source="u", block=64)
    # XBLOCK is not a role of the user kernel: only num_warps (and num_stages, Inductor's 1) carry over
    assert changed(user, prior(store, user)) == [{"num_warps": 8, "num_stages": 1}]
    other_poi = dataclasses.replace(pointwise(), source_hash="d" * 64, kernel="triton_poi_fused_mul_1")
    assert changed(other_poi, prior(store, other_poi)) == [{"XBLOCK": 1024, "num_warps": 8}]  # no maxnreg


def test_a_runs_own_decisions_seed_its_next_runs_not_its_other_keys(store):
    """Which keys of a run decided first depends on its lanes' timing: N lanes must decide what one does."""
    decide(store, vector(n=1 << 22), {"BLOCK": 1024})
    decide(store, vector(source="g"), {"BLOCK": 256})
    first, second = [run.id for run in store.runs()]
    spec = vector(n=1 << 20, block=16)
    key = key_for(spec, H200)
    assert changed(spec, prior_configs(store, key, spec, "elementwise")) == [{"BLOCK": 1024}, {"BLOCK": 256}]
    assert changed(spec, prior_configs(store, key, spec, "elementwise", run_id=first)) == [{"BLOCK": 256}]
    assert changed(spec, prior_configs(store, key, spec, "elementwise", run_id=second)) == [{"BLOCK": 1024}]


# ----------------------------------------------------------------------------- trust

def test_unsigned_foreign_edited_and_rolled_back_decisions_never_seed(tmp_path):
    path = tmp_path / "store.db"
    with DecisionStore(path, signer=THEIRS) as theirs:  # another user's tritune wrote into this file
        decide(theirs, vector(n=1 << 22), {"BLOCK": 2048})
        decide(theirs, vector(source="f"), {"BLOCK": 4096})
    with DecisionStore(path, signer=MINE) as store:
        new = vector(source="n")
        assert prior(store, vector()) == [] and prior(store, new) == []
        decide(store, vector(n=1 << 18), {"BLOCK": 512})
        decide(store, vector(source="g"), {"BLOCK": 256})
        assert changed(vector(), prior(store, vector())) == [{"BLOCK": 512}, {"BLOCK": 256}]  # source, category
        assert changed(new, prior(store, new)) == [{"BLOCK": 256}]
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE decisions SET signature = NULL WHERE variant LIKE '%512%'")  # unsigned now
        conn.execute("UPDATE decisions SET traits = replace(traits, '256', '128') WHERE variant LIKE '%256%'")
    with DecisionStore(path, signer=MINE) as store:
        assert prior(store, vector()) == []
        assert prior(store, new) == []  # its traits were edited: their signature fails
        decide(store, vector(source="h"), {"BLOCK": 128})
        assert changed(new, prior(store, new)) == [{"BLOCK": 128}]
        store.rollback(key_for(vector(source="h"), H200))  # the user turned it off: it seeds nothing either
        assert prior(store, new) == []


# ----------------------------------------------------------------------------- legality

def test_a_config_illegal_here_is_dropped(store):
    decide(store, vector(n=1 << 22, block=16384), {"BLOCK": 16384}, speedup=3.0)  # over every block's bound
    decide(store, vector(n=1 << 18), {"BLOCK": 64, "num_stages": 9}, speedup=2.5)  # no such stage count
    decide(store, vector(n=1 << 20, block=8192), {"num_warps": 8}, speedup=1.1)
    wide = vector(n=1 << 16, block=64)
    assert changed(wide, prior(store, wide)) == [{"BLOCK": 8192, "num_warps": 8}]
    odd = vector(n=1 << 16)
    odd.constexprs["BLOCK"] = 12  # not a power of two: not a knob here (the grid block is no role of it)
    assert "BLOCK" not in knob_roles(odd)
    assert changed(odd, prior(store, odd)) == [{"num_warps": 8}]  # a config gives the knobs it has


def test_a_prior_config_over_a_resource_ceiling_is_not_proposed():
    spec = vector(block=64)
    seed = {**config_of(spec, Variant()), "BLOCK": 4096}
    failed = Trial(Variant(constexprs={"BLOCK": 2048}), False, failure="compile_error",
                   message="out of resource: shared memory, Required: 300000, Hardware limit: 232448")
    context = Context(spec, [failed], prior=(seed,), baseline_ms=1.0)
    proposed = LaunchConfigSearch.for_context(context).propose(spec, [failed], 4)
    assert proposed and all(v.constexprs.get("BLOCK", 64) < 2048 for v in proposed)
    assert LaunchConfigSearch.for_context(Context(spec, [], prior=(seed,))).propose(spec, [], 1)[0].constexprs == {
        "BLOCK": 4096}  # without that failure it is the first proposal


# ------------------------------------------------------------------------------ the loop

def test_the_loop_proposes_the_prior_first_records_it_and_decides_with_traits(store):
    decide(store, vector(n=1 << 22), {"BLOCK": 1024})
    spec = vector(n=1 << 16, block=16)
    loop = KernelLoop.__new__(KernelLoop)
    loop.settings, loop.trials, loop.records, loop._index = LoopSettings(per_round=2), [], [], {}
    loop.store, loop.key, loop.spec, loop.category = store, key_for(spec, H200), spec, "elementwise"
    loop.run_id = store.start_run({})  # a later run than the decision's
    decide(store, vector(n=1 << 24), {"BLOCK": 4096}, speedup=9.0, run=loop.run_id)  # this run's: no seed
    loop.log, loop.prior, loop.profile, loop.knob_roles, loop.registers, loop.base_ms = (
        lambda line: None, None, {}, (), None, 1.0)
    loop._sibling_timeouts, loop._siblings_from_store, loop._skipped = {}, False, set()
    loop.evaluator = type("Evaluator", (), {"root": None})()
    loop.families = [Family(LaunchConfigSearch.name, LaunchConfigSearch(), lambda v: "tolerance", reads_context=True)]
    context = loop._context(Variant(), [])
    assert changed(spec, context.prior) == [{"BLOCK": 1024}]
    (first, family), *_ = loop._propose([LaunchConfigSearch.name], context)
    assert first.constexprs == {"BLOCK": 1024}
    loop._record(first, family, Trial(first, True, 0.1), status="verified")
    loop._record(Variant(constexprs={"BLOCK": 32}), family, Trial(first, True, 0.5), status="verified")
    assert [r.prior for r in loop.records] == [True, False]
    assert traits(spec, loop.key, "elementwise", first) == {"category": "elementwise", "size_class": 18,
                                                             "config": {"grid0": 1024, "num_warps": 4,
                                                                        "num_stages": 3, "maxnreg": None}}


def test_a_version_4_store_gains_decision_traits_and_keeps_its_decisions(tmp_path):
    path = tmp_path / "store.db"
    with DecisionStore(path, signer=MINE) as store:
        decide(store, vector(n=1 << 20), {"BLOCK": 256}, with_traits=False)
    with sqlite3.connect(path) as conn:  # as tritune before version 5 left it
        conn.execute("ALTER TABLE decisions DROP COLUMN traits")
        conn.execute("ALTER TABLE decisions DROP COLUMN traits_signature")
        conn.execute("UPDATE schema_version SET version = 4")
    with DecisionStore(path, signer=MINE) as store:
        assert store._db.opened_version == 4
        [old] = store.decisions(usable_only=True)
        assert old.traits is None
        small = vector(n=1 << 16)
        assert changed(small, prior(store, small)) == [{"BLOCK": 256}]
        decide(store, vector(source="b"), {"BLOCK": 512})
        assert [d.traits is None for d in sorted(store.decisions(), key=lambda d: d.created)] == [True, False]
        assert changed(vector(source="n"), prior(store, vector(source="n"))) == [{"BLOCK": 512}]


def test_traits_travel_with_a_keys_records_and_are_signed_by_the_store_that_adopts_them(tmp_path):
    """A Ray lane's decision comes back to the driver's store (``key_records``/``adopt``): its
    traits come too, signed there, so it seeds other kernels' searches from the driver's store."""
    spec = vector(source="g")
    with DecisionStore(tmp_path / "lane.db", signer=MINE) as lane, \
            DecisionStore(tmp_path / "driver.db", signer=MINE) as driver:
        key = decide(lane, spec, {"BLOCK": 256})
        driver.adopt(driver.start_run({}), key, lane.key_records(key))
        assert driver.decision_for(key).traits == lane.decision_for(key).traits
        new = vector(source="n")
        assert changed(new, prior(driver, new)) == [{"BLOCK": 256}]
