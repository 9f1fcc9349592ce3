"""A generated module through the model-free optimization: decisions baked into its text
(``generate.modules.bake``), and the flow that captures it, bakes and re-verifies (``run``)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from llm_server import ScriptedServer
from test_generate_llm import CORRECT, SPEC
from test_llm_loop import key  # noqa: F401 - the LLM key in the environment, shared
from test_loop import worker  # noqa: F401 - the module-scoped interpreter worker, shared

from tritune.capture.spec import LaunchSpec
from tritune.generate.modules import bake
from tritune.replay.variant import Variant

MODULE = '''import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def run(x):  # a comment that stays
    out = x.new_empty(x.shape)
    k[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)
    return out
'''
META_GRID = MODULE.replace("k[(triton.cdiv(x.numel(), 64),)](x, out, x.numel(), BLOCK=64)",
                           "k[lambda meta: (triton.cdiv(x.numel(), meta['BLOCK']),)](x, out, x.numel(), BLOCK=64,\n"
                           "                                                            num_warps=4)")


def _spec() -> LaunchSpec:
    return LaunchSpec(kernel="k", kind="jit", module="m", source_file="m.py", source="sources/m.py", source_hash="0",
                      args=[], constexprs={"BLOCK": 64}, options={"num_warps": 4}, grid=[1, 1, 1])


def test_options_are_added_to_the_one_launch_and_the_rest_is_unchanged():
    text, notes = bake(MODULE, [(_spec(), Variant(options={"num_warps": 8, "num_stages": 2}))])
    assert notes == []
    assert "x.numel(), BLOCK=64, num_warps=8, num_stages=2)" in text
    assert text.replace(", num_warps=8, num_stages=2", "") == MODULE


def test_an_option_already_written_is_replaced_in_place():
    text, _ = bake(META_GRID, [(_spec(), Variant(options={"num_warps": 2}))])
    assert "num_warps=2)" in text and "num_warps=4" not in text


def test_a_constexpr_is_baked_only_where_the_grid_follows_it():
    fixed, notes = bake(MODULE, [(_spec(), Variant(constexprs={"BLOCK": 128}))])
    assert fixed == MODULE and any("BLOCK not baked in" in note for note in notes)
    meta, notes = bake(META_GRID, [(_spec(), Variant(constexprs={"BLOCK": 128}))])
    assert "BLOCK=128" in meta and notes == []


def test_a_rewritten_kernel_is_spliced_in_by_name():
    rewritten = MODULE.replace("tl.load(x_ptr + offs, mask=offs < n)",
                               "tl.load(x_ptr + offs, mask=offs < n, eviction_policy='evict_first')")
    text, notes = bake(MODULE, [(_spec(), Variant(source=rewritten))])
    assert text == rewritten and notes == []


@pytest.mark.parametrize("variant, why", [
    (Variant(passes=("merge-redundant-loads",)), "compiler passes"),
    (Variant(grid={"persistent": {"k": 4, "tiles": "_tritune_tiles"}}), "persistent grid"),
    (Variant(options={"num_warps": 8}, assumes=("noalias",)), "noalias"),
])
def test_decisions_that_need_tritune_at_run_time_are_named_not_baked(variant, why):
    text, notes = bake(MODULE, [(_spec(), variant)])
    assert text == MODULE and len(notes) == 1 and why in notes[0]


def test_two_launch_sites_leave_the_options_alone():
    twice = MODULE.replace("    return out\n", "    k[(1,)](x, out, 1, BLOCK=64)\n    return out\n")
    text, notes = bake(twice, [(_spec(), Variant(options={"num_warps": 8}))])
    assert text == twice and "more or fewer than one place" in notes[0]


# ------------------------------------------------------------------------------------ the flow

DRIVER = '''
import json, sys
from pathlib import Path
from tritune.capture.spec import read_launches
from tritune.generate import run as flow
from tritune.replay.variant import Variant

mode = sys.argv[3]

def planted(capture, folder, settings, kernels, result, field, log, only=None):
    """The loop replaced: every captured launch 'decided' with a planted variant."""
    out = []
    for spec in read_launches(capture):
        source = (Path(capture) / spec.source).read_text()
        variant = Variant(options={"num_warps": 2}) if mode == "good" else \\
            Variant(source=source.replace("tl.maximum(x + b, 0.0)", "tl.maximum(x + b, 0.5)"))
        out.append((spec, variant))
    result[field] = {"decided": len(out)}
    return out

flow._loop_on = planted
from tritune.generate.run import GenerateSettings, generate
from tritune.llm.family import LLMSettings
result = generate(sys.argv[1], sys.argv[2], GenerateSettings(budget_s=1, bench=False, interpret=True, family=False,
                  llm=LLMSettings(url=sys.argv[4], model="scripted")), log=lambda line: None)
print(json.dumps({"paths": result["paths"], "notes": result["notes"], "ok": result["check"]["ok"],
                  "winner": result["winner"]}))
'''


@pytest.mark.parametrize("mode", ["good", "wrong"])
def test_the_models_module_is_optimized_and_reverified(tmp_path, key, mode):
    """Matmul-free relu: Inductor's path runs too (on the interpreter); the model's module is
    captured, 'decided' (planted), baked and verified; a wrong decision is refused."""
    spec = tmp_path / "bias_relu.py"
    spec.write_text(SPEC)
    with ScriptedServer([CORRECT]) as server:
        done = subprocess.run([sys.executable, "-c", DRIVER, str(spec), str(tmp_path / "out"), mode, server.url],
                              capture_output=True, text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ok"]
    llm_path = Path(result["paths"]["llm"])
    if mode == "good":
        assert llm_path.name == "optimized.py" and "num_warps=2" in llm_path.read_text()
    else:
        assert llm_path.name == "kernel.py"
        assert any("baked in failed verification (wrong_result" in note for note in result["notes"])


def test_the_search_on_the_models_module_gets_the_specs_own_launches_only(tmp_path, worker, monkeypatch):
    """The model's module is captured on every case (derived ones too: their n and grid differ,
    so their launches are distinct), but the loop is given the own case's launch alone, as on the
    model-free path (``run.own_launches``): the derived cases verify, they are not tuned."""
    from tritune.capture.spec import read_launches
    from tritune.generate import run as flow
    from tritune.generate.spec import load_spec

    spec = tmp_path / "bias_relu.py"
    spec.write_text(SPEC)
    module = tmp_path / "kernel.py"
    module.write_text(CORRECT.split("```python\n")[1].split("```")[0])
    seen = {}

    def record(capture, folder, settings, kernels, result, field, log, only=None):
        seen.update(capture=capture, only=only, field=field)
        return []

    monkeypatch.setattr(flow, "_loop_on", record)
    result = {"notes": []}
    kept = flow._llm_optimized(load_spec(spec), module, tmp_path / "out", flow.GenerateSettings(budget_s=60), worker,
                               "cpu", result, lambda line: None)
    assert kept == module and result["notes"] == [] and seen["field"] == "llm_optimize"
    launches = {launch.id: launch for launch in read_launches(seen["capture"])}
    assert len(launches) == 4  # spec 0 (4 x 40), odd (3 x 39), one row (1 x 40), larger (8 x 40)
    own = [launch_id for launch_id, launch in launches.items()
           if [arg.value for arg in launch.args if arg.name == "n"] == [4 * 40]]
    assert len(own) == 1 and seen["only"] == own


class _Answers:
    """A worker for ``_llm_optimized`` that runs nothing: the capture and the check answer as told."""

    def __init__(self):
        self.jobs: list[str] = []

    def call(self, job, payload, **limits):
        from tritune.worker.pool import Outcome

        self.jobs.append(job)
        if job.endswith("capture_module_job"):
            return Outcome(True, {"kernels": ["bias_relu_kernel"], "own": ["a"]})
        return Outcome(True, {"ok": True, "failure": None, "message": "ok", "cases": [], "launches": 1})


@pytest.mark.parametrize("payload", [None, "open('leak', 'w')"])
def test_a_baked_module_passes_both_allowlists_again_before_it_is_written(tmp_path, monkeypatch, payload):
    """optimized.py is assembled anew from the baked text: a decided source that would carry what
    the kernel allowlist refuses into it is never written nor checked (the module stays unbaked)."""
    from tritune.generate import run as flow
    from tritune.generate.assemble import assemble
    from tritune.generate.launcher import TENSOR
    from tritune.generate.spec import load_spec
    from tritune.llm.reply import first_python_block

    (tmp_path / "bias_relu.py").write_text(SPEC)
    spec = load_spec(tmp_path / "bias_relu.py")
    best = tmp_path / "out" / "llm" / "kernel.py"
    best.parent.mkdir(parents=True)
    best.write_text(assemble(first_python_block(CORRECT), [TENSOR, TENSOR], name="bias_relu").text)
    kernel = LaunchSpec(kernel="bias_relu_kernel", kind="jit", module="m", source_file="m.py", source="m.py",
                        source_hash="0", args=[], constexprs={"BLOCK": 64}, options={}, grid=[1, 1, 1])
    source = best.read_text()
    if payload is not None:
        source = source.replace("tl.maximum(x + b, 0.0)", f"tl.maximum(x + b, 0.0) + 0 * {payload}")
    variant = Variant(source=source, options={"num_warps": 2})
    monkeypatch.setattr(flow, "_loop_on", lambda *args, **kwargs: [(kernel, variant)])
    worker, result = _Answers(), {"notes": []}
    settings = flow.GenerateSettings(budget_s=1, bench=False, interpret=True)
    path = flow._llm_optimized(spec, best, tmp_path / "out", settings, worker, "cpu", result, lambda line: None)
    optimized = tmp_path / "out" / "llm" / "optimized.py"
    if payload is None:
        assert path == optimized and "num_warps=2" in optimized.read_text()
        assert worker.jobs[-1].endswith("check_job")
    else:
        assert path == best and not optimized.exists() and not worker.jobs[-1].endswith("check_job")
        assert any("fails the allowlists (line" in note for note in result["notes"]), result["notes"]
