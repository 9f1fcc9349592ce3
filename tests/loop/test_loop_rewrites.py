"""The source-rewrite family in the loop, on the CPU: a (fake) rule's rewrite is built, verified
bitwise and accepted; the config search then moves the launch config on the rewritten source; the
decision keeps the chain (rule, its parameters, the config) and the refine hints after each
acceptance reach the proposers. Times are scripted (``retime``), building and verifying are real."""

from __future__ import annotations

import dataclasses

from fake_rules import CommentRule
from test_loop import SETTINGS, captured, run, worker  # noqa: F401 - module-scoped fixtures shared

import tritune.rewrites
from tritune.loop import kernel as kernel_module
from tritune.loop.families import families_for
from tritune.profile import Hint
from tritune.search.rewrites import SourceRewriteProposer
from tritune.store import DecisionStore


def rewrite_pays(spec, variant, measured_ms):
    """Only the rewrite pays (2x at S=2, less at other S), and on it a bigger BLOCK pays more."""
    if variant.rewrite is None:
        return 1.0
    stages = 1.0 if variant.rewrite["params"]["S"] == 2 else 1.1
    return 0.5 * stages * 64 / variant.constexprs.get("BLOCK", 64)


def test_an_accepted_rewrite_is_tuned_on_and_the_decision_keeps_the_chain(captured, tmp_path, worker, monkeypatch):
    monkeypatch.setattr(tritune.rewrites, "RULES", {"pipeline-loop": CommentRule("pipeline-loop")})
    monkeypatch.setattr(kernel_module, "hints_from_delta", lambda before, after: (Hint("more_stages", "scripted"),))
    contexts = []
    propose_in = SourceRewriteProposer.propose_in

    def spy(self, context, limit):
        contexts.append(context)
        return propose_in(self, context, limit)

    monkeypatch.setattr(SourceRewriteProposer, "propose_in", spy)
    only = ("launch-config", "source-rewrite")
    families = lambda spec: [f for f in families_for(spec, root=str(captured)) if f.name in only]  # noqa: E731
    results = run(captured, tmp_path, worker, retime=rewrite_pays, families=families,
                  settings=dataclasses.replace(SETTINGS, max_candidates=8))
    [kernel] = results.kernels
    by_name = {c.variant: c for c in kernel.candidates}
    assert (by_name["pipeline-loop(S=2)"].family, by_name["pipeline-loop(S=2)"].mode) == ("source-rewrite",
                                                                                               "bitwise")
    on_rewrite = [c for c in kernel.candidates if c.variant.startswith("pipeline-loop(S=2) + BLOCK=")]
    assert on_rewrite and all((c.family, c.mode) == ("launch-config", "tolerance") for c in on_rewrite)
    walked = [c for c in kernel.candidates if c.variant.startswith(("pipeline-loop(S=1)", "pipeline-loop(S=3)"))]
    assert walked and all(c.family == "source-rewrite" for c in walked)

    assert kernel.accepted and kernel.decision.startswith("pipeline-loop(S=2) + BLOCK=")
    assert kernel.won_by == ["pipeline-loop(S=2)", "BLOCK"]
    with DecisionStore(tmp_path / "decisions.db") as store:
        [decision] = store.decisions()
    assert decision.variant.rewrite == {"rule": "pipeline-loop", "exact": "exact", "params": {"S": 2}}
    assert decision.variant.constexprs["BLOCK"] > 64 and "# pipeline-loop S=2\n" in decision.variant.source

    after = [c for c in contexts if c.accepted.rewrite]
    assert after and all(c.hints == ({"action": "more_stages", "text": "scripted"},) for c in after)
    assert all(c.hints == () for c in contexts if not c.accepted.rewrite)


def test_without_a_family_the_loop_never_proposes_it_and_the_run_names_it(captured, tmp_path, worker, monkeypatch):
    """``--without source-rewrite``: the knob-only run a benchmark compares with (same budget)."""
    monkeypatch.setattr(tritune.rewrites, "RULES", {"pipeline-loop": CommentRule("pipeline-loop")})
    settings = dataclasses.replace(SETTINGS, max_candidates=8, without=("source-rewrite",))
    results = run(captured, tmp_path, worker, retime=rewrite_pays, settings=settings)
    [kernel] = results.kernels
    assert kernel.candidates and all(c.family != "source-rewrite" for c in kernel.candidates)
    assert settings.to_json()["without"] == ["source-rewrite"]
    assert "without" not in SETTINGS.to_json()  # older runs' settings, which a later command resumes
