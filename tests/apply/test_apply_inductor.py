"""Apply on Inductor kernels: under the interpreter end to end (a subprocess: capture the launch,
decide, launch again through Inductor's real ``run``), and the GPU path's steps on the CPU with
Inductor's launcher and Triton's compiled kernel replaced by recorders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")

from tritune import apply  # noqa: E402
from tritune.capture import inductor  # noqa: E402
from tritune.model.variant import Variant  # noqa: E402
from tritune.store import DecisionStore, current_target, key_for  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
POI = REPO / "examples" / "inductor" / "triton_poi_fused_add_gelu_mul_0.py"
CPU = current_target("cpu")


def decide(store, key, variant):
    run = store.start_run({"test": True})
    cand = store.add_candidate(run, key, variant)
    store.finish_candidate(cand.id, "verified", verification={"ok": True})
    store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)


@pytest.fixture(autouse=True)
def disabled():
    yield
    apply.disable()
    assert not inductor.installed()


class FakeCompiled:
    """Stands for Triton's CompiledKernel: ``compiled[grid](*args, stream=...)``."""

    def __init__(self):
        self.launches = []

    def __getitem__(self, grid):
        return lambda *args, stream=None: self.launches.append((grid, args, stream))


def test_gpu_path_first_launch_is_inductors_then_the_compiled_variant(tmp_path):
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    from tritune.capture.inductor_modules import autotuner_of, host_rand_strided
    from tritune.capture.inductor_spec import launch_spec
    from tritune.imports import import_file

    module = import_file(POI, fresh=True)  # its tuner gets a fake launcher
    module.rand_strided = host_rand_strided
    tuner = autotuner_of(module)
    assert not tuner.triton_interpret and type(tuner.fn).__name__ == "JITFunction"
    inductors = []

    def launcher(*args, stream):
        inductors.append(stream)

    launcher.config = tuner.configs[1]
    launcher.cache_hash, launcher.store_cubin = "fake", False
    tuner.launchers = [launcher]
    args = module.get_args()
    spec, _ = launch_spec(tuner, args, launcher.config, config_from="autotuned")
    xblock = spec.constexprs["XBLOCK"]
    assert xblock != 64
    with DecisionStore(tmp_path / "d.db") as store:
        decide(store, key_for(spec, CPU), Variant(name="x64", constexprs={"XBLOCK": 64}, options={"num_warps": 2}))
    compiled, compiles = FakeCompiled(), []

    def compile_run(*a, grid, warmup, **kwargs):  # JITFunction.run(warmup=True) -> the CompiledKernel
        compiles.append((a, grid, warmup, kwargs))
        return compiled

    original = CachingAutotuner.__dict__["run"]
    tuner.fn.run = compile_run
    applier = apply.enable(tmp_path / "d.db", device="cpu")
    for _ in range(3):
        tuner.run(*args, stream=7)
    tuner.run(*args, stream=7, benchmark_run=True)  # a benchmark run is Inductor's own
    assert inductors == [7, 7]  # the first launch (Inductor settles, saves) and the benchmark run
    ((a, grid, warmup, kwargs),) = compiles  # compiled once
    assert a == () and warmup is True and grid == (1024000 // 64, 1, 1)
    assert kwargs["XBLOCK"] == 64 and kwargs["num_warps"] == 2 and kwargs["xnumel"] == 1024000
    assert kwargs["num_stages"] == spec.options["num_stages"] and kwargs["sanitize_overflow"] is False
    assert len(compiled.launches) == 2
    for grid, values, stream in compiled.launches:
        assert grid == (16000, 1, 1) and stream == 7
        assert values[:3] == args[:3] and values[3:] == (1024000, 64)  # fn.arg_names order
    assert applier.stats()["triton_poi_fused_add_gelu_mul_0"] == {"launches": 4, "applied": 2, "skipped": 0,
                                                                  "noalias_fallbacks": 0, "decisions": 1}
    launcher.config = tuner.configs[0]  # another config: another key, no decision
    tuner.run(*args, stream=7)
    assert inductors == [7, 7, 7] and len(compiled.launches) == 2
    apply.disable()
    assert CachingAutotuner.__dict__["run"] is original


def _faked_tuner(path=POI):
    """The example module's tuner with Inductor's launcher replaced by a recorder (settled on
    ``configs[1]``) and Triton's compile by ``FakeCompiled``; returns (tuner, args, its spec,
    Inductor's launches, the compiled variant)."""
    from tritune.capture.inductor_modules import autotuner_of, host_rand_strided
    from tritune.capture.inductor_spec import launch_spec
    from tritune.imports import import_file

    module = import_file(path, fresh=True)
    module.rand_strided = host_rand_strided
    tuner = autotuner_of(module)
    inductors, compiled = [], FakeCompiled()

    def launcher(*args, stream):
        inductors.append(stream)

    launcher.config = tuner.configs[1]
    launcher.cache_hash, launcher.store_cubin = "fake", False
    tuner.launchers = [launcher]
    tuner.fn.run = lambda *a, grid, warmup, **kwargs: compiled
    args = module.get_args()
    spec, _ = launch_spec(tuner, args, launcher.config, config_from="autotuned")
    return tuner, args, spec, inductors, compiled


def test_inductor_launches_toggle_with_enable_and_disable(tmp_path):
    """Blocks of launches with the store on and off, as the end-to-end benchmark runs a compiled
    model: on, the decision (after Inductor's first run under each enable); off, Inductor's own
    launcher through the restored ``run``; a tuner whose config no decision has skips the patch
    while on and is back on it when off."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    original = CachingAutotuner.__dict__["run"]
    tuner, args, spec, inductors, compiled = _faked_tuner()
    other, other_args, _, other_inductors, _ = _faked_tuner()
    other.launchers[0].config = other.configs[0]  # settled elsewhere: no decision has its XBLOCK
    with DecisionStore(tmp_path / "d.db") as store:
        decide(store, key_for(spec, CPU), Variant(name="x64", constexprs={"XBLOCK": 64}))
    for block in range(4):
        apply.enable(tmp_path / "d.db", device="cpu")
        before = len(compiled.launches)
        for _ in range(3):
            tuner.run(*args, stream=1)
            other.run(*other_args, stream=1)
        assert len(compiled.launches) - before == (2 if block == 0 else 3)  # first: Inductor settles
        assert "run" in vars(other) and "run" not in vars(tuner)
        apply.disable()
        assert CachingAutotuner.__dict__["run"] is original and "run" not in vars(other)
        count = len(inductors)
        tuner.run(*args, stream=2)
        assert len(inductors) == count + 1 and len(compiled.launches) == before + (2 if block == 0 else 3)
    assert len(other_inductors) == 4 * 3 + 0


@pytest.mark.parametrize("how", ["its own run", "a subclass's run"])
def test_a_tuner_whose_run_is_not_ours_is_never_sent_past_it(tmp_path, how):
    """A tuner without decisions whose launches reach some other ``run`` first (one set on the
    object, or a subclass's, as Inductor's DebugAutotuner has) keeps it: the bypass would skip it."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    tuner, args, _, inductors, _ = _faked_tuner()
    calls = []
    if how == "its own run":
        def own(*args, **kwargs):
            calls.append(1)
            return CachingAutotuner.run(tuner, *args, **kwargs)

        tuner.run = own
    else:
        class Sub(type(tuner)):
            def run(self, *args, **kwargs):
                calls.append(1)
                return super().run(*args, **kwargs)

        tuner.__class__ = Sub
    DecisionStore(tmp_path / "d.db").close()  # a store without decisions
    apply.enable(tmp_path / "d.db", device="cpu")
    for _ in range(3):
        tuner.run(*args, stream=1)
    apply.disable()
    tuner.run(*args, stream=1)
    assert len(calls) == 4 and inductors == [1] * 4
    assert (vars(tuner).get("run") is own) if how == "its own run" else ("run" not in vars(tuner))


def test_a_decision_waits_for_coordinate_descent_to_settle_the_config(tmp_path):
    """With coordinate descent on, a launcher whose config it has not found yet is not settled:
    Inductor's own run goes on (it tunes); once the config is coordinate descent's, the decision."""
    tuner, args, spec, inductors, compiled = _faked_tuner()
    tuner.inductor_meta = {**tuner.inductor_meta, "coordinate_descent_tuning": True}
    tuner.coordinate_descent_tuning = lambda launcher, *args, **kwargs: launcher  # tuning, not done yet
    with DecisionStore(tmp_path / "d.db") as store:
        decide(store, key_for(spec, CPU), Variant(name="x64", constexprs={"XBLOCK": 64}))
    applier = apply.enable(tmp_path / "d.db", device="cpu")
    for _ in range(3):
        tuner.run(*args, stream=1)
    assert inductors == [1, 1, 1] and compiled.launches == []
    tuner.launchers[0].config.found_by_coordesc = True
    tuner.run(*args, stream=1)
    assert inductors == [1, 1, 1] and len(compiled.launches) == 1
    assert applier.stats()[spec.kernel]["applied"] == 1


def test_a_tuner_past_the_patch_is_recorded_again_by_capture_installed_later(tmp_path):
    """A tuner without decisions goes past the patch while apply is alone; capture installed
    afterwards records each of its launches (a bypass never hides a launch), and once capture
    is gone the tuner goes past the patch again, until apply is disabled."""
    tuner, args, spec, inductors, _ = _faked_tuner()
    DecisionStore(tmp_path / "d.db").close()  # a store without decisions
    apply.enable(tmp_path / "d.db", device="cpu")
    tuner.run(*args, stream=1)
    assert "run" in vars(tuner)
    heard = []
    inductor.install(lambda found, values: heard.append(found.kernel))
    try:
        assert "run" not in vars(tuner)
        tuner.run(*args, stream=1)
        tuner.run(*args, stream=1)
    finally:
        inductor.uninstall()
    assert heard == [spec.kernel] * 2
    tuner.run(*args, stream=1)
    assert "run" in vars(tuner)
    apply.disable()
    assert "run" not in vars(tuner) and inductors == [1] * 4


def test_a_config_decision_is_served_by_inductors_own_autotune_cache_until_rolled_back(tmp_path, monkeypatch):
    """``inductor_cache=True``: the decided config goes into Inductor's ``.best_config`` beside the
    kernel's module, Inductor's next compile of the kernel reads it and launches that config alone
    (no hook needed); rolling the decision back puts Inductor's cache back as it was."""
    import shutil

    from tritune.apply import inductor_cache
    from tritune.capture.inductor_modules import autotuner_of
    from tritune.imports import import_file

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))  # the kernel's module is in Inductor's cache
    kernel = tmp_path / POI.name
    shutil.copy(POI, kernel)
    tuner, args, spec, _, compiled = _faked_tuner(kernel)
    chosen = tuner.launchers[0].config
    with DecisionStore(tmp_path / "d.db") as store:
        decide(store, key_for(spec, CPU), Variant(name="x64", constexprs={"XBLOCK": 64}, options={"num_warps": 2}))
    applier = apply.enable(tmp_path / "d.db", device="cpu", inductor_cache=True)
    for _ in range(3):
        tuner.run(*args, stream=1)
    assert len(compiled.launches) == 2  # this process: the launch-time path
    (entry,) = inductor_cache.entries(tmp_path / "d.db")
    assert Path(entry.path).parent == tmp_path and entry.previous is None and entry.signed
    again = autotuner_of(import_file(kernel, fresh=True))  # the next compile of that kernel
    assert again.autotune_cache_info["autotune_cache_state"] == "hit"
    ((kwargs, warps, stages),) = [(c.kwargs, c.num_warps, c.num_stages) for c in again.configs]
    assert (kwargs, warps, stages) == ({**chosen.kwargs, "XBLOCK": 64}, 2, chosen.num_stages)
    assert applier.rollback(spec.kernel) == 1
    assert inductor_cache.entries(tmp_path / "d.db") == [] and not Path(entry.path).exists()
    fresh = autotuner_of(import_file(kernel, fresh=True))
    assert fresh.autotune_cache_info["autotune_cache_state"] == "miss" and len(fresh.configs) == 2


def test_an_inductor_cache_entry_goes_when_its_decision_is_no_longer_signed(tmp_path, monkeypatch):
    """A decision edited after it was served through Inductor's cache (so no longer signed by this
    user) is not counted, and its entry comes out the next time the store is read."""
    import shutil
    import sqlite3

    from tritune.apply import inductor_cache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    kernel = tmp_path / POI.name
    shutil.copy(POI, kernel)
    tuner, args, spec, _, _ = _faked_tuner(kernel)
    with DecisionStore(tmp_path / "d.db") as store:
        decide(store, key_for(spec, CPU), Variant(name="x64", constexprs={"XBLOCK": 64}))
    apply.enable(tmp_path / "d.db", device="cpu", inductor_cache=True)
    tuner.run(*args, stream=1)
    tuner.run(*args, stream=1)
    (entry,) = inductor_cache.entries(tmp_path / "d.db")
    assert Path(entry.path).exists()
    edited = Variant(name="x64", constexprs={"XBLOCK": 128}).to_json()
    with sqlite3.connect(tmp_path / "d.db") as conn:
        conn.execute("UPDATE decisions SET variant = ?", (json.dumps(edited),))
    applier = apply.enable(tmp_path / "d.db", device="cpu", inductor_cache=True)
    assert inductor_cache.entries(tmp_path / "d.db") == [] and not Path(entry.path).exists()
    assert spec.kernel not in applier.stats()  # no launch since, and no decision counted


def test_a_config_inductors_reader_would_not_serve_is_not_left_in_its_cache(tmp_path, monkeypatch):
    """``write`` reads the entry back with Inductor's own reader: another config back (an older
    torch that takes only the kernel's own configs) puts the file back as it was, with no entry."""
    from triton import Config

    from tritune.apply import inductor_cache

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    best = tmp_path / "k.best_config"
    best.write_text('{"XBLOCK": 1024}')  # coordinate descent's, say

    class Cache:  # Inductor's AutotuneCache as write uses it
        local_cache, remote_cache = (None, str(best)), None

        def save(self, config, time_taken_ns, found_by_coordesc=False):
            best.write_text(json.dumps(config.kwargs))

        def read_best(self, inductor_meta, configs):
            return configs[0]  # its own first config, not the one written

        def hook(self, *args):
            pass

    config = Config({"XBLOCK": 1024}, num_warps=4, num_stages=1)
    tuner = SimpleNamespace(save_cache_hook=Cache().hook, inductor_meta={})
    decision = SimpleNamespace(variant=Variant(constexprs={"XBLOCK": 64}),
                               key=SimpleNamespace(sha="k", kernel="triton_k"))
    why = inductor_cache.write(tuner, config, decision, tmp_path / "d.db", [config])
    assert why == "Inductor's cache reader would not serve it (torch without coordinate descent)"
    assert best.read_text() == '{"XBLOCK": 1024}' and inductor_cache.entries(tmp_path / "d.db") == []


def test_only_config_knob_decisions_of_static_kernels_go_through_inductors_cache(tmp_path):
    from tritune.apply import inductor_cache

    tuner, _, spec, _, _ = _faked_tuner()
    config = tuner.launchers[0].config

    def why(variant, count=1, of=tuner):
        return inductor_cache.reason_not(of, config, SimpleNamespace(variant=variant), count)

    assert why(Variant(constexprs={"XBLOCK": 64}, options={"num_warps": 2})) is None
    assert why(Variant(source="text")) == "it changes the kernel's code"
    assert why(Variant(passes=("exact",))) == "it changes the kernel's code"
    assert why(Variant(options={"maxnreg": 128})) == "it changes more than Inductor's config knobs"
    assert why(Variant(constexprs={"XBLOCK": 64}), count=2) == "the kernel has several decisions"
    source = tuner.fn.src.replace("xnumel = 1024000\n", "")  # xnumel a runtime argument
    dynamic = SimpleNamespace(fn=SimpleNamespace(src=source, arg_names=tuner.fn.arg_names),
                              save_cache_hook=tuner.save_cache_hook)
    assert why(Variant(constexprs={"XBLOCK": 64}), of=dynamic) == "the kernel's sizes are dynamic"
    assert why(Variant(constexprs={"XBLOCK": 64}), of=SimpleNamespace(fn=tuner.fn)) == \
        "Inductor keeps no local autotune cache for it"


def test_store_inductor_cache_command_removes_the_entries_and_restores_what_was_there(tmp_path, monkeypatch):
    from click.testing import CliRunner

    from tritune.cli import main

    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path))
    best = tmp_path / "k.best_config"
    plant(tmp_path / "d.db", best, previous='{"XBLOCK": 1024}', written='{"XBLOCK": 64}')  # coordinate descent's before
    listed = CliRunner().invoke(main, ["store", "inductor-cache", str(tmp_path / "d.db")])
    assert listed.exit_code == 0 and "triton_k" in listed.output and best.read_text() == '{"XBLOCK": 64}'
    removed = CliRunner().invoke(main, ["store", "inductor-cache", str(tmp_path / "d.db"), "--remove"])
    assert removed.exit_code == 0 and "removed 1 entries" in removed.output
    assert best.read_text() == '{"XBLOCK": 1024}' and inductor_cache_entries(tmp_path / "d.db") == []


def plant(store_path: Path, path: Path, previous: str | None, written: str, signer=None) -> None:
    """An entry of the store's Inductor cache table, as ``apply.inductor_cache.write`` leaves it,
    signed by ``signer`` (default this user); ``path`` holds ``written`` (unless it is a link)."""
    from tritune.store.inductor_entries import InductorEntry

    if not path.is_symlink():
        path.write_text(written)
    with DecisionStore(store_path, signer=signer) as store, store.inductor_entries_locked() as (signed, _):
        signed.append(InductorEntry(str(path), "k", "triton_k", previous, written))


def inductor_cache_entries(store_path: Path) -> list:
    from tritune.apply import inductor_cache

    return inductor_cache.entries(store_path)


def test_a_kernel_compiled_in_a_worker_is_reloaded_as_inductor_does():
    import types

    from tritune.apply.inductor import live_kernel

    loaded = types.SimpleNamespace(fn=lambda: None)
    tuner = types.SimpleNamespace(fn=types.SimpleNamespace(fn=None),
                                  _reload_kernel=lambda: types.SimpleNamespace(fn=loaded))
    assert live_kernel(tuner) is loaded and tuner.fn is loaded  # no _ensure_kernel_loaded: the stashed reload
    with pytest.raises(apply.ApplyError, match="compiled in a worker"):
        live_kernel(types.SimpleNamespace(fn=types.SimpleNamespace(fn=None)))


INTERPRETED = textwrap.dedent("""
    import json, sys
    import torch
    from tritune import apply
    from tritune.capture import inductor
    from tritune.capture.inductor_modules import autotuner_of
    from tritune.capture.recorder import Recorder, finalize
    from tritune.imports import import_file
    from tritune.model.variant import Variant
    from tritune.store import DecisionStore, current_target, key_for

    kernel_file, out, db = sys.argv[1:4]
    module = import_file(kernel_file)
    module.rand_strided = lambda size, stride, dtype=None, device=None: torch.randn(
        sum((s - 1) * st for s, st in zip(size, stride)) + 1).as_strided(size, stride)
    tuner = autotuner_of(module)
    recorder = Recorder(out)
    inductor.install(recorder.add)
    tuner.run(*module.get_args(), stream=0)
    inductor.uninstall()
    recorder.close()
    (spec,) = finalize(out)
    key = key_for(spec, current_target())

    store = DecisionStore(db)
    def decide(variant):
        run = store.start_run({})
        cand = store.add_candidate(run, key, variant)
        store.finish_candidate(cand.id, "verified", verification={"ok": True})
        store.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)

    grids = []
    real_run = tuner.fn.run
    def spy(*args, grid, warmup, **kwargs):
        grids.append([list(grid), kwargs.get("XBLOCK")])
        return real_run(*args, grid=grid, warmup=warmup, **kwargs)
    tuner.fn.run = spy

    def launch():
        args = module.get_args()
        tuner.run(*args, stream=0)
        a, b, y = args[:3]
        ref = (0.5 * a * (1 + torch.erf(a * 0.7071067811865476))) * b + 1
        return round(float((y - ref).abs().max()), 3)

    report = {"captured": [spec.grid, spec.constexprs]}
    decide(Variant(name="x64", constexprs={"XBLOCK": 64}))
    applier = apply.enable(db)
    report["x64"] = [launch(), grids[-1]]
    apply.rollback(spec.kernel)
    report["rolled_back"] = [launch(), grids[-1]]
    decide(Variant(name="plus two", source=open(kernel_file).read().replace(
        "tmp11 = tmp10 + tmp6", "tmp11 = tmp10 + tmp6 + tmp6")))
    applier.refresh()
    report["source"] = launch()
    report["stats"] = applier.stats()[spec.kernel]
    apply.disable()
    report["disabled"] = launch()
    print(json.dumps(report))
""")


def test_interpreted_inductor_kernel_uses_its_decisions(tmp_path, small_inductor_poi):
    kernel = small_inductor_poi
    script = tmp_path / "run.py"
    script.write_text(INTERPRETED)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, str(script), str(kernel), str(tmp_path / "out"), str(tmp_path / "d.db")],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    grid, constexprs = report["captured"]
    assert constexprs["XBLOCK"] != 64 and grid == [4096 // constexprs["XBLOCK"], 1, 1]
    assert report["x64"] == [0.0, [[64, 1, 1], 64]]  # Inductor's grid for XBLOCK 64, the same result
    assert report["rolled_back"][0] == 0.0 and report["rolled_back"][1] == [grid, constexprs["XBLOCK"]]
    assert report["source"] == 1.0  # the replacement text ran: + 1 more
    assert report["stats"] == {"launches": 3, "applied": 2, "skipped": 0, "noalias_fallbacks": 0, "decisions": 1}
    assert report["disabled"] == 0.0


def test_a_failing_inductor_hook_launches_as_written(capfd):
    from tritune.capture.inductor_modules import autotuner_of, host_rand_strided
    from tritune.imports import import_file

    module = import_file(POI, fresh=True)  # its tuner gets a fake launcher
    module.rand_strided = host_rand_strided
    tuner = autotuner_of(module)
    calls = []

    def launcher(*args, stream):
        calls.append(stream)

    launcher.config = tuner.configs[0]
    launcher.cache_hash, launcher.store_cubin = "fake", False
    tuner.launchers = [launcher]

    def broken(tuner, args, kwargs, run):
        raise RuntimeError("planted")

    inductor.install_apply(broken)
    try:
        tuner.run(*module.get_args(), stream=3)
    finally:
        inductor.uninstall_apply()
    assert calls == [3]
    assert "launched as written (launch hook failed: RuntimeError: planted)" in capfd.readouterr().err


def test_inductor_still_settles_its_config_as_apply_assumes():
    """apply.inductor reads the launched config the way ``CachingAutotuner.run`` chooses it; this
    fails when torch changes that (``check_target`` covers the patch itself)."""
    import inspect

    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    source = inspect.getsource(inspect.unwrap(CachingAutotuner.__dict__["run"]))
    # (plugins and combo tuning, newer than torch 2.11, are read with defaults where present)
    for needle in ("self.triton_interpret", "self.configs[0]", "len(self.launchers) != 1",
                   "coordinate_descent_tuning", "found_by_coordesc", "benchmark_run", "(launcher,) = self.launchers"):
        assert needle in source, f"CachingAutotuner.run no longer has {needle!r}: check tritune.apply.inductor"
    assert hasattr(CachingAutotuner, "_ensure_kernel_loaded") or "_reload_kernel" in inspect.getsource(CachingAutotuner)


def _launcher_maker(tuner, built):
    """``tuner._precompile_config(cfg).make_launcher()`` replaced by a recorder per config, as
    coordinate descent makes launchers (``apply.inductor_swap``)."""

    def precompile(cfg):
        calls = []

        def launcher(*args, stream):
            calls.append(stream)

        launcher.config, launcher.calls = cfg, calls
        launcher.cache_hash, launcher.store_cubin = "fake", False
        built.append(launcher)
        return SimpleNamespace(make_launcher=lambda: launcher)

    tuner._precompile_config = precompile


def test_a_config_decision_is_launched_by_inductors_own_launcher_and_undone_by_disable(tmp_path):
    """A config-only decision of a static kernel: built once as Inductor's own kind of launcher,
    put in ``tuner.launchers`` (Inductor's ``run`` launches it, past the patch: no per-launch
    cost); disable puts Inductor's launcher back at once, enable again re-puts the one built."""
    tuner, args, spec, inductors, compiled = _faked_tuner()
    own = tuner.launchers[0]
    built = []
    _launcher_maker(tuner, built)
    with DecisionStore(tmp_path / "d.db") as store:
        decide(store, key_for(spec, CPU), Variant(name="x64", constexprs={"XBLOCK": 64}, options={"num_warps": 2}))
    applier = apply.enable(tmp_path / "d.db", device="cpu")
    for _ in range(4):
        tuner.run(*args, stream=3)
    (decided,) = built
    assert decided.config.kwargs == {**own.config.kwargs, "XBLOCK": 64} and decided.config.num_warps == 2
    assert decided.config.num_stages == own.config.num_stages
    assert inductors == [3] and decided.calls == [3, 3, 3]  # Inductor settles once, then the decision
    assert tuner.launchers == [decided] and compiled.launches == []  # not the launch-time path
    assert "run" in vars(tuner)  # its launches skip the patch
    assert applier.stats()[spec.kernel]["applied"] == 1  # counted when put in place
    apply.disable()
    assert tuner.launchers == [own] and "run" not in vars(tuner)
    tuner.run(*args, stream=4)
    assert inductors == [3, 4]
    apply.enable(tmp_path / "d.db", device="cpu")
    tuner.run(*args, stream=5)
    tuner.run(*args, stream=5)
    assert len(built) == 1 and decided.calls == [3, 3, 3, 5, 5] and tuner.launchers == [decided]
    assert apply.rollback(spec.kernel) == 1
    assert tuner.launchers == [own]
    tuner.run(*args, stream=6)
    assert inductors == [3, 4, 6] and decided.calls == [3, 3, 3, 5, 5]


def test_a_decision_that_changes_code_or_a_dynamic_kernel_stays_on_the_launch_time_path(tmp_path):
    tuner, args, spec, inductors, compiled = _faked_tuner()
    built = []
    _launcher_maker(tuner, built)
    with DecisionStore(tmp_path / "d.db") as store:  # maxnreg is not one of Inductor's config knobs
        decide(store, key_for(spec, CPU), Variant(name="reg", constexprs={"XBLOCK": 64}, options={"maxnreg": 128}))
    apply.enable(tmp_path / "d.db", device="cpu")
    for _ in range(3):
        tuner.run(*args, stream=1)
    assert built == [] and len(compiled.launches) == 2 and tuner.launchers[0].config is tuner.configs[1]
