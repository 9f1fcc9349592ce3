"""flash-linear-attention retention (fla/ops/retention): chunk_retention, forward and backward.

It runs on simple_gla's chunk kernels.

Shapes from fla-org/flash-linear-attention benchmarks/ops/benchmark_gla.py, which times
chunk_retention beside gla: bf16, B, H, D = 16, 8, 128, T swept over 128 * 2**i (here 2048),
upstream gradient ones.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "fla"
# The capture autotunes the simple_gla chunk kernels (fla/ops/common/chunk_h.py, chunk_o.py)
# over 8-36 configs a kernel, each compiled once on a fresh Triton cache: expected to take minutes (an estimate).
CAPTURE_S = 300
B, T, H, D = 16, 2048, 8, 128


def make(device: str, small: bool = False) -> dict:
    b, t, h, d = (1, 64, 2, 16) if small else (B, T, H, D)
    g = torch.Generator(device="cpu").manual_seed(0)
    s = {n: torch.randn(b, t, h, d, generator=g).to(device, torch.bfloat16).requires_grad_() for n in "qkv"}
    s["do"] = torch.ones(b, t, h, d, device=device, dtype=torch.bfloat16)
    return s


def step(s: dict) -> dict:
    from fla.ops.retention import chunk_retention

    inputs = (s["q"], s["k"], s["v"])
    o, _ = chunk_retention(*inputs)
    dq, dk, dv = _base.grads(o, inputs, s["do"])
    return {"o": o.detach(), "dq": dq, "dk": dk, "dv": dv}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
