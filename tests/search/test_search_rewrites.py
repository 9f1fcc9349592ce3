"""The ``source-rewrite`` family with fake rules: the variants it proposes and their modes, fast-math
only when allowed, the order the bottleneck and the hints give, the held rewrite's parameters
walked, the config search on the rewritten source, and the chain a decision keeps."""

from __future__ import annotations

import dataclasses
import json

import pytest
from fake_rules import BrokenRule, CommentRule, GridRule

import tritune.rewrites
from tritune.loop.families import ALIASES, DEFAULT_ORDER, REGISTRY, Setup, families_for
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.profile import FAMILIES
from tritune.rewrites.base import FAST_MATH, NOALIAS, TOLERANCE
from tritune.search import chain
from tritune.search.changes import changed_knobs
from tritune.search.family import Context
from tritune.search.proposers import LaunchConfigSearch
from tritune.search.rewrites import SourceRewriteProposer, launch_facts, mode

SOURCE = '''import triton
import triton.language as tl


@triton.jit
def copy_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)
'''


def spec() -> LaunchSpec:
    return LaunchSpec(kernel="copy_kernel", kind="jit", module="m", source_file="k.py", source="sources/k.py",
                      source_hash="0" * 64,
                      args=[ArgSpec("x_ptr", "tensor", shape=[4096], stride=[1], dtype="float16"),
                            ArgSpec("y_ptr", "tensor", shape=[4096], stride=[1], dtype="float32"),
                            ArgSpec("n", "scalar", value=4096, type="int"), ArgSpec("BLOCK", "constexpr")],
                      constexprs={"BLOCK": 1024}, options={"num_warps": 4}, grid=[4],
                      grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}, {"const": 1}, {"const": 1}]})


@pytest.fixture
def root(tmp_path):
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "k.py").write_text(SOURCE)
    return str(tmp_path)


def register(monkeypatch, *rules):
    monkeypatch.setattr(tritune.rewrites, "RULES", {rule.name: rule for rule in rules})


def proposed(root, limit=8, **context):
    return SourceRewriteProposer().propose_in(Context(spec(), root=root, **context), limit)


def test_each_rewrite_becomes_a_variant_verified_in_the_mode_of_its_class(monkeypatch, root):
    register(monkeypatch, CommentRule("pipeline-loop"), CommentRule("broadcast-sum-to-dot", exact=TOLERANCE),
             CommentRule("fast", exact=FAST_MATH))
    variants = proposed(root, fast_math=True)
    assert [v.name for v in variants] == ["pipeline-loop(S=2)", "broadcast-sum-to-dot(S=2)", "fast(S=2)"]
    assert [mode(v) for v in variants] == ["bitwise", "tolerance", "fast_math"]
    first = variants[0]
    assert first.source == SOURCE.replace("    offs =", "    # pipeline-loop S=2\n    offs =", 1)
    assert first.rewrite == {"rule": "pipeline-loop", "exact": "exact", "params": {"S": 2}}
    assert not first.options and not first.constexprs and not first.fast_math and variants[2].fast_math
    assert Variant.from_json(json.loads(json.dumps(first.to_json()))) == first


def test_fast_math_rewrites_only_with_fast_math_and_no_alias_only_where_capture_saw_it(monkeypatch, root):
    aliasing = CommentRule("aliasing", assumes=(NOALIAS,))
    register(monkeypatch, CommentRule("fast", exact=FAST_MATH), aliasing, CommentRule("exact"))
    assert [v.name for v in proposed(root)] == ["exact(S=2)"]  # capture recorded nothing: unknown
    assert [v.name for v in proposed(root, fast_math=True)] == ["fast(S=2)", "exact(S=2)"]
    assert aliasing.seen and not any(k.noalias for k in aliasing.seen)  # the rules were not told they may
    overlapping = dataclasses.replace(spec(), extra={"overlapping": [["x_ptr", "y_ptr"]]})
    assert [v.name for v in SourceRewriteProposer().propose_in(Context(overlapping, root=root), 8)] == ["exact(S=2)"]
    disjoint = dataclasses.replace(spec(), extra={"overlapping": []})
    variants = SourceRewriteProposer().propose_in(Context(disjoint, root=root), 8)
    assert [v.name for v in variants] == ["aliasing(S=2)", "exact(S=2)"]
    assert variants[0].assumes == (NOALIAS,) and variants[1].assumes == ()  # the applier's guard reads it
    assert aliasing.seen[-1].noalias


def test_the_bottleneck_orders_the_rules_and_a_hint_moves_its_rule_up(monkeypatch, root):
    names = ("hoist-invariant-load", "broadcast-sum-to-dot", "pipeline-loop", "persistent-grid")
    register(monkeypatch, *(CommentRule(name) for name in names))

    def rules(kind=None, hints=(), bottleneck_hints=()):
        profile = {"bottleneck": {"kind": kind, "hints": list(bottleneck_hints)}} if kind else {}
        return [v.rewrite["rule"] for v in proposed(root, profile=profile, hints=hints)]

    assert rules() == list(names)  # no bottleneck: the registry's order
    assert rules("compute-bound")[0] == "broadcast-sum-to-dot"
    assert rules("launch-bound")[0] == "persistent-grid" and rules("tail-effect")[0] == "persistent-grid"
    assert rules("latency-bound")[:2] == ["pipeline-loop", "hoist-invariant-load"]
    assert rules("memory-far-from-roofline")[:2] == ["pipeline-loop", "hoist-invariant-load"]
    assert rules("unknown", hints=({"action": "more_stages", "text": ""},))[0] == "pipeline-loop"
    assert rules("unknown", bottleneck_hints=[{"action": "whole_waves", "text": ""}])[0] == "persistent-grid"


def test_tried_rewrites_are_not_proposed_again_and_the_limit_holds(monkeypatch, root):
    register(monkeypatch, CommentRule("a"), CommentRule("b"), CommentRule("c"))
    first = proposed(root, limit=2)
    assert [v.name for v in first] == ["a(S=2)", "b(S=2)"]
    renamed = Variant(name="same text, another name", source=first[0].source)
    trials = [Trial(renamed, False, failure="wrong_result"), Trial(first[1], True, 1.0)]
    assert [v.name for v in proposed(root, trials=trials)] == ["c(S=2)"]


def test_no_source_a_broken_rule_or_no_rules_propose_nothing_and_never_raise(monkeypatch, root, tmp_path):
    register(monkeypatch, BrokenRule())
    assert proposed(root) == []
    register(monkeypatch, CommentRule())
    assert proposed(str(tmp_path / "elsewhere")) == []
    assert SourceRewriteProposer().propose_in(Context(spec(), root=root), 0) == []


def test_the_rules_see_the_captured_launch(monkeypatch, root):
    rule = CommentRule()
    register(monkeypatch, rule)
    proposed(root, profile={"facts": {"sm_count": 132}})
    assert rule.seen[0].launch == launch_facts(spec(), {"sm_count": 132}) == {
        "constexprs": {"BLOCK": 1024}, "options": {"num_warps": 4}, "grid": [4, 1, 1],
        "grid_rule": spec().grid_rule, "dtypes": {"x_ptr": "float16", "y_ptr": "float32"},
        "signature": {"x_ptr": "*fp16", "y_ptr": "*fp32", "n": "i32", "BLOCK": "constexpr"},
        "shapes": {"x_ptr": [4096], "y_ptr": [4096]}, "scalars": {"n": 4096}, "sm_count": 132}
    assert "sm_count" not in launch_facts(spec())  # unknown: the rule assumes nothing


def held(root, rule_name="pipeline-loop", **config) -> Variant:
    """The decision a fake rule's rewrite (S=2) became, with ``config`` found on top of it."""
    [variant] = [v for v in proposed(root, fast_math=True) if v.rewrite["rule"] == rule_name]
    return chain.on_rewrite(variant, Variant(**config)) if config else variant


def test_once_a_rewrite_is_held_its_parameters_are_walked_with_the_held_config(monkeypatch, root):
    register(monkeypatch, CommentRule("pipeline-loop"), CommentRule("other"))
    decision = held(root, constexprs={"BLOCK": 2048})
    walked = proposed(root, accepted=decision)
    assert [v.name for v in walked] == ["pipeline-loop(S=1) + BLOCK=2048", "pipeline-loop(S=3) + BLOCK=2048",
                                        "pipeline-loop(S=2)", "other(S=2)"]
    assert "# pipeline-loop S=3\n" in walked[1].source and walked[1].constexprs == {"BLOCK": 2048}
    assert walked[1].rewrite["params"] == {"S": 3}
    assert mode(walked[1]) == "tolerance"  # a block size on top: the config's mode wins over exact
    assert changed_knobs(spec(), walked[1]) == ["pipeline-loop(S=3)", "BLOCK"]


def test_the_config_search_continues_on_the_held_rewrite(monkeypatch, root):
    register(monkeypatch, CommentRule("broadcast-sum-to-dot", exact=TOLERANCE))
    decision = held(root, "broadcast-sum-to-dot")
    [config] = [f for f in families_for(spec(), root=root) if f.name == "launch-config"]
    plain = config.propose(Context(spec(), root=root), 8)
    assert all(v.source is None and v.rewrite is None for v in plain)  # nothing held: the captured source
    on_it = config.propose(Context(spec(), root=root, accepted=decision), 8)
    assert on_it and all(v.source == decision.source and v.rewrite == decision.rewrite for v in on_it)
    assert on_it[0].name == "broadcast-sum-to-dot(S=2) + BLOCK=512" and on_it[0].constexprs == {"BLOCK": 512}
    assert config.mode(on_it[0]) == "tolerance"
    # its history is the trials on that source only: a faster block on the captured source moves nothing
    faster = Variant(constexprs={"BLOCK": 2048})
    again = config.propose(Context(spec(), [Trial(on_it[0], True, 5.0), Trial(faster, True, 0.1)], root=root,
                                   accepted=decision), 8)
    assert on_it[0].key() not in {v.key() for v in again} and all(v.source == decision.source for v in again)


def test_a_register_cap_on_an_exact_rewrite_stays_bitwise_and_fast_math_stays_fast_math(monkeypatch, root):
    register(monkeypatch, CommentRule("exact"), CommentRule("fast", exact=FAST_MATH))
    search = LaunchConfigSearch(order=["maxnreg"], base=held(root, "exact"))
    cap = search.propose(spec(), [], 1)[0]
    assert cap.options.keys() == {"maxnreg"} and cap.rewrite["rule"] == "exact"
    [config] = [f for f in families_for(spec()) if f.name == "launch-config"]
    assert config.mode(cap) == "bitwise"
    fast = chain.on_rewrite(held(root, "fast"), Variant(options={"maxnreg": 128}))
    assert fast.fast_math and config.mode(fast) == "fast_math"


def test_the_chain_without_a_config_is_the_rule_alone_and_old_variants_keep_their_json(monkeypatch, root):
    register(monkeypatch, CommentRule("pipeline-loop"))
    assert changed_knobs(spec(), held(root)) == ["pipeline-loop(S=2)"]
    assert "rewrite" not in Variant(name="x", options={"num_warps": 8}).to_json()  # store keys unchanged
    assert Variant.from_json({"name": "old", "options": {}, "constexprs": {}, "passes": [], "fast_math": False,
                              "source": None}).rewrite is None


def test_every_family_is_named_in_the_profiles_vocabulary():
    named = set(FAMILIES) | {name for names in ALIASES.values() for name in names}
    made = [family for family in (make(Setup()) for make in REGISTRY) if family is not None]
    assert {family.name for family in made} <= named  # the llm family is costly: outside the bottleneck's order
    assert [family.name for family in made] == [name for name in DEFAULT_ORDER if name != "llm"]
    assert "source-rewrite" in FAMILIES


def test_an_imported_exact_rewrite_is_checked_bitwise_and_no_claim_loosens_the_gate():
    from tritune.loop.imports import verification_mode

    def claimed(exact, **config):
        return Variant(source=SOURCE, rewrite={"rule": "r", "exact": exact, "params": {}}, **config)

    assert verification_mode(claimed("exact")) == "bitwise"
    assert verification_mode(claimed("exact", options={"num_warps": 8})) == "tolerance"
    assert verification_mode(claimed("fast_math")) == verification_mode(claimed("nonsense")) == "tolerance"


def test_rewrites_that_differ_only_in_their_grid_are_distinct_and_the_grid_stays_with_the_chain(monkeypatch, root):
    register(monkeypatch, GridRule("persistent-grid"))
    k4, k8 = proposed(root)
    assert k4.source == k8.source and (k4.grid, k8.grid) == ({"persistent": {"k": 4, "tiles": "_tiles"}},
                                                             {"persistent": {"k": 8, "tiles": "_tiles"}})
    walked = proposed(root, accepted=k4, trials=[Trial(k4, True, 0.5), Trial(k8, True, 0.6)])
    assert [v.name for v in walked] == ["persistent-grid(k=2)"]  # k=8 was tried; k=2 only differs in its grid
    search = LaunchConfigSearch(base=k4)
    on_k4 = search.propose(spec(), [Trial(k4, True, 0.5), Trial(k8, True, 0.6)], 4)
    assert on_k4 and all(v.grid == k4.grid and v.source == k4.source for v in on_k4)


def test_a_tf32_rewrite_is_opt_in_and_verified_against_its_own_entry(monkeypatch, root):
    """tf32 rounds fp32 factors to a 10-bit mantissa: only with --fast-math, and checked against
    ``TF32`` (fp32 outputs), which a plain fp32 rewrite's tolerance would refuse and seed 000's
    1e-4 fast-math gate would too."""
    import torch

    from tritune.rewrites.base import TF32
    from tritune.verify import compare, tolerance_for

    register(monkeypatch, CommentRule("dot-tf32", exact=TF32))
    assert proposed(root) == []
    [variant] = proposed(root, fast_math=True)
    assert mode(variant) == "tf32" and variant.fast_math
    assert tolerance_for("float32", "tf32").rtol == 5e-3 and tolerance_for("float16", "tf32") == tolerance_for("float16")
    base = torch.linspace(1.0, 2.0, 64, dtype=torch.float32)
    rounded = base * (1 + 2.0 ** -11)  # one tf32 rounding of a factor
    assert compare("out", base, rounded, "tf32", poisoned=False).ok
    assert not compare("out", base, rounded, "fast_math", poisoned=False).ok
    assert not compare("out", base, base * 1.01, "tf32", poisoned=False).ok  # a wrong result still is one
