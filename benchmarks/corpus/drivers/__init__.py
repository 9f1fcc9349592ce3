"""The development corpus: one driver per kernel module of Liger-Kernel and flash-linear-attention
(issue 24, section 4). Each is a program (``python3 benchmarks/corpus/drivers/NAME.py``, what
``tritune capture`` records) and a module (``make`` / ``step``, what ``measure.py`` runs)."""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

HERE = Path(__file__).resolve().parent

FILES = (
    "liger_rms_norm", "liger_layer_norm", "liger_rope", "liger_swiglu", "liger_cross_entropy",
    "liger_fused_linear_cross_entropy", "liger_jsd",
    "fla_gla", "fla_retention", "fla_delta_rule", "fla_l2norm", "fla_fused_norm_gate",
)


def path(name: str) -> Path:
    if name not in FILES:
        raise KeyError(f"no corpus file {name!r} (files: {', '.join(FILES)})")
    return HERE / f"{name}.py"


def load(name: str) -> ModuleType:
    path(name)
    return importlib.import_module(f"{__name__}.{name}")
