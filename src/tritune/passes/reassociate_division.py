"""reassociate-division (fast-math, opt-in): a chain of divisions becomes one division.

Rewrites (seed 000, Table II), when the inner division's result has exactly one use::

    case 1:  (a / b) / c  ->  a / (b * c)
    case 2:  c / (a / b)  ->  (b * c) / a

Longer chains fold one link at a time: ``((a / b) / c) / d -> (a / (b * c)) / d -> a / ((b * c) * d)``.
Both ``arith.divf`` (which Triton lowers to the approximate ``div.full.f32``) and the precise
``tt.precise_divf`` (``div_rn``) are matched; if either division of a pair is precise, the new
division is precise, so a precise kernel stays precise.

Legal when the inner division has one use (otherwise its result is still needed and the rewrite
adds work) and, as a value, only under fast-math: ``b * c`` rounds once more and can overflow or
underflow where ``a / b / c`` does not, so results differ in the last bits (and at the extremes of
the range). It is therefore off unless the user allows fast-math, and every use goes through the
accuracy gate (max relative error <= 1e-4, NaN/Inf parity).
"""

from __future__ import annotations

from triton._C.libtriton import ir

from tritune.ir import ModuleView, Op, Pattern, PatternSet, Rewriter, apply_patterns

NAME = "reassociate-division"
EXACT = False
DIVISIONS = ("arith.divf", "tt.precise_divf")


def _single_use_division(value_owner: Op | None, user: Op) -> bool:
    return (value_owner is not None and value_owner.name in DIVISIONS
            and value_owner.result.num_uses == 1 and value_owner.result.uses[0][0] is user)


def _divide(builder: ir.builder, precise: bool, lhs: ir.value, rhs: ir.value) -> ir.value:
    return builder.create_precise_divf(lhs, rhs) if precise else builder.create_fdiv(lhs, rhs)


class ReassociateDivision(Pattern):
    """Matches the outer division of a pair."""

    op_names = DIVISIONS
    name = NAME

    def match_and_rewrite(self, op: Op, view: ModuleView, rewriter: Rewriter) -> bool:
        dividend, divisor = op.operands
        if _single_use_division(dividend.owner, op):
            inner, case = dividend.owner, 1
        elif _single_use_division(divisor.owner, op):
            inner, case = divisor.owner, 2
        else:
            return False
        a, b = (v.handle for v in inner.operands)
        c = (divisor if case == 1 else dividend).handle
        precise = "tt.precise_divf" in (op.name, inner.name)
        builder = rewriter.insert_after(op)
        product = builder.create_fmul(b, c)
        if case == 1:
            new = _divide(builder, precise, a, product)  # (a / b) / c -> a / (b * c)
        else:
            new = _divide(builder, precise, product, a)  # c / (a / b) -> (b * c) / a
        rewriter.created(2)
        rewriter.replace(op.result, new)
        return True


PATTERNS = PatternSet((ReassociateDivision(),))


def run(module: ir.module, *, fast_math: bool = False) -> int:
    """Reassociate division chains (only with ``fast_math``); return the divisions removed."""
    if not fast_math:
        return 0
    return apply_patterns(module, PATTERNS).rewrites
