"""Lanes on a Ray cluster (``tritune optimize --ray``), on one local Ray instance of 2 CPUs per
module, under the interpreter: the Ray lanes decide what one local lane decides, the store is
written by the driver alone (signed, usable, resumable), an actor that dies gives its key to the
other lane, and the CLI connects to a running cluster. The one-line errors of ``--ray`` (Ray
missing among them) are in ``tests/cli/test_bad_inputs.py``, which runs without Ray."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from tritune.loop import optimize  # noqa: E402
from tritune.loop.evaluate import Evaluator  # noqa: E402
from tritune.loop.lanes import LaneDied, LocalLane  # noqa: E402
from tritune.loop.ray_lanes import RayLane, ray_lanes  # noqa: E402
from tritune.model.request import RunRequest
from tritune.store import DecisionStore, variant_hash  # noqa: E402

from test_loop_lanes import GRIDS, SETTINGS, by_grid, captured, decisions_of, interpreter_worker  # noqa: E402,F401

HERE = Path(__file__).resolve().parent  # this module and test_loop_lanes, which the actors import
TESTS = HERE.parent  # the helper modules


@pytest.fixture(scope="module", autouse=True)
def cluster():
    """One local Ray instance for the module. Its processes inherit this environment when it
    starts: the actors import the scripted times of these tests (``by_grid``, ``DieOnce``)."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYTHONPATH", os.pathsep.join([str(HERE), str(TESTS), os.environ.get("PYTHONPATH", "")]))
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
                 object_store_memory=100 * 1024 * 1024)
    yield
    ray.shutdown()


def ids(root: Path, grids) -> list[str]:
    """The launch ids of the launches of these grids (the smaller, the quicker to interpret)."""
    from tritune.capture.spec import read_launches

    return [spec.id for spec in read_launches(root) if spec.grid[0] in grids]


SMALL = GRIDS[1:]  # the three smaller keys: the largest alone takes longer to interpret than they do


def close(lanes) -> None:
    for lane in lanes:
        lane.close()


@pytest.fixture(scope="module")
def local_and_ray(captured, tmp_path_factory):
    """The capture optimized on one local lane, then on two Ray lanes: (results, out) of each."""
    local_out, ray_out = tmp_path_factory.mktemp("local"), tmp_path_factory.mktemp("ray")
    worker = interpreter_worker()
    try:
        lane = LocalLane(None, captured, evaluator=Evaluator(captured, retime=by_grid, worker=worker))
        local = optimize(captured, RunRequest(local_out, settings=SETTINGS, cover=1.0, kernels=ids(captured, SMALL)), lanes=[lane])
    finally:
        worker.close()
    lanes = ray_lanes(captured, SETTINGS, interpret=True, retime=by_grid)
    try:
        remote = optimize(captured, RunRequest(ray_out, settings=SETTINGS, cover=1.0, kernels=ids(captured, SMALL)), lanes=lanes)
    finally:
        close(lanes)
    return (local, local_out), (remote, ray_out)


def test_ray_lanes_decide_what_one_local_lane_decides(local_and_ray):
    (local, local_out), (remote, ray_out) = local_and_ray
    assert len(local.kernels) == len(SMALL) == len(remote.kernels)
    assert [k.key_sha for k in remote.kernels] == [t.key_sha for t in local.timed] == [k.key_sha for k in local.kernels]
    for a, b in zip(local.kernels, remote.kernels):
        assert (a.decision, a.accepted, a.speedup, a.baseline_ms) == (b.decision, b.accepted, b.speedup, b.baseline_ms)
        assert [(c.variant, c.status) for c in a.candidates] == \
            [(c.variant, c.status) for c in b.candidates]
    assert any(k.accepted for k in remote.kernels)
    assert decisions_of(local_out / "decisions.db") == decisions_of(ray_out / "decisions.db") != {}
    names = [lane.name for lane in remote.lanes]
    assert len(names) == 2 and all(n.startswith("ray:") and "/cpu" in n for n in names) and len(set(names)) == 2
    assert all(lane.gpu == "interpreter" and lane.kernels >= 1 and lane.died is None for lane in remote.lanes)
    assert {k.lane for k in remote.kernels} == set(names) and remote.finished is not None


def test_the_driver_alone_writes_the_store_signed_and_usable(local_and_ray):
    (local, local_out), (remote, ray_out) = local_and_ray
    with DecisionStore(ray_out / "decisions.db") as store, DecisionStore(local_out / "decisions.db") as mine:
        assert [(r.id, r.pid) for r in store.runs()] == [(remote.run_id, os.getpid())]  # no actor's run leaked in
        cands = store.candidates()
        assert cands and all(c.signed and c.done and c.run_id == remote.run_id for c in cands)
        assert sorted((c.key_sha, c.variant_hash, c.status) for c in cands) == \
            sorted((c.key_sha, c.variant_hash, c.status) for c in mine.candidates())
        assert [d.usable for d in store.decisions()] == [True] * len(mine.decisions())
        for kernel in remote.kernels:
            assert store.profile_for(kernel.key_sha) is not None  # signed here, as the loop reads it
            records = store.key_records(kernel.key_sha)  # what a resumed key would be shipped
            assert len(records["candidates"]) == len(mine.key_records(kernel.key_sha)["candidates"]) > 0


def test_a_resumed_key_reuses_the_records_the_driver_ships(local_and_ray, captured):
    """A new run on the Ray store: every key's candidates travel to the lanes and are reused."""
    _, (remote, ray_out) = local_and_ray
    lanes = ray_lanes(captured, SETTINGS, interpret=True, retime=by_grid)
    try:
        again = optimize(captured, RunRequest(ray_out, settings=SETTINGS, cover=1.0, kernels=ids(captured, SMALL), fresh=True), lanes=lanes)
    finally:
        close(lanes)
    assert again.run_id != remote.run_id and len(again.kernels) == len(SMALL)
    # what the first run evaluated is reused, never evaluated again; the first run's decisions on
    # sibling keys now seed this one (``search.prior``), so the search's order, and what it gets to
    # within its 3 candidates, may differ
    before = {k.id: {c.variant for c in k.candidates} for k in remote.kernels}
    for kernel in again.kernels:
        assert all(c.reused == (c.variant in before[kernel.id]) for c in kernel.candidates)
    assert all(any(c.reused for c in k.candidates) for k in again.kernels)
    assert [k.decision for k in again.kernels] == [k.decision for k in remote.kernels]
    reused = {c.variant for k in again.kernels for c in k.candidates if c.reused}
    with DecisionStore(ray_out / "decisions.db") as store:
        # the reused ones unchanged: not written again
        assert {c.run_id for c in store.candidates()} <= {remote.run_id, again.run_id}
        assert all(c.run_id == remote.run_id for c in store.candidates() if c.variant.describe() in reused)


class DieOnce:
    """Scripted times, but the first candidate any lane times ends that lane's actor (its process
    exits), once for the run (``marker``)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __call__(self, spec, variant, measured_ms):
        if not variant.is_baseline:
            try:
                os.close(os.open(self.marker, os.O_CREAT | os.O_EXCL))
            except FileExistsError:
                pass
            else:
                os._exit(3)
        return by_grid(spec, variant, measured_ms)


def test_an_actor_that_dies_gives_its_key_to_the_other_lane(captured, tmp_path):
    lines: list[str] = []
    lanes = ray_lanes(captured, SETTINGS, interpret=True, retime=DieOnce(tmp_path / "died"))
    try:
        results = optimize(captured, RunRequest(tmp_path / "out", settings=SETTINGS, cover=1.0, kernels=ids(captured, GRIDS[-1:])), lanes=lanes, log=lines.append)
    finally:
        close(lanes)
    assert (tmp_path / "died").exists() and len(results.kernels) == 1 and results.stopped is None
    dead = [lane for lane in results.lanes if lane.died]
    alive = [lane for lane in results.lanes if not lane.died]
    assert len(dead) == len(alive) == 1 and "ActorDiedError" in dead[0].died and dead[0].kernels == 0
    assert [k.lane for k in results.kernels] == [alive[0].name]  # the key it held, done by the other
    said = [line for line in lines if " died: its Ray actor is gone" in line]
    assert len(said) == 1 and said[0].startswith(f"tritune optimize: lane {dead[0].name} (interpreter) died: ")
    with DecisionStore(tmp_path / "out" / "decisions.db") as store:
        cands = store.candidates()
        assert cands and all(c.signed and c.done for c in cands)  # nothing of the dead actor's half key


def test_a_lane_that_finds_no_cpu_free_does_not_start(captured):
    """Both CPUs of the instance held: a lane waits for one, then counts as dead."""

    @ray.remote(num_cpus=1)
    class Holder:
        def ready(self) -> bool:
            return True

    holders = [Holder.remote() for _ in range(2)]
    late = RayLane(captured, SETTINGS, index=2, gpu=False, interpret=True, start_timeout_s=1.0)
    try:
        assert ray.get([holder.ready.remote() for holder in holders]) == [True, True]
        with pytest.raises(LaneDied) as caught:
            late.start()
    finally:
        late.close()
        for holder in holders:
            ray.kill(holder)
    assert str(caught.value) == "no CPU of the cluster came free for it, or its workers did not start (1 s)"


class BugFor:
    """Planted families: the real ones (None), but a bug for the launch of ``grid`` programs."""

    def __init__(self, grid: int) -> None:
        self.grid = grid

    def __call__(self, spec):
        if spec.grid[0] == self.grid:
            raise ValueError("a bug in the families")
        return None


def test_a_job_s_error_is_raised_and_interrupt_kills_what_runs(captured, tmp_path):
    """The job's own error comes back as itself (the run would stop); ``interrupt`` kills the
    actor mid-key, the call raises ``Interrupted``, and nothing of the key reaches the store."""
    from tritune.capture.spec import read_launches
    from tritune.loop.evaluate import Interrupted
    from tritune.loop.lanes import KeyJob
    from tritune.loop.session import plan

    lane = RayLane(captured, SETTINGS, gpu=False, interpret=True, retime=by_grid, families=BugFor(GRIDS[-1]))
    path = tmp_path / "decisions.db"
    try:
        target = lane.start()
        with DecisionStore(path) as store:
            run = store.start_run({})
        jobs = {spec.grid[0]: KeyJob(spec, key, settings=SETTINGS, run_id=run, store_path=str(path),
                                     root=str(captured))
                for spec, key in plan(read_launches(captured), target).items}
        with pytest.raises(ValueError, match="a bug in the families"):
            lane.run_key(jobs[GRIDS[-1]])
        raised: list[BaseException] = []

        def run_key() -> None:
            try:
                lane.run_key(jobs[GRIDS[0]])
            except BaseException as exc:  # noqa: BLE001 - what the lane's thread would see
                raised.append(exc)

        thread = threading.Thread(target=run_key)
        thread.start()
        time.sleep(1.0)  # the key is running in the actor (it takes a few seconds)
        lane.interrupt()
        thread.join(60)
        assert [type(exc) for exc in raised] == [Interrupted]
        with pytest.raises(Interrupted):
            lane.run_key(jobs[GRIDS[1]])  # an interrupted lane is not used again
    finally:
        lane.close()
    with DecisionStore(path) as store:
        assert store.candidates() == [] and store.profile_for(jobs[GRIDS[0]].key) is None
    # A killed actor cannot remove its folder (the capture's copy, its stores): the next lane on
    # the node removes the folders of actors whose process is gone.
    from tritune.loop.ray_lanes import _LaneActor

    folder = Path(lane.folder)
    assert folder.is_dir()
    for _ in range(20):  # until the killed actor's process is gone
        after = ray.remote(_LaneActor).options(num_cpus=1).remote(index=1, interpret=True, jobs=1, use_ncu="never",
                                                                  retime=None, families=None)
        ray.get(after.close.remote())  # made (it starts no worker), then closed: its own folder removed
        ray.kill(after)
        if not folder.exists():
            break
        time.sleep(0.5)
    assert not folder.exists()


def tolerance(variant) -> str:
    return "tolerance"


class Proposes:
    """A proposer of fixed variants, in order (each proposed once)."""

    name = "planted"

    def __init__(self, variants) -> None:
        self.variants = variants

    def propose(self, spec, trials, limit):
        tried = {t.variant.key() for t in trials}
        return [v for v in self.variants if v.key() not in tried][:limit]


class PlantFor:
    """Planted families, made in the actor: ``variants`` for the launch of ``grid`` programs."""

    def __init__(self, grid: int, variants) -> None:
        self.grid, self.variants = grid, variants

    def __call__(self, spec):
        from tritune.loop.families import Family

        return [Family("planted", Proposes(self.variants), tolerance)] if spec.grid[0] == self.grid else None


def test_a_ray_lane_skips_what_timed_out_on_a_sibling_key(captured, tmp_path):
    """The actor's store holds only its key: the driver's timeouts on the key's siblings (same
    source, GPU, Triton) travel with the key, so that it skips them as a local lane does."""
    from tritune.capture.spec import read_launches
    from tritune.loop.lanes import KeyJob
    from tritune.loop.session import plan
    from tritune.model.variant import Variant

    slow, good = Variant(name="slow", constexprs={"BLOCK": 32}), Variant(name="good", constexprs={"BLOCK": 128})
    lane = RayLane(captured, SETTINGS, gpu=False, interpret=True, retime=by_grid,
                   families=PlantFor(GRIDS[-1], [slow, good]))
    path = tmp_path / "decisions.db"
    try:
        target = lane.start()
        items = {spec.grid[0]: (spec, key) for spec, key in plan(read_launches(captured), target).items}
        with DecisionStore(path) as store:
            run = store.start_run({})
            cand = store.add_candidate(run, items[GRIDS[-2]][1], slow)  # timed out on a sibling key
            store.claim(cand.id, run)
            store.finish_candidate(cand.id, "rejected", failure={"kind": "timeout", "message": "past its limit"})
        spec, key = items[GRIDS[-1]]
        result = lane.run_key(KeyJob(spec, key, settings=SETTINGS, run_id=run, store_path=str(path),
                                     root=str(captured)))
    finally:
        lane.close()
    assert [c.variant for c in result.candidates] == ["good"] and result.skipped == 1


def test_a_ray_lane_starts_from_the_configs_the_drivers_store_decided(captured, tmp_path):
    """The actor's store holds only its key: the configs the driver's store decided for the same
    source on a sibling key (``search.prior``) travel with the key, and its search starts there,
    as a local lane's does."""
    from tritune.capture.spec import read_launches
    from tritune.loop.lanes import KeyJob
    from tritune.loop.session import plan
    from tritune.model.variant import Variant
    from tritune.search.prior import traits

    lane = RayLane(captured, SETTINGS, gpu=False, interpret=True, retime=by_grid)
    path = tmp_path / "decisions.db"
    seed = Variant(name="seed", constexprs={"BLOCK": 256})
    try:
        target = lane.start()
        items = {spec.grid[0]: (spec, key) for spec, key in plan(read_launches(captured), target).items}
        sibling, sibling_key = items[GRIDS[-2]]
        with DecisionStore(path) as store:
            before = store.start_run({})  # an earlier run decided the sibling key
            cand = store.add_candidate(before, sibling_key, seed)
            store.claim(cand.id, before)
            store.finish_candidate(cand.id, "verified", verification={"ok": True, "mode": "tolerance", "checks": []},
                                   timings={"time_ms": 1.0})
            store.set_decision(sibling_key, seed, baseline_ms=2.0, best_ms=1.0,
                               traits=traits(sibling, sibling_key, "elementwise", seed))
            run = store.start_run({})
        spec, key = items[GRIDS[-1]]
        result = lane.run_key(KeyJob(spec, key, settings=SETTINGS, run_id=run, store_path=str(path),
                                     root=str(captured), category="elementwise"))
    finally:
        lane.close()
    seeded = [c for c in result.candidates if c.prior]
    assert seeded and "BLOCK=256" in seeded[0].variant


class Misaddressed:
    """An actor as a node running other code might be: it answers each key with a made-up result
    and records for another key (no workers: it runs nothing)."""

    def __init__(self, **options) -> None:
        pass

    def start(self) -> dict:
        import triton

        from tritune import __version__

        target = {"gpu": "interpreter", "capability": 0, "triton_version": triton.__version__, "meaningful": False,
                  "copy_gbps": None}
        return {"target": target, "tritune": __version__, "where": "elsewhere/cpu0", "jobs": 1, "folder": ""}

    def run_key(self, body: dict, files: dict) -> dict:
        verified = {"variant": {"name": "mine", "options": {}, "constexprs": {"BLOCK": 128}, "passes": [],
                                "fast_math": False, "source": None}, "status": "verified", "failure_kind": None,
                    "message": None, "detail": None, "verification": {"ok": True}, "timings": {"time_ms": 1.0}}
        result = {"id": "another", "kernel": "another", "key_sha": "0" * 64, "baseline_ms": 1.0}
        return {"result": result, "records": {"candidates": [verified], "profiles": [], "decision": None},
                "log": []}

    def close(self) -> None:
        pass


def test_a_reply_for_another_key_is_refused_and_nothing_of_it_recorded(captured, tmp_path, monkeypatch):
    from tritune.capture.spec import read_launches
    from tritune.loop import ray_lanes as module
    from tritune.loop.lanes import KeyJob
    from tritune.loop.session import plan

    monkeypatch.setattr(module, "_LaneActor", Misaddressed)
    lane = RayLane(captured, SETTINGS, gpu=False, interpret=True)
    path = tmp_path / "decisions.db"
    try:
        target = lane.start()
        [(spec, key), *_] = plan(read_launches(captured), target).items
        with DecisionStore(path) as store:
            run = store.start_run({})
        with pytest.raises(LaneDied, match="answered for another key"):
            lane.run_key(KeyJob(spec, key, settings=SETTINGS, run_id=run, store_path=str(path), root=str(captured)))
    finally:
        lane.close()
    with DecisionStore(path) as store:
        assert store.candidates() == []


def test_the_cli_runs_its_lanes_on_a_running_cluster(captured, tmp_path):
    """``--ray auto``: the command connects to this module's instance, and the run is the driver's."""
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    [smallest] = ids(captured, GRIDS[-1:])
    done = subprocess.run([sys.executable, "-m", "tritune", "optimize", "--out", str(tmp_path / "out"), "--launches",
                           str(captured), "--ray", "auto", "--kernel", smallest, "--max-candidates", "2",
                           "--per-round", "2", "--ncu", "never", "--no-report"],
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode in (0, 1), done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    with DecisionStore(tmp_path / "out" / "decisions.db") as store:
        [run] = store.runs()
        cands = store.candidates()
    assert run.status == "finished" and run.pid != os.getpid()
    assert 1 <= len(cands) <= 2 and all(c.signed and c.done for c in cands)


def test_a_cluster_address_where_nothing_answers_is_one_line_at_once(captured, tmp_path):
    """Ray itself would try to reach it for many minutes (20 tries of ~40 s in Ray 2.60), printing
    its warnings."""
    done = subprocess.run([sys.executable, "-m", "tritune", "optimize", "--out", str(tmp_path / "out"), "--launches",
                           str(captured), "--ray", "127.0.0.1:1", "--no-report"],
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=120)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, done.stderr
    assert lines[0].startswith("tritune optimize: --ray 127.0.0.1:1: cannot connect to the Ray cluster: nothing "
                               "answers at "), lines[0]


def test_tritune_imports_ray_only_when_a_ray_lane_is_made():
    code = ("import sys, tritune.cli, tritune.commands.optimize, tritune.loop.session, tritune.loop.ray_lanes; "
            "print('ray' in sys.modules)")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "False", done.stderr


def test_replies_not_in_the_form_the_driver_reads_are_named():
    """What the driver checks of an actor's start and baselines replies (form, not truth)."""
    from tritune.loop.ray_lanes import baselines_problem, start_problem
    from tritune.worker.failures import Failure

    good = {"target": {"gpu": "g", "capability": 0, "triton_version": "3", "meaningful": False},
            "tritune": "1", "where": "n", "jobs": 1, "folder": ""}
    assert start_problem(good) is None
    assert start_problem([good]) == "a list, not a dict"
    assert start_problem({**good, "jobs": "1"}) == "jobs is not a int"
    assert start_problem({**good, "target": {"gpu": "g"}}) == "its target lacks capability, triton_version, meaningful"
    failure = Failure("compile_error", "no")
    found = {"a": ({"time_ms": 0.5}, None), "b": (None, failure), "c": [{"message": "x"}, None]}
    assert baselines_problem({"found": found, "log": ["line"]}, ["a", "b", "c"]) is None
    assert baselines_problem({"found": found}, ["a", "b", "c"]) == "no found dict and log lines"
    assert baselines_problem({"found": found, "log": []}, ["a", "b"]) == \
        "timings for 1 launch(es) not sent and 0 missing"
    assert baselines_problem({"found": {"a": ({"time_ms": 0.5}, None)}, "log": []}, ["a", "z"]) == \
        "timings for 0 launch(es) not sent and 1 missing"
    for pair, problem in [(({"time_ms": "fast"}, None), "a: time_ms 'fast' is not a positive number"),
                          (({"time_ms": -1.0}, None), "a: time_ms -1.0 is not a positive number"),
                          (({"time_ms": float("nan")}, None), "a: time_ms nan is not a positive number"),
                          (({"time_ms": True}, None), "a: time_ms True is not a positive number"),
                          (("1 ms", None), "a: its timing is a str"),
                          ((None, {"kind": "crash"}), "a: its failure is a dict"),
                          ((None,), "a: not a (timing, failure) pair")]:
        assert baselines_problem({"found": {"a": pair}, "log": []}, ["a"]) == problem


class Tampered(Misaddressed):
    """A node that starts well, then answers the ranking with a time that is not a number, and a
    key (its own, this time) with records not in their form."""

    def baselines(self, specs: list, files: dict) -> dict:
        return {"found": {body["id"]: ({"time_ms": "fast"}, None) for body in specs}, "log": []}

    def run_key(self, body: dict, files: dict) -> dict:
        result = {"id": body["spec"]["id"], "kernel": body["spec"]["kernel"], "key_sha": body["key"]["sha"],
                  "baseline_ms": 1.0}
        return {"result": result, "records": {"candidates": [{"status": "verified"}]}, "log": []}


def test_a_tampered_reply_is_a_dead_lane_and_nothing_of_it_recorded(captured, tmp_path, monkeypatch):
    from tritune.capture.spec import read_launches
    from tritune.loop import ray_lanes as module
    from tritune.loop.lanes import KeyJob
    from tritune.loop.session import plan

    monkeypatch.setattr(module, "_LaneActor", Tampered)
    path = tmp_path / "decisions.db"
    for call in ("baselines", "run_key"):
        lane = RayLane(captured, SETTINGS, gpu=False, interpret=True)
        try:
            target = lane.start()
            [(spec, key), *_] = plan(read_launches(captured), target).items
            expected = "its reply to baselines is not in the form" if call == "baselines" else \
                "disagree with its result: a record or result entry not in its form"
            with pytest.raises(LaneDied, match=expected) as died:
                if call == "baselines":
                    lane.baselines([spec])
                else:
                    with DecisionStore(path) as store:
                        run = store.start_run({})
                    lane.run_key(KeyJob(spec, key, settings=SETTINGS, run_id=run, store_path=str(path),
                                        root=str(captured)))
            assert ("time_ms 'fast'" if call == "baselines" else "(TypeError); not recorded") in str(died.value)
        finally:
            lane.close()
    with DecisionStore(path) as store:
        assert store.candidates() == []


# ------------------------------------------------- a reply whose records disagree with its result

def genuine(local_and_ray) -> tuple[dict, dict]:
    """A key's result and records as a lane makes them (the local run's key with a decision):
    what an honest actor returns for a key it was sent with no records."""
    import copy

    (local, local_out), _ = local_and_ray
    kernel = next(k for k in local.kernels if k.accepted and len(k.candidates) >= 3)
    with DecisionStore(local_out / "decisions.db") as store:
        records = store.key_records(kernel.key_sha)
    return copy.deepcopy(kernel.to_json()), records


NOTHING_SENT = {"candidates": [], "profiles": [], "decision": None}


def roles(result: dict, records: dict) -> tuple[dict, dict, dict, dict]:
    """(reported, recorded) of the decided candidate, then of another verified one."""
    decided = result["decision_hash"]
    other = next(c for c in result["candidates"] if c["variant_hash"] != decided and c["status"] == "verified")
    by_hash = {variant_hash(body["variant"]): body for body in records["candidates"]}
    accepted = next(c for c in result["candidates"] if c["variant_hash"] == decided)
    return accepted, by_hash[decided], other, by_hash[other["variant_hash"]]


def hide_the_decision(result, records):
    """The issue's case: optimize.json would show decision null, ``tritune run`` would apply it."""
    result.update(accepted=False, decision=None, decision_hash=None, speedup=1.0)


def drop_the_decision(result, records):
    records["decision"] = None


def decide_another(result, records):
    """Both halves say the other candidate was accepted, but the result names the first as decided."""
    accepted, decided, other, body = roles(result, records)
    accepted["status"] = decided["status"] = "verified"
    other["status"] = body["status"] = "accepted"
    records["decision"]["variant"] = body["variant"]


def change_a_status(result, records):
    *_, body = roles(result, records)
    body.update(status="rejected", failure_kind="wrong_result")


def change_a_time(result, records):
    _, decided, _, _ = roles(result, records)
    decided["timings"]["time_ms"] /= 2


def change_a_failure(result, records):
    *_, other, body = roles(result, records)
    other.update(status="rejected", failure="timeout")
    body.update(status="rejected", failure_kind="wrong_result")


def leave_a_record_unreported(result, records):
    *_, other, _ = roles(result, records)
    result["candidates"].remove(other)


def leave_a_reported_one_unrecorded(result, records):
    *_, body = roles(result, records)
    records["candidates"].remove(body)


def change_the_speedup(result, records):
    result["speedup"] *= 1.5


DISAGREEMENTS = {
    hide_the_decision: "the records hold a decision the result does not report",
    drop_the_decision: "the result reports decision 'BLOCK=128', the records none",
    decide_another: "the result reports decision 'BLOCK=128', the records another variant",
    change_a_status: "reported verified, recorded rejected",
    change_a_time: "BLOCK=128: reported ",
    change_a_failure: "reported rejected for timeout, recorded for wrong_result",
    leave_a_record_unreported: "that the result does not report",
    leave_a_reported_one_unrecorded: "reported verified, but not among the records",
    change_the_speedup: "the result reports speedup 3.0, the records' decision 2.0",
}


@pytest.mark.parametrize("plant", list(DISAGREEMENTS), ids=lambda plant: plant.__name__)
def test_records_that_disagree_with_their_result_are_named(local_and_ray, plant):
    from tritune.loop.ray_records import records_problem

    result, records = genuine(local_and_ray)
    assert records_problem(result, records, NOTHING_SENT) is None  # as a lane makes them: they agree
    plant(result, records)
    problem = records_problem(result, records, NOTHING_SENT)
    assert problem is not None and DISAGREEMENTS[plant] in problem, problem


def test_records_the_driver_sent_must_come_back_as_sent(local_and_ray):
    """A resumed key: records the driver sent come back unchanged, but for its accepted candidate
    that a new decision moved back to verified; anything else changed in them is a disagreement."""
    import copy

    from tritune.loop.ray_records import records_problem

    result, records = genuine(local_and_ray)
    unchanged = {**copy.deepcopy(result), "candidates": [], "accepted": False, "decision": None,
                 "decision_hash": None}  # its baseline failed this time: the sent decision is kept
    assert records_problem(unchanged, records, records) is None
    tampered = copy.deepcopy(records)
    change_a_status({**result, "candidates": copy.deepcopy(result["candidates"])}, tampered)
    assert "the driver sent came back changed" in records_problem(unchanged, tampered, records)
    # sent: another candidate accepted and decided; back: the new decision, that one verified again
    earlier = copy.deepcopy(records)
    _, decided, _, body = roles(result, earlier)
    decided["status"], body["status"] = "verified", "accepted"
    earlier["decision"] = {**earlier["decision"], "variant": body["variant"]}
    earlier["candidates"].remove(decided)
    assert records_problem(result, records, earlier) is None
    body["status"] = "rejected"  # sent rejected, back verified: not what a new decision does
    assert "came back changed" in records_problem(result, records, earlier)


def test_a_reply_whose_records_disagree_kills_the_lane_and_nothing_is_signed(local_and_ray, captured, tmp_path,
                                                                            monkeypatch):
    """End to end: an actor returning a lane's real result and records is signed in; the same with
    the decision hidden from its result (the issue's case) kills the lane, and nothing is stored."""
    from tritune.capture.spec import read_launches
    from tritune.loop import ray_lanes as module
    from tritune.loop.lanes import KeyJob
    from tritune.loop.session import plan

    result, records = genuine(local_and_ray)
    for plant in (None, hide_the_decision):
        if plant is not None:
            plant(result, records)

        class Replies(Misaddressed):  # made here: Ray pickles it with this reply inside
            reply = {"result": result, "records": records, "log": []}

            def run_key(self, body: dict, files: dict) -> dict:
                return {**self.reply, "result": {**self.reply["result"], "key_sha": body["key"]["sha"]}}

        monkeypatch.setattr(module, "_LaneActor", Replies)
        lane = RayLane(captured, SETTINGS, gpu=False, interpret=True)
        path = tmp_path / f"{plant is None}.db"
        try:
            target = lane.start()
            [(spec, key)] = [(s, k) for s, k in plan(read_launches(captured), target).items if s.id == result["id"]]
            with DecisionStore(path) as store:
                run = store.start_run({})
            job = KeyJob(spec, key, settings=SETTINGS, run_id=run, store_path=str(path), root=str(captured))
            if plant is None:
                assert lane.run_key(job).decision == "BLOCK=128"
            else:
                with pytest.raises(LaneDied, match="disagree with its result: the records hold a decision"):
                    lane.run_key(job)
        finally:
            lane.close()
        with DecisionStore(path) as store:
            signed = (len(store.candidates()), [d.usable for d in store.decisions()])
        assert signed == ((3, [True]) if plant is None else (0, []))
