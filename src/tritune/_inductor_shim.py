"""Shim: import Inductor-generated kernel modules on a machine without a GPU.

A CUDA kernel module written by Inductor (torch 2.11-2.13) runs, at import time,
``triton_helpers.set_driver_to_gpu()`` (raises "Could not find an active GPU backend" without a
GPU) and ``from torch._C import _cuda_getCurrentRawStream`` (absent from CPU builds of torch).
Neither matters to static analysis, which never launches. There is no hook for this, so this
module owns the patch, only for the duration of one import, and
``tests/analyze/test_discover.py::test_inductor_shim_targets_exist`` fails if torch renames what it patches.
"""

from __future__ import annotations

import contextlib
from typing import Iterator

# The source text that marks a file as needing torch (checked before importing it).
MARKERS = ("torch._inductor", "triton_heuristics", "triton_helpers")


def needs_inductor(source: str) -> bool:
    return any(marker in source for marker in MARKERS)


@contextlib.contextmanager
def inductor_without_gpu() -> Iterator[None]:
    import torch
    from torch._inductor.runtime import triton_helpers

    original = triton_helpers.set_driver_to_gpu

    def set_driver_to_gpu() -> None:
        try:
            original()
        except RuntimeError:
            pass  # no GPU backend here: analysis compiles for a target, it never launches

    added_stream = not hasattr(torch._C, "_cuda_getCurrentRawStream")
    triton_helpers.set_driver_to_gpu = set_driver_to_gpu
    if added_stream:
        torch._C._cuda_getCurrentRawStream = _no_stream
    try:
        yield
    finally:
        triton_helpers.set_driver_to_gpu = original
        if added_stream:
            del torch._C._cuda_getCurrentRawStream


def _no_stream(device: int) -> int:
    return 0
