"""constant-division: division by a constant becomes multiplication by its reciprocal.

Rewrite (seed 003's instruction-selection peephole)::

    x / C  ->  x * (1 / C)

Exact when ``C`` is a power of two whose reciprocal is representable in the element type
(``1/C`` is then itself an exact power of two and ``x * 2^-k`` is the correctly rounded
``x / 2^k``): on by default. For any other finite non-zero constant ``1/C`` is rounded, so the
product can differ from the quotient in the last bit: fast-math only. Division by zero, inf or
NaN is never touched. Both ``arith.divf`` and ``tt.precise_divf`` are matched; the constant
must be the divisor and come from ``arith.constant`` (a scalar or a splat tensor).
"""

from __future__ import annotations

import math

from triton._C.libtriton import ir

from tritune.ir import ModuleView, Op, Pattern, PatternSet, Rewriter, apply_patterns

NAME = "constant-division"
EXACT = True  # by default; the non-power-of-two case runs only under fast-math
DIVISIONS = ("arith.divf", "tt.precise_divf")

# Smallest (subnormal) and largest binary exponent of a power of two each type can hold.
_POW2_EXPONENTS = {"f16": (-24, 15), "bf16": (-133, 127), "f32": (-149, 127), "f64": (-1074, 1023)}
_SCALAR = {"f16": "get_fp16", "bf16": "get_bf16", "f32": "get_fp32", "f64": "get_fp64"}


def exact_reciprocal(value: float, element_type: str) -> float | None:
    """``1/value`` if ``value`` is a power of two whose reciprocal the type holds exactly."""
    if not math.isfinite(value) or value == 0.0:
        return None
    mantissa, exponent = math.frexp(value)  # value = mantissa * 2**exponent, |mantissa| in [0.5, 1)
    if abs(mantissa) != 0.5:
        return None
    low, high = _POW2_EXPONENTS[element_type]
    reciprocal_exponent = 1 - exponent  # 1 / (0.5 * 2**e) = 2**(1 - e)
    if not low <= reciprocal_exponent <= high:
        return None
    return math.copysign(math.ldexp(1.0, reciprocal_exponent), value)


class DivideByConstant(Pattern):
    op_names = DIVISIONS
    name = NAME

    def __init__(self, fast_math: bool):
        self.fast_math = fast_math

    def match_and_rewrite(self, op: Op, view: ModuleView, rewriter: Rewriter) -> bool:
        dividend, divisor = op.operands
        constant = divisor.owner.constant if divisor.owner is not None else None
        if constant is None or constant.element_type not in _SCALAR:
            return False
        reciprocal = exact_reciprocal(constant.value, constant.element_type)
        if reciprocal is None:
            if not self.fast_math or not math.isfinite(constant.value) or constant.value == 0.0:
                return False
            reciprocal = 1.0 / constant.value  # rounded: fast-math
        builder = rewriter.insert_after(op)
        scalar = getattr(builder, _SCALAR[constant.element_type])(reciprocal)
        if divisor.type.startswith("tensor<"):
            scalar = builder.create_splat(divisor.handle.get_type(), scalar)
        product = builder.create_fmul(dividend.handle, scalar)  # x / C -> x * (1/C)
        rewriter.created(2)
        rewriter.replace(op.result, product)
        return True


def run(module: ir.module, *, fast_math: bool = False) -> int:
    """Rewrite divisions by constants; return the number rewritten."""
    return apply_patterns(module, PatternSet((DivideByConstant(fast_math),))).rewrites
