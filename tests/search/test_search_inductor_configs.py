"""Inductor's max-autotune configs as the config search's seeds, on hand-written Inductor modules.

The expected lists come from the installed Inductor, called here on the same values the module's
decorator is written from: a torch that changes its heuristics changes both sides, never the
test's meaning (every max-autotune config is proposed, in Inductor's order, before the descent).
"""

from __future__ import annotations

from pathlib import Path

import pytest

torch = pytest.importorskip("torch")

from torch._inductor.runtime import triton_heuristics  # noqa: E402
from torch._inductor.runtime.hints import AutotuneHint, DeviceProperties, ReductionHint, TileHint  # noqa: E402

from tritune.model.launch import ArgSpec, LaunchSpec  # noqa: E402
from tritune.model.trial import Trial  # noqa: E402
from tritune.search import LaunchConfigSearch, config_of, knobs
from tritune.search.family import Context  # noqa: E402
from tritune.search.inductor_configs import NoConfigs, max_autotune_configs, seeds  # noqa: E402
from tritune.search.proposers import variant_of  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
EXAMPLES, HARVESTED = REPO / "examples" / "inductor", REPO / "examples" / "inductor_harvested"
H100 = dict(type="cuda", index=0, multi_processor_count=132, cc=90, major=9, regs_per_multiprocessor=65536,
            max_threads_per_multi_processor=2048, max_threads_per_block=1024, warp_size=32)
DEVICE = DeviceProperties(**{k: v for k, v in H100.items() if k in DeviceProperties._fields})
SOURCE = """import triton
import triton.language as tl
from torch._inductor.runtime import triton_helpers, triton_heuristics
from torch._inductor.runtime.hints import AutotuneHint, ReductionHint, TileHint, DeviceProperties

@triton_heuristics.{heuristic}(
    size_hints={size_hints!r},
    {hint}filename=__file__,
    triton_meta={triton_meta!r},
    inductor_meta={inductor_meta!r},
)
@triton.jit
def {kernel}({params}):
    pass
"""
# (XBLOCK, R0_BLOCK, warps, stages) as Inductor's default mode launches each case on the H100
# (benchmarks/results/generate/softmax/kernel.py, torch 2.11): the captured config
SOFTMAX_RED = ("triton_red_fused__softmax_0", {"x": 8192, "r0_": 2048}, {"XBLOCK": 2, "R0_BLOCK": 2048}, 16)
SOFTMAX_PER = ("triton_per_fused__softmax_0", {"x": 2048, "r0_": 1024}, {"XBLOCK": 1}, 1)
POINTWISE = ("triton_poi_fused_mul_silu_0", {"x": 16 * 512 * 2048}, {"XBLOCK": 1024}, 4)


def heuristic_of(kernel: str) -> str:
    return {"red": "reduction", "per": "persistent_reduction", "poi": "pointwise"}[kernel.split("_")[1]]


def case(tmp_path, kernel, size_hints, constexprs, warps, meta=None, hint="INNER", **changes):
    """(spec, source text, the decorator's arguments) of a one-kernel Inductor module in fp16."""
    scalars = ["xnumel", *(["r0_numel"] if "r0_" in size_hints else [])]
    signature = {"in_ptr0": "*fp16", "out_ptr0": "*fp16", **{n: "i32" for n in scalars},
                 **{n: "constexpr" for n in constexprs}}
    triton_meta = {"signature": signature, "device": DEVICE, "constants": {}}
    inductor_meta = {"grid_type": "Grid1D", "num_load": 2, "num_reduction": 2, "max_autotune": False,
                     "max_autotune_pointwise": False, "autotune_pointwise": True, **(meta or {})}
    heuristic = heuristic_of(kernel)
    params = ", ".join(["in_ptr0", "out_ptr0", *scalars, *(f"{n}: tl.constexpr" for n in constexprs)])
    text = SOURCE.format(heuristic=heuristic, size_hints=size_hints, triton_meta=triton_meta,
                         inductor_meta=inductor_meta, kernel=kernel, params=params,
                         hint=f"reduction_hint=ReductionHint.{hint},\n    " if heuristic != "pointwise" else "")
    (tmp_path / "sources").mkdir(exist_ok=True)
    (tmp_path / "sources" / "k.py").write_text(text)
    xnumel = size_hints["x"]
    numels = {"xnumel": xnumel, "r0_numel": size_hints.get("r0_")}
    args = [ArgSpec("in_ptr0", "tensor", shape=[xnumel], stride=[1], dtype="float16"),
            ArgSpec("out_ptr0", "tensor", shape=[xnumel], stride=[1], dtype="float16"),
            *(ArgSpec(n, "scalar", value=numels[n], type="int") for n in scalars),
            *(ArgSpec(n, "constexpr") for n in constexprs)]
    fields = dict(kernel=kernel, kind="inductor", module="k", source_file="k.py", source="sources/k.py",
                  source_hash="0" * 64, args=args, constexprs=dict(constexprs),
                  options={"num_warps": warps, "num_stages": 1}, grid=[xnumel // constexprs["XBLOCK"]],
                  grid_rule={"kind": "inductor", "grid_type": "Grid1D", "scalars": {"xnumel": xnumel}})
    fields.update(changes)
    arguments = dict(size_hints=dict(size_hints), triton_meta=triton_meta, inductor_meta=inductor_meta)
    if heuristic != "pointwise":
        arguments["reduction_hint"] = getattr(ReductionHint, hint)
    return LaunchSpec(**fields), text, arguments


def inductor_max_autotune(heuristic: str, arguments: dict) -> list[dict]:
    """What Inductor's own heuristic gives with max-autotune on, as knob values."""
    arguments = {**arguments, "size_hints": dict(arguments["size_hints"]),
                 "inductor_meta": {**arguments["inductor_meta"], "max_autotune": True}}
    configs = getattr(triton_heuristics, heuristic)(**arguments, return_configs=True)
    return [{**c.kwargs, "num_warps": c.num_warps, "num_stages": c.num_stages} for c in configs]


def proposed(spec, tmp_path, trials=(), limit=24, baseline_ms=1.0) -> list[dict]:
    context = Context(spec, list(trials), root=str(tmp_path), baseline_ms=baseline_ms)
    return [config_of(spec, v) for v in LaunchConfigSearch().propose_in(context, limit)]


def full(spec, config: dict) -> dict:
    """``config`` over the captured launch's value of every knob."""
    return {**{k.name: k.current for k in knobs(spec)}, **config}


@pytest.mark.parametrize("example", [SOFTMAX_RED, SOFTMAX_PER, POINTWISE], ids=["red", "per", "poi"])
def test_every_max_autotune_config_comes_first_in_inductors_order(tmp_path, example):
    spec, text, arguments = case(tmp_path, *example)
    expected = [full(spec, c) for c in inductor_max_autotune(heuristic_of(spec.kernel), arguments)]
    captured = full(spec, {})
    assert max_autotune_configs(text, spec.kernel) == inductor_max_autotune(heuristic_of(spec.kernel), arguments)
    new = [c for c in expected if c != captured]
    assert new, "max-autotune adds nothing here: the test could not fail"
    assert proposed(spec, tmp_path)[:len(new)] == new


def test_softmax_looped_reduction_gets_configs_a_descent_reaches_late(tmp_path):
    # the finding of 2026-11-26: max-autotune's kernel for softmax fp16 (16, 512, 2048) ran 13%
    # faster than the default; most of its configs move XBLOCK, R0_BLOCK and warps at once
    spec, _, arguments = case(tmp_path, *SOFTMAX_RED)
    captured = full(spec, {})
    expected = [full(spec, c) for c in inductor_max_autotune("reduction", arguments)]
    assert captured in expected  # the default mode's config is one of them
    far = [c for c in expected if sum(c[k] != captured[k] for k in c) > 1]
    assert len(far) >= 2
    first = proposed(spec, tmp_path, limit=len(expected) - 1)
    assert all(c in first for c in far)


def test_the_descent_walks_from_the_fastest_seed_or_from_the_baseline(tmp_path):
    spec, _, _ = case(tmp_path, *SOFTMAX_RED)
    first = LaunchConfigSearch().propose_in(Context(spec, [], root=str(tmp_path), baseline_ms=1.0), 24)
    slower = [Trial(v, True, 2.0) for v in first]
    after = proposed(spec, tmp_path, slower)
    assert after and all(c["XBLOCK"] in (1, 4) and c["R0_BLOCK"] == 2048 for c in after)  # XBLOCK 2 +- 1 step
    faster = list(slower)
    faster[1] = Trial(first[1], True, 0.5)
    best = config_of(spec, first[1])
    after = proposed(spec, tmp_path, faster)
    assert after and all(sum(c[k] != best[k] for k in best) == 1 for c in after)  # one step from the seed


def test_a_seed_over_a_resource_ceiling_is_not_proposed(tmp_path):
    spec, _, arguments = case(tmp_path, *SOFTMAX_RED)
    expected = [full(spec, c) for c in inductor_max_autotune("reduction", arguments)]
    big = max((c for c in expected if c["XBLOCK"] > 2), key=lambda c: c["XBLOCK"])
    oom = Trial(variant_of(spec, {**full(spec, {}), "XBLOCK": big["XBLOCK"]}), False, failure="compile_error",
                message="OutOfResources: out of resource: shared memory, Required: 262144, Hardware limit: 232448")
    left = proposed(spec, tmp_path, [oom])
    assert left and not any(c["XBLOCK"] >= big["XBLOCK"] for c in left)


def test_no_seeds_for_a_kernel_compiled_with_max_autotune(tmp_path):
    spec, text, _ = case(tmp_path, *SOFTMAX_RED, meta={"max_autotune": True})
    assert max_autotune_configs(text, spec.kernel) == [] and seeds(spec, text) == []
    assert proposed(spec, tmp_path) == [config_of(spec, v) for v in LaunchConfigSearch().propose(spec, [], 24)]


def test_a_decorator_it_cannot_read_gives_no_seeds_and_says_why(tmp_path):
    spec, text, _ = case(tmp_path, *SOFTMAX_RED)
    unread = text.replace("size_hints={", "size_hints=hints_of(), unused={")
    with pytest.raises(NoConfigs, match=r"cannot read hints_of\(\)"):
        max_autotune_configs(unread, spec.kernel)
    assert seeds(spec, unread) == []
    with pytest.raises(NoConfigs, match="no @triton_heuristics decorator"):
        max_autotune_configs("import triton\n@triton.jit\ndef k(x):\n    pass\n", "k")
    with pytest.raises(NoConfigs, match="no function"):
        max_autotune_configs(text, "other_kernel")
    refused = text.replace("size_hints={'x': 8192, 'r0_': 2048}", "size_hints={'y': 8192, 'r0_': 2048}")
    with pytest.raises(NoConfigs, match=r"Inductor's reduction\(\) gave no configs"):
        max_autotune_configs(refused, spec.kernel)


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("triton_*.py")) + sorted(HARVESTED.glob("*.py")),
                         ids=lambda p: p.stem[-40:])
def test_inductors_own_modules_are_read(path):
    # decorators Inductor wrote (torch 2.11, H100): tuple keys in triton_meta's configs, set(),
    # DeviceProperties(...), the hint enums; what is read is what Inductor evaluates on import
    text = path.read_text()
    kernel = next(line.split("(")[0][4:] for line in text.splitlines() if line.startswith("def triton_"))
    namespace = {"ReductionHint": ReductionHint, "TileHint": TileHint, "AutotuneHint": AutotuneHint,
                 "DeviceProperties": DeviceProperties, "__file__": str(path)}
    call = text[text.index("@triton_heuristics.") + len("@triton_heuristics."):text.index("\n@triton.jit")]
    heuristic, arguments = call.split("(", 1)[0], eval("dict(" + call.split("(", 1)[1], namespace)  # noqa: S307
    arguments.pop("filename")
    assert max_autotune_configs(text, kernel) == inductor_max_autotune(heuristic, arguments) != []


def test_a_config_on_a_constexpr_that_is_no_knob_is_left_out(tmp_path):
    spec, text, _ = case(tmp_path, *SOFTMAX_RED, extra={"grid_unexplained": ["XBLOCK"]})
    assert "XBLOCK" not in {k.name for k in knobs(spec)}
    assert max_autotune_configs(text, spec.kernel) and seeds(spec, text) == []


def test_not_inductor_or_no_source_no_seeds(tmp_path):
    spec, text, _ = case(tmp_path, *SOFTMAX_RED)
    assert seeds(spec, None) == []
    assert seeds(LaunchSpec(**{**spec.__dict__, "kind": "jit"}), text) == []


def test_inductor_blocks_go_down_to_one(tmp_path):
    spec, _, _ = case(tmp_path, *SOFTMAX_RED)
    found = {k.name: k for k in knobs(spec)}
    assert found["XBLOCK"].neighbours(2) == [1, 4]  # the ladder once started at 16: 2 -> 16 only
    assert found["R0_BLOCK"].values[0] == 1 and found["R0_BLOCK"].values[-1] == 2048


def test_a_round_is_seeded_when_it_tries_one_of_the_max_autotune_configs(tmp_path):
    """``Round.seeded`` (the loop's ``_seeded``): a round with a seed is not a flat one; the
    captured config and a descent step that is no seed do not make it seeded."""
    from tritune.loop.families import Family
    from tritune.loop.kernel import _seeded

    spec, _, arguments = case(tmp_path, *SOFTMAX_RED)
    context = Context(spec, [], root=str(tmp_path), baseline_ms=1.0)
    family = Family(LaunchConfigSearch.name, LaunchConfigSearch(), lambda v: "tolerance")
    other = Family("cache-hints", LaunchConfigSearch(), lambda v: "tolerance")
    captured = full(spec, {})
    seed = next(full(spec, c) for c in inductor_max_autotune("reduction", arguments) if full(spec, c) != captured)
    step = {**captured, "XBLOCK": 4}  # a descent neighbour of XBLOCK=2, no max-autotune config
    assert step not in [full(spec, c) for c in inductor_max_autotune("reduction", arguments)]
    assert _seeded(spec, context, [(variant_of(spec, seed), family)])
    assert not _seeded(spec, context, [(variant_of(spec, step), family)])
    assert not _seeded(spec, context, [(variant_of(spec, seed), other)])
    unseeded = Context(LaunchSpec(**{**spec.__dict__, "kind": "jit"}), [], root=str(tmp_path), baseline_ms=1.0)
    assert not _seeded(unseeded.spec, unseeded, [(variant_of(spec, seed), family)])
