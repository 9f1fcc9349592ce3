"""flash-linear-attention fused_norm_gate (fla/modules/fused_norm_gate.py): RMSNorm(x) * swish(g), forward and backward.

The gated output norm of fla's layers (GLA, GatedDeltaNet: FusedRMSNormGated over the head dim),
at the attention shapes of benchmarks/ops/benchmark_gla.py: bf16, B, H, D = 16, 8, 128, T = 2048;
weight of the head dim, no bias, eps 1e-6 (the module's default).
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "fla"
B, T, H, D = 16, 2048, 8, 128


def make(device: str, small: bool = False) -> dict:
    b, t, h, d = (1, 16, 2, 16) if small else (B, T, H, D)
    g = torch.Generator(device="cpu").manual_seed(0)
    s = {"x": torch.randn(b, t, h, d, generator=g), "g": torch.randn(b, t, h, d, generator=g),
         "w": 1 + 0.1 * torch.randn(d, generator=g)}
    s = {n: x.to(device, torch.bfloat16).requires_grad_() for n, x in s.items()}
    s["dy"] = torch.randn(b, t, h, d, generator=g).to(device, torch.bfloat16)
    return s


def step(s: dict) -> dict:
    from fla.modules.fused_norm_gate import rms_norm_gated

    inputs = (s["x"], s["g"], s["w"])
    y = rms_norm_gated(s["x"], s["g"], s["w"], None, activation="swish", eps=1e-6)
    dx, dg, dw = _base.grads(y, inputs, s["dy"])
    return {"y": y.detach(), "dx": dx, "dg": dg, "dw": dw}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
