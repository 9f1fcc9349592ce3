"""The typed IR view: printed attributes, uses, dominance, and the walk/print pairing."""

from __future__ import annotations

import pytest
from triton._C.libtriton import ir

from conftest import F32, PTR, ttir
from tritune.ir import ModuleView, parse_module, printed


def test_printed_load_attributes_and_constants():
    text = f"""
    %0 = tt.load %7, %3, %cst evictionPolicy = evict_last : {PTR} loc(#loc1)
    %1 = tt.load %7 cacheModifier = cg : {PTR}
    %2 = tt.load %7 {{isVolatile = true}} : {PTR}
    %3 = tt.load %7 {{boundaryCheck = array<i32: 0, 1>, padding = 2 : i32}} : {PTR}
    %c = arith.constant dense<2.500000e-01> : {F32}
    %d = arith.constant dense<0x7F800000> : {F32}
    %e = arith.constant 3.000000e+00 : f16
    %f = arith.constant 7 : i32
    %g = arith.constant dense<0x3F80> : tensor<4xbf16>
"""
    attrs = printed.parse(text)
    assert [(a.cache, a.evict, a.volatile) for a in attrs.loads] == [
        (ir.CACHE_MODIFIER.NONE, ir.EVICTION_POLICY.EVICT_LAST, False),
        (ir.CACHE_MODIFIER.CG, ir.EVICTION_POLICY.NORMAL, False),
        (ir.CACHE_MODIFIER.NONE, ir.EVICTION_POLICY.NORMAL, True),
        (ir.CACHE_MODIFIER.NONE, ir.EVICTION_POLICY.NORMAL, False),
    ]
    assert attrs.loads[3].boundary_check == (0, 1) and attrs.loads[3].padding == 2
    values = [(c.value, c.element_type) if c else None for c in attrs.constants]
    assert values == [(0.25, "f32"), (float("inf"), "f32"), (3.0, "f16"), None, (1.0, "bf16")]


def test_uses_and_block_structure():
    view = ModuleView.build(parse_module(ttir(f"""
    %a = tt.load %p : {PTR}
    %b = arith.addf %a, %a : {F32}
    tt.store %q, %b : {PTR}""")))
    [load] = view.ops_named("tt.load")
    assert load.result.num_uses == 2  # both operands of the add
    [add] = view.ops_named("arith.addf")
    assert add.operands[0] is load.result and add.block is load.block
    func = view.ops_named("tt.func")[0]
    assert load.block.parent is func


def test_dominance_in_structured_control_flow():
    view = ModuleView.build(parse_module(ttir(f"""
    %a = tt.load %p : {PTR}
    %t = arith.constant true
    %r = scf.if %t -> ({F32}) {{
      %b = tt.load %q : {PTR}
      scf.yield %b : {F32}
    }} else {{
      %c = tt.load %p : {PTR}
      scf.yield %c : {F32}
    }}
    tt.store %q, %r : {PTR}""")))
    a, b, c = view.ops_named("tt.load")
    assert view.dominates(a, b) and view.dominates(a, c)
    assert not view.dominates(b, a) and not view.dominates(b, c) and not view.dominates(a, a)
    [if_op] = view.ops_named("scf.if")
    assert set(view.nested_ops(if_op)) >= {b, c}
    assert set(view.ops_between(a, b)) >= {b, c}  # the whole if: conservative and sound


def test_walk_and_print_disagreeing_is_an_error(monkeypatch):
    monkeypatch.setattr(printed, "parse", lambda text: printed.PrintedAttrs(loads=(), constants=()))
    module = parse_module(ttir(f"""
    %a = tt.load %p : {PTR}
    tt.store %q, %a : {PTR}"""))
    with pytest.raises(printed.PrintedIRError, match="1 / 0"):
        ModuleView.build(module)
