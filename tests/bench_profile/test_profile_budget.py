"""Budgeted profiling: ncu runs on a key only when its cost, measured on the first key that ran
it, is at most a tenth of the key's budget; where it cannot run at all it is not tried again.
The profile job is scripted (no worker runs): what is tested is the evaluator's choice."""

from __future__ import annotations

from tritune.loop.evaluate import NCU_SHARE, Evaluator
from tritune.model.launch import LaunchSpec
from tritune.model.target import Target
from tritune.worker import Outcome

SPEC = LaunchSpec(kernel="k", kind="jit", module="m", source_file="k.py", source="sources/k.py", source_hash="0",
                  args=[], constexprs={}, options={}, grid=[1, 1, 1])


class Scripted(Evaluator):
    """Answers every profile job with ``answer(payload)`` and keeps the payloads."""

    def __init__(self, answer, use_ncu="auto"):
        super().__init__(".", use_ncu=use_ncu, worker=object())
        self.answer, self.sent = answer, []

    def _exclusive(self, job, payload, **call):
        self.sent.append(payload)
        return Outcome(True, self.answer(payload))


def ncu_answer(seconds):
    def answer(payload):
        if payload["use_ncu"] == "never":
            return {"source": "timing+static", "note": "not used", "ncu_status": "not-used", "ncu_s": None}
        return {"source": "ncu", "note": "ncu profiled", "ncu_status": "ok", "ncu_s": seconds}
    return answer


def test_ncu_runs_where_its_measured_cost_fits_a_tenth_of_the_budget_and_is_skipped_elsewhere():
    evaluator = Scripted(ncu_answer(12.0))
    first = evaluator.profile(SPEC, {}, budget_s=200.0)  # cost unknown: the first key measures it
    assert first["source"] == "ncu" and evaluator.ncu_s == 12.0
    assert evaluator.sent[0]["timeout_s"] == NCU_SHARE * 200.0  # and it may cost no more than its share
    small = evaluator.profile(SPEC, {}, budget_s=14.0)
    assert evaluator.sent[1]["use_ncu"] == "never" and small["ncu_status"] == "skipped"
    assert small["note"].startswith("ncu skipped: ~12 s of a 14 s budget")
    large = evaluator.profile(SPEC, {}, budget_s=150.0)
    assert evaluator.sent[2]["use_ncu"] == "auto" and large["source"] == "ncu"


def test_an_ncu_cut_at_its_share_counts_as_at_least_that_cost():
    evaluator = Scripted(lambda payload: {"source": "timing+static", "note": "ncu ran past its limit",
                                          "ncu_status": "timeout", "ncu_s": payload["timeout_s"]})
    evaluator.profile(SPEC, {}, budget_s=30.0)
    assert evaluator.ncu_s == 3.0
    evaluator.profile(SPEC, {}, budget_s=29.0)
    assert evaluator.sent[1]["use_ncu"] == "never"


def test_ncu_unavailable_here_is_not_tried_again_and_require_keeps_its_meaning():
    jailed = Scripted(lambda payload: {"source": "timing+static", "note": "jailed", "ncu_status": "jailed",
                                       "ncu_s": 0.0})
    jailed.profile(SPEC, {}, budget_s=500.0)
    second = jailed.profile(SPEC, {}, budget_s=500.0)
    assert jailed.sent[1]["use_ncu"] == "never" and "ncu unavailable here (jailed)" in second["note"]
    assert second["ncu_status"] == "jailed"  # the key's profile as ncu would leave it here: kept in the store
    required = Scripted(ncu_answer(50.0), use_ncu="require")
    required.profile(SPEC, {}, budget_s=10.0)
    required.profile(SPEC, {}, budget_s=10.0)
    assert [p["use_ncu"] for p in required.sent] == ["require", "require"]
    assert required.sent[0]["timeout_s"] > 10.0  # require: ncu's own limit, not the budget's share


def _loop(tmp_path, evaluator):
    from tritune.loop.kernel import KernelLoop
    from tritune.model.settings import LoopSettings
    from tritune.store import DecisionStore, key_for

    store = DecisionStore(tmp_path / "decisions.db")
    key = key_for(SPEC, Target("GPU", 90, "3.6.0"))
    run_id = store.start_run({}, "test")
    loop = KernelLoop(SPEC, key, store=store, run_id=run_id, evaluator=evaluator, settings=LoopSettings(budget_s=14.0),
                      families=[], baseline=({"time_ms": 1.0, "noise": 0.01}, None))
    return loop, store, key, run_id


def test_a_profile_the_store_holds_for_the_key_is_reused_without_profiling(tmp_path):
    def never(payload):
        raise AssertionError("profiled again")

    loop, store, key, run_id = _loop(tmp_path, Scripted(never))
    store.set_profile(key, {"source": "ncu", "note": "ncu profiled", "ncu_status": "ok", "facts": {}}, run_id=run_id)
    result = loop.run()
    assert result.profile_source == "ncu" and result.profile_note == "reused from the store (ncu): ncu profiled"
    assert set(result.split) >= {"baseline_s", "profile_s", "idle_s"} and "to_first_s" not in result.split
    store.close()


def test_a_profile_without_ncu_for_want_of_budget_is_not_kept_as_the_keys_profile(tmp_path):
    evaluator = Scripted(ncu_answer(12.0))
    evaluator.ncu_s = 12.0  # measured on an earlier key: more than a tenth of this key's 14 s
    loop, store, key, _ = _loop(tmp_path, evaluator)
    result = loop.run()
    assert result.profile_note.startswith("ncu skipped: ~12 s of a 14 s budget")
    assert store.profile_for(key) is None  # a key with a larger budget later still gets ncu's profile
    store.close()
