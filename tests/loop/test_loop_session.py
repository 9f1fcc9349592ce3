"""The session's whole-program view: every key's baseline timed once, keys ranked by their share
of the kernel time, budgets by share, the --cover stop, and the typed optimize.json. On the CPU
the times are scripted (``Evaluator.retime``); builds, verification and the store are real."""

from __future__ import annotations

import dataclasses
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from tritune.capture.spec import file_hash, read_launches
from tritune.loop import optimize
from tritune.loop.evaluate import Evaluator
from tritune.model.request import RunRequest
from tritune.model.settings import ArbiterSettings, LoopSettings
from tritune.loop.jobs import (BASELINE_JOB, BASELINES_JOB, COMPILE_JOB, EXCLUSIVE_JOB, RANK_BENCH_MS, RANK_METHODS,
                               full_timing)
from tritune.loop.session import budget_for, timing_to_key
from tritune.model.results import KernelResult, KeyTime, ResultsError, RunResults, shares
from tritune.model.variant import Variant
from tritune.report import summarize, write_report
from tritune.worker import Worker

SETTINGS = LoopSettings(arbiter=ArbiterSettings(require_meaningful=False), max_candidates=3, per_round=3)
MS_PER_PROGRAM = 0.01  # scripted: each program of the grid costs 10 us at the captured BLOCK=64


@pytest.fixture(scope="module")
def captured(share_captured) -> Path:
    return share_captured


class CountingWorker(Worker):
    """A worker that counts its calls per job (an exclusive job by the job it runs), to see the
    baselines timed in one call; ``payloads`` keeps what each call was given."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.calls: list[str] = []
        self.payloads: list[tuple[str, dict]] = []

    def call(self, target, payload=None, **kwargs):
        self.calls.append(payload["job"] if target == EXCLUSIVE_JOB else target)
        self.payloads.append((target, payload))
        return super().call(target, payload, **kwargs)


def counting_worker() -> CountingWorker:
    return CountingWorker(120.0, env={"TRITON_INTERPRET": "1"}, preload=("torch", "triton"))


@pytest.fixture(scope="module")
def worker():
    with counting_worker() as w:
        yield w


@pytest.fixture(scope="module")
def verifiers():
    workers = [counting_worker() for _ in range(2)]
    yield workers
    for w in workers:
        w.close()


def by_grid(spec, variant, measured_ms):
    """Scripted: time grows with the launch's size, and a bigger BLOCK is faster."""
    return spec.grid[0] * MS_PER_PROGRAM * 64 / variant.constexprs.get("BLOCK", spec.constexprs["BLOCK"])


def run(captured, out, worker, **kwargs):
    evaluator = Evaluator(captured, retime=by_grid, worker=worker)
    request = RunRequest(out, settings=kwargs.pop("settings", SETTINGS), **_request_fields(kwargs))
    return optimize(captured, request, evaluator=evaluator, **kwargs)


@pytest.fixture(scope="module")
def full(captured, worker, tmp_path_factory):
    """Both keys optimized (cover 100%), and the worker's calls during the run."""
    worker.calls.clear()
    results = run(captured, tmp_path_factory.mktemp("full"), worker, cover=1.0)
    return results, list(worker.calls)


def test_keys_are_ranked_by_time_share_not_launch_count(full):
    results, calls = full
    assert calls.count(BASELINES_JOB) == 1  # every baseline in one call
    assert calls.count(COMPILE_JOB) == 2  # one job: the one worker built each key first
    assert calls.count(BASELINE_JOB) == 2  # each key optimized timed its baseline fully for itself
    small, large = sorted(results.timed, key=lambda t: t.launches, reverse=True)
    assert (small.launches, large.launches) == (3, 1)
    # 3 launches x 5 programs against 1 launch x 63 programs
    assert large.time_share == pytest.approx(63 / 78) and small.time_share == pytest.approx(15 / 78)
    assert [k.key_sha for k in results.kernels] == [large.key_sha, small.key_sha]  # the costly one first
    assert results.kernels[0].time_share == pytest.approx(63 / 78) and results.kernels[0].launches == 1
    assert results.coverage == pytest.approx(1.0)
    gain = sum(k.time_share * (1 - 1 / k.speedup) for k in results.kernels if k.accepted)
    assert results.expected_gain == pytest.approx(gain) and 0 < gain < 1
    assert results.program_ms == pytest.approx(78 * MS_PER_PROGRAM)


def test_the_verify_workers_build_the_baselines_and_the_ranking_is_unchanged(full, captured, worker, verifiers):
    timer = worker
    for w in [timer, *verifiers]:
        w.calls.clear()
        w.payloads.clear()
    specs = read_launches(captured)
    found = Evaluator(captured, retime=by_grid, worker=timer, verifiers=verifiers).baselines(specs)
    built = [c for w in verifiers for c in w.calls]
    assert built == [COMPILE_JOB, COMPILE_JOB] and all(w.calls for w in verifiers)  # one key each, in parallel
    assert timer.calls == [BASELINES_JOB]  # the timing worker built nothing, and timed all in one call
    [(_, sent)] = timer.payloads
    assert sent["methods"] == list(RANK_METHODS) and sent["medians"] == 1  # the ranking's one median
    assert sent["bench_ms"] == list(RANK_BENCH_MS)  # on the ranking's shorter do_bench
    results, _ = full  # one job: built and timed by the one worker
    keys = {t.id: SimpleNamespace(sha=t.key_sha) for t in results.timed}
    assert shares([timing_to_key(s, keys[s.id], found[s.id]) for s in specs]) == results.timed
    assert not any(full_timing(found[s.id][0]) for s in specs)  # the loop times its own noise and graph


def test_launches_built_as_the_lane_starts_are_not_built_again(captured, worker, verifiers):
    """``Evaluator.prebuild`` (a lone lane's, while its target job runs): the ranking takes each
    one's outcome; a launch it did not prebuild is built then."""
    for w in [worker, *verifiers]:
        w.calls.clear()
    specs = read_launches(captured)
    evaluator = Evaluator(captured, retime=by_grid, worker=worker, verifiers=verifiers)
    evaluator.prebuild(specs[:1])
    evaluator.prebuild(specs[:1])  # asked twice: built once
    evaluator._prebuilt[specs[0].id].result()  # built before the ranking asks
    assert [c for w in verifiers for c in w.calls] == [COMPILE_JOB] and worker.calls == []
    found = evaluator.baselines(specs)
    assert [c for w in verifiers for c in w.calls] == [COMPILE_JOB] * len(specs)
    assert all(found[s.id][0]["time_ms"] for s in specs) and not evaluator._prebuilt
    alone = Evaluator(captured, worker=worker)  # the timing worker verifies too: it builds nothing early
    alone.prebuild(specs)
    assert not alone._prebuilt and worker.calls == [BASELINES_JOB]


def test_a_lone_lane_prebuilds_the_plans_launches_unless_the_out_folder_holds_baselines(captured, tmp_path):
    from tritune.loop.session import BASELINES_FILE, _prebuild

    specs = read_launches(captured)
    one, two = [object()], [object(), object()]
    assert sorted(s.id for s in _prebuild(specs, one, tmp_path, kernels=(), sample=None)) == \
        sorted(s.id for s in specs)
    assert _prebuild(specs, two, tmp_path, kernels=(), sample=None) == []  # each lane ranks its part
    first = specs[0].kernel
    assert {s.kernel for s in _prebuild(specs, one, tmp_path, kernels=(first,), sample=None)} == {first}
    (tmp_path / BASELINES_FILE).write_text("{}")  # kept even by --fresh when they match: none to build
    assert _prebuild(specs, one, tmp_path, kernels=(), sample=None) == []


def test_a_lane_hands_its_verify_workers_the_launches_to_build_before_its_target_job(tmp_path, monkeypatch):
    from tritune.loop.lanes import LocalLane

    lane = LocalLane(None, tmp_path, jobs=2)  # its own evaluator, whose workers are made, not started
    order = []
    monkeypatch.setattr(lane.evaluator, "start_verifiers", lambda first=None: [])
    monkeypatch.setattr(lane.evaluator, "start_rest", lambda: None)
    monkeypatch.setattr(lane.evaluator, "prebuild", lambda specs: order.append(("prebuild", list(specs))))
    monkeypatch.setattr(lane, "_start", lambda: order.append(("target",)) or {"gpu": "planted"})
    try:
        lane.start(prebuild=["a", "b"])
        lane.start()  # nothing to build: not asked
    finally:
        lane.close()
    assert order == [("prebuild", ["a", "b"]), ("target",), ("target",)]


def test_a_build_that_fails_or_crashes_is_that_keys_failure_alone(captured, tmp_path, worker, verifiers):
    root = tmp_path / "capture"
    shutil.copytree(captured, root)
    small, large = sorted(read_launches(root), key=lambda s: s.count, reverse=True)
    source = (root / small.source).read_text()
    (root / "sources" / "broken.py").write_text(source + "\ndef broken(:\n")
    (root / "sources" / "crash.py").write_text(source + "\nimport os\nos._exit(7)\n")
    # another grid: another id (it names the launch, not its file); each fails before it launches
    # each file's whole hash, as capture records it (small's would refuse them unread)
    crash = dataclasses.replace(small, source="sources/crash.py", grid=[6, 1, 1],
                                file_hash=file_hash((root / "sources" / "crash.py").read_bytes()))
    broken = dataclasses.replace(small, source="sources/broken.py", grid=[7, 1, 1],
                                 file_hash=file_hash((root / "sources" / "broken.py").read_bytes()))
    lines: list[str] = []
    timer, verifier = worker, verifiers[0]
    for w in (timer, verifier):
        w.calls.clear()
        w.payloads.clear()
    starts = verifier.starts
    evaluator = Evaluator(root, retime=by_grid, worker=timer, verifiers=[verifier])
    evaluator.progress_s = 0  # one launch a timing call, and a line after each
    found = evaluator.baselines([crash, small, broken, large], log=lines.append)
    # one verifier, the crash first: the builds after it were not lost
    assert verifier.calls == [COMPILE_JOB] * 4 and verifier.starts == starts + 1
    assert timer.calls == [BASELINES_JOB] * 2  # neither failure was sent to be timed
    assert [[s["id"] for s in p["specs"]] for _, p in timer.payloads] == [[small.id, large.id], [large.id]]
    assert found[crash.id][0] is None and found[crash.id][1].kind == "crash"
    assert found[broken.id][0] is None and found[broken.id][1].kind == "compile_error"
    assert "broken.py" in found[broken.id][1].message and len(found) == 4
    for spec in (small, large):
        timing, failure = found[spec.id]
        assert failure is None and timing["time_ms"] == pytest.approx(by_grid(spec, Variant(), 0.0))
    assert lines[0] == "timed 1 of 2 baselines" and len(lines) == 2
    assert lines[1].startswith("built 4 baseline(s) in ") and "(1 job(s)), timed them in " in lines[1]
    assert evaluator.ranking["launches"] == 4 and evaluator.ranking["build_s"] > 0 < evaluator.ranking["time_s"]


def test_the_run_stops_once_the_cover_is_reached_and_resumes_without_timing_again(captured, tmp_path, worker):
    results = run(captured, tmp_path, worker, cover=63 / 78)  # exactly the first key's share: reached
    [kernel] = results.kernels
    assert kernel.launches == 1 and kernel.time_share == pytest.approx(63 / 78)
    assert results.stopped.startswith("cover") and "1 kernels left" in results.stopped
    assert results.coverage == pytest.approx(63 / 78) and len(results.timed) == 2
    assert results.finished is not None  # covered is done, not interrupted
    on_disk = RunResults.load(tmp_path)
    assert on_disk.to_json() == results.to_json()
    worker.calls.clear()
    again = run(captured, tmp_path, worker, cover=1.0)  # another setting: a new run, same baselines
    assert BASELINES_JOB not in worker.calls  # OUT/baselines.json kept them
    assert len(again.kernels) == 2 and again.kernels[0].candidates and again.kernels[0].candidates[0].reused


def test_a_ranking_interrupted_keeps_the_keys_it_timed(captured, tmp_path, worker, monkeypatch):
    """Ctrl-C while the baselines are timed: the keys timed before it are in baselines.json, and
    the run again times only the rest."""
    import json

    from tritune.loop import session

    monkeypatch.setattr(session, "RANK_CHUNK", 1)
    calls = []

    def interrupting(spec, variant, ms):
        calls.append(spec.id)
        if len(calls) == 2:  # the second key's baseline
            raise KeyboardInterrupt
        return by_grid(spec, variant, ms)

    evaluator = Evaluator(captured, retime=interrupting, worker=worker)
    with pytest.raises(KeyboardInterrupt):
        optimize(captured, RunRequest(tmp_path, settings=SETTINGS, cover=1.0), evaluator=evaluator)
    kept = json.loads((tmp_path / session.BASELINES_FILE).read_text())["keys"]
    assert len(kept) == 1
    worker.calls.clear()
    results = run(captured, tmp_path, worker, cover=1.0)
    assert worker.calls.count(BASELINES_JOB) == 1 and len(results.timed) == 2
    assert len(json.loads((tmp_path / session.BASELINES_FILE).read_text())["keys"]) == 2


def test_a_deadline_shares_the_time_by_share(captured, tmp_path, worker):
    results = run(captured, tmp_path, worker, cover=1.0, deadline_s=600.0, floor_s=5.0)
    first, second = results.kernels
    # the costly key: its share (63/78) of what was left once the baselines were timed (the
    # run's fixed seconds, however long a loaded machine took for them)
    assert first.budget_s == pytest.approx((600 - results.fixed["total_s"]) * 63 / 78, abs=0.5)
    assert first.budget_s <= 600 * 63 / 78
    # the last key: all that is left (the first finished early and left its time)
    assert first.budget_s < second.budget_s <= 600 - first.wall_s


def test_budget_for_gives_shares_between_floor_and_cap():
    assert budget_for(0.5, 1.0, 900.0, 20.0, None) == 900.0  # no deadline: the cap
    assert budget_for(0.5, 1.0, 900.0, 20.0, 100.0) == 50.0  # half of what is left
    assert budget_for(0.001, 1.0, 900.0, 20.0, 100.0) == 20.0  # the floor
    assert budget_for(0.9, 1.0, 60.0, 20.0, 1000.0) == 60.0  # the cap
    assert budget_for(0.5, 0.5, 900.0, 20.0, 10.0) == 10.0  # never past the deadline
    assert budget_for(None, 1.0, 900.0, 20.0, 100.0) == 20.0  # untimed: the floor


def test_shares_put_untimed_keys_last():
    timed = shares([KeyTime("a", "a", "k", 2, 1.0), KeyTime("b", "b", "k", 1, None, failure="compile_error"),
                    KeyTime("c", "c", "k", 1, 6.0)])
    assert [t.key_sha for t in timed] == ["c", "a", "b"]
    assert [t.time_share for t in timed] == [0.75, 0.25, None]


def test_results_round_trip_and_read_format_1():
    run = RunResults(command="x", timed=[KeyTime("a", "a", "k", 1, 2.0, 1.0)], cover=0.95,
                     kernels=[KernelResult(id="a", key_sha="a", launches=1, time_share=1.0, baseline_ms=2.0,
                                           best_ms=1.0, speedup=2.0, accepted=True, won_by=["BLOCK"])],
                     settings={"arbiter": {"threshold": 1.05}})
    body = run.to_json()
    assert body["expected_gain"] == pytest.approx(0.5) and body["coverage"] == 1.0 and body["program_ms"] == 2.0
    assert RunResults.from_json(body).to_json() == body
    old = RunResults.from_json({"tritune_optimize": 1, "kernels": [{"id": "k", "count": 4, "baseline_ms": "x"}]})
    assert old.kernels[0].launches == 4 and old.kernels[0].baseline_ms is None and old.coverage is None
    with pytest.raises(ResultsError, match="version 9"):
        RunResults.from_json({"tritune_optimize": 9})


def test_coverage_counts_keys_the_loop_ran_on_and_the_gain_only_improved_ones():
    run = RunResults(timed=[KeyTime(k, k, k, 1, 1.0) for k in "abcd"], settings={"arbiter": {"threshold": 1.05}},
                     kernels=[KernelResult(key_sha="a", time_share=0.4, baseline_ms=1.0, speedup=2.0, accepted=True),
                              KernelResult(key_sha="b", time_share=0.3, baseline_ms=1.0, speedup=1.02, accepted=True),
                              KernelResult(key_sha="c", time_share=0.2, baseline_ms=1.0, speedup=1.5),
                              KernelResult(key_sha="d", time_share=0.1, failure="compile_error")])
    assert run.coverage == pytest.approx(0.9)  # d's baseline never ran: not covered
    assert run.expected_gain == pytest.approx(0.4 * 0.5)  # b is under the threshold, c was not accepted


def test_the_report_shows_shares_coverage_and_the_amdahl_plot(full, tmp_path):
    pytest.importorskip("matplotlib")
    results, _ = full
    program = summarize(results)["program"]
    assert program["coverage"] == pytest.approx(1.0) and [k["share"] for k in program["keys"]] == \
        [pytest.approx(63 / 78), pytest.approx(15 / 78)]
    written = write_report(results, tmp_path / "report")
    assert "amdahl" in written and written["amdahl"].stat().st_size > 0
    text = written["markdown"].read_text()
    assert "covered by the kernels optimized: 100.0%" in text and "80.8%" in text  # the table's share column


def test_a_ranking_call_is_limited_to_one_launch_past_its_slice_not_one_per_launch():
    from tritune.loop.evaluate import BASELINE_TIMEOUT_S

    evaluator = Evaluator(".", worker=object())
    evaluator.progress_s = 10.0  # the job starts no launch after 10 s: a hang costs one launch's limit more
    assert evaluator._batch_limit(33) == BASELINE_TIMEOUT_S + 10.0
    evaluator.progress_s = None  # no slice: every launch of the batch may run
    assert evaluator._batch_limit(33) == BASELINE_TIMEOUT_S * 33


def test_a_launch_that_hangs_the_ranking_costs_one_failed_batch_and_itself_not_one_per_launch_before_it():
    """The batch that hung is timed again one launch a call until the culprit fails alone; the
    launches after it go back in one batch. Before, every launch before the culprit cost a batch
    that hung again."""
    from tritune.model.launch import LaunchSpec
    from tritune.worker import Outcome
    from tritune.worker.failures import Failure

    specs = [LaunchSpec(kernel="k", kind="jit", module="m", source_file="k.py", source="sources/k.py",
                        source_hash="0", args=[], constexprs={}, options={}, grid=[g, 1, 1]) for g in range(1, 7)]
    culprit = specs[3].id
    sent = []

    class Scripted(Evaluator):
        def _build(self, specs, say):
            return [None] * len(specs)

        def _call(self, worker, job, payload, **call):
            ids = [s["id"] for s in payload["specs"]]
            sent.append(ids)
            if culprit in ids:
                return Outcome(False, failure=Failure("timeout", "hung"))
            return Outcome(True, {"timings": [[i, {"time_ms": 1.0}, None] for i in ids], "fault": False})

    found = Scripted(".", worker=object()).baselines(specs)
    assert sum(culprit in ids for ids in sent) == 2  # the batch, then itself alone
    assert sent == [[s.id for s in specs], *[[s.id] for s in specs[:4]], [specs[4].id, specs[5].id]]
    assert found[culprit][1].kind == "timeout" and all(found[s.id][0] for s in specs if s.id != culprit)


def test_the_parent_warms_inductors_heuristics_only_for_a_capture_of_inductors_kernels(monkeypatch):
    """The first proposal for an Inductor kernel imports its heuristics (its max-autotune seeds):
    imported while the lanes start, not in the first key's time to its first candidate."""
    from tritune.loop import session
    from tritune.model.launch import LaunchSpec

    seen = []
    monkeypatch.setattr(session, "_import_quietly", seen.append)

    def spec(kind):
        return LaunchSpec(kernel="k", kind=kind, module="m", source_file="k.py", source="sources/k.py",
                          source_hash="0", args=[], constexprs={}, options={}, grid=[1, 1, 1])

    session._warm_parent([spec("jit")]).join()
    session._warm_parent([spec("jit"), spec("inductor")]).join()
    assert seen == [session.WARM_MODULES, session.WARM_MODULES + session.INDUCTOR_WARM_MODULES]
    assert "torch._inductor.runtime.triton_heuristics" in session.INDUCTOR_WARM_MODULES


def _request_fields(kwargs: dict) -> dict:
    """The ``RunRequest`` fields among a helper's keyword arguments, taken out of them."""
    return {name: kwargs.pop(name) for name in list(kwargs) if name in RunRequest.__dataclass_fields__}
