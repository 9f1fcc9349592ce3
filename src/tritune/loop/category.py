"""What family a kernel belongs to, for the report's per-category table (TritonForge Table 1).

Inductor names its kernels by what they are (``triton_poi_`` pointwise, ``triton_red_`` looped
reduction, ``triton_per_`` persistent reduction, ``triton_tem_`` template: a matmul or conv);
for a hand-written kernel the ops in the kernel function's source decide, first match wins:

    two tl.dot and an exp      attention (QK^T, softmax, PV)
    tl.dot                     matmul
    tl.cumsum / associative_scan   scan
    tl.sum / max / min / reduce / argmax / argmin   reduction
    anything else              elementwise

Read from the captured source text with ``ast`` (no compile, no import: the source may need a
GPU to import). A file that does not parse, or a kernel not found in it, is ``other``.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tritune.kernel_facts import LOOPED, PERSISTENT, POINTWISE, TEMPLATE, inductor_kind
from tritune.model.launch import LaunchSpec

CATEGORIES = ("elementwise", "reduction", "scan", "matmul", "attention", "other")
INDUCTOR_CATEGORIES = {POINTWISE: "elementwise", LOOPED: "reduction", PERSISTENT: "reduction", TEMPLATE: "matmul"}
REDUCTIONS = {"sum", "max", "min", "reduce", "argmax", "argmin", "xor_sum"}
SCANS = {"cumsum", "cumprod", "associative_scan"}


def category_of(spec: LaunchSpec, root: str | Path) -> str:
    category = INDUCTOR_CATEGORIES.get(inductor_kind(spec.kernel) or "")
    if category is not None:
        return category
    try:
        tree = ast.parse((Path(root) / spec.source).read_text())
    except (OSError, SyntaxError, ValueError):
        return "other"
    function = next((node for node in ast.walk(tree)
                     if isinstance(node, ast.FunctionDef) and node.name == spec.kernel), None)
    if function is None:
        return "other"
    return _from_calls(_called(function))


def _called(function: ast.FunctionDef) -> list[str]:
    """Attribute names called in ``function`` (``tl.dot(...)`` -> ``dot``; ``x.sum()`` too)."""
    return [node.func.attr for node in ast.walk(function)
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)]


def _from_calls(calls: list[str]) -> str:
    if calls.count("dot") >= 2 and "exp" in calls or calls.count("dot") >= 2 and "exp2" in calls:
        return "attention"
    if "dot" in calls:
        return "matmul"
    if SCANS.intersection(calls):
        return "scan"
    if REDUCTIONS.intersection(calls):
        return "reduction"
    return "elementwise"
