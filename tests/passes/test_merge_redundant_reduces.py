"""merge-redundant-reduces, and Table I end to end: loads merged, then the reduces they feed."""

from __future__ import annotations

from conftest import F32, PTR, count, ttir
from tritune.ir import parse_module
from tritune.passes import merge_redundant_loads, merge_redundant_reduces, run_pipeline


def reduce_of(name: str, operand: str) -> str:
    return f"""
    %{name} = "tt.reduce"({operand}) <{{axis = 0 : i32}}> ({{
    ^bb0(%x{name}: f32, %y{name}: f32):
      %r{name} = arith.addf %x{name}, %y{name} : f32
      tt.reduce.return %r{name} : f32
    }}) : ({F32}) -> f32"""


TABLE_1 = f"""
    %2 = tt.load %p evictionPolicy = evict_last : {PTR}
    %3 = tt.load %p evictionPolicy = evict_first : {PTR}
{reduce_of("6", "%2")}
{reduce_of("7", "%3")}
    %s = arith.addf %6, %7 : f32
    %t = tt.splat %s : f32 -> {F32}
    tt.store %q, %t : {PTR}"""


def test_table1_reduces_stay_apart_while_loads_differ():
    module = parse_module(ttir(TABLE_1))
    assert merge_redundant_reduces.run(module) == 0
    assert count(module, "tt.reduce") == 2


def test_table1_end_to_end():
    module = parse_module(ttir(TABLE_1))
    result = run_pipeline(module, ["merge-redundant-loads", "merge-redundant-reduces"], verify=True)
    assert result.counts == {"merge-redundant-loads": 1, "merge-redundant-reduces": 1}
    assert count(module, "tt.load") == 1 and count(module, "tt.reduce") == 1


def test_different_combine_regions_do_not_merge():
    body = TABLE_1.replace("%r7 = arith.addf", "%r7 = arith.maxnumf")
    module = parse_module(ttir(body))
    merge_redundant_loads.run(module)
    assert merge_redundant_reduces.run(module) == 0
    assert count(module, "tt.reduce") == 2
