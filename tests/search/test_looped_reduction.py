"""Persistent -> looped (``search.looped_reduction``): the rewrite of real Inductor kernels, that it
compiles for sm_90 and computes the same under the interpreter, the cases that must not fire,
and the proposer."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tritune.capture.inductor_modules import specs_from_modules
from tritune.search.looped_reduction import (NAME_PREFIX, LoopedReductionProposer, NotLoopable, blocks, loopable,
                                             parse, rewrite)
from tritune.model.trial import Trial

REPO = Path(__file__).resolve().parents[2]
LAYER_NORM = REPO / "examples" / "inductor" / "triton_per_fused_native_layer_norm_0.py"
SOFTMAX = REPO / "examples" / "inductor" / "triton_per_fused__softmax_add_exp_gelu_prepare_softmax_online_sub_1.py"
IN_PLACE = (REPO / "examples" / "inductor_harvested" /
            "coat_lite_mini_train_triton_per_fused_add_addmm_native_layer_norm_native_layer_norm_backward_view_73.py")
LOOPED = REPO / "examples" / "inductor" / "triton_red_fused_native_layer_norm_0.py"
POINTWISE = REPO / "examples" / "inductor" / "triton_poi_fused_add_gelu_mul_0.py"
LOOP = "for r0_offset in tl.range(R0_BLOCK, r0_numel, R0_BLOCK):"


def kernel_of(path: Path) -> str:
    return re.search(r"^def (triton_\w+)\(", path.read_text(), re.MULTILINE).group(1)


def body(text: str, kernel: str) -> str:
    return text[text.index(f"def {kernel}("):text.index("def get_args")]


# ------------------------------------------------------------------------------- the rewrite

def test_layer_norm_loops_three_times_and_keeps_every_other_byte():
    source, kernel = LAYER_NORM.read_text(), kernel_of(LAYER_NORM)
    looped = rewrite(source, kernel, 64)
    start, end = source.index(f"def {kernel}("), source.index("def get_args")
    assert looped[:start] == source[:start] and looped.endswith(source[end:])  # decorator, module, get_args
    text = body(looped, kernel)
    assert "R0_BLOCK: tl.constexpr = 64" in text and "R0_BLOCK: tl.constexpr = 256" not in text
    assert text.count(LOOP) == 3  # mean, variance, then the normalized row
    # chunk 0 (its own names) starts each accumulator, the other chunks add to it
    assert "    tmp5 = tl.sum(tmp3_c0, 1)[:, None].to(tl.float32)\n" in text
    assert "        tmp5 = tmp5 + tl.sum(tmp3, 1)[:, None].to(tl.float32)\n" in text
    assert text.count("    r0_index_c0 = r0_offset_c0 + tl.arange(0, R0_BLOCK)[None, :]\n") == 3
    assert text.count("        r0_index = r0_offset + tl.arange(0, R0_BLOCK)[None, :]\n") == 3
    # the row's store in the last loop (chunk 0 and the loop), the per-row stores once, after it
    assert "    tl.store(out_ptr1 + (r0_1_c0 + 256 * x0), tmp24_c0, None)\n" in text
    assert text.count("tl.store(out_ptr1 + (r0_1 + 256*x0), tmp24, None)") == 1
    tail = text[text.rindex(LOOP):]
    assert tail.count("tl.store(out_ptr0 + (x0), tmp8, None)") == 1
    # x-only values sit between the loops: the mean after the first, rsqrt after the second
    assert text.index("tmp8 = (tmp5 / tmp7)") < text.index(LOOP, text.index(LOOP) + 1)
    assert parse(source, kernel).r0_block == 256 and not parse(source, kernel).masked


def test_max_is_combined_with_inductors_maximum():
    looped = body(rewrite(SOFTMAX.read_text(), kernel_of(SOFTMAX), 128), kernel_of(SOFTMAX))
    assert ("tmp13 = triton_helpers.maximum(tmp13, triton_helpers.max2(tmp11, 1)[:, None].to(tl.float32))"
            in looped)
    assert looped.count(LOOP) == 3


def test_an_in_place_row_is_read_before_it_is_overwritten_behind_a_barrier():
    looped = body(rewrite(IN_PLACE.read_text(), kernel_of(IN_PLACE), 128), kernel_of(IN_PLACE))
    last = looped[looped.rindex(LOOP):]
    assert "tl.debug_barrier()\n        tl.store(in_out_ptr0 + (r0_1 + 512*x0), tmp29, xmask)" in last
    assert last.index("tmp4 = tl.load(in_out_ptr0") < last.index("tl.store(in_out_ptr0")


def test_a_rewritten_kernel_compiles_for_sm90(tmp_path):
    from tritune.analyze.report import analyze_path

    out = tmp_path / IN_PLACE.name  # three loops, a barrier in one, a masked x dimension
    out.write_text(rewrite(IN_PLACE.read_text(), kernel_of(IN_PLACE), 128))
    [record] = analyze_path(out)
    assert record["error"] is None, record["error"]
    assert record["kind"] == "inductor" and record["target"] == "sm_90"


# ------------------------------------------------------------------------ under the interpreter

def small(path: Path, tmp_path: Path, replacements: dict[str, str]) -> Path:
    """A copy of an example at a few rows, libdevice calls spelled tl.math (the interpreter has
    no libdevice)."""
    text = path.read_text()
    for old, new in {**replacements, "libdevice.": "tl.math."}.items():
        assert old in text, old
        text = text.replace(old, new)
    out = tmp_path / "kernels" / path.name
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(text)
    return out


SMALL = {  # kernel file, edits to make it small, the looped R0_BLOCK
    "layer_norm": (LAYER_NORM, {"4096": "16"}, 128),
    # max2 is tl.reduce with a jit combine function, which the interpreter calls per element pair
    "softmax": (SOFTMAX, {"4096": "4", "256": "64"}, 32),
    # a row of 50 in a block of 64, masked as Inductor masks it: the last chunk of 32 is partial
    "softmax_masked": (SOFTMAX, {"(4096, 256), (256, 1)": "(4, 50), (50, 1)", "4096, 256,": "4, 50,", "4096": "4",
                                 "'r0_': 256": "'r0_': 64", "r0_numel = 256": "r0_numel = 50",
                                 "R0_BLOCK: tl.constexpr = 256": "R0_BLOCK: tl.constexpr = 64",
                                 "tl.full([R0_BLOCK], True, tl.int1)[None, :]": "r0_index < r0_numel",
                                 "256*x0), None)": "50*x0), r0_mask, other=0.0)",
                                 "tmp11 = tl.broadcast_to(tmp9, [XBLOCK, R0_BLOCK])":
                                     "tmp11 = tl.where(r0_mask, tmp9, float('-inf'))",
                                 "tmp16 = tl.broadcast_to(tmp15, [XBLOCK, R0_BLOCK])":
                                     "tmp16 = tl.where(r0_mask, tmp15, 0)",
                                 "(r0_1 + 256*x0), tmp23, None)": "(r0_1 + 50*x0), tmp23, r0_mask)"}, 32),
    "in_place": (IN_PLACE, {"xnumel = 400": "xnumel = 16", "(8, 50, 512)": "(1, 16, 512)",
                            "(400, 512)": "(16, 512)", "(8, 50, 1), (50, 1, 1)": "(1, 16, 1), (16, 1, 1)",
                            "400, 512,": "16, 512,", "'x': 512": "'x': 16"}, 128),
}


PLANTED = {"layer_norm", "in_place", "softmax_masked"}  # softmax's tl.reduce is slow under the interpreter

INTERPRETED = textwrap.dedent("""
    import json, re, sys
    from tritune.capture.inductor_modules import specs_from_modules
    from tritune.model.variant import Variant
    from tritune.search.looped_reduction import rewrite
    from tritune.verify import verify

    def check(spec, out, name, text):
        result = verify(spec, Variant(name=name, source=text), out, mode="tolerance", input_sets=1)
        return [result.ok, result.failure, result.message]

    report = {}
    for case, kernel_file, out, block, plant in zip(*[iter(sys.argv[1:])] * 5):
        [spec], errors = specs_from_modules([kernel_file], out, launch=False)
        looped = rewrite(open(kernel_file).read(), spec.kernel, int(block))
        # a sum that forgets the earlier chunks: the check must catch it
        broken, n = re.subn(r"(tmp\\d+) = \\1 \\+ ", r"\\1 = ", looped, count=1)
        report[case] = {"errors": errors, "looped": check(spec, out, "looped", looped),
                        "broken": check(spec, out, "broken", broken) if plant == "1" and n == 1 else None}
    print(json.dumps(report))
""")


def test_the_looped_kernels_compute_what_the_persistent_ones_do(tmp_path):
    # one process with TRITON_INTERPRET=1 from the start: Inductor's triton_helpers must be
    # interpreted too, and this process may have imported them compiled
    argv = []
    for name, (path, replacements, block) in sorted(SMALL.items()):
        argv += [name, str(small(path, tmp_path / name, replacements)), str(tmp_path / name / "capture"), str(block),
                 str(int(name in PLANTED))]
    script = tmp_path / "run.py"
    script.write_text(INTERPRETED)
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, str(script), *argv], capture_output=True, text=True, timeout=600, env=env)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(done.stdout.strip().splitlines()[-1])
    assert sorted(report) == sorted(SMALL)
    for case, result in report.items():
        assert result["errors"] == [] and result["looped"][0], f"{case}: {result}"
        if case in PLANTED:
            ok, failure, message = result["broken"]
            assert not ok and failure == "wrong_result", f"{case}: {message}"


# ------------------------------------------------------------------------------ must not fire

def edited(old: str, new: str) -> str:
    text = LAYER_NORM.read_text()
    assert old in text
    return text.replace(old, new, 1)


LN = kernel_of(LAYER_NORM)
REFUSED = {
    "a looped kernel": (LOOPED.read_text(), kernel_of(LOOPED), "not known to be elementwise"),
    "a pointwise kernel": (POINTWISE.read_text(), kernel_of(POINTWISE), "not a persistent reduction"),
    "a scan": (edited("tl.sum(tmp3, 1)", "tl.cumsum(tmp3, 1)"), LN, "tl.cumsum(...) is not known"),
    "a reduction inside an expression": (edited("tmp5 = tl.sum(tmp3, 1)[:, None].to(tl.float32)",
                                                "tmp5 = tl.sum(tmp3, 1)[:, None] + 1.0"), LN, "tl.sum(...)"),
    "a reduction over another axis": (edited("tl.sum(tmp3, 1)", "tl.sum(tmp3, 0)"), LN, "not over axis 1"),
    "welford": (edited("tmp5 = tl.sum(tmp3, 1)[:, None].to(tl.float32)",
                       "tmp5 = triton_helpers.welford_reduce(tmp3, 1)"), LN, "welford_reduce"),
    "a branch": (edited("    tmp6 = tl.full", "    if XBLOCK > 1:\n        pass\n    tmp6 = tl.full"), LN,
                 "If statement"),
    "a stored pointer read elsewhere": (edited("tmp21 = tl.load(in_ptr1 + (r0_1)", "tmp21 = tl.load(out_ptr1 + (r0_1)"),
                                        LN, "out_ptr1 is loaded at"),
    "a pointer read after its store": (edited("    tl.store(out_ptr0 + (x0), tmp8, None)",
                                              "    tl.store(out_ptr0 + (x0), tmp8, None)\n"
                                              "    tmp99 = tl.load(out_ptr0 + (x0), None)"), LN,
                                       "loaded after it is stored"),
    "a pointer stored twice": (edited("    tl.store(out_ptr0 + (x0), tmp8, None)",
                                      "    tl.store(out_ptr0 + (x0), tmp8, None)\n"
                                      "    tl.store(out_ptr0 + (x0), tmp18, None)"), LN, "stored twice"),
    "an unmasked row of unknown length": (edited("    r0_numel = 256\n", ""), LN, "does not fix"),
    "a second reduction dimension": (edited("    R0_BLOCK: tl.constexpr = 256\n",
                                            "    R0_BLOCK: tl.constexpr = 256\n    R1_BLOCK: tl.constexpr = 2\n"), LN,
                                     "second reduction dimension"),
    "a cooperative reduction": (edited("XBLOCK : tl.constexpr)", "XBLOCK : tl.constexpr, RSPLIT : tl.constexpr)"), LN,
                                "(RSPLIT)"),
    "a reduction of a value constant along the row": (edited("tmp11 = tl.broadcast_to(tmp10,",
                                                             "tmp11 = tl.broadcast_to(tmp8,"), LN, "does not vary"),
    "a name assigned twice": (edited("    tmp7 = tmp6.to(tl.float32)", "    tmp7 = tmp6.to(tl.float32)\n"
                                     "    tmp7 = tmp7 * 2.0"), LN, "assigned twice"),
    "a name the rewrite would give chunk 0": (edited("tmp7 = tmp6.to(tl.float32)", "tmp7 = tmp6.to(tl.float32)\n"
                                                     "    tmp0_c0 = tmp7"), LN, "names ending in _c0"),
    "a store that scatters a row to one address": (edited("tl.store(out_ptr0 + (x0), tmp8, None)",
                                                          "tl.store(out_ptr0 + (x0), tmp24, None)"), LN,
                                                   "disagree on varying"),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_must_not_fire(case):
    source, kernel, why = REFUSED[case]
    reason = loopable(source, kernel)
    assert reason is not None and why in reason, reason
    with pytest.raises(NotLoopable):
        rewrite(source, kernel, 64)


def test_an_in_place_row_reloaded_after_its_store_is_refused():
    # in_out_ptr0's row is stored in loop 0 (a level-0 store) and read again by loop 1
    text = edited("    tmp0 = tl.load(in_ptr0 + (r0_1 + 256*x0), None)\n",
                  "    tmp0 = tl.load(in_out_ptr0 + (r0_1 + 256*x0), None)\n"
                  "    tl.store(in_out_ptr0 + (r0_1 + 256*x0), tmp0 * 2.0, None)\n")
    text = text.replace("    tl.store(in_out_ptr0 + (x0), tmp18, None)\n", "")
    assert "loaded again after its store" in loopable(text, LN)


def test_a_pointer_kept_in_a_local_name_is_refused():
    # as above, the row's load through a local: the reload after the store must not go unseen
    text = edited("    tmp0 = tl.load(in_ptr0 + (r0_1 + 256*x0), None)\n",
                  "    p0 = in_out_ptr0 + (r0_1 + 256*x0)\n"
                  "    tmp0 = tl.load(p0, None)\n"
                  "    tl.store(in_out_ptr0 + (r0_1 + 256*x0), tmp0 * 2.0, None)\n")
    text = text.replace("    tl.store(in_out_ptr0 + (x0), tmp18, None)\n", "")
    assert "p0 is a pointer kept in a local name" in loopable(text, LN)
    stored = edited("    tl.store(out_ptr0 + (x0), tmp8, None)",
                    "    p1 = out_ptr0 + (x0)\n    tl.store(p1, tmp8, None)")
    assert "p1 is a pointer kept in a local name" in loopable(stored, LN)


def test_only_smaller_powers_of_two():
    source = LAYER_NORM.read_text()
    for block in (256, 512, 48, 0):
        with pytest.raises(NotLoopable, match="power of two below"):
            rewrite(source, LN, block)
    assert blocks(256) == [128, 64, 32] and blocks(64) == [32] and blocks(32) == []
    assert blocks(8192) == [4096, 2048, 1024]


# ---------------------------------------------------------------------------------- proposer

@pytest.fixture
def capture(tmp_path) -> Path:
    specs, errors = specs_from_modules([LAYER_NORM, POINTWISE], tmp_path, launch=False)
    assert errors == []
    return tmp_path


def test_proposer_halves_r0_block_one_step_at_a_time(capture):
    from tritune.capture.spec import read_launches

    specs = {s.kernel: s for s in read_launches(capture)}
    per, proposer = specs[LN], LoopedReductionProposer(str(capture))
    [first] = proposer.propose(per, [], limit=4)
    assert first.name == f"{NAME_PREFIX}128" and first.source == rewrite(LAYER_NORM.read_text(), LN, 128)
    assert not (first.options or first.constexprs or first.passes)
    [second] = proposer.propose(per, [Trial(first, True, 1.0)], limit=4)
    assert second.name == f"{NAME_PREFIX}64"
    assert proposer.propose(per, [Trial(first, False, None, "compile_error")], limit=4) == []
    assert proposer.propose(per, [], limit=0) == []
    assert proposer.propose(specs[kernel_of(POINTWISE)], [], limit=4) == []  # not a persistent reduction
    assert proposer.propose(dataclasses.replace(per, kind="jit"), [], limit=4) == []
    shutil.rmtree(capture / "sources")
    assert proposer.propose(per, [], limit=4) == []  # no source to rewrite: nothing, not a crash


def test_every_family_offers_something_for_a_persistent_reduction(capture):
    from tritune.capture.spec import read_launches
    from tritune.loop.families import Context, families_for
    from tritune.search import knobs

    per = next(s for s in read_launches(capture) if s.kernel == LN)
    assert {"XBLOCK", "num_warps", "num_stages", "maxnreg"} <= {k.name for k in knobs(per)}
    assert "R0_BLOCK" not in {k.name for k in knobs(per)}  # fixed in the body: only the rewrite moves it
    context = Context(per, [], root=str(capture), knob_roles=("num_stages", "maxnreg"))
    offered = {f.name: f.propose(context, 8) for f in families_for(per, root=str(capture))}
    assert {name for name, variants in offered.items() if variants} == {"launch-config", "passes", "cache-hints",
                                                                        "looped-reduction"}
    # Inductor's max-autotune configs come first (search.inductor_configs); once they are tried and
    # slower than the baseline, the descent from the baseline follows the roles
    launch = next(f for f in families_for(per, root=str(capture)) if f.name == "launch-config")
    slower = [Trial(v, True, 2.0) for v in offered["launch-config"]]
    after = launch.propose(dataclasses.replace(context, trials=slower, baseline_ms=1.0), 8)
    assert after[0].options.keys() == {"num_stages"} and not after[0].constexprs  # the roles asked for it first
    assert offered["cache-hints"][0].name.startswith("cache hints: ")
    assert all(v.knobs == ("persistent->looped", "R0_BLOCK") for v in offered["looped-reduction"])
