"""merge-redundant-loads: golden IR, legality cases that must not fire, ptxas-legal attributes."""

from __future__ import annotations

import pytest
from triton._C.libtriton import ir

from conftest import F32, PTR, count, ttir
from tritune.ir import ModuleView, parse_module
from tritune.passes import merge_redundant_loads as mrl

E = ir.EVICTION_POLICY
C = ir.CACHE_MODIFIER


ARGS_N = "%arg0: !tt.ptr<f32>, %arg1: !tt.ptr<f32>, %n: i32"


def run(body: str, args: str | None = None):
    module = parse_module(ttir(body) if args is None else ttir(body, args))
    removed = mrl.run(module)
    assert module.verify()
    return module, removed


def loads(module):
    return ModuleView.build(module).ops_named("tt.load")


def store_sum(a="%a", b="%b"):
    return f"""    %s = arith.addf {a}, {b} : {F32}
    tt.store %q, %s : {PTR}"""


def test_table1_loads_differing_in_eviction_policy_merge():
    module, removed = run(f"""
    %a = tt.load %p evictionPolicy = evict_last : {PTR}
    %b = tt.load %p evictionPolicy = evict_first : {PTR}
{store_sum()}""")
    assert removed == 1
    [kept] = loads(module)
    # the merged load is the last read of that data: it takes the later load's hint
    assert kept.load.evict == E.EVICT_FIRST
    [add] = ModuleView.build(module).ops_named("arith.addf")
    assert add.operands[0] is add.operands[1]


def test_three_loads_merge_into_one_with_masks_and_other():
    module, removed = run(f"""
    %nn = tt.splat %n : i32 -> tensor<128xi32>
    %m = arith.cmpi slt, %offs, %nn : tensor<128xi32>
    %z = arith.constant dense<0.000000e+00> : {F32}
    %a = tt.load %p, %m, %z evictionPolicy = evict_last : {PTR}
    %b = tt.load %p, %m, %z cacheModifier = ca : {PTR}
    %c = tt.load %p, %m, %z evictionPolicy = evict_first : {PTR}
    %s0 = arith.addf %a, %b : {F32}
    %s = arith.addf %s0, %c : {F32}
    tt.store %q, %s : {PTR}""", args=ARGS_N)
    assert removed == 2
    [kept] = loads(module)
    assert len(kept.operands) == 3  # pointer, mask and other survive the rebuild
    assert (kept.load.cache, kept.load.evict) == (C.NONE, E.EVICT_FIRST)


@pytest.mark.parametrize("between", [
    pytest.param(f"tt.store %p, %a : {PTR}", id="store-same-pointer"),
    pytest.param(f"tt.store %q, %a : {PTR}", id="store-other-pointer-may-alias"),
    pytest.param(f"%r = tt.atomic_rmw fadd, acq_rel, gpu, %q, %a : ({PTR}, {F32}) -> {F32}",
                 id="atomic"),
    pytest.param("gpu.barrier", id="barrier"),
    pytest.param(f"%v = tt.load %q {{isVolatile = true}} : {PTR}", id="volatile-load-between"),
])
def test_write_between_blocks_the_merge(between):
    module, removed = run(f"""
    %a = tt.load %p evictionPolicy = evict_last : {PTR}
    {between}
    %b = tt.load %p evictionPolicy = evict_first : {PTR}
{store_sum()}""")
    assert removed == 0
    assert len(loads(module)) >= 2


def test_volatile_loads_never_merge():
    module, removed = run(f"""
    %a = tt.load %p {{isVolatile = true}} : {PTR}
    %b = tt.load %p {{isVolatile = true}} : {PTR}
{store_sum()}""")
    assert removed == 0
    assert len(loads(module)) == 2


@pytest.mark.parametrize("second", [
    pytest.param(f"%b = tt.load %q evictionPolicy = evict_first : {PTR}", id="other-pointer"),
    pytest.param(f"%m = arith.constant dense<true> : tensor<128xi1>\n"
                 f"    %b = tt.load %p, %m evictionPolicy = evict_first : {PTR}", id="other-mask"),
])
def test_different_operands_do_not_merge(second):
    module, removed = run(f"""
    %a = tt.load %p evictionPolicy = evict_last : {PTR}
    {second}
{store_sum()}""")
    assert removed == 0


def test_store_later_in_loop_body_blocks_merge_across_back_edge():
    # %a before the loop, %b inside it; the store after %b runs before %b's next iteration.
    module, removed = run(f"""
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %a = tt.load %p evictionPolicy = evict_last : {PTR}
    scf.for %i = %c0 to %c4 step %c1  : i32 {{
      %b = tt.load %p evictionPolicy = evict_first : {PTR}
      %s = arith.addf %a, %b : {F32}
      tt.store %p, %s : {PTR}
    }}""")
    assert removed == 0


def test_load_hoisted_into_loop_without_writes_merges():
    module, removed = run(f"""
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32
    %z = arith.constant dense<0.000000e+00> : {F32}
    %a = tt.load %p evictionPolicy = evict_last : {PTR}
    %acc = scf.for %i = %c0 to %c4 step %c1 iter_args(%x = %z) -> ({F32}) : i32 {{
      %b = tt.load %p evictionPolicy = evict_first : {PTR}
      %s = arith.addf %x, %b : {F32}
      scf.yield %s : {F32}
    }}
{store_sum("%a", "%acc")}""")
    assert removed == 1


def test_loads_in_sibling_branches_do_not_merge():
    # neither branch dominates the other
    module, removed = run(f"""
    %t = arith.constant true
    %r = scf.if %t -> ({F32}) {{
      %a = tt.load %p evictionPolicy = evict_last : {PTR}
      scf.yield %a : {F32}
    }} else {{
      %b = tt.load %p evictionPolicy = evict_first : {PTR}
      scf.yield %b : {F32}
    }}
    tt.store %q, %r : {PTR}""")
    assert removed == 0


@pytest.mark.parametrize("first, second, expected", [
    ((C.CG, E.NORMAL), (C.CG, E.EVICT_FIRST), (C.CG, E.NORMAL)),
    ((C.CG, E.NORMAL), (C.CG, E.EVICT_LAST), (C.CG, E.NORMAL)),
    ((C.NONE, E.EVICT_LAST), (C.NONE, E.EVICT_FIRST), (C.NONE, E.EVICT_FIRST)),
    ((C.CA, E.EVICT_LAST), (C.CG, E.EVICT_FIRST), (C.NONE, E.EVICT_FIRST)),
])
def test_merged_attributes(first, second, expected):
    from tritune.ir.printed import LoadAttrs

    merged = mrl.merged_attrs(LoadAttrs(*first), LoadAttrs(*second))
    assert (merged.cache, merged.evict) == expected


# ------------------------------------------------------------ no-alias mode (exact-noalias)

def run_noalias(body: str):
    module = parse_module(ttir(body))
    removed = mrl.run(module, noalias=True)
    assert module.verify()
    return module, removed


def around(between: str) -> str:
    """Two loads of %p (arguments 0) with ``between`` in the middle."""
    return f"""
    %a = tt.load %p evictionPolicy = evict_last : {PTR}
    {between}
    %b = tt.load %p evictionPolicy = evict_first : {PTR}
{store_sum()}"""


LOOP = """
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c4 = arith.constant 4 : i32"""


def test_noalias_merges_across_a_store_through_another_argument_and_normal_mode_does_not():
    # Inductor's reduction with one iteration: a store through out_ptr0 between loads of in_out_ptr0
    body = around(f"tt.store %q, %a : {PTR}")
    assert run(body)[1] == 0
    module, removed = run_noalias(body)
    assert removed == 1 and len(loads(module)) == 1
    assert count(module, "tt.store") == 2  # the store stays, only the second load goes


def test_noalias_follows_a_loop_carried_pointer_to_its_argument():
    body = f"""{LOOP}
    %a = tt.load %p evictionPolicy = evict_last : {PTR}
    %end = scf.for %i = %c0 to %c4 step %c1 iter_args(%ptr = %q) -> ({PTR}) : i32 {{
      tt.store %ptr, %a : {PTR}
      %next = tt.addptr %ptr, %offs : {PTR}, tensor<128xi32>
      scf.yield %next : {PTR}
    }}
    %b = tt.load %p evictionPolicy = evict_first : {PTR}
{store_sum()}"""
    assert run(body)[1] == 0 and run_noalias(body)[1] == 1
    assert run_noalias(body.replace("iter_args(%ptr = %q)", "iter_args(%ptr = %p)"))[1] == 0  # walks %p itself


@pytest.mark.parametrize("between", [
    pytest.param(f"tt.store %p, %a : {PTR}", id="store-same-argument"),
    pytest.param(f"%p2 = tt.addptr %p, %offs : {PTR}, tensor<128xi32>\n    tt.store %p2, %a : {PTR}",
                 id="store-other-offsets-same-argument"),
    pytest.param(f"%c = arith.constant dense<true> : tensor<128xi1>\n"
                 f"    %r = arith.select %c, %q, %p : tensor<128xi1>, {PTR}\n    tt.store %r, %a : {PTR}",
                 id="store-through-either-argument"),
    pytest.param(f"%iv = arith.constant dense<0> : tensor<128xi64>\n"
                 f"    %ip = tt.int_to_ptr %iv : tensor<128xi64> -> {PTR}\n    tt.store %ip, %a : {PTR}",
                 id="store-through-a-pointer-of-unknown-origin"),
    pytest.param(f"%r = tt.atomic_rmw fadd, acq_rel, gpu, %q, %a : ({PTR}, {F32}) -> {F32}",
                 id="atomic-through-another-argument"),
    pytest.param("gpu.barrier", id="barrier"),
    pytest.param(f"%v = tt.load %q {{isVolatile = true}} : {PTR}", id="volatile-load"),
])
def test_noalias_still_blocks_what_may_write_the_loaded_memory_or_order_it(between):
    module, removed = run_noalias(around(between))
    assert removed == 0 and len(loads(module)) >= 2


def test_noalias_reaches_the_pass_only_through_the_pass_set():
    from tritune.passes import resolve, run_pipeline

    assert resolve(["exact-noalias"])[-1] == "noalias" and "noalias" not in resolve(["exact"])
    body = around(f"tt.store %q, %a : {PTR}")
    assert run_pipeline(parse_module(ttir(body)), ["exact"]).counts["merge-redundant-loads"] == 0
    result = run_pipeline(parse_module(ttir(body)), ["exact-noalias"])
    assert result.counts["merge-redundant-loads"] == 1 and "noalias" not in result.counts
