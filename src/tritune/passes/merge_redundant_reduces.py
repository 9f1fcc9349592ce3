"""merge-redundant-reduces (exact): structurally identical reductions are one reduction.

Rewrite (seed 000, Table I, %6/%7)::

    %6 = tt.reduce(%2) {axis = 0} ({ add })
    %7 = tt.reduce(%2) {axis = 0} ({ add })
      ->
    %6 = tt.reduce(%2) {axis = 0} ({ add })   (uses of %7 now use %6)

Legal when both reduce the same operand values along the same axis with the same combine region:
``tt.reduce`` is pure, so equal inputs give equal outputs. MLIR's CSE implements exactly this
structural equality (operands, attributes, region bodies), so this pass is a pipeline step around
CSE that counts the reduces it removed. Table I's reduces only become identical once
``merge-redundant-loads`` has made their operands one load: run this pass after it.

Exact: the kept reduce computes the same values in the same order; bitwise identical.
"""

from __future__ import annotations

from triton._C.libtriton import ir, passes

from tritune.ir import ModuleView, run_mlir_passes

NAME = "merge-redundant-reduces"
EXACT = True


def _count_reduces(module: ir.module) -> int:
    return len(ModuleView.build(module).ops_named("tt.reduce"))


def run(module: ir.module, *, fast_math: bool = False) -> int:
    """CSE ``module``; return the number of ``tt.reduce`` ops it removed."""
    before = _count_reduces(module)
    if before < 2:
        return 0
    run_mlir_passes(module, passes.common.add_cse)
    return before - _count_reduces(module)
