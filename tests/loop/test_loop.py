"""The loop end to end on the CPU: a captured program's kernel through propose, build/verify in
workers, arbitrate, store. Times come from a scripted ``retime`` (interpreter times measure
numpy), everything else is real: candidates are built and verified in worker processes."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tritune.capture.spec import read_launches
from tritune.loop import optimize
from tritune.loop.evaluate import Evaluator
from tritune.loop.families import Context, Family, families_for, order_of
from tritune.loop.kernel import KernelLoop
from tritune.loop.session import machine, plan
from tritune.model.request import RunRequest
from tritune.model.results import RunResults
from tritune.model.settings import ArbiterSettings, LoopSettings
from tritune.model.target import Target
from tritune.model.variant import Variant
from tritune.store import DecisionStore
from tritune.worker import Worker

PROGRAM = Path(__file__).resolve().parents[1] / "programs" / "loop_program.py"
SETTINGS = LoopSettings(arbiter=ArbiterSettings(require_meaningful=False), max_candidates=6, per_round=3)


@pytest.fixture(scope="module")
def captured(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("loop") / "capture"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "tritune", "capture", "--out", str(out), "--", sys.executable,
                           str(PROGRAM)], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return out


@pytest.fixture(scope="module")
def worker():
    with Worker(120.0, env={"TRITON_INTERPRET": "1"}, preload=("torch", "triton")) as w:
        yield w


def block_speed(spec, variant, measured_ms):
    """Scripted times: a bigger BLOCK is faster (1.0 ms at the captured 64); passes change nothing."""
    block = variant.constexprs.get("BLOCK", 64)
    return 64 / block


class Planted:
    """A proposer of fixed source variants (a wrong kernel, a crashing one), proposed once."""

    name = "planted"

    def __init__(self, variants):
        self.variants = variants

    def propose(self, spec, trials, limit):
        tried = {t.variant.key() for t in trials}
        return [v for v in self.variants if v.key() not in tried][:limit]


def source_of(root: Path) -> str:
    spec = read_launches(root)[0]
    return (root / spec.source).read_text()


def run(captured, out, worker, retime=block_speed, families=None, settings=SETTINGS, **kwargs):
    evaluator = Evaluator(captured, retime=retime, worker=worker)
    request = RunRequest(out, settings=settings, **_request_fields(kwargs))
    return optimize(captured, request, evaluator=evaluator, families=families, **kwargs)


# the planted crash and hang below are module-level code, which the allowlist refuses in any source
# no rule of tritune's made (``allowlist.sandbox``): marked as a rule's, they test the worker, not the check
RULED = {"rule": "pipeline-loop", "exact": "tolerance", "params": {}}

def test_a_faster_verified_variant_becomes_the_decision(captured, tmp_path, worker):
    results = run(captured, tmp_path, worker)
    [kernel] = results.kernels
    assert kernel.accepted and kernel.decision.startswith("BLOCK=") and kernel.won_by[0] == "BLOCK"
    assert kernel.speedup >= 2.0 and kernel.baseline_ms == 1.0
    assert results.meaningful is False and results.target["gpu"] == "interpreter"
    with DecisionStore(tmp_path / "decisions.db") as store:
        [decision] = store.decisions()
        assert decision.variant.constexprs["BLOCK"] > 64 and decision.verified and decision.enabled
        assert decision.evidence["confirmation"]["order"][:2] == ["AB", "BA"]
        statuses = {c.variant.describe(): c.status for c in store.candidates()}
    assert statuses[kernel.decision] == "accepted"
    body = json.loads((tmp_path / "optimize.json").read_text())
    assert body["finished"] is not None
    # where the key's time went: every part, the first candidate before the end, candidates counted
    split = body["kernels"][0]["split"]
    assert set(split) == {"to_first_s", "baseline_s", "profile_s", "build_s", "verify_s", "time_s", "judge_s",
                          "idle_s"}
    assert 0 < split["to_first_s"] < kernel.wall_s and split["verify_s"] > 0 and split["judge_s"] > 0
    assert kernel.timed_candidates == sum(c.time_ms is not None for c in kernel.candidates) > 0
    fixed = body["fixed"]
    assert set(fixed) == {"start_s", "baselines_s", "warm_s", "total_s", "build_s", "rank_time_s"} and fixed["baselines_s"] > 0
    assert 0 < fixed["build_s"] + fixed["rank_time_s"] <= fixed["baselines_s"]  # the ranking's two parts
    assert body["deadline_s"] is None


def test_without_a_gain_nothing_is_decided(captured, tmp_path, worker):
    results = run(captured, tmp_path, worker, retime=lambda spec, variant, ms: 1.0)
    [kernel] = results.kernels
    assert not kernel.accepted and kernel.speedup == 1.0 and kernel.won_by == []
    assert {c.verdict for c in kernel.candidates if c.verdict is not None} <= {"below_threshold"}
    with DecisionStore(tmp_path / "decisions.db") as store:
        assert store.decisions() == []


def test_a_planted_wrong_candidate_is_rejected_however_fast(captured, tmp_path, worker):
    wrong = Variant(name="wrong", source=source_of(captured).replace("x * alpha + y", "x * alpha + y * 1.001"))
    assert wrong.source != source_of(captured)

    def retime(spec, variant, ms):
        return 0.01 if variant.source is not None else 1.0  # the wrong one claims 100x

    families = lambda spec: [Family("planted", Planted([wrong]), lambda v: "tolerance")]  # noqa: E731
    lines = []
    results = run(captured, tmp_path, worker, retime=retime, families=families, log=lines.append)
    [kernel] = results.kernels
    [record] = kernel.candidates
    assert record.status == "rejected" and record.failure == "wrong_result"
    assert "out_ptr" in record.message  # names the output that differs
    # the terminal says what became of it, with its class and why (not only report.md)
    [said] = [line for line in lines if line.startswith(f"{kernel.kernel}: wrong: ")]
    assert said.startswith(f"{kernel.kernel}: wrong: failed (wrong_result): ") and "out_ptr" in said
    assert not kernel.accepted
    with DecisionStore(tmp_path / "decisions.db") as store:
        assert store.decisions() == []
        [rejected] = store.rejected(store.keys()[0])
        assert rejected.failure_kind == "wrong_result" and rejected.verification["ok"] is False


def test_a_crashing_candidate_is_survived_and_the_next_one_still_wins(captured, tmp_path, worker):
    crash = Variant(name="crash", source=source_of(captured) + "\nimport os\nos._exit(7)\n", rewrite=RULED)
    good = Variant(name="block 256", constexprs={"BLOCK": 256})
    families = lambda spec: [Family("planted", Planted([crash, good]), lambda v: "tolerance")]  # noqa: E731
    results = run(captured, tmp_path, worker, families=families)
    [kernel] = results.kernels
    first, second = kernel.candidates
    assert first.status == "rejected" and first.failure == "crash"
    assert second.status == "accepted" and kernel.decision == "block 256"
    with DecisionStore(tmp_path / "decisions.db") as store:
        crashed = store.rejected(store.keys()[0])
        assert [c.failure_kind for c in crashed] == ["crash"] and "7" in crashed[0].message


def test_a_candidate_slower_to_build_than_its_kernels_budget_is_cut_there(captured, tmp_path, worker, monkeypatch):
    """A candidate's build and verification get what is left of the kernel's budget (at least
    CANDIDATE_FLOOR_S), not the worker's 120 s: one that hangs fails as a timeout at that limit."""
    import dataclasses
    import time

    from tritune.loop import kernel as kernel_module

    monkeypatch.setattr(kernel_module, "CANDIDATE_FLOOR_S", 6.0)  # a good candidate's build and 6 verified draws fit
    hang = Variant(name="hang", source=source_of(captured) + "\nimport time\ntime.sleep(120)\n", rewrite=RULED)
    good = Variant(name="block 256", constexprs={"BLOCK": 256})
    families = lambda spec: [Family("planted", Planted([hang, good]), lambda v: "tolerance")]  # noqa: E731
    begin = time.monotonic()
    results = run(captured, tmp_path, worker, families=families, settings=dataclasses.replace(SETTINGS, budget_s=1.0))
    took = time.monotonic() - begin
    [kernel] = results.kernels
    first, second = kernel.candidates
    assert first.status == "rejected" and first.failure == "timeout" and "6 s limit" in first.message
    assert second.status == "accepted" and kernel.decision == "block 256"
    assert took < 60  # not the worker's 120 s


def test_an_interrupted_run_resumes_without_redoing_candidates(captured, tmp_path, worker):
    calls = []

    def interrupting(spec, variant, ms):
        calls.append(variant.describe())
        if len(calls) == 4:  # the ranking's baseline, the loop's own, one candidate, then Ctrl-C
            raise KeyboardInterrupt
        return block_speed(spec, variant, ms)

    with pytest.raises(KeyboardInterrupt):
        run(captured, tmp_path, worker, retime=interrupting)
    with DecisionStore(tmp_path / "decisions.db") as store:
        [first_run] = store.runs()
        assert first_run.status == "interrupted"
        done_before = [c.variant.describe() for c in store.candidates() if c.done]
    assert len(done_before) == 1
    partial = json.loads((tmp_path / "optimize.json").read_text())
    assert partial["finished"] is None

    calls.clear()
    lines = []
    results = run(captured, tmp_path, worker, log=lines.append)
    [kernel] = results.kernels
    reused = [c.variant for c in kernel.candidates if c.reused]
    assert reused == done_before
    assert f"tritune optimize: resuming run {first_run.id} in {tmp_path}: 0 kernel(s) done before " \
           "(--fresh starts over)" in lines
    [line] = [line for line in lines if line.endswith("(recorded before)")]
    assert line.startswith(f"{kernel.kernel}: {done_before[0]}: verified, ") and "x the baseline" in line
    fresh = [line for line in lines if ": verified, " in line and ": accepted " not in line
             and not line.endswith("(recorded before)")]
    assert fresh and all(" ms, " in line and line.endswith("x the baseline") for line in fresh)
    assert kernel.accepted and results.run_id == first_run.id
    with DecisionStore(tmp_path / "decisions.db") as store:
        assert [r.status for r in store.runs()] == ["finished"]

    again = run(captured, tmp_path, worker)  # a finished run is not resumed: a new run, all reused
    assert again.run_id != first_run.id
    assert all(c.reused for c in again.kernels[0].candidates)


def test_families_verify_exact_rewrites_bitwise_and_configs_by_tolerance(captured):
    spec = read_launches(captured)[0]
    modes = {f.name: f.mode for f in families_for(spec, fast_math=True)}
    assert modes["launch-config"](Variant(options={"num_warps": 8})) == "tolerance"
    assert modes["passes"](Variant(passes=("exact",))) == "bitwise"
    assert modes["passes"](Variant(passes=("fast",), fast_math=True)) == "fast_math"
    # a register cap alone changes no operation; with anything else it is a config like the others
    assert modes["launch-config"](Variant(options={"maxnreg": 128})) == "bitwise"
    assert modes["launch-config"](Variant(options={"maxnreg": 128, "num_warps": 8})) == "tolerance"
    assert modes["looped-reduction"](Variant(source="...")) == "tolerance"  # a sum added chunk by chunk
    assert order_of({"proposers": ["inductor-blocks", "passes"]})[0] == ["launch-config", "looped-reduction",
                                                                         "passes", "cache-hints", "source-rewrite", "llm"]


def test_a_round_is_shared_the_first_family_half_the_others_one_each_and_leftovers_in_order(captured):
    """With 16 candidates and 4 a round, the first family alone would fill every round: a rewrite
    late in the bottleneck's order would never be tried."""
    spec = read_launches(captured)[0]

    def family(name, count):
        variants = [Variant(name=f"{name}{i}", constexprs={"BLOCK": 1000 * (len(name)) + i}) for i in range(count)]
        return Family(name, Planted(variants), lambda v: "bitwise")

    loop = KernelLoop.__new__(KernelLoop)
    loop.settings, loop.trials = dataclasses.replace(SETTINGS, per_round=4, max_candidates=16), []
    loop._sibling_timeouts, loop._siblings_from_store, loop._skipped = {}, False, set()  # no store, no timeouts
    loop.families = [family("c", 9), family("bb", 1), family("aaa", 0), family("dddd", 5)]
    context = Context(spec, loop.trials)
    order = ["c", "dddd", "bb", "aaa"]
    names = lambda picked: [v.name for v, _ in picked]  # noqa: E731
    assert names(loop._propose(order, context)) == ["c0", "c1", "dddd0", "bb0"]
    loop.families = [family("c", 9), family("dddd", 5)]  # fewer families: leftovers go back in order
    assert names(loop._propose(order, context)) == ["c0", "c1", "c2", "dddd0"]
    loop.families = [family("c", 1), family("dddd", 5)]
    assert names(loop._propose(order, context)) == ["c0", "dddd0", "dddd1", "dddd2"]
    loop.settings = dataclasses.replace(loop.settings, per_round=1)
    assert names(loop._propose(order, context)) == ["c0"]


def test_a_costly_family_gets_the_rounds_the_others_leave_outside_the_candidate_cap(captured, tmp_path, worker):
    """The model-free family first, within --max-candidates; then the costly one (a model), one
    candidate a round, not counted in the cap and not cut by the patience of flat rounds."""
    llm = {"rule": "llm", "exact": "tolerance", "params": {}}
    cheap = [Variant(name=f"b{b}", constexprs={"BLOCK": b}) for b in (128, 32, 256)]
    costly = [Variant(name=f"m{b}", constexprs={"BLOCK": b}, rewrite=llm) for b in (16, 8, 512)]

    def families(spec):
        return [Family("cheap", Planted(cheap), lambda v: "tolerance"),
                Family("llm", Planted(costly), lambda v: "tolerance", costly=True)]

    settings = dataclasses.replace(SETTINGS, max_candidates=2, per_round=2)
    results = run(captured, tmp_path, worker, families=families, settings=settings)
    [kernel] = results.kernels
    assert [c.variant for c in kernel.candidates] == ["b128", "b32", "m16", "m8", "m512"], (kernel.finish, kernel.finish_reason)
    assert [c.family for c in kernel.candidates] == ["cheap", "cheap", "llm", "llm", "llm"]
    assert kernel.decision == "m512" and kernel.finish == "exhausted"


def test_settings_refuse_nonsense():
    with pytest.raises(ValueError, match="per_round"):
        LoopSettings(per_round=0)
    with pytest.raises(ValueError, match="use_ncu"):
        LoopSettings(use_ncu="sometimes")


def test_plan_merges_launches_of_one_key_and_samples_reproducibly(captured):
    import dataclasses

    from tritune.loop import plan

    spec = read_launches(captured)[0]
    target = Target("interpreter", 0, "3.6.0")
    same_key = dataclasses.replace(spec, count=5, grid=[9, 1, 1])  # another launch, same specialization
    others = [dataclasses.replace(spec, constexprs={**spec.constexprs, "BLOCK": b}) for b in (16, 32, 128, 256)]
    merged = plan([spec, same_key, *others], target)
    assert merged.keys == 5 and merged.items[0][0].count == 6 and merged.items[0][0].grid == [9, 1, 1]
    first, second = plan([spec, *others], target, sample=3), plan([spec, *others], target, sample=3)
    assert len(first.items) == 3 and first.keys == 5
    assert [k.sha for _, k in first.items] == [k.sha for _, k in second.items]
    assert plan([spec, *others], target, kernels=["nope"]).items == []


def test_a_deadline_stops_before_the_next_kernel_and_the_run_resumes(captured, tmp_path, worker):
    results = run(captured, tmp_path, worker, deadline_s=1e-9)
    assert results.kernels == [] and "deadline" in results.stopped
    with DecisionStore(tmp_path / "decisions.db") as store:
        assert [r.status for r in store.runs()] == ["interrupted"]
    resumed = run(captured, tmp_path, worker)
    assert resumed.run_id == results.run_id and resumed.kernels[0].accepted


def test_the_decision_is_applied_in_the_unmodified_program_and_rolled_back(captured, tmp_path, worker):
    """optimize -> store -> `tritune run --store` of the same script: the decided BLOCK is what
    launches (same checksum), and after a rollback the original launch runs again."""
    results = run(captured, tmp_path, worker)
    assert results.kernels[0].accepted
    store_path = tmp_path / "decisions.db"
    env = {**os.environ, "TRITON_INTERPRET": "1"}

    def program(*extra):
        done = subprocess.run([sys.executable, "-m", "tritune", "run", "--store", str(store_path), "--",
                               sys.executable, str(PROGRAM), *extra], env=env, capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        return done

    plain = subprocess.run([sys.executable, str(PROGRAM)], env=env, capture_output=True, text=True, timeout=300)
    applied = program()
    assert "decisions applied to 1 of 1 launches" in applied.stderr
    assert applied.stdout == plain.stdout  # the program's own check passed and the checksum is the same
    other_size = program("5000")  # n=5000 is another shape bucket: no decision, runs as written
    assert "decisions applied to 0 of 1 launches" in other_size.stderr
    with DecisionStore(store_path) as store:
        assert store.rollback_all("scale_add_kernel") == 1
    rolled_back = program()
    assert "decisions applied" not in rolled_back.stderr and rolled_back.stdout == plain.stdout


def test_a_candidate_the_arbiter_rejected_is_never_decided_in_a_later_run(captured, tmp_path, worker):
    """Run 1: the benchmark says BLOCK=256 is 2x but the interleaved re-timing disagrees: rejected.
    A later run (other settings: a new run over the same store) reuses that record and must not
    promote it, even when its re-timing would now agree."""
    from tritune.arbiter.confirm import Confirmation

    class Disagreeing(Evaluator):
        def confirm(self, spec, variant):
            return Confirmation(1.0, 1.0, 1.0, 0.0, ((1.0, 1.0),), ("AB",), False, "scripted"), None

    only = lambda spec: [Family("planted", Planted([Variant(name="b256", constexprs={"BLOCK": 256})]),  # noqa: E731
                                lambda v: "tolerance")]
    first = optimize(captured, RunRequest(tmp_path, settings=SETTINGS), families=only, evaluator=Disagreeing(captured, retime=block_speed, worker=worker))
    assert first.kernels[0].candidates[0].status == "rejected"
    other = LoopSettings(arbiter=ArbiterSettings(require_meaningful=False), max_candidates=5, per_round=3)
    second = run(captured, tmp_path, worker, families=only, settings=other)
    [kernel] = second.kernels
    assert second.run_id != first.run_id and not kernel.accepted
    with DecisionStore(tmp_path / "decisions.db") as store:
        assert store.decisions() == []


def test_optimize_command_on_an_inductor_kernel_directory(tmp_path, small_inductor_poi):
    modules = small_inductor_poi.parent
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "tritune", "optimize", "--out", str(tmp_path / "opt"),
                           "--inductor-dir", str(modules), "--max-candidates", "2"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 launches from 1 Inductor modules" in done.stdout and "NOT meaningful" in done.stdout
    results = RunResults.load(tmp_path / "opt")
    [kernel] = results.kernels
    assert kernel.kind == "inductor" and kernel.category == "elementwise" and kernel.baseline_ms > 0
    # built and verified; one may reach confirmation on CPU wall time, which the arbiter refuses
    assert len(kernel.candidates) == 2 and all(c.failure in (None, "not_meaningful") for c in kernel.candidates)
    assert not kernel.accepted
    assert (tmp_path / "opt" / "report.html").exists() and (tmp_path / "opt" / "decisions.db").exists()


def test_optimize_command_wants_exactly_one_input(tmp_path):
    from click.testing import CliRunner

    from tritune.cli import main

    none = CliRunner().invoke(main, ["optimize", "--out", str(tmp_path)])
    assert none.exit_code == 2 and "exactly one of" in none.output
    two = CliRunner().invoke(main, ["optimize", "--out", str(tmp_path), "--launches", str(tmp_path), "--",
                                    "python", "x.py"])
    assert two.exit_code == 2 and "got -- COMMAND, --launches" in two.output


# Another optimize process on the same store: it claims a candidate, then on release finishes it
# (``finish``) or dies with the run still ``running`` and the candidate claimed (``die``).
HOLDER = """
import dataclasses, json, os, sys
from tritune.model.key import DecisionKey
from tritune.model.variant import Variant
from tritune.store import DecisionStore
path, key, variant, then = sys.argv[1:]
store = DecisionStore(path)
run = store.start_run({"another": "optimize"})
cand = store.add_candidate(run, DecisionKey(**json.loads(key)), Variant.from_json(json.loads(variant)))
assert store.claim(cand.id, run) is not None
print("held", flush=True)
sys.stdin.read()
if then == "finish":
    store.finish_candidate(cand.id, "rejected", failure={"kind": "wrong_result", "message": "found by the other run"})
    store.finish_run(run)
    store.close()
os._exit(0)
"""


@pytest.mark.parametrize("then", ["finish", "die", "never"])
def test_a_candidate_another_live_run_holds_is_waited_for_not_lost(captured, tmp_path, worker, monkeypatch, then):
    import dataclasses

    good = Variant(name="block 256", constexprs={"BLOCK": 256})
    families = lambda spec: [Family("planted", Planted([good]), lambda v: "tolerance")]  # noqa: E731
    [(spec, key)] = plan(read_launches(captured), machine(worker)).items
    fields = {f.name: getattr(key, f.name) for f in dataclasses.fields(key) if f.init}
    holder = subprocess.Popen([sys.executable, "-c", HOLDER, str(tmp_path / "decisions.db"), json.dumps(fields),
                               json.dumps(good.to_json()), then],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        seen = []
        wait = KernelLoop._wait_for_held

        def release_then_wait(loop, start):  # the loop has seen the candidate held: the other run goes on
            seen.append(len(loop._held))
            if loop._held and then == "never":
                loop.settings = dataclasses.replace(loop.settings, budget_s=1e-9)  # it held on past the budget
            elif loop._held:
                holder.stdin.close()
                holder.wait(timeout=60)  # reaped: a dead process, not a zombie that looks alive
            return wait(loop, start)

        monkeypatch.setattr(KernelLoop, "_wait_for_held", release_then_wait)
        results = run(captured, tmp_path, worker, families=families)
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
    [kernel] = results.kernels
    [record] = kernel.candidates
    assert seen[0] == 1 and kernel.waited == 1
    assert json.loads((tmp_path / "optimize.json").read_text())["kernels"][0]["waited"] == 1
    if then == "finish":  # its verdict is used, not evaluated again
        assert record.reused and record.status == "rejected" and record.failure == "wrong_result"
        assert kernel.busy == 0 and not kernel.accepted
    elif then == "die":  # taken over and evaluated here
        assert not record.reused and record.status == "accepted" and kernel.decision == "block 256"
        assert kernel.busy == 0
    else:
        assert record.status == "busy" and kernel.busy == 1 and not kernel.accepted


def test_after_coordinate_descent_the_knobs_it_never_turns_come_first():
    from tritune.model.launch import ArgSpec, LaunchSpec

    red = LaunchSpec(kernel="triton_red_fused_sum_0", kind="inductor", module="m", source_file="m.py",
                     source="sources/m.py", source_hash="0" * 64,
                     args=[ArgSpec("in_ptr0", "tensor", shape=[64, 512], stride=[512, 1], dtype="float32"),
                           ArgSpec("xnumel", "scalar", value=64, type="int"),
                           ArgSpec("r0_numel", "scalar", value=512, type="int"),
                           ArgSpec("XBLOCK", "constexpr"), ArgSpec("R0_BLOCK", "constexpr")],
                     constexprs={"XBLOCK": 1, "R0_BLOCK": 64}, options={"num_warps": 2, "num_stages": 1},
                     grid=[64], grid_rule={"kind": "inductor", "grid_type": "Grid1D"},
                     extra={"config_from": "autotuned"})
    [config] = [f for f in families_for(red) if f.name == "launch-config"]
    first = config.propose(Context(red, [], knob_roles=("block", "num_warps")), 1)[0]
    assert set(first.constexprs) == {"XBLOCK"}  # Inductor's heuristic pick: its blocks first
    red.extra["config_from"] = "coordinate_descent"
    first = config.propose(Context(red, [], knob_roles=("block", "num_warps")), 1)[0]
    assert first.options == {"num_stages": 2} and not first.constexprs


@pytest.fixture(scope="module")
def siblings(tmp_path_factory) -> Path:
    """One kernel captured at two sizes: two keys of the same source."""
    out = tmp_path_factory.mktemp("siblings") / "capture"
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    for n, more in (("300", []), ("200", ["--append"])):
        done = subprocess.run([sys.executable, "-m", "tritune", "capture", "--out", str(out), *more, "--",
                               sys.executable, str(PROGRAM), n], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
    assert len(read_launches(out)) == 2
    return out


def test_a_variant_that_timed_out_on_a_sibling_key_is_not_tried_again(siblings, tmp_path, worker, monkeypatch):
    """The same source compiled for other shapes compiles the same way: a config whose build ran
    past its limit on one key is skipped on the next (issue 11: 7 gpt2 keys lost 15 s each so)."""
    from tritune.loop import kernel as kernel_module

    monkeypatch.setattr(kernel_module, "CANDIDATE_FLOOR_S", 6.0)  # a good candidate's build and 6 verified draws fit
    hang = Variant(name="hang", source=source_of(siblings) + "\nimport time\ntime.sleep(120)\n", rewrite=RULED)
    good = Variant(name="block 256", constexprs={"BLOCK": 256})
    families = lambda spec: [Family("planted", Planted([hang, good]), lambda v: "tolerance")]  # noqa: E731
    logged = []
    results = run(siblings, tmp_path, worker, families=families, log=logged.append,
                  settings=dataclasses.replace(SETTINGS, budget_s=1.0))
    first, second = results.kernels
    assert [c.variant for c in first.candidates][:1] == ["hang"] and first.candidates[0].failure == "timeout"
    assert "hang" not in [c.variant for c in second.candidates] and second.skipped == 1 and first.skipped == 0
    assert second.accepted and second.decision == "block 256"
    assert any("hang skipped: it timed out on a sibling key" in line for line in logged)


def test_a_timeout_on_a_sibling_key_found_while_this_key_runs_is_heeded_the_next_round(captured):
    """Several lanes: a sibling key on another lane may time out on a config while this key runs.
    The store is asked again each round, so the next round does not try it."""
    from tritune.model.trial import Trial
    from tritune.store import variant_hash

    spec = read_launches(captured)[0]
    variants = [Variant(name=f"v{i}", constexprs={"BLOCK": 100 + i}) for i in range(4)]
    timed_out: dict = {}

    class Store:
        asked = 0

        def timed_out_on_siblings(self, key):
            Store.asked += 1
            return dict(timed_out)

    loop = KernelLoop.__new__(KernelLoop)
    loop.settings, loop.trials = dataclasses.replace(SETTINGS, per_round=1, max_candidates=16), []
    loop.store, loop.key, loop.spec, loop.log = Store(), None, spec, lambda line: None
    loop._sibling_timeouts, loop._siblings_from_store, loop._skipped = None, True, set()
    loop.families = [Family("f", Planted(variants), lambda v: "bitwise")]
    context = Context(spec, loop.trials)
    [(first, _)] = loop._propose(["f"], context)
    assert first.name == "v0" and Store.asked == 1
    loop.trials.append(Trial(first, ok=True, time_ms=1.0))
    timed_out[variant_hash(variants[1])] = "0" * 64  # another lane's sibling key timed out on v1 meanwhile
    loop.settings = dataclasses.replace(loop.settings, per_round=2)
    # v1 is skipped and takes no slot: the round still holds two candidates
    assert [v.name for v, _ in loop._propose(["f"], context)] == ["v2", "v3"] and Store.asked == 2
    timed_out[variant_hash(variants[3])] = "0" * 64  # the family has nothing left beyond the skipped ones
    assert [v.name for v, _ in loop._propose(["f"], context)] == ["v2"] and Store.asked == 3


def _request_fields(kwargs: dict) -> dict:
    """The ``RunRequest`` fields among a helper's keyword arguments, taken out of them."""
    return {name: kwargs.pop(name) for name in list(kwargs) if name in RunRequest.__dataclass_fields__}
