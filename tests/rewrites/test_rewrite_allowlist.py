"""What tritune's own source rewrite rules emit passes the allowlist a model's code must pass
(``allowlist.sandbox.check_variant_source``, the captured file as context): every rule, on every kernel
of the suite, Inductor's examples and the rules' own test kernels, at its default parameters and
at each value of its knobs. Rules keep their own path (a rule's variant is not checked where it is
imported); this proves that path could take the check too."""
from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

import test_rewrite_broadcast_sum_to_dot as dot_tests
import test_rewrite_hoist_invariant_load as hoist_tests
import test_rewrite_persistent_grid as persistent_tests
import test_rewrite_pipeline_loop as pipeline_tests
from tritune.allowlist.sandbox import Unsafe, check_variant_source
from tritune.rewrites import KernelSource, NotRewritable, Rewrite
from tritune.rewrites.applicable import applicable, rules

REPO = Path(__file__).resolve().parents[2]
# the rules' own test kernels (each rule fires on its own), a few suite kernels of each shape
# (GEMM, row reductions, logits) and Inductor's: every rule runs on every kernel of these (a rule
# costs ~0.1 s a kernel; the whole suite would take a minute)
FILES = {"broadcast_sum_to_dot": dot_tests.KERNELS, "hoist_invariant_load": hoist_tests.KERNELS,
         "persistent_grid": persistent_tests.KERNELS, "pipeline_loop": pipeline_tests.POSITIVE,
         "pipeline_loop_descriptors": pipeline_tests.DESCRIPTORS}
FILES.update({path.stem: path.read_text() for path in [
    *(REPO / "benchmarks" / "suite" / "kernels" / f"{name}.py" for name in ("matmul", "norm_fused")),
    *(REPO / "examples" / "inductor" / f"{name}.py" for name in ("triton_poi_fused_add_gelu_mul_0",
                                                                 "triton_red_fused_native_layer_norm_0"))]})


def kernels(text: str) -> list[str]:
    return [n.name for n in ast.parse(text).body if isinstance(n, ast.FunctionDef) and n.decorator_list]


def rewrites_of(text: str) -> list[tuple[str, Rewrite]]:
    """Every rewrite the rules make of each kernel of ``text`` at their defaults, and the first
    rewrite of each rule with each of its knobs at the ends of its values."""
    found, moved = [], set()
    for kernel in kernels(text):
        for rewrite in applicable(text, kernel, noalias=True).rewrites:
            found.append((kernel, rewrite))
            if rewrite.rule in moved:
                continue
            moved.add(rewrite.rule)
            for knob in rewrite.knobs:
                for value in {knob.values[0], knob.values[-1]} - {knob.default}:
                    try:
                        found.append((kernel, rules()[rewrite.rule].apply(
                            KernelSource.parse(text, kernel, noalias=True), {**rewrite.params, knob.name: value})))
                    except NotRewritable:
                        continue
    return found


@functools.cache
def rewrites(name: str) -> list[tuple[str, Rewrite]]:
    return rewrites_of(FILES[name])


@pytest.mark.parametrize("name", sorted(FILES))
def test_every_rules_rewrite_passes_the_allowlist(name):
    text = FILES[name]
    for kernel, rewrite in rewrites(name):
        try:
            check_variant_source(text, rewrite.source, kernel)
        except Unsafe as exc:
            pytest.fail(f"{name}: {kernel}: {rewrite.name}: {exc}")


def test_the_rules_fire_on_these_kernels():
    """The test above is not vacuous: every rule rewrites some of these kernels, many times over,
    knobs moved included."""
    made = [rewrite for name in FILES for _, rewrite in rewrites(name)]
    assert {rewrite.rule for rewrite in made} == set(rules())
    assert len(made) >= 100 and sum(1 for r in made if any(r.params.get(k.name) != k.default for k in r.knobs)) >= 5


def test_a_rewrite_that_slipped_something_in_would_be_refused():
    text = FILES["pipeline_loop"]
    kernel, rewrite = rewrites("pipeline_loop")[0]
    planted = rewrite.source.replace("tl.load(", "tl.core.inspect.getsource(", 1)
    assert planted != rewrite.source
    with pytest.raises(Unsafe, match="tl.core is not allowed"):
        check_variant_source(text, planted, kernel)
