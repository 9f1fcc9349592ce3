"""``tritune harvest`` on a CPU machine: it refuses in one line (exit 2), parses ``module:callable``
and normalises what a model factory returns. The GPU run itself is checked on the GPU machine."""

from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
from click.testing import CliRunner  # noqa: E402

from tritune.commands.harvest import harvest  # noqa: E402
from tritune.inductor import models  # noqa: E402
from tritune.inductor.models import ModelError, build, default_loss, parse_reference, resolve  # noqa: E402

needs_cpu_only = pytest.mark.skipif(torch.cuda.is_available(), reason="checks the refusal on a CPU-only machine")

HARVEST_ENV = ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR", "TORCHINDUCTOR_BENCHMARK_KERNEL",
               "TORCHINDUCTOR_FORCE_DISABLE_CACHES")


@needs_cpu_only
@pytest.mark.parametrize("model", ["bert", "coat_lite_mini", "os.path:join"])
def test_harvest_without_cuda_exits_2_in_one_line_and_leaves_the_environment(tmp_path, model):
    before = {key: os.environ.get(key) for key in HARVEST_ENV}
    result = CliRunner().invoke(harvest, ["--model", model, "--out", str(tmp_path / "h")])
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "no CUDA GPU" in lines[0] and lines[0].startswith("tritune harvest:")
    assert {key: os.environ.get(key) for key in HARVEST_ENV} == before
    assert not (tmp_path / "h" / "launches.jsonl").exists()


def test_harvest_refuses_a_directory_holding_a_capture(tmp_path):
    (tmp_path / "launches.jsonl").write_text("{}\n")
    result = CliRunner().invoke(harvest, ["--model", "bert", "--out", str(tmp_path)])
    assert result.exit_code == 2 and "--force" in result.output


@pytest.mark.parametrize("text, message", [
    ("resnet50", "expected one of bert"),
    ("a:b:c", "MODULE:CALLABLE"),
    (":make", "'' is not a module name"),
    ("pkg.mod:", "'' is not a callable's name"),
    ("pkg-mod:make", "is not a module name"),
    ("pkg.mod:make model", "is not a callable's name"),
])
def test_module_callable_parsing_errors(text, message):
    with pytest.raises(ModelError, match=message):
        parse_reference(text)
    result = CliRunner().invoke(harvest, ["--model", text, "--out", "unused"])
    assert result.exit_code == 2 and "Invalid value for '--model'" in result.output


def test_module_callable_parses_and_resolves():
    assert parse_reference("pkg.sub.mod:build.small") == ("pkg.sub.mod", "build.small")
    assert resolve("os.path:join") is os.path.join
    assert resolve("bert") is models.bert
    with pytest.raises(ModelError, match="cannot import no_such_module_xyz"):
        resolve("no_such_module_xyz:make")
    with pytest.raises(ModelError, match="has no nothing_here"):
        resolve("os.path:nothing_here")
    with pytest.raises(ModelError, match="is not callable"):
        resolve("os:sep")


def _mlp(batch, dtype, device):
    model = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.GELU())
    return model.to(dtype=dtype), (torch.randn(batch, 8, dtype=dtype),)


def test_build_passes_only_the_keywords_a_factory_takes():
    seen = {}

    def factory(batch, mode):
        seen.update(batch=batch, mode=mode)
        return torch.nn.Identity(), {"input": torch.ones(batch)}, lambda out: out.sum()

    work = build(factory, batch=3, dtype=torch.float32, device="cpu", mode="infer")
    assert seen == {"batch": 3, "mode": "infer"}
    assert work.forward().shape == (3,) and work.loss_fn is not None

    work = build(_mlp, batch=2, dtype=torch.float64, device="cpu", mode="train")
    out = work.forward()
    assert out.shape == (2, 4) and out.dtype == torch.float64
    default_loss(out).backward()  # a scalar that reaches the parameters
    assert work.model[0].weight.grad is not None


def test_build_accepts_one_tensor_and_kwargs_factories():
    work = build(lambda **kw: (torch.nn.Identity(), torch.zeros(kw["batch"])), batch=5,
                 dtype=torch.float32, device="cpu", mode="infer")
    assert work.inputs == (work.inputs[0],) and work.forward().shape == (5,)


@pytest.mark.parametrize("made, message", [
    (torch.nn.Identity(), "expected \\(model, inputs\\)"),
    ((1, (), None), "is not callable"),
    ((torch.nn.Identity(), (), 3), "loss_fn .* is not callable"),
])
def test_build_rejects_what_breaks_the_contract(made, message):
    with pytest.raises(ModelError, match=message):
        build(lambda: made, batch=1, dtype=torch.float32, device="cpu", mode="train")


def test_default_loss_needs_something_to_train():
    with pytest.raises(ModelError, match="nothing to train"):
        default_loss({"ids": torch.ones(3, dtype=torch.int64), "x": torch.ones(2)})
    x = torch.ones(2, requires_grad=True)
    assert float(default_loss([x * 2, {"y": x * 4}]).detach()) == pytest.approx(6.0)


def test_prepare_environment_sets_fresh_caches(tmp_path, monkeypatch):
    from tritune.inductor import harvest as module

    for key in HARVEST_ENV:  # set, then removed: recorded either way, so what prepare_environment
        monkeypatch.setenv(key, "")  # sets is undone after the test (its TORCHINDUCTOR_BENCHMARK_KERNEL=1
        monkeypatch.delenv(key)  # breaks Inductor's kernels for the CPU in every later torch.compile)
    import torch._inductor.config as inductor_config
    import torch.compiler.config as compiler_config

    # restored after the test: other tests import Inductor modules
    monkeypatch.setattr(inductor_config, "benchmark_kernel", inductor_config.benchmark_kernel)
    monkeypatch.setattr(compiler_config, "force_disable_caches", compiler_config.force_disable_caches)
    compiler_config.force_disable_caches = False
    env = module.prepare_environment(tmp_path)
    assert set(env) <= set(HARVEST_ENV)  # each undone after the test (a new one would stay in this worker)
    assert env["TORCHINDUCTOR_BENCHMARK_KERNEL"] == "1" and env["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] == "1"
    for key in ("TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR"):
        assert os.environ[key] == env[key] and os.path.isdir(env[key]) and env[key].startswith(str(tmp_path))
    # both were imported before (by `import torch` and above): the settings reach them anyway
    assert inductor_config.benchmark_kernel is True and inductor_config.force_disable_caches is True


def test_collect_modules_names_copies_by_kernel_and_hash(tmp_path):
    from pathlib import Path

    from tritune.inductor.harvest import collect_modules

    poi = Path(__file__).resolve().parents[2] / "examples" / "inductor" / "triton_poi_fused_add_gelu_mul_0.py"
    for folder in ("ab", "cd"):  # the same kernel name from two graphs (forward, backward)
        (tmp_path / "cache" / folder).mkdir(parents=True)
        (tmp_path / "cache" / folder / f"c{folder}123456789xyz.py").write_text(poi.read_text())
    copies = collect_modules(tmp_path / "cache", tmp_path / "out")
    names = sorted(copy.name for copy in copies)
    assert names == ["triton_poi_fused_add_gelu_mul_0_cab1234567.py", "triton_poi_fused_add_gelu_mul_0_ccd1234567.py"]
    assert all(copy.read_text() == poi.read_text() for copy in copies)



def _staged_harvest(monkeypatch, kernel_module, step=lambda: None):
    """``harvest`` on the CPU: the GPU parts replaced (the fresh Inductor cache holds
    ``kernel_module`` as torch.compile would have written it; ``step`` stands for the model's
    step), the rest real: modules copied, specs built without launching, the capture installed."""
    import shutil
    from pathlib import Path

    from tritune.capture import inductor_modules
    from tritune.inductor import harvest as module

    def prepare(work):
        cache = Path(work) / "inductor"
        (cache / "ab").mkdir(parents=True)
        shutil.copyfile(kernel_module, cache / "ab" / "cab123456789xyz.py")
        return {module.ENV_INDUCTOR_CACHE: str(cache)}  # the process environment is left alone

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    monkeypatch.setattr(module, "require_cuda", lambda: None)
    monkeypatch.setattr(module, "prepare_environment", prepare)
    monkeypatch.setattr(module, "model_step", lambda *args: step())
    monkeypatch.setattr(inductor_modules, "tuned_autotuners", lambda: {})
    build = inductor_modules.specs_from_modules
    monkeypatch.setattr(inductor_modules, "specs_from_modules", lambda *a, **kw: build(*a, **{**kw, "launch": False}))
    return module


def _old_capture(out):
    out.mkdir()
    (out / "launches.jsonl").write_text('{"tritune_launches": 1}\n')
    for folder in ("sources", "modules"):
        (out / folder).mkdir()
        (out / folder / "old.py").write_text("# old\n")
    (out / "notes.txt").write_text("the user's\n")
    return {str(p.relative_to(out)): p.read_bytes() if p.is_file() else None for p in sorted(out.rglob("*"))}


def test_harvest_replaces_the_capture_once_the_new_one_is_complete(tmp_path, monkeypatch, small_inductor_poi):
    from pathlib import Path

    from tritune.capture.spec import read_launches

    out = tmp_path / "runs" / "bert"
    out.parent.mkdir()
    _old_capture(out)
    module = _staged_harvest(monkeypatch, small_inductor_poi)
    result = module.harvest("bert", out, mode="infer")
    assert result.errors == [] and len(result.specs) == 1
    [spec] = read_launches(out)
    # the module file the spec names is where the capture now is, not the temporary directory
    assert Path(spec.source_file) == (out / "modules" / result.modules[0].name).resolve()
    assert Path(spec.source_file).is_file() and (out / spec.source).is_file()
    assert not (out / "sources" / "old.py").exists() and not (out / "modules" / "old.py").exists()
    assert (out / "notes.txt").read_text() == "the user's\n"  # not part of the capture
    assert [p.name for p in out.parent.iterdir()] == ["bert"]  # no temporary directory left


def test_harvest_that_fails_leaves_the_capture_as_it_was(tmp_path, monkeypatch, small_inductor_poi):
    out = tmp_path / "runs" / "bert"
    out.parent.mkdir()
    before = _old_capture(out)

    def step():
        raise RuntimeError("CUDA out of memory")

    module = _staged_harvest(monkeypatch, small_inductor_poi, step)
    with pytest.raises(RuntimeError, match="out of memory"):
        module.harvest("bert", out, mode="infer")
    assert {str(p.relative_to(out)): p.read_bytes() if p.is_file() else None for p in sorted(out.rglob("*"))} == before
    assert [p.name for p in out.parent.iterdir()] == ["bert"]


def test_harvest_checks_the_model_before_writing(tmp_path, monkeypatch, small_inductor_poi):
    from tritune.inductor.harvest import HarvestError

    module = _staged_harvest(monkeypatch, small_inductor_poi)
    with pytest.raises(HarvestError, match="cannot import no_such_module_xyz"):
        module.harvest("no_such_module_xyz:make", tmp_path / "runs" / "deep" / "out")
    assert not (tmp_path / "runs").exists()
