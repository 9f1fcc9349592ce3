"""The model floor's values: what they say about themselves and how they cross a process."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritune.model import families
from tritune.model.request import STORE_FILE, RunRequest
from tritune.model.results import CandidateLine, KernelResult
from tritune.model.settings import LLMSettings, LoopSettings
from tritune.model.target import INTERPRETER_GPU, Target
from tritune.model.variant import Variant


def test_a_target_crosses_as_json_and_keys_by_its_identity_alone():
    h200 = Target("NVIDIA H200", 90, "3.6.0", copy_gbps=4242.0, meaningful=True, sm_count=132)
    assert Target.from_json(h200.to_json()) == h200
    assert h200.key_json() == {"gpu": "NVIDIA H200", "capability": 90, "triton_version": "3.6.0"}
    assert h200.identity == Target("NVIDIA H200", 90, "3.6.0") != h200
    assert h200.facts() == {"sm_count": 132}
    assert Target.from_json({**h200.to_json(), "pid": 7}) == h200  # a reply's other keys are not the target's
    assert Target(INTERPRETER_GPU, "0", "3.6.0").interpreted and Target(INTERPRETER_GPU, "0", "x").capability == 0


def test_a_run_request_names_its_store_and_refuses_a_cover_outside_0_1(tmp_path):
    request = RunRequest(str(tmp_path), kernels=["k"])
    assert request.out == tmp_path and request.store == tmp_path / STORE_FILE and request.kernels == ("k",)
    assert RunRequest(tmp_path, store_path=str(tmp_path / "s.db")).store == Path(tmp_path / "s.db")
    for cover in (0.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match="--cover"):
            RunRequest(tmp_path, cover=cover)


def test_the_loop_settings_name_the_model_family_and_its_templates():
    llm = LLMSettings(url="http://localhost:1/v1", model="m", template="t1")
    body = LoopSettings(llm=llm).to_json()
    assert body["llm"]["template"] == "t1" and "llm" not in LoopSettings().to_json()


@pytest.mark.parametrize("variant, expected", [
    (Variant(rewrite={"rule": families.LLM}), True),
    (Variant(rewrite={"rule": "pipeline-loop"}), False),
    (Variant(), False),
    (None, False),  # the baseline, as a profile names it
    ({"rewrite": {"rule": families.LLM}}, False),  # JSON is not a variant
])
def test_a_models_variant_is_known_by_its_rule(variant, expected):
    assert families.by_model(variant) is expected


def test_a_candidate_line_keeps_the_arbiters_fields_only_once_judged():
    line = CandidateLine(variant="BLOCK=64", status="verified", time_ms=1.0, speedup=2.0)
    assert "verdict" not in line.to_json() and CandidateLine.from_json(line.to_json()) == line
    line.verdict, line.reason, line.confirmed = "accepted", "2.0x", 1.9
    assert CandidateLine.from_json(line.to_json()) == line
    result = KernelResult(id="k-1", candidates=[line])
    assert KernelResult.from_json(result.to_json()).candidates == [line]


def test_knobs_describe_a_variant_and_leave_its_key_and_hash_alone():
    """A store written before ``Variant.knobs`` existed finds the same candidates (and keeps their
    final verdicts) for a cache-hint or looped-reduction variant its proposer now describes."""
    from tritune.store.records import variant_hash

    before = Variant(name="cache hints: load0 evict_first", source="...")
    now = Variant(name="cache hints: load0 evict_first", source="...", knobs=("evict:load0=evict_first",))
    assert now.to_json()["knobs"] == ["evict:load0=evict_first"]  # kept with the variant, for the report
    assert now.key() == before.key() and variant_hash(now) == variant_hash(before)
    assert variant_hash(now.to_json()) == variant_hash(before.to_json())  # a stored row's JSON too
    assert variant_hash(Variant(name="x", source="other")) != variant_hash(before)
