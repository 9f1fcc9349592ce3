"""``tritune generate``'s model-free path on the CPU: Inductor's real kernels for a spec (generated
for CPU tensors and run on Triton's interpreter, ``interpreter.on_interpreter``), captured with their
plans, written into kernel.py, verified; decisions baked in, or refused when wrong or not bakeable.

The interpreter has no libdevice (tanh, erf, rsqrt), so the specs here are relu and sums."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from tritune.generate import run as flow  # noqa: E402
from tritune.generate.run import GenerateSettings, generate  # noqa: E402
from tritune.generate.spec import GenerateError  # noqa: E402
from tritune.model.variant import Variant  # noqa: E402

SPEC = '''
import torch
name = "bias_relu"

def reference(x, bias):
    return torch.relu(x + bias) * 2.0

def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 40, generator=g).to(device), torch.randn(40, generator=g).to(device))]
'''

MATMUL_SPEC = '''
import torch

def reference(x, w, bias):
    return torch.relu(x @ w + bias)

def inputs(device):
    return [(torch.randn(16, 32, device=device), torch.randn(32, 16, device=device), torch.randn(16, device=device))]
'''

QUIET = GenerateSettings(budget_s=0, bench=False, interpret=True, family=False)  # kernel.py's family: its own tests


def _quiet(budget_s: float) -> GenerateSettings:
    return GenerateSettings(budget_s=budget_s, bench=False, interpret=True, family=False)


def _spec(tmp_path: Path, text: str = SPEC) -> Path:
    path = tmp_path / "spec.py"
    path.write_text(text)
    return path


def _run_kernel(path: Path, body: str) -> str:
    """Run ``body`` in a fresh interpreter with kernel.py imported as ``kernel`` (Triton's
    interpreter must be on before Triton and Inductor's helpers are first imported)."""
    code = (f"import importlib.util, torch\nspec = importlib.util.spec_from_file_location('kernel', {str(path)!r})\n"
            "kernel = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(kernel)\n" + body)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300,
                          env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


CHECK_RUN = """
x, bias = torch.randn(8, 40), torch.randn(40)
print(torch.equal(kernel.run(x, bias), torch.relu(x + bias) * 2.0))
try:
    kernel.run(torch.randn(2, 5, 5), torch.randn(5))  # another rank: neither a case nor the family
except ValueError as exc:
    print(exc)
"""


@pytest.fixture
def interpreted(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def test_kernel_py_runs_without_torch_compile_and_matches_the_reference(tmp_path, interpreted):
    result = generate(_spec(tmp_path), tmp_path / "out", QUIET, log=lambda line: None)
    assert result["winner"] == "inductor" and result["fused"] and result["check"]["ok"]
    labels = [case["label"] for case in result["check"]["cases"]]
    assert len(labels) >= 3  # the spec's case and the derived odd shapes
    text = (tmp_path / "out" / "kernel.py").read_text()
    assert "torch.compile(" not in text and "_dynamo" not in text and "triton_heuristics" not in text
    assert "@triton.jit" in text
    same, error = _run_kernel(tmp_path / "out" / "kernel.py", CHECK_RUN).splitlines()
    assert same == "True" and error.startswith("bias_relu: no kernel for inputs")
    saved = json.loads((tmp_path / "out" / "generate.json").read_text())
    assert saved["winner"] == "inductor" and (tmp_path / "out" / "report.md").exists()


def _planted(monkeypatch, make):
    """The optimize loop replaced by one that 'decides' ``make(spec)`` for every launch."""
    from tritune.model.launch import LaunchSpec

    def decide(capture, folder, body, settings, result, log):
        out = {}
        for plan in body["plans"]:
            for step in plan["steps"]:
                spec = LaunchSpec.from_json(step["spec"])
                out[spec.id] = make(spec, capture)
        result["optimize"] = {"decided": len(out)}
        return out

    monkeypatch.setattr(flow, "_optimize", decide)


def test_a_decided_config_is_baked_in_with_its_grid(tmp_path, interpreted, monkeypatch):
    _planted(monkeypatch, lambda spec, capture: Variant(name="x16", constexprs={"XBLOCK": 16}))
    result = generate(_spec(tmp_path), tmp_path / "out", _quiet(1),
                      log=lambda line: None)
    assert result["check"]["ok"]
    text = (tmp_path / "out" / "kernel.py").read_text()
    assert "XBLOCK=16" in text and "[(20, 1, 1)]" in text  # 320 elements / 16
    assert "optimized by tritune's search" in text


def test_a_wrong_decision_is_caught_and_inductors_configuration_kept(tmp_path, interpreted, monkeypatch):
    def wrong(spec, capture):  # a "rewrite" that computes relu(x + bias) * 3
        source = (capture / spec.source).read_text()
        assert "2.0" in source
        return Variant(name="planted", source=source.replace("2.0", "3.0"))

    _planted(monkeypatch, wrong)
    result = generate(_spec(tmp_path), tmp_path / "out", _quiet(1),
                      log=lambda line: None)
    assert result["check"]["ok"]
    assert any("failed verification (wrong_result: case 'spec 0'" in note for note in result["notes"])
    assert _run_kernel(tmp_path / "out" / "kernel.py", CHECK_RUN).splitlines()[0] == "True"


def test_a_decision_that_needs_tritune_at_run_time_is_not_baked(tmp_path, interpreted, monkeypatch):
    _planted(monkeypatch, lambda spec, capture: Variant(name="p", passes=("merge-redundant-loads",)))
    result = generate(_spec(tmp_path), tmp_path / "out", _quiet(1),
                      log=lambda line: None)
    assert result["check"]["ok"]
    assert any("not baked in: compiler passes" in note for note in result["notes"])


def test_work_outside_triton_is_one_line(tmp_path, interpreted):
    with pytest.raises(GenerateError, match="outside Triton"):
        generate(_spec(tmp_path, MATMUL_SPEC), tmp_path / "out", QUIET, log=lambda line: None)


def test_without_a_gpu_or_a_model_the_cli_says_so_in_one_line(tmp_path):
    done = subprocess.run([sys.executable, "-m", "tritune", "generate", str(_spec(tmp_path)), "--out",
                           str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "tritune generate: the model-free path needs a GPU (Inductor generates Triton kernels only for one); "
        "without one, give --llm URL --llm-model NAME"]


def test_a_failed_run_leaves_no_kernel_py_of_an_earlier_one(tmp_path, interpreted):
    # DIR/kernel.py is the verified artefact: after a run that verified nothing, none is there
    out = tmp_path / "out"
    (out / "inductor").mkdir(parents=True)
    for stale in (out / "kernel.py", out / "inductor" / "kernel.py"):
        stale.write_text("def run(*inputs):\n    raise SystemExit('an earlier run')\n")
    with pytest.raises(GenerateError, match="outside Triton"):
        generate(_spec(tmp_path, MATMUL_SPEC), out, QUIET, log=lambda line: None)
    assert not (out / "kernel.py").exists() and not (out / "inductor" / "kernel.py").exists()
    assert json.loads((out / "generate.json").read_text())["winner"] is None


INPLACE_SPEC = SPEC.replace("return torch.relu(x + bias) * 2.0", "return x.add_(bias).relu_().mul_(2.0)")


def test_an_in_place_reference_gets_a_kernel_py_that_leaves_its_inputs_alone(tmp_path, interpreted):
    # Inductor's kernel writes into x as the reference does; kernel.py runs it on a copy of x, so
    # that it passes the check (a kernel must not write into its inputs) and its caller keeps x
    result = generate(_spec(tmp_path, INPLACE_SPEC), tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"], result["check"]["message"]
    assert any("writes into its input 0" in note for note in result["notes"])
    same = _run_kernel(tmp_path / "out" / "kernel.py", (
        "x, bias = torch.randn(8, 40), torch.randn(40)\nbefore = x.clone()\nout = kernel.run(x, bias)\n"
        "print(torch.equal(out, torch.relu(before + bias) * 2.0), torch.equal(x, before))\n"))
    assert same.split() == ["True", "True"]


MEAN_VAR_SPEC = SPEC.replace("return torch.relu(x + bias) * 2.0", "return x.mean(-1) * x.var(-1) + bias.sum()")


def test_a_buffer_inductor_names_in_out_but_only_stores_to_is_no_work_outside_triton(tmp_path, interpreted):
    # Inductor passes the reduced buffer as in_out_ptr and only stores to it: no library call wrote it
    # (the matmul of test_work_outside_triton_is_one_line: in_out_ptr loaded, its value from outside Triton)
    result = generate(_spec(tmp_path, MEAN_VAR_SPEC), tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"], result["check"]["message"]
    assert "in_out_ptr" in (tmp_path / "out" / "kernel.py").read_text()


SCALARS_SPEC = '''
import torch

def reference(x, low, fill):
    return torch.where(x > 1.0, low, torch.where(x < -1.0, fill, x * 2.0))

def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 40, generator=g).to(device), float("-inf"), float("nan"))]
'''


def test_non_finite_scalar_inputs_are_written_as_python_can_read_them(tmp_path, interpreted):
    # repr(-inf) is `-inf`, no Python name: kernel.py spells it float("-inf"), and dispatches a NaN
    # that is not the very object it was generated with (NaN != NaN)
    result = generate(_spec(tmp_path, SCALARS_SPEC), tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"], result["check"]["message"]
    same = _run_kernel(tmp_path / "out" / "kernel.py", (
        "x = torch.randn(8, 40)\nout = kernel.run(x, float('-inf'), float('nan'))\n"
        "want = torch.where(x > 1.0, float('-inf'), torch.where(x < -1.0, float('nan'), x * 2.0))\n"
        "print(torch.equal(out.isnan(), want.isnan()), torch.equal(out.nan_to_num(), want.nan_to_num()))\n"))
    assert same.split() == ["True", "True"]


SAME_TWICE_SPEC = '''
import torch

def reference(x, y):
    return x * y + 1.0

def inputs(device):
    g = torch.Generator().manual_seed(0)
    a = torch.randn(8, 40, generator=g).to(device)
    return [(a, a)]  # one tensor passed twice (or two views of one storage)
'''


def test_a_spec_passing_one_tensor_twice_gets_a_kernel_that_reads_both_arguments(tmp_path, interpreted):
    # compiled on the spec's own arguments, Inductor saw x * x and kernel.py ignored y: the check,
    # whose copies hold equal values, passed it; a caller with two tensors got x * x + 1
    result = generate(_spec(tmp_path, SAME_TWICE_SPEC), tmp_path / "out", QUIET, log=lambda line: None)
    assert result["check"]["ok"], result["check"]["message"]
    same = _run_kernel(tmp_path / "out" / "kernel.py", (
        "x, y = torch.randn(8, 40), torch.randn(8, 40)\nprint(torch.allclose(kernel.run(x, y), x * y + 1.0))\n"))
    assert same.split() == ["True"]


def test_the_search_gets_the_specs_own_launches_each_an_equal_budget(tmp_path, interpreted, monkeypatch):
    """The derived cases (odd shapes, one row, larger) verify kernel.py; the search spends its
    budget on the spec's own cases only, and no launch gets more than an equal part of it."""
    from tritune.capture.spec import read_launches
    from tritune.model.request import FLOOR_S
    from tritune.model.launch import LaunchSpec

    seen = {}

    def record(capture, folder, settings, kernels, result, field, log, only=None):
        seen.update(capture=capture, only=only)
        result[field] = {"kernels": 0, "decided": 0, "decisions": {}, "stopped": None}
        return []

    monkeypatch.setattr(flow, "_loop_on", record)
    real_plan = flow._optimize

    def keep_plans(capture, folder, body, settings, result, log):
        seen["plans"] = body["plans"]
        return real_plan(capture, folder, body, settings, result, log)

    monkeypatch.setattr(flow, "_optimize", keep_plans)
    result = generate(_spec(tmp_path), tmp_path / "out", _quiet(60),
                      log=lambda line: None)
    assert result["check"]["ok"]
    plans = seen["plans"]
    own = [p for p in plans if not p["derived"]]
    assert [p["label"] for p in own] == ["spec 0"] and len(plans) > len(own)  # derived cases were captured
    own_ids = [LaunchSpec.from_json(s["spec"]).id for p in own for s in p["steps"]]
    derived_ids = {LaunchSpec.from_json(s["spec"]).id for p in plans if p["derived"] for s in p["steps"]}
    assert seen["only"] == own_ids and not set(own_ids) & derived_ids
    assert set(own_ids) <= {spec.id for spec in read_launches(seen["capture"])}  # ids the loop can find
    settings = GenerateSettings(budget_s=60, per_kernel_s=60)
    assert flow.per_key_s(settings, 6) == FLOOR_S and flow.per_key_s(settings, 0) == 60.0
    assert flow.per_key_s(settings, 1) == pytest.approx((60 - flow.RESERVE_S) / (1 + flow.OVERRUN))
    assert flow.per_key_s(settings, 60) == FLOOR_S and flow.least_budget_s(6) > 60


def test_the_default_budget_reaches_every_launch_of_a_spec_at_the_floor_or_more():
    """Each launch's budget plus its last round, times the launches, plus the run's fixed costs,
    fit the default deadline (120 s) for a spec of up to 6 launches: none is left unreached."""
    from tritune.model.request import FLOOR_S

    settings = GenerateSettings()
    for launches in range(1, 7):
        each = flow.per_key_s(settings, launches)
        assert each >= FLOOR_S
        assert flow.RESERVE_S + launches * each * (1 + flow.OVERRUN) <= settings.budget_s + 1e-9
