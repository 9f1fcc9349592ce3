"""Inductor kernels as launch specs, on the CPU: the grid rule, specs from kernel modules, the
shim on CachingAutotuner.run (through Inductor's real ``run``), and replay under the interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import types
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tritune.capture import inductor  # noqa: E402
from tritune.capture.inductor_grid import grid_for, grid_rule  # noqa: E402
from tritune.capture.inductor_spec import launch_spec  # noqa: E402
from tritune.capture.spec import read_launches  # noqa: E402
from tritune.model.launch import SpecError

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples" / "inductor"
HARVESTED = REPO / "examples" / "inductor_harvested"
POI = EXAMPLES / "triton_poi_fused_add_gelu_mul_0.py"
RED = EXAMPLES / "triton_red_fused_native_layer_norm_0.py"
PER = EXAMPLES / "triton_per_fused_native_layer_norm_0.py"
SOFTMAX = EXAMPLES / "triton_per_fused__softmax_add_exp_gelu_prepare_softmax_online_sub_1.py"
EXAMPLE_FILES = sorted(EXAMPLES.glob("triton_*.py")) + sorted(HARVESTED.glob("*.py"))


def _rule(grid_type: str, **scalars) -> dict:
    return grid_rule({"grid_type": grid_type}, scalars)


# ------------------------------------------------------------------------------------ the grid

@pytest.mark.parametrize("xblock, expected", [(1024, 1000), (512, 2000), (128, 8000), (1, 1024000)])
def test_grid_of_pointwise_example_follows_xblock(xblock, expected):
    # triton_poi_fused_add_gelu_mul_0: xnumel = 1024000, Grid1D: ceil(xnumel / XBLOCK)
    rule = _rule("Grid1D", xnumel=1024000)
    assert grid_for(rule, {"XBLOCK": xblock}, {"xnumel": 1024000}) == (expected, 1, 1)


@pytest.mark.parametrize("blocks, expected", [({"XBLOCK": 2, "R0_BLOCK": 2048}, 2048),
                                              ({"XBLOCK": 1, "R0_BLOCK": 512}, 4096),
                                              ({"XBLOCK": 8, "R0_BLOCK": 64}, 512),
                                              ({"XBLOCK": 3, "R0_BLOCK": 1024}, 1366)])
def test_grid_of_reduction_example_ignores_r0_block(blocks, expected):
    # triton_red_fused_native_layer_norm_0: xnumel 4096, r0_numel 2048; one program per XBLOCK rows
    rule = _rule("Grid1D", xnumel=4096, r0_numel=2048)
    assert grid_for(rule, blocks, {"xnumel": 4096, "r0_numel": 2048}) == (expected, 1, 1)


def test_grid_falls_back_to_captured_scalars_and_args_win():
    rule = _rule("Grid1D", xnumel=400)
    assert grid_for(rule, {"XBLOCK": 8}) == (50, 1, 1)  # coat_lite_mini's per kernel: 400 rows
    assert grid_for(rule, {"XBLOCK": 8}, {"xnumel": 16}) == (2, 1, 1)


def test_grid_2d_split_scan_and_fixed():
    assert grid_for(_rule("Grid2D", xnumel=1000, ynumel=300), {"XBLOCK": 64, "YBLOCK": 16}) == (16, 19, 1)
    assert grid_for(_rule("SplitScanGrid", xnumel=7, r0_numel=1000), {"XBLOCK": 1, "R0_BLOCK": 256}) == (4, 7, 1)
    fixed = grid_rule({"grid_type": "FixedGrid", "fixed_grid": ["_grid_0", "_grid_1", "_grid_2"]},
                      {"_grid_0": 5, "_grid_1": 6, "_grid_2": 7})
    assert grid_for(fixed, {}) == (5, 6, 1 * 7)
    assert json.loads(json.dumps(fixed)) == fixed  # a rule is plain JSON


def test_grid_yz_overflow_splits_a_large_y():
    rule = _rule("Grid2DWithYZOverflow", xnumel=4, ynumel=200_000)
    x, y, z = grid_for(rule, {"XBLOCK": 4, "YBLOCK": 1})
    assert x == 1 and z > 1 and y * z >= 200_000 and y <= 65535


def test_grid_errors_are_one_line():
    with pytest.raises(SpecError, match="unknown to torch"):
        grid_for(_rule("NoSuchGrid", xnumel=4), {"XBLOCK": 1})
    with pytest.raises(SpecError, match="xnumel"):
        grid_for(grid_rule({"grid_type": "Grid1D"}, {}), {"XBLOCK": 4})
    with pytest.raises(SpecError, match="not an Inductor grid rule"):
        grid_for({"kind": "cdiv"}, {})
    with pytest.raises(SpecError, match="grid_type"):
        grid_rule({"kernel_name": "k"}, {})


# ------------------------------------------------------------------- specs from kernel modules

@pytest.fixture(scope="module")
def example_specs(tmp_path_factory):
    from tritune.capture.inductor_modules import specs_from_modules

    out = tmp_path_factory.mktemp("inductor_specs")
    specs, errors = specs_from_modules(EXAMPLE_FILES, out, launch=False)
    return out, {s.kernel: s for s in specs}, errors


def test_a_spec_per_example_module(example_specs):
    out, specs, errors = example_specs
    assert errors == []
    assert len(specs) == len(EXAMPLE_FILES) == 8
    assert {s.kind for s in specs.values()} == {"inductor"}
    assert {s.extra["kernel_type"] for s in specs.values()} == {"poi", "per", "red"}
    assert {s.extra["config_from"] for s in specs.values()} == {"first"}
    reread = {s.kernel: s for s in read_launches(out)}
    assert {k: s.key() for k, s in reread.items()} == {k: s.key() for k, s in specs.items()}
    for spec in specs.values():
        assert (out / spec.source).exists() and spec.writes_from == "inductor"


def test_pointwise_spec_args_written_grid_and_extra(example_specs):
    _, specs, _ = example_specs
    spec = specs["triton_poi_fused_add_gelu_mul_0"]
    assert [(a.name, a.kind) for a in spec.args] == [("in_ptr0", "tensor"), ("in_ptr1", "tensor"),
                                                     ("out_ptr0", "tensor"), ("xnumel", "scalar"),
                                                     ("XBLOCK", "constexpr")]
    assert [a.name for a in spec.written] == ["out_ptr0"]
    assert spec.arg("in_ptr0").shape == [1024, 1000] and spec.arg("in_ptr0").dtype == "float32"
    assert spec.arg("in_ptr0").device == "cuda:0"  # where the kernel runs, though built on the CPU
    assert spec.arg("xnumel").value == 1024000
    xblock = spec.constexprs["XBLOCK"]
    assert spec.grid == [-(-1024000 // xblock), 1, 1]
    assert spec.grid_rule["kind"] == "inductor" and spec.grid_rule["grid_type"] == "Grid1D"
    assert spec.extra["kernel_num_gb"] == pytest.approx(0.012288)
    assert spec.options["num_warps"] in (1, 2, 4, 8, 16, 32) and spec.options["sanitize_overflow"] is False


def test_in_out_pointers_are_written_inputs_are_not(example_specs):
    _, specs, _ = example_specs
    red = specs["triton_red_fused_native_layer_norm_0"]
    assert {a.name for a in red.written} == {"in_out_ptr0", "out_ptr0", "out_ptr1"}
    assert not any(red.arg(n).written for n in ("in_ptr0", "in_ptr1", "in_ptr2"))
    assert set(red.constexprs) == {"XBLOCK", "R0_BLOCK"}
    assert red.arg("in_ptr0").dtype == "float16" and red.arg("in_out_ptr0").shape == [4096, 1]
    per = specs["triton_per_fused_native_layer_norm_0"]
    assert set(per.constexprs) == {"XBLOCK"}  # R0_BLOCK is fixed inside a persistent reduction
    assert "in_out_ptr0" in per.extra["mutated_arg_names"]


def test_a_module_that_fails_is_one_line_and_the_others_go_on(tmp_path):
    from tritune.capture.inductor_modules import specs_from_modules

    broken = tmp_path / "triton_poi_broken_0.py"
    broken.write_text("import triton\nraise RuntimeError('no GPU backend\\nsecond line')\n")
    not_inductor = tmp_path / "plain.py"
    not_inductor.write_text("x = 1\n")
    seen = []
    specs, errors = specs_from_modules([broken, POI, not_inductor], tmp_path / "out", launch=False,
                                       progress=lambda path, error: seen.append((Path(path).name, error)))
    assert [s.kernel for s in specs] == ["triton_poi_fused_add_gelu_mul_0"]
    assert [(Path(e.file).name, e.error) for e in errors] == [
        ("triton_poi_broken_0.py", "RuntimeError: no GPU backend"),
        ("plain.py", "SpecError: no Inductor kernel (CachingAutotuner) in the module")]
    assert all("\n" not in e.error for e in errors)
    assert [name for name, _ in seen] == ["triton_poi_broken_0.py", POI.name, "plain.py"]
    from tritune.capture import skipped

    assert sorted((r.kernel, r.kind, r.reason) for r in skipped.read(tmp_path / "out")) == [
        ("plain", "error", "SpecError: no Inductor kernel (CachingAutotuner) in the module"),
        ("triton_poi_broken_0", "error", "RuntimeError: no GPU backend")]


def test_kernel_files_finds_kernel_modules_not_wrappers(tmp_path):
    from tritune.capture.inductor_modules import kernel_files

    (tmp_path / "ab").mkdir()
    (tmp_path / "ab" / "cabc.py").write_text(POI.read_text())
    (tmp_path / "wrapper.py").write_text("async_compile = AsyncCompile()\n" + POI.read_text())
    (tmp_path / "other.py").write_text("def get_args():\n    return ()\n")
    assert kernel_files(tmp_path) == {str((tmp_path / "ab" / "cabc.py").resolve())}


# ---------------------------------------------------------------- the shim on CachingAutotuner

def test_shim_target_exists_in_this_torch():
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    inductor.check_target()
    assert callable(CachingAutotuner.__dict__["run"])


def test_shim_check_fails_when_torch_renames_run(monkeypatch):
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    monkeypatch.delattr(CachingAutotuner, "run")
    with pytest.raises(inductor.InductorShimError, match="has no run"):
        inductor.check_target()


def test_shim_check_fails_when_run_changes_signature(monkeypatch):
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    monkeypatch.setattr(CachingAutotuner, "run", lambda self, args, grid: None)
    with pytest.raises(inductor.InductorShimError, match="no longer"):
        inductor.check_target()


def _tuner_with_fake_launcher(config_index: int):
    """The poi example's real CachingAutotuner, whose one launcher records calls instead of
    launching: Inductor's own ``run`` (autotune skipped: one launcher) drives the shim."""
    from tritune.capture.inductor_modules import autotuner_of, host_rand_strided
    from tritune.imports import import_file

    module = import_file(POI, fresh=True)  # its tuner gets a fake launcher
    module.rand_strided = host_rand_strided
    tuner = autotuner_of(module)
    calls = []

    def launcher(*args, stream):
        calls.append(args)

    launcher.config = tuner.configs[config_index]
    launcher.cache_hash, launcher.store_cubin = "fake", False
    tuner._tritune_candidates = len(tuner.configs)  # as the shim notes before Inductor compiles
    tuner.launchers = [launcher]
    return module, tuner, calls


def test_shim_records_the_launched_config_and_counts(tmp_path, monkeypatch):
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    from tritune.capture.recorder import Recorder, finalize

    module, tuner, calls = _tuner_with_fake_launcher(config_index=1)  # XBLOCK 512, not the first
    original = CachingAutotuner.__dict__["run"]
    built = []
    monkeypatch.setattr(inductor, "launch_spec", lambda *a, **k: built.append(1) or launch_spec(*a, **k))
    recorder = Recorder(tmp_path)
    inductor.install(recorder.add)
    try:
        args = module.get_args()
        tuner.run(*args, stream=0)
        tuner.run(*args, stream=0)  # a repeat: only counted (the recorder's hot path)
    finally:
        inductor.uninstall()
    assert len(built) == 1
    assert CachingAutotuner.__dict__["run"] is original and not inductor.installed()
    tuner.run(*module.get_args(), stream=0)  # after uninstall: launched, not recorded
    assert len(calls) == 3
    recorder.close()
    (spec,) = finalize(tmp_path)
    assert spec.count == 2
    assert spec.constexprs == {"XBLOCK": 512} and spec.grid == [2000, 1, 1]
    assert spec.options["num_warps"] == tuner.configs[1].num_warps
    assert spec.extra["config_from"] == "autotuned"
    assert [a.name for a in spec.written] == ["out_ptr0"]


def test_shim_records_coordinate_descents_winner_not_the_starting_config(tmp_path, monkeypatch):
    """With ``coordinate_descent_tuning`` on, Inductor's real ``run`` hands the launcher to its real
    coordinate descent (``CoordescTuner``), which replaces ``launchers`` by its winner; compiling and
    timing are faked (no GPU): a config costs its distance from XBLOCK 128 and 2 warps."""
    import math

    from tritune.capture.recorder import Recorder, finalize

    module, tuner, calls = _tuner_with_fake_launcher(config_index=0)
    start = tuner.launchers[0].config
    assert (start.kwargs["XBLOCK"], start.num_warps) != (128, 2)
    tuner.inductor_meta = {**tuner.inductor_meta, "coordinate_descent_tuning": True}
    tuner.coordesc_tuner.inductor_meta = tuner.inductor_meta

    def compiled(config):
        def launcher(*args, stream):
            calls.append(config)

        launcher.config, launcher.cache_hash, launcher.store_cubin = config, "fake", False
        launcher.n_regs = launcher.n_spills = launcher.shared = 0  # Inductor logs them
        return types.SimpleNamespace(make_launcher=lambda: launcher)

    def bench(launcher, *args, **kwargs):
        config = launcher.config
        return 1.0 + abs(math.log2(config.kwargs["XBLOCK"] / 128)) + abs(math.log2(config.num_warps / 2))

    monkeypatch.setattr(tuner, "_precompile_config", compiled)
    monkeypatch.setattr(tuner, "bench", bench)
    monkeypatch.setattr(tuner, "save_cache_hook", None)
    recorder = Recorder(tmp_path)
    with inductor.recording(recorder.add):
        tuner.run(*module.get_args(), stream=0)
    recorder.close()
    (spec,) = finalize(tmp_path)
    assert spec.constexprs == {"XBLOCK": 128} and spec.options["num_warps"] == 2
    assert spec.grid == [1024000 // 128, 1, 1]
    assert spec.extra["config_from"] == "coordinate_descent"
    assert calls[-1].kwargs["XBLOCK"] == 128  # the winner is what Inductor launched


def test_recording_restores_the_previous_listener():
    module, tuner, _ = _tuner_with_fake_launcher(config_index=0)
    outer, inner = [], []
    inductor.install(lambda spec, values: outer.append(spec.kernel))
    try:
        with inductor.recording(lambda spec, values: inner.append(sorted(values))):
            tuner.run(*module.get_args(), stream=0)
        tuner.run(*module.get_args(), stream=0)
    finally:
        inductor.uninstall()
    assert inner == [["in_ptr0", "in_ptr1", "out_ptr0", "xnumel"]]
    assert outer == ["triton_poi_fused_add_gelu_mul_0"]


def test_a_recording_failure_never_breaks_the_launch(capsys):
    module, tuner, calls = _tuner_with_fake_launcher(config_index=0)

    def add(spec, values):
        raise ValueError("disk full")

    with inductor.recording(add):
        tuner.run(*module.get_args(), stream=0)
    assert len(calls) == 1
    assert "not recorded: ValueError: disk full" in capsys.readouterr().err


def test_an_inductor_launch_that_cannot_be_recorded_is_named_in_skipped_jsonl(tmp_path, monkeypatch):
    from tritune.capture import skipped
    from tritune.capture.recorder import Recorder, finalize

    module, tuner, calls = _tuner_with_fake_launcher(config_index=0)

    def broken(*args, **kwargs):
        raise ValueError("an argument Inductor never passes")

    monkeypatch.setattr(inductor, "launch_spec", broken)
    recorder = Recorder(tmp_path)
    with inductor.recording(recorder.add):
        tuner.run(*module.get_args(), stream=0)
        tuner.launchers = [tuner.launchers[0], tuner.launchers[0]]  # a plugin's: which config ran is unknown
        tuner.run(*module.get_args(), stream=0)
    recorder.close()
    finalize(tmp_path)
    assert len(calls) == 2  # the program's launches ran
    reasons = sorted((r.kind, r.reason) for r in skipped.read(tmp_path))
    assert reasons == [("error", "ValueError: an argument Inductor never passes"),
                       ("unsupported", "Inductor launched it with 2 launchers (a plugin): which config ran is "
                                       "unknown")]
    assert {r.kernel for r in skipped.read(tmp_path)} == {"triton_poi_fused_add_gelu_mul_0"}


# --------------------------------------------------------------------- under the interpreter

INTERPRETED = textwrap.dedent("""
    import json, sys
    from pathlib import Path
    import torch
    from tritune.capture import _jit_shim, inductor
    from tritune.capture.inductor_modules import autotuner_of
    from tritune.capture.recorder import Recorder, finalize
    from tritune.imports import import_file
    from tritune.model.variant import Variant
    from tritune.replay import Replay, make_args

    kernel_file, out = sys.argv[1], sys.argv[2]
    module = import_file(kernel_file)
    module.rand_strided = lambda size, stride, dtype=None, device=None: torch.randn(
        sum((s - 1) * st for s, st in zip(size, stride)) + 1).as_strided(size, stride)
    tuner = autotuner_of(module)
    jit_seen = []
    _jit_shim.install(jit_seen.append)
    recorder = Recorder(out)
    inductor.install(recorder.add)
    args = module.get_args()
    tuner.run(*args, stream=0)
    inductor.uninstall()
    _jit_shim.uninstall(jit_seen.append)
    recorder.close()
    a, b, y = args[:3]
    error = float((((0.5 * a * (1 + torch.erf(a * 0.7071067811865476))) * b + 1) - y).abs().max())
    (spec,) = finalize(out)
    replays = {}
    for variant in (Variant(), Variant(name="x64", constexprs={"XBLOCK": 64})):
        r = Replay(spec, variant, root=out)
        inputs = make_args(spec, out, seed=3)
        r(inputs)
        x, w, o = inputs["in_ptr0"], inputs["in_ptr1"], inputs["out_ptr0"]
        ref = (0.5 * x * (1 + torch.erf(x * 0.7071067811865476))) * w + 1
        replays[variant.name] = [list(r.grid), float((ref - o).abs().max())]
    print(json.dumps({"error": error, "jit_seen": len(jit_seen), "grid": spec.grid,
                      "config_from": spec.extra["config_from"], "replays": replays}))
""")


def test_interpreted_inductor_kernel_is_captured_once_and_replays(tmp_path, small_inductor_poi):
    kernel = small_inductor_poi
    script = tmp_path / "run.py"
    script.write_text(INTERPRETED)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    result = subprocess.run([sys.executable, str(script), str(kernel), str(tmp_path / "out")],
                            capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["error"] < 1e-5
    assert report["jit_seen"] == 0  # Inductor's launch went through InterpretedFunction.run: not twice
    assert report["config_from"] == "first"
    xblock_grid = report["grid"][0]
    assert report["replays"]["baseline"][0] == [xblock_grid, 1, 1]
    assert report["replays"]["x64"][0] == [64, 1, 1]  # 4096 / 64: the grid follows XBLOCK
    assert all(err < 1e-5 for _, err in report["replays"].values())


def test_values_hold_the_real_tensors(tmp_path):
    from tritune.capture.inductor_modules import autotuner_of, host_spec
    from tritune.imports import import_file

    module = import_file(RED)
    spec, values = host_spec(module, autotuner_of(module), str(RED))
    assert set(values) == {a.name for a in spec.args if a.kind != "constexpr"}
    assert isinstance(values["in_ptr0"], torch.Tensor) and values["in_ptr0"].device.type == "cpu"
    assert values["r0_numel"] == 2048


def test_launch_spec_rejects_a_wrong_argument_count():
    from tritune.capture.inductor_modules import autotuner_of, host_rand_strided
    from tritune.capture.inductor_spec import launch_spec
    from tritune.imports import import_file

    module = import_file(POI, fresh=True)
    module.rand_strided = host_rand_strided
    tuner = autotuner_of(module)
    with pytest.raises(SpecError, match="launched with 3 arguments"):
        launch_spec(tuner, module.get_args()[:3], tuner.configs[0], config_from="first")


def test_jsonable_keeps_enums_readable():
    from tritune.capture.inductor_spec import _jsonable

    assert _jsonable({"a": {1, 2}, "b": types.SimpleNamespace(name="INNER")}) == {"a": [1, 2], "b": "INNER"}


def test_tuned_autotuners_are_found_by_their_kernel_file():
    from tritune.capture.inductor_modules import autotuner_of, tuned_autotuners
    from tritune.imports import import_file

    tuner = autotuner_of(import_file(PER))
    assert tuned_autotuners()[os.path.realpath(PER)] is tuner  # the latest import of the file


def test_install_waits_for_inductor_runtime_import():
    script = textwrap.dedent("""
        import sys
        from tritune.capture import inductor
        name = inductor.SHIM_TARGET[0]
        inductor.install(lambda spec, values: None)
        assert name not in sys.modules and inductor.installed()
        from torch._inductor.runtime.triton_heuristics import CachingAutotuner
        assert getattr(CachingAutotuner.__dict__["run"], "_tritune_shim", False)
        inductor.uninstall()
        assert not getattr(CachingAutotuner.__dict__["run"], "_tritune_shim", False)
        inductor.install(lambda spec, values: None)
        inductor.uninstall()
        print("ok")
    """)
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.strip() == "ok", result.stderr[-2000:]
