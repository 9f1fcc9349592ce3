"""tritune's view of Triton's MLIR: typed ops and values, patterns, and module helpers."""

from __future__ import annotations

import os
import tempfile

from triton._C.libtriton import ir

from tritune.ir.rewrite import Pattern, PatternSet, Rewriter, apply_patterns, canonicalize, run_mlir_passes
from tritune.ir.view import Block, ModuleView, Op, Value, context_of

__all__ = [
    "Block", "ModuleView", "Op", "Pattern", "PatternSet", "Rewriter", "Value", "apply_patterns",
    "canonicalize", "context_of", "new_context", "parse_module", "run_mlir_passes",
]


def new_context() -> ir.context:
    """A context with Triton's core dialects and the NVIDIA backend's (for TTGIR) loaded."""
    context = ir.context()
    ir.load_dialects(context)
    from triton.backends.nvidia.compiler import CUDABackend

    CUDABackend.load_dialects(None, context)
    return context


def parse_module(text: str, context: ir.context | None = None) -> ir.module:
    """Parse MLIR text (TTIR or TTGIR) into a module; the bindings only parse files."""
    context = context or new_context()
    fd, path = tempfile.mkstemp(suffix=".mlir")
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(text)
        module = ir.parse_mlir_module(path, context)
    finally:
        os.unlink(path)
    module.context = context  # keep the context alive as long as the module
    return module
