"""constant-division: exact for powers of two by default, other constants only under fast-math."""

from __future__ import annotations

import math

import pytest

from conftest import F32, PTR, ttir
from tritune.ir import ModuleView, parse_module
from tritune.passes import constant_division as cd


def run(divisor: str, fast_math: bool = False, op: str = "arith.divf", ty: str = F32):
    module = parse_module(ttir(f"""
    %a = tt.load %p : {PTR}
    %c = arith.constant dense<{divisor}> : {ty}
    %y = {op} %a, %c : {ty}
    tt.store %q, %y : {PTR}"""))
    changed = cd.run(module, fast_math=fast_math)
    assert module.verify()
    return ModuleView.build(module), changed


def multiplier(view: ModuleView) -> float:
    [mul] = view.ops_named("arith.mulf")
    return mul.operands[1].owner.constant.value


@pytest.mark.parametrize("divisor, reciprocal", [
    ("2.000000e+00", 0.5), ("-8.000000e+00", -0.125), ("2.500000e-01", 4.0),
])
def test_power_of_two_is_exact_and_on_by_default(divisor, reciprocal):
    view, changed = run(divisor)
    assert changed == 1
    assert not view.ops_named("arith.divf")
    assert multiplier(view) == reciprocal


def test_division_by_one_disappears():
    # x / 1 -> x * 1 -> x (the canonicalizer folds the multiplication)
    view, changed = run("1.000000e+00")
    assert changed == 1
    assert not view.ops_named("arith.divf") and not view.ops_named("arith.mulf")


def test_precise_division_by_power_of_two():
    view, changed = run("4.000000e+00", op="tt.precise_divf")
    assert changed == 1 and not view.ops_named("tt.precise_divf")


@pytest.mark.parametrize("divisor", ["3.000000e+00", "0.000000e+00", "0x7F800000", "0x7FC00000"])
def test_not_without_fast_math(divisor):
    view, changed = run(divisor)
    assert changed == 0
    assert len(view.ops_named("arith.divf")) == 1


def test_non_power_of_two_under_fast_math():
    view, changed = run("3.000000e+00", fast_math=True)
    assert changed == 1
    assert multiplier(view) == pytest.approx(1 / 3, rel=1e-7)


@pytest.mark.parametrize("divisor", ["0.000000e+00", "0x7F800000", "0x7FC00000"])
def test_zero_inf_nan_never(divisor):
    _, changed = run(divisor, fast_math=True)
    assert changed == 0


@pytest.mark.parametrize("value, ty, expected", [
    (2.0 ** -126, "f32", 2.0 ** 126),
    (2.0 ** -127, "f32", 2.0 ** 127),  # a subnormal divisor, normal reciprocal
    (2.0 ** 127, "f32", 2.0 ** -127),  # 2^-127 is a subnormal f32, still exact
    (2.0 ** -149, "f32", None),        # 2^149 overflows f32
    (2.0 ** 15, "f16", 2.0 ** -15),
    (2.0 ** -15, "f16", 2.0 ** 15),
    (2.0 ** -16, "f16", None),         # 2^16 overflows f16
    (3.0, "f32", None),
    (math.inf, "f32", None),
])
def test_exact_reciprocal(value, ty, expected):
    assert cd.exact_reciprocal(value, ty) == expected
