"""Capture: every Triton launch of a program as a replayable ``LaunchSpec`` (see ``spec``).

    with tritune.capture.capture("runs/demo"):   # or: tritune capture --out runs/demo -- CMD
        my_program()

``capture`` and ``finalize`` load on first use, so ``import tritune.capture`` stays light (the
spec module needs neither torch nor triton).
"""

from __future__ import annotations

from typing import Any

__all__ = ["capture", "finalize"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from tritune.capture import recorder

        return getattr(recorder, name)
    raise AttributeError(f"module 'tritune.capture' has no attribute {name!r}")
