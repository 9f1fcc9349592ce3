"""Liger-Kernel layer_norm (liger_kernel/ops/layer_norm.py): forward and backward through the functional API.

Shapes from linkedin/Liger-Kernel benchmark/scripts/benchmark_layer_norm.py: M = 4096 rows, fp32,
eps 1e-6, hidden size swept over 2**10..2**14 (here 4096).
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "liger"
M, N = 4096, 4096


def make(device: str, small: bool = False) -> dict:
    m, n = (8, 64) if small else (M, N)
    g = torch.Generator(device="cpu").manual_seed(0)
    return {"x": torch.randn(m, n, generator=g).to(device).requires_grad_(),
            "w": (1 + 0.1 * torch.randn(n, generator=g)).to(device).requires_grad_(),
            "b": (0.1 * torch.randn(n, generator=g)).to(device).requires_grad_(),
            "dy": torch.randn(m, n, generator=g).to(device)}


def step(s: dict) -> dict:
    from liger_kernel.transformers.functional import liger_layer_norm

    y = liger_layer_norm(s["x"], s["w"], s["b"], 1e-6)
    dx, dw, db = _base.grads(y, (s["x"], s["w"], s["b"]), s["dy"])
    return {"y": y.detach(), "dx": dx, "dw": dw, "db": db}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
