"""confirm(): interleaved re-timing with a scripted timer (order, median ratio, spread), the CPU
fallback marked not meaningful, and one real confirmation of a replayed kernel under the interpreter."""

from __future__ import annotations

from pathlib import Path

import pytest

from tritune.arbiter import ConfirmError, Timer, confirm, confirmation_from_json, cpu_timer, judge_candidate


class Scripted:
    """A timer that runs the launch (which logs its name) and returns the next scripted time for it."""

    def __init__(self, base_times, cand_times):
        self.times = {"A": list(base_times), "B": list(cand_times)}
        self.log: list[str] = []

    def launch(self, name):
        return lambda: self.log.append(name)

    def __call__(self, launch) -> float:
        launch()
        return self.times[self.log[-1]].pop(0)


def test_alternates_the_order_every_round():
    timer = Scripted([1.0] * 4, [0.8] * 4)
    result = confirm(timer.launch("A"), timer.launch("B"), rounds=4, timer=timer)
    assert "".join(timer.log) == "ABBAABBA"
    assert result.order == ("AB", "BA", "AB", "BA")


def test_pairs_adjacent_samples_and_reports_the_median_ratio():
    timer = Scripted([1.0, 1.2, 1.0, 1.1, 1.0], [0.5, 0.6, 0.5, 0.55, 1.0])
    result = confirm(timer.launch("A"), timer.launch("B"), rounds=5, timer=timer)
    assert result.samples[1] == (1.2, 0.6)  # round 2 ran BA: still paired as (base, cand)
    assert result.ratio == pytest.approx(2.0)  # ratios 2, 2, 2, 2, 1: one disturbed round does not move it
    assert result.base_ms == pytest.approx(1.0) and result.cand_ms == pytest.approx(0.55)
    assert result.spread == pytest.approx(0.0)  # IQR of the ratios: the outlier stays outside it
    assert result.meaningful  # an injected timer decides (tests script it)


def test_spread_grows_with_scattered_ratios():
    timer = Scripted([1.0] * 6, [1 / 0.98, 1 / 1.14, 1 / 0.98, 1 / 1.14, 1 / 1.06, 1 / 1.06])
    result = confirm(timer.launch("A"), timer.launch("B"), rounds=6, timer=timer)
    assert result.ratio == pytest.approx(1.06)
    assert result.spread == pytest.approx(0.12 / 1.06)  # IQR 1.00..1.12 over the median
    # the arbiter then refuses: a 6% gain inside the re-timing's own scatter (some rounds even slower)
    assert judge_candidate(True, 1.0, 1 / 1.06, 0.01, result).code == "inside_noise"


def test_a_timer_without_a_usable_time_is_a_clear_error():
    timer = Scripted([1.0], [0.0])
    with pytest.raises(ConfirmError, match="candidate"):
        confirm(timer.launch("A"), timer.launch("B"), rounds=1, timer=timer)
    with pytest.raises(ValueError, match="at least one round"):
        confirm(lambda: None, lambda: None, rounds=0, timer=timer)


def test_cpu_timer_is_marked_not_meaningful_and_the_arbiter_refuses_it():
    calls = []
    result = confirm(lambda: calls.append("A"), lambda: calls.append("B"), rounds=2, timer=cpu_timer(runs=2))
    assert not result.meaningful and result.timer == "cpu-wall"
    assert calls.count("A") == calls.count("B") == 2 * 3  # per sample: one warm-up + 2 timed
    assert judge_candidate(True, 1.0, 0.5, 0.01, result).code == "not_meaningful"


def test_confirmation_round_trips_through_json():
    timer = Scripted([1.0, 1.0], [0.5, 0.5])
    result = confirm(timer.launch("A"), timer.launch("B"), rounds=2, timer=Timer("scripted", timer))
    assert confirmation_from_json(result.to_json()) == result


@pytest.fixture
def add_root(tmp_path: Path, monkeypatch) -> Path:
    """tests/bench_profile/test_bench_run.py's add_kernel launch, replayed by the interpreter."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    from test_bench_run import KERNEL, add_spec
    from tritune.capture.spec import write_launches

    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "kernels.py").write_text(KERNEL)
    write_launches(tmp_path, [add_spec()])
    return tmp_path


def test_confirm_spec_times_a_replayed_kernel_and_its_variant_under_the_interpreter(add_root):
    from tritune.arbiter import confirm_job, confirm_spec
    from tritune.capture.spec import read_launches
    from tritune.model.variant import Variant

    [spec] = read_launches(add_root)
    result = confirm_spec(spec, add_root, Variant(name="block64", constexprs={"BLOCK": 64}), rounds=2)
    assert not result.meaningful and result.timer == "cpu-wall"  # the CPU default: decides nothing
    assert result.order == ("AB", "BA") and all(b > 0 and c > 0 for b, c in result.samples)
    body = confirm_job({"spec": spec.to_json(), "root": str(add_root), "rounds": 1,
                        "candidate": Variant(name="w2", options={"num_warps": 2}).to_json()})
    assert body["meaningful"] is False and len(body["samples"]) == 1
