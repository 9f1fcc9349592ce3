"""Pattern rewriting in the spirit of xDSL: a pattern per op kind, one rewriter, a fixpoint driver.

A ``Pattern`` names the op kinds it matches and implements ``match_and_rewrite(op, view,
rewriter)``: check conditions first, return False early, then rewrite through the rewriter, which
counts what was done. ``PatternSet``s are plain values that combine with ``+``.
``apply_patterns`` runs a set to a fixpoint, rebuilding the view after each rewrite, then removes
the ops left dead (Triton's bindings have no erase: replaced ops lose their uses and the
canonicalizer drops them, non-volatile loads included since they only read).
"""

from __future__ import annotations

import collections
import dataclasses
from typing import ClassVar, Iterable

from triton._C.libtriton import ir, passes

from tritune.ir.view import ModuleView, Op, Value, context_of


class Rewriter:
    """Creates ops next to an existing op and replaces values; counts everything it does."""

    def __init__(self, view: ModuleView):
        self.view = view
        self.builder = ir.builder(view.context())
        self.counts: collections.Counter[str] = collections.Counter()

    def insert_after(self, op: Op) -> ir.builder:
        """Position the builder right after ``op``, with ``op``'s location; return the builder."""
        self.builder.set_insertion_point_after(op.handle)
        if op.results:
            self.builder.set_loc(op.result.handle.get_loc())
        return self.builder

    def created(self, count: int = 1) -> None:
        self.counts["inserted"] += count

    def replace(self, old: Value, new: ir.value) -> None:
        """Replace every use of ``old`` with ``new``; ``old``'s op is dead afterwards."""
        old.handle.replace_all_uses_with(new)
        self.counts["replaced"] += 1


class Pattern:
    op_names: ClassVar[tuple[str, ...]] = ()
    name: ClassVar[str] = ""

    def match_and_rewrite(self, op: Op, view: ModuleView, rewriter: Rewriter) -> bool:
        raise NotImplementedError


@dataclasses.dataclass(frozen=True)
class PatternSet:
    patterns: tuple[Pattern, ...]

    def __add__(self, other: "PatternSet") -> "PatternSet":
        return PatternSet(self.patterns + other.patterns)

    def for_op(self, name: str) -> Iterable[Pattern]:
        return (p for p in self.patterns if name in p.op_names)


@dataclasses.dataclass
class RewriteResult:
    rewrites: int  # successful match_and_rewrite calls
    counts: collections.Counter  # what the rewriter did: replaced, inserted
    by_pattern: collections.Counter


class FixpointError(RuntimeError):
    pass


def apply_patterns(module: ir.module, patterns: PatternSet, max_rewrites: int = 10_000) -> RewriteResult:
    """Apply ``patterns`` until none fires; then drop the dead ops."""
    counts: collections.Counter[str] = collections.Counter()
    by_pattern: collections.Counter[str] = collections.Counter()
    rewrites = 0
    while True:
        view = ModuleView.build(module)
        rewriter = Rewriter(view)
        fired = _first_rewrite(view, patterns, rewriter)
        counts.update(rewriter.counts)
        if fired is None:
            break
        by_pattern[fired.name] += 1
        rewrites += 1
        if rewrites > max_rewrites:
            raise FixpointError(f"no fixpoint after {max_rewrites} rewrites ({dict(by_pattern)})")
    if rewrites:
        canonicalize(module)
    return RewriteResult(rewrites, counts, by_pattern)


def _first_rewrite(view: ModuleView, patterns: PatternSet, rewriter: Rewriter) -> Pattern | None:
    for op in view.ops:
        if op.results and all(r.num_uses == 0 for r in op.results):
            continue  # dead, awaiting removal
        for pattern in patterns.for_op(op.name):
            if pattern.match_and_rewrite(op, view, rewriter):
                return pattern
    return None


def run_mlir_passes(module: ir.module, *adders) -> None:
    """Run Triton's own MLIR passes (``passes.common.add_cse`` ...) on ``module``."""
    pm = ir.pass_manager(context_of(module))
    for add in adders:
        add(pm)
    pm.run(module, "tritune")


def canonicalize(module: ir.module) -> None:
    run_mlir_passes(module, passes.common.add_canonicalizer)
