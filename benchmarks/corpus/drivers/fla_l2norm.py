"""flash-linear-attention l2norm (fla/modules/l2norm.py): row L2 normalization, forward and backward.

Shapes from fla-org/flash-linear-attention benchmarks/modules/benchmark_l2norm.py: bf16 x of
(B*T, D) with B = 16, D = 1024 // H, T swept over 128 * 2**i (here T = 4096, H = 8: D = 128);
the backward seeded with x itself, as there.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "fla"
B, T, D = 16, 4096, 128


def make(device: str, small: bool = False) -> dict:
    rows, d = (64, 16) if small else (B * T, D)
    g = torch.Generator(device="cpu").manual_seed(0)
    return {"x": torch.randn(rows, d, generator=g).to(device, torch.bfloat16).requires_grad_()}


def step(s: dict) -> dict:
    from fla.modules.l2norm import l2norm

    y = l2norm(s["x"])
    (dx,) = _base.grads(y, (s["x"],), s["x"].detach())
    return {"y": y.detach(), "dx": dx}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
