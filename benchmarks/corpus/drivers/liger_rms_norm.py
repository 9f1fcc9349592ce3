"""Liger-Kernel rms_norm (liger_kernel/ops/rms_norm.py): forward and backward through the functional API.

Shapes from linkedin/Liger-Kernel benchmark/scripts/benchmark_rms_norm.py: M = 2048 rows, bf16,
eps 1e-6, hidden size swept over 2**10..2**16 (here 4096, a Llama-7B hidden size). `in_place=False`:
the default writes dX into dY, which would change the next call's input.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "liger"
M, H = 2048, 4096


def make(device: str, small: bool = False) -> dict:
    m, h = (8, 64) if small else (M, H)
    g = torch.Generator(device="cpu").manual_seed(0)
    x = torch.randn(m, h, generator=g).to(device, torch.bfloat16)
    w = (1 + 0.1 * torch.randn(h, generator=g)).to(device, torch.bfloat16)
    dy = torch.randn(m, h, generator=g).to(device, torch.bfloat16)
    return {"x": x.requires_grad_(), "w": w.requires_grad_(), "dy": dy}


def step(s: dict) -> dict:
    from liger_kernel.transformers.functional import liger_rms_norm

    y = liger_rms_norm(s["x"], s["w"], 1e-6, in_place=False)
    dx, dw = _base.grads(y, (s["x"], s["w"]), s["dy"])
    return {"y": y.detach(), "dx": dx, "dw": dw}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
