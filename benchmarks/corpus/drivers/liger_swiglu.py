"""Liger-Kernel swiglu (liger_kernel/ops/swiglu.py): silu(a) * b, forward and backward.

Shapes from linkedin/Liger-Kernel benchmark/scripts/benchmark_swiglu.py: B = 4, bf16,
intermediate size 11008 (Llama-7B), seq len swept over 2**10..2**13 (here 2048). The script runs
LigerSwiGLUMLP (its matmuls are cuBLAS); this drives the Triton part, the gate product, directly.
Liger's backward writes the gradients into a and b, so each step takes fresh copies of them, as a
training step gets fresh ones from its gate and up projections.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "liger"
B, T, I = 4, 2048, 11008


def make(device: str, small: bool = False) -> dict:
    shape = (2, 8, 64) if small else (B, T, I)
    g = torch.Generator(device="cpu").manual_seed(0)
    return {"a": torch.randn(shape, generator=g).to(device, torch.bfloat16),
            "b": torch.randn(shape, generator=g).to(device, torch.bfloat16),
            "dy": torch.randn(shape, generator=g).to(device, torch.bfloat16)}


def step(s: dict) -> dict:
    from liger_kernel.transformers.functional import liger_swiglu

    a, b = s["a"].clone().requires_grad_(), s["b"].clone().requires_grad_()
    y = liger_swiglu(a, b)
    da, db = _base.grads(y, (a, b), s["dy"])
    return {"y": y.detach(), "da": da, "db": db}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
