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

from tritune.generate.modules import bake
from tritune.model.launch import LaunchSpec
from tritune.model.variant import Variant

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


# ------------------------------------------------------------------- decisions per size bucket

# A 2-D input, rebound to a view before its launch (the buckets are tested on run()'s inputs as
# given, at its top), and a grid that follows BLOCK: each bucket's BLOCK is observable.
TWO_D = '''import triton
import triton.language as tl


@triton.jit
def k(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n), mask=offs < n)


def run(x):
    out = torch.empty_like(x)
    x = x.reshape(-1)
    k[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)](x, out, x.numel(), BLOCK=64, num_warps=4)  # own
    return out
'''


def _launch(number: int) -> LaunchSpec:
    """A distinct launch of ``k`` (its grid tells it apart: a distinct id)."""
    return LaunchSpec(kernel="k", kind="jit", module="m", source_file="m.py", source="sources/m.py", source_hash="0",
                      args=[], constexprs={"BLOCK": 64}, options={"num_warps": 4}, grid=[number, 1, 1])


def _cases(*shapes) -> list[dict]:
    """``capture_module_job``'s cases: case i of ``shapes`` made launch i + 1."""
    return [{"label": f"spec {i}", "sizes": [list(shape)], "launches": [_launch(i + 1).id]}
            for i, shape in enumerate(shapes)]


# spec 0 and spec 2 decide alike (they share a branch), spec 1 otherwise
CASES = _cases((4, 40), (16, 40), (64, 100))
DECIDED = [(_launch(1), Variant(options={"num_warps": 8}, constexprs={"BLOCK": 128})),
           (_launch(2), Variant(constexprs={"BLOCK": 32})),
           (_launch(3), Variant(options={"num_warps": 8}, constexprs={"BLOCK": 128}))]
# a size -> the BLOCK its launch must take: buckets x[4, 64] and x[64, 128] -> 128, x[16, 64] -> 32,
# the module's own 64 elsewhere; each bucket's both ends, and the sizes just past them in each dim
SERVED = {(3, 33): 128, (4, 64): 128, (2, 64): 64, (5, 40): 64, (4, 32): 64, (4, 65): 64,
          (9, 33): 32, (16, 64): 32, (8, 64): 64, (17, 40): 64, (16, 32): 64, (16, 65): 64,
          (33, 65): 128, (64, 128): 128, (32, 100): 64, (65, 100): 64, (64, 64): 64, (64, 129): 64,
          (1, 40): 64}


def _baked_two_d() -> str:
    from tritune.generate.assemble import assemble
    from tritune.generate.launcher import TENSOR

    text, notes = bake(TWO_D, DECIDED, CASES)
    assert notes == []
    return assemble(text, [TENSOR], name="two_d").text  # both allowlists, as _llm_optimized does


class _Spy:
    """Stands for a kernel in the module's globals: records each launch's BLOCK, then launches
    (``launch=False``: records only)."""

    def __init__(self, kernel, launch: bool = True):
        self.kernel, self.launch, self.blocks = kernel, launch, []

    def __getitem__(self, grid):
        def launched(*args, **kwargs):
            self.blocks.append(kwargs["BLOCK"])
            if self.launch:
                self.kernel[grid](*args, **kwargs)
        return launched


def _served(text: str, tmp_path, monkeypatch, launch: bool = False) -> dict:
    """Each size of ``SERVED`` -> the BLOCK the module ``text`` launched ``k`` with, on the interpreter."""
    import torch
    from conftest import import_interpreted

    path = tmp_path / f"served_{len(list(tmp_path.iterdir()))}.py"
    path.write_text(text)
    module = import_interpreted(path, path.stem)
    spy = _Spy(module.k, launch)
    monkeypatch.setattr(module, "k", spy)
    served = {}
    for shape in SERVED:
        x = torch.randn(shape)
        out = module.run(x)
        if launch:  # the grid follows each branch's BLOCK: every element copied
            torch.testing.assert_close(out, x, rtol=0, atol=0)
        served[shape] = spy.blocks[-1]
    return served


def test_different_decisions_per_case_dispatch_by_bucket():
    text = _baked_two_d()
    run = text[text.index("def run(x):"):]
    assert "    _bucket_0 = (x.dim() == 2 and 2 < x.size(0) <= 4 and 32 < x.size(1) <= 64) or " \
           "(x.dim() == 2 and 32 < x.size(0) <= 64 and 64 < x.size(1) <= 128)\n" in run
    assert "    _bucket_1 = x.dim() == 2 and 8 < x.size(0) <= 16 and 32 < x.size(1) <= 64\n" in run
    assert run.index("_bucket_1 = ") < run.index("out = torch.empty_like(x)")  # before x is rebound
    branches = [line.strip() for line in run.splitlines() if line.strip().startswith(("if ", "elif ", "else"))]
    assert branches == ["if _bucket_0:", "elif _bucket_1:", "else:"]
    launches = [line.strip() for line in run.splitlines() if line.strip().startswith("k[")]
    assert [launch.split("out, x.numel(), ")[1] for launch in launches] == [
        "BLOCK=128, num_warps=8)", "BLOCK=32, num_warps=4)", "BLOCK=64, num_warps=4)  # own"]
    # the table: each bucket, its configuration and where it came from; the module's own elsewhere
    assert "#   bucket x[4, 64]: num_warps=8 BLOCK=128  (tritune's search on spec 0: num_warps=8, BLOCK=128)" in run
    assert "#   bucket x[16, 64]: BLOCK=32  (tritune's search on spec 1: BLOCK=32)" in run
    assert "#   bucket x[64, 128]: num_warps=8 BLOCK=128  (tritune's search on spec 2" in run
    assert "#   any other size: BLOCK=64 num_warps=4  (the module's own launch)" in run


def test_each_bucket_is_served_its_configuration_and_every_other_size_the_modules_own(tmp_path, monkeypatch):
    """On the interpreter: a size at each end of each bucket takes that bucket's BLOCK, a size just
    past a bucket in any dim the module's own, and every result is right (the grid follows BLOCK)."""
    assert _served(_baked_two_d(), tmp_path, monkeypatch, launch=True) == SERVED


@pytest.mark.parametrize("old, new", [
    ("2 < x.size(0) <= 4", "1 < x.size(0) <= 4"),  # a bucket's lower end one too low: serves 2
    ("8 < x.size(0) <= 16", "8 < x.size(0) < 16"),  # its upper end left out: 16 gets the module's own
    ("2 < x.size(0) <= 4 and 32 < x.size(1)", "2 < x.size(0) <= 4 and 32 < x.size(0)"),  # another dim
    ("64 < x.size(1) <= 128", "32 < x.size(1) <= 128"),  # two buckets run together
    ("if _bucket_0:", "if _bucket_1:"),  # the branches swapped
])
def test_a_wrong_bucket_condition_serves_a_size_the_wrong_configuration(tmp_path, monkeypatch, old, new):
    """What the test above catches: each planted fault in the dispatch changes what some size of
    ``SERVED`` is launched with."""
    baked = _baked_two_d()
    assert baked.count(old) == 1
    wrong = baked.replace(old, new)
    if old.startswith("if "):
        wrong = wrong.replace("elif _bucket_1:", "elif _bucket_0:")
    assert _served(wrong, tmp_path, monkeypatch) != SERVED


def test_equal_decisions_keep_one_launch_whatever_the_cases():
    decided = [(_launch(1), Variant(options={"num_warps": 8})), (_launch(2), Variant(options={"num_warps": 8}))]
    assert bake(TWO_D, decided, CASES) == bake(TWO_D, decided) == (TWO_D.replace("num_warps=4", "num_warps=8"), [])


def test_without_cases_different_decisions_leave_the_launch_alone():
    text, notes = bake(TWO_D, DECIDED)
    assert text == TWO_D and len(notes) == 1 and "3 different decisions" in notes[0]


def test_per_bucket_the_rules_of_one_decision_hold():
    """A constexpr under a fixed grid, a decision that needs tritune at run time and a rewritten
    source of one case alone are left out of their bucket (which keeps the module's own), each
    with a note; an option is still set where the constexpr is not."""
    fixed = TWO_D.replace('lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)', "(triton.cdiv(x.numel(), 64),)")
    text, notes = bake(fixed, DECIDED, CASES)
    launches = [line.strip() for line in text.splitlines() if line.strip().startswith("k[")]
    assert [launch.split("out, x.numel(), ")[1] for launch in launches] == [
        "BLOCK=64, num_warps=8)", "BLOCK=64, num_warps=4)  # own"]  # spec 1's BLOCK alone: no branch
    assert "if _bucket_0:" in text and "elif" not in text
    assert sorted(notes) == [f"k (spec {i}): BLOCK not baked in (the launch's grid does not follow them, or the "
                             "option is not a launch keyword)" for i in range(3)]
    rewritten = TWO_D.replace("mask=offs < n)", "mask=offs < n, eviction_policy='evict_first')", 1)
    decided = [(_launch(1), Variant(options={"num_warps": 8}, passes=("merge-redundant-loads",))),
               (_launch(2), Variant(source=rewritten, options={"num_warps": 2})),
               (_launch(3), Variant(constexprs={"BLOCK": 128}))]
    text, notes = bake(TWO_D, decided, CASES)
    launches = [line.strip() for line in text.splitlines() if line.strip().startswith("k[")]
    assert "evict_first" not in text and [launch.split("out, x.numel(), ")[1] for launch in launches] == [
        "BLOCK=128, num_warps=4)", "BLOCK=64, num_warps=4)  # own"]
    assert "_bucket_0 = x.dim() == 2 and 32 < x.size(0) <= 64 and 64 < x.size(1) <= 128\n" in text \
        and "_bucket_1" not in text
    assert len(notes) == 2 and "(spec 0)" in notes[0] and "compiler passes" in notes[0]
    assert "(spec 1)" in notes[1] and "a rewritten source cannot be per size bucket" in notes[1]


def test_a_source_every_case_rewrites_alike_is_spliced_and_its_options_go_by_bucket():
    rewritten = TWO_D.replace("mask=offs < n)", "mask=offs < n, eviction_policy='evict_first')", 1)
    decided = [(_launch(1), Variant(source=rewritten, options={"num_warps": 8})),
               (_launch(2), Variant(source=rewritten, options={"num_warps": 2}))]
    text, notes = bake(TWO_D, decided, CASES[:2])
    assert notes == [] and "evict_first" in text
    assert "elif _bucket_1:" in text and "num_warps=8)" in text and "num_warps=2)" in text


@pytest.mark.parametrize("unbakeable", [{"assumes": ("noalias",)}, {"passes": ("merge-redundant-loads",)}])
def test_a_shared_source_of_decisions_that_cannot_be_baked_is_never_spliced(unbakeable):
    # both cases' decisions rewrite the source alike, but need a no-alias guard or passes the module cannot
    # hold: the source (which may count on them) is not spliced in either
    rewritten = TWO_D.replace("mask=offs < n)", "mask=offs < n, eviction_policy='evict_first')", 1)
    decided = [(_launch(1), Variant(source=rewritten, options={"num_warps": 8}, **unbakeable)),
               (_launch(2), Variant(source=rewritten, options={"num_warps": 2}, **unbakeable))]
    text, notes = bake(TWO_D, decided, CASES[:2])
    assert text == TWO_D
    assert len(notes) == 2 and all("not baked in" in note for note in notes), notes


def test_a_source_only_decision_keeps_its_bucket_and_a_source_not_every_case_chose_is_not_spliced():
    rewritten = TWO_D.replace("mask=offs < n)", "mask=offs < n, eviction_policy='evict_first')", 1)
    cases = _cases((4, 40), (3, 33), (64, 100))
    # spec 0 decides the rewritten source alone (no keyword): its bucket is its own, spec 1's is left out
    decided = [(_launch(1), Variant(source=rewritten)), (_launch(2), Variant(source=rewritten, options={"num_warps": 2})),
               (_launch(3), Variant(source=rewritten, options={"num_warps": 8}))]
    text, notes = bake(TWO_D, decided, cases)
    assert "evict_first" in text and "num_warps=2" not in text and "num_warps=8)" in text, text
    assert notes == ["k (spec 1): its bucket takes an earlier case's decision; "
                     f"{decided[1][1].describe()} not baked in"]
    # spec 0's decision (compiler passes, no source) cannot be baked: spec 1's source is no source of every case
    decided = [(_launch(1), Variant(passes=("merge-redundant-loads",))),
               (_launch(2), Variant(source=rewritten, options={"num_warps": 2}))]
    text, notes = bake(TWO_D, decided, _cases((4, 40), (16, 40)))
    assert "evict_first" not in text and "num_warps=2" not in text, text
    assert len(notes) == 2 and "a rewritten source cannot be per size bucket" in notes[1], notes


def test_a_decision_that_reaches_no_keyword_leaves_its_bucket_to_the_next_case():
    """spec 0's decision sets a constexpr under a fixed grid (nothing of it can be baked): spec 1,
    in the same bucket, gives it."""
    fixed = TWO_D.replace('k[lambda meta: (triton.cdiv(x.numel(), meta["BLOCK"]),)]', "k[(triton.cdiv(x.numel(), 64),)]")
    cases = _cases((4, 40), (3, 33), (64, 100))
    decided = [(_launch(1), Variant(constexprs={"BLOCK": 128})), (_launch(2), Variant(options={"num_warps": 2})),
               (_launch(3), Variant(options={"num_warps": 8}))]
    text, notes = bake(fixed, decided, cases)
    assert "_bucket_0 = x.dim() == 2 and 2 < x.size(0) <= 4 and 32 < x.size(1) <= 64\n" in text, text
    assert "BLOCK=64, num_warps=2)" in text and "BLOCK=64, num_warps=8)" in text
    assert notes == ["k (spec 0): BLOCK not baked in (the launch's grid does not follow them, or the option is not a "
                     "launch keyword)"]


def test_one_bucket_takes_its_first_cases_decision_and_the_modules_own_makes_no_branch():
    """spec 1 (3 x 33) falls in spec 0's bucket: spec 0's decision is baked there; spec 2's
    decision is what the launch does already: no branch."""
    cases = _cases((4, 40), (3, 33), (64, 100))
    decided = [(_launch(1), Variant(constexprs={"BLOCK": 128})), (_launch(2), Variant(constexprs={"BLOCK": 32})),
               (_launch(3), Variant(options={"num_warps": 4}))]
    text, notes = bake(TWO_D, decided, cases)
    assert "_bucket_0 = x.dim() == 2 and 2 < x.size(0) <= 4 and 32 < x.size(1) <= 64\n" in text \
        and "_bucket_1" not in text
    assert "BLOCK=128, num_warps=4)" in text and "BLOCK=32" not in text
    assert notes == ["k (spec 1): its bucket takes an earlier case's decision; BLOCK=32 not baked in"]


def test_each_inputs_rank_is_tested_first_and_scalars_have_no_bucket():
    from tritune.generate.assemble import assemble
    from tritune.generate.launcher import NUMBER, TENSOR

    module = TWO_D.replace("def run(x):", "def run(x, scale):")
    cases = [{"label": "spec 0", "sizes": [[4, 40], None], "launches": [_launch(1).id]},
             {"label": "spec 1", "sizes": [[100], None], "launches": [_launch(2).id]}]
    text, notes = bake(module, DECIDED[:2], cases)
    assert notes == []
    assert "_bucket_0 = x.dim() == 2 and 2 < x.size(0) <= 4 and 32 < x.size(1) <= 64\n" in text
    assert "_bucket_1 = x.dim() == 1 and 64 < x.size(0) <= 128\n" in text
    assemble(text, [TENSOR, NUMBER])


@pytest.mark.parametrize("change, why", [
    (("    return out\n", "    k[(1,)](x, out, 1, BLOCK=64)\n    return out\n"), "more or fewer than one place"),
    (("num_warps=4)  # own", "num_warps=4); y = 1"), "not a statement on lines of its own"),
])
def test_a_launch_the_dispatch_cannot_replace_is_left_alone(change, why):
    module = TWO_D.replace(*change)
    text, notes = bake(module, DECIDED, CASES)
    assert text == module and len(notes) == 1 and why in notes[0]


def test_a_decision_of_a_launch_no_own_case_made_is_named():
    text, notes = bake(TWO_D, DECIDED + [(_launch(9), Variant(constexprs={"BLOCK": 16}))], CASES)
    assert "BLOCK=16" not in text and "if _bucket_0:" in text and "elif _bucket_1:" in text
    assert notes == [f"k: no own case made launch {_launch(9).id}; its decision BLOCK=16 not baked in"]


# ------------------------------------------------------------------------------------ the flow

DRIVER = '''
import json, sys
from pathlib import Path
from tritune.capture.spec import read_launches
from tritune.generate import run as flow
from tritune.model.variant import Variant

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


# two own cases in two buckets: (4, 40) and (16, 100), and a launch whose grid follows BLOCK
TWO_CASES = SPEC.replace(
    "return [(torch.randn(4, 40, generator=g).to(device), torch.randn(40, generator=g).to(device))]",
    "return [(torch.randn(4, 40, generator=g).to(device), torch.randn(40, generator=g).to(device)),\n"
    "            (torch.randn(16, 100, generator=g).to(device), torch.randn(100, generator=g).to(device))]")
META_MODULE = CORRECT.split("```python\n")[1].split("```")[0].replace(
    "bias_relu_kernel[(triton.cdiv(n, 64),)]", 'bias_relu_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)]')


def test_the_capture_says_each_own_cases_sizes_and_launches(tmp_path, worker):
    assert TWO_CASES != SPEC and META_MODULE.count("lambda meta") == 1
    (tmp_path / "spec.py").write_text(TWO_CASES)
    (tmp_path / "kernel.py").write_text(META_MODULE)
    outcome = worker.call("tritune.generate.modules:capture_module_job",
                          {"module": str(tmp_path / "kernel.py"), "spec": str(tmp_path / "spec.py"), "device": "cpu",
                           "capture": str(tmp_path / "capture")})
    assert outcome.ok, outcome.failure
    found = outcome.value
    assert [(case["label"], case["sizes"]) for case in found["cases"]] == [("spec 0", [[4, 40], [40]]),
                                                                           ("spec 1", [[16, 100], [100]])]
    assert [case["launches"] for case in found["cases"]] == [[found["own"][0]], [found["own"][1]]]
    assert len(found["own"]) == 2 and found["launches"] > 2  # the derived cases' launches: no case's


def test_the_models_module_takes_each_own_cases_decision_in_its_bucket(tmp_path, worker, monkeypatch):
    """Captured for real, 'decided' (planted: BLOCK 128 for 4 x 40, 32 for 16 x 100), baked by
    bucket, assembled again and verified on every case, derived and sampled sizes included."""
    from tritune.capture.spec import read_launches
    from tritune.generate import run as flow
    from tritune.generate.spec import load_spec

    (tmp_path / "spec.py").write_text(TWO_CASES)
    module = tmp_path / "kernel.py"
    module.write_text(META_MODULE)
    blocks = {4 * 40: 128, 16 * 100: 32}

    def planted(capture, folder, settings, kernels, result, field, log, only=None):
        launches = {launch.id: launch for launch in read_launches(capture)}
        return [(launches[i], Variant(constexprs={"BLOCK": blocks[launches[i].arg("n").value]})) for i in only]

    monkeypatch.setattr(flow, "_loop_on", planted)
    result = {"notes": []}
    kept = flow._llm_optimized(load_spec(tmp_path / "spec.py"), module, tmp_path / "out",
                               flow.GenerateSettings(budget_s=60), worker, "cpu", result, lambda line: None)
    assert kept == tmp_path / "out" / "llm" / "optimized.py" and result["notes"] == []
    text = kept.read_text()
    assert "    _bucket_0 = x.dim() == 2 and 2 < x.size(0) <= 4 and 32 < x.size(1) <= 64 and bias.dim() == 1 and " \
           "32 < bias.size(0) <= 64\n" in text
    assert "    _bucket_1 = x.dim() == 2 and 8 < x.size(0) <= 16 and 64 < x.size(1) <= 128 and bias.dim() == 1 and " \
           "64 < bias.size(0) <= 128\n" in text
    assert "    if _bucket_0:\n" in text and "    elif _bucket_1:\n" in text and "    else:\n" in text
    assert [line.split("bias.numel(), ")[1] for line in text.splitlines() if "bias_relu_kernel[" in line] == [
        "BLOCK=128)", "BLOCK=32)", "BLOCK=64)"]


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
