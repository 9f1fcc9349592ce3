"""merge-redundant-loads (exact): two loads of one pointer value are one load.

Rewrite (seed 000, Table I)::

    %2 = tt.load %ptr, %mask, %other evictionPolicy = evict_last
    %3 = tt.load %ptr, %mask, %other evictionPolicy = evict_first
      ->
    %2 = tt.load %ptr, %mask, %other evictionPolicy = evict_first   (uses of %3 now use %2)

MLIR's CSE already merges loads with identical attributes; Inductor emits a reduction's loads
with different cache hints (``evict_last`` in the first loop, ``evict_first`` in the second), and
when the reduction loop has a single iteration both land in one block and CSE leaves them.

Legal when all of these hold:
- same pointer SSA value, same mask, same other, same boundary check and padding, same type;
- neither load is volatile;
- the first load dominates the second;
- no op that may execute between them may write global memory (``ir.effects``): a store, an
  atomic, a call, a barrier, inline asm not marked pure, any op of unknown effect. The check does
  not try to prove that a store's pointer differs from the loaded one: two different pointer
  values can alias, so any write in between blocks the merge (seed 000's "store to an equivalent
  pointer" test is unsound for exactly that reason).
Writes by other programs of the same launch without synchronisation are a data race in the
original kernel too: non-volatile loads promise no ordering with them.

No-alias mode (``noalias=True``: ``noalias`` in the pass list, ``("exact", "noalias")``; the variant
records the assumption and the applier checks it at every launch, ``tritune.aliasing``): distinct pointer
arguments of the kernel are assumed not to overlap, so a plain ``tt.store`` in between no longer
blocks the merge when its pointer is derived only from arguments the loaded pointer is not
derived from (``ir.provenance``). Everything else still blocks: a store whose pointer's origin is
unknown or shared with the load, atomics (they order memory), calls, barriers, volatile loads.
Inductor's reductions are the case: with one iteration of the reduction loop, a store through
``out_ptr0`` sits between two loads of ``in_out_ptr0`` (seed 000 merges them by comparing the
store's pointer with the loaded one, which is unsound without this assumption).

The kept load gets the eviction policy of the later one (after the merge it is the last read of
that data, which is what ``evict_first`` says) and the cache modifier the two share, or the
default if they differ. ptxas rejects ``.cg`` with any L1 eviction hint (``evict_first`` and
``evict_last`` alike, checked with Triton 3.6's ptxas), so a ``.cg`` load keeps ``evict_normal``.

Exact: the merged load reads the same bytes; results are bitwise identical.
"""

from __future__ import annotations

import dataclasses

from triton._C.libtriton import ir

from tritune.ir import ModuleView, Op, Pattern, PatternSet, Rewriter, apply_patterns
from tritune.ir.effects import may_write_global
from tritune.ir.printed import LoadAttrs
from tritune.ir.provenance import Provenance

NAME = "merge-redundant-loads"
EXACT = True
ASSUMPTIONS = ("noalias",)  # what ``run`` can use when told it holds


def legal_attrs(attrs: LoadAttrs) -> LoadAttrs:
    # .cg + evict_first / evict_last -> .cg alone: ptxas rejects any L1 hint with .cg
    if attrs.cache == ir.CACHE_MODIFIER.CG and attrs.evict != ir.EVICTION_POLICY.NORMAL:
        return dataclasses.replace(attrs, evict=ir.EVICTION_POLICY.NORMAL)
    return attrs


def merged_attrs(first: LoadAttrs, second: LoadAttrs) -> LoadAttrs:
    cache = first.cache if first.cache == second.cache else ir.CACHE_MODIFIER.NONE
    return legal_attrs(dataclasses.replace(first, cache=cache, evict=second.evict))


def _load_key(op: Op) -> tuple:
    attrs = op.load
    assert attrs is not None
    return (tuple(v.id for v in op.operands), attrs.boundary_check, attrs.padding, op.result.type)


class MergeRedundantLoad(Pattern):
    """Matches the later load; finds an equivalent earlier one with no write in between."""

    op_names = ("tt.load",)
    name = NAME
    noalias = False

    def match_and_rewrite(self, op: Op, view: ModuleView, rewriter: Rewriter) -> bool:
        if op.load is None or op.load.volatile:
            return False
        earlier = self._earlier_equivalent(op, view)
        if earlier is None:
            return False
        kept = earlier.result.handle
        attrs = merged_attrs(earlier.load, op.load)
        if attrs != earlier.load:
            kept = self._rebuild(earlier, attrs, rewriter)
            rewriter.replace(earlier.result, kept)
        rewriter.replace(op.result, kept)
        return True

    def _earlier_equivalent(self, op: Op, view: ModuleView) -> Op | None:
        key = _load_key(op)
        blocks = self._blocker(op, view)
        for candidate in view.ops_named("tt.load"):
            if candidate is op or candidate.load is None or candidate.load.volatile:
                continue
            if candidate.result.num_uses == 0 or _load_key(candidate) != key:
                continue
            if not view.dominates(candidate, op):
                continue
            if any(blocks(between) for between in view.ops_between(candidate, op)):
                continue
            return candidate
        return None

    def _blocker(self, load: Op, view: ModuleView):
        """Whether an op between two loads of ``load``'s pointer keeps them apart."""
        if not self.noalias:
            return may_write_global
        provenance = Provenance(view)
        loaded = provenance.bases(load.operands[0])

        def blocks(op: Op) -> bool:
            if not may_write_global(op):
                return False
            if op.name != "tt.store" or loaded is None:
                return True
            # store through other arguments only: no overlap under the assumption
            stored = provenance.bases(op.operands[0])
            return stored is None or bool(stored & loaded)

        return blocks

    @staticmethod
    def _rebuild(load: Op, attrs: LoadAttrs, rewriter: Rewriter) -> ir.value:
        """A copy of ``load`` with new attributes, right after it (enum attrs have no setter)."""
        builder = rewriter.insert_after(load)
        operands = [v.handle for v in load.operands]
        if attrs.boundary_check or attrs.padding is not None:
            padding = None if attrs.padding is None else ir.PADDING_OPTION(attrs.padding)
            new = builder.create_tensor_pointer_load(
                operands[0], list(attrs.boundary_check), padding, attrs.cache, attrs.evict, False)
        elif len(operands) == 1:
            new = builder.create_load(operands[0], attrs.cache, attrs.evict, False)
        else:
            other = operands[2] if len(operands) > 2 else None
            new = builder.create_masked_load(operands[0], operands[1], other, attrs.cache, attrs.evict, False)
        rewriter.created()
        return new


class MergeRedundantLoadNoAlias(MergeRedundantLoad):
    noalias = True


PATTERNS = PatternSet((MergeRedundantLoad(),))
NOALIAS_PATTERNS = PatternSet((MergeRedundantLoadNoAlias(),))


def run(module: ir.module, *, fast_math: bool = False, noalias: bool = False) -> int:
    """Merge redundant loads in ``module``; return the number of loads removed. ``noalias``:
    distinct pointer arguments may be assumed not to overlap (see the module docstring)."""
    return apply_patterns(module, NOALIAS_PATTERNS if noalias else PATTERNS).rewrites
