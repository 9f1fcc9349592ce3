"""TTIR op counts, from Triton's own MLIR parser (no text matching): op name -> count."""

from __future__ import annotations

import collections

from tritune.ir import parse_module

_STRUCTURAL = {"builtin.module"}


def count_ops(ttir_text: str) -> dict[str, int]:
    """Every op in the module by name, sorted by name (``tt.func`` included, the module not)."""
    module = parse_module(ttir_text)
    counts: collections.Counter[str] = collections.Counter()
    module.walk(lambda op: counts.update([op.get_name()]))
    return {name: counts[name] for name in sorted(counts) if name not in _STRUCTURAL}
