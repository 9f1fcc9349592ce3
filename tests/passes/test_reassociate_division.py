"""reassociate-division: Table II cases, chains, precise division stays precise, must-not-fire."""

from __future__ import annotations

from conftest import F32, PTR, count, ttir
from tritune.ir import ModuleView, parse_module
from tritune.passes import reassociate_division as rd

LOADS = f"""
    %a = tt.load %p : {PTR}
    %b = tt.load %q : {PTR}
    %c = arith.addf %a, %b : {F32}
    %d = arith.mulf %a, %b : {F32}"""


def run(body: str, fast_math: bool = True):
    module = parse_module(ttir(LOADS + body))
    changed = rd.run(module, fast_math=fast_math)
    assert module.verify()
    return module, ModuleView.build(module), changed


def stored(view: ModuleView):
    [store] = view.ops_named("tt.store")
    return store.operands[1].owner


def test_table2_case1_quotient_is_dividend():
    # (a / b) / c -> a / (b * c)
    _, view, changed = run(f"""
    %x = arith.divf %a, %b : {F32}
    %y = arith.divf %x, %c : {F32}
    tt.store %q, %y : {PTR}""")
    assert changed == 1
    div = stored(view)
    assert div.name == "arith.divf"
    a, product = div.operands
    assert a.owner.name == "tt.load" and product.owner.name == "arith.mulf"
    assert [v.owner.name for v in product.owner.operands] == ["tt.load", "arith.addf"]  # b * c
    assert len(view.ops_named("arith.divf")) == 1


def test_table2_case2_quotient_is_divisor():
    # c / (a / b) -> (b * c) / a
    _, view, changed = run(f"""
    %x = arith.divf %a, %b : {F32}
    %y = arith.divf %c, %x : {F32}
    tt.store %q, %y : {PTR}""")
    assert changed == 1
    div = stored(view)
    product, a = div.operands
    assert product.owner.name == "arith.mulf"
    assert a.owner.name == "tt.load"
    b, c = product.owner.operands
    assert (b.owner.name, c.owner.name) == ("tt.load", "arith.addf")
    assert a is not b


def test_chain_of_three_divisions_becomes_one():
    # ((a / b) / c) / d -> a / ((b * c) * d)
    _, view, changed = run(f"""
    %x = arith.divf %a, %b : {F32}
    %y = arith.divf %x, %c : {F32}
    %z = arith.divf %y, %d : {F32}
    tt.store %q, %z : {PTR}""")
    assert changed == 2
    assert len(view.ops_named("arith.divf")) == 1
    assert len(view.ops_named("arith.mulf")) == 3  # %d itself plus the two products


def test_precise_division_stays_precise():
    _, view, changed = run(f"""
    %x = tt.precise_divf %a, %b : {F32}
    %y = arith.divf %x, %c : {F32}
    tt.store %q, %y : {PTR}""")
    assert changed == 1
    assert stored(view).name == "tt.precise_divf"
    assert not view.ops_named("arith.divf")


def test_inner_division_with_two_users_is_left_alone():
    _, view, changed = run(f"""
    %x = arith.divf %a, %b : {F32}
    %y = arith.divf %x, %c : {F32}
    %s = arith.addf %x, %y : {F32}
    tt.store %q, %s : {PTR}""")
    assert changed == 0
    assert len(view.ops_named("arith.divf")) == 2


def test_quotient_divided_by_itself_is_left_alone():
    # x / x uses the inner division twice from one op
    _, view, changed = run(f"""
    %x = arith.divf %a, %b : {F32}
    %y = arith.divf %x, %x : {F32}
    tt.store %q, %y : {PTR}""")
    assert changed == 0


def test_off_without_fast_math():
    module, view, changed = run(f"""
    %x = arith.divf %a, %b : {F32}
    %y = arith.divf %x, %c : {F32}
    tt.store %q, %y : {PTR}""", fast_math=False)
    assert changed == 0
    assert count(module, "arith.divf") == 2
