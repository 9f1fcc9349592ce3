"""flash-linear-attention gla (fla/ops/gla): chunk_gla and fused_recurrent_gla, forward and backward.

Shapes from fla-org/flash-linear-attention benchmarks/ops/benchmark_gla.py: bf16, B, H, D =
16, 8, 128, T swept over 128 * 2**i (here 1024); gates logsigmoid(randn) clamped at -5, upstream
gradient ones, as there.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "fla"
# The capture autotunes chunk_gla's fwd and bwd kernels (fla/ops/gla/chunk.py, fla/ops/common/chunk_h.py, chunk_o.py)
# over 8-36 configs a kernel, each compiled once on a fresh Triton cache: expected to take minutes (an estimate).
CAPTURE_S = 300
B, T, H, D = 16, 1024, 8, 128


def make(device: str, small: bool = False) -> dict:
    b, t, h, d = (1, 64, 2, 16) if small else (B, T, H, D)
    g = torch.Generator(device="cpu").manual_seed(0)

    def rand():
        return torch.randn(b, t, h, d, generator=g)

    gate = torch.nn.functional.logsigmoid(rand()).clamp_min(-5)
    s = {n: x.to(device, torch.bfloat16).requires_grad_() for n, x in
         (("q", rand()), ("k", rand()), ("v", rand()), ("g", gate))}
    s["do"] = torch.ones(b, t, h, d, device=device, dtype=torch.bfloat16)
    return s


def step(s: dict) -> dict:
    from fla.ops.gla import chunk_gla, fused_recurrent_gla

    inputs = (s["q"], s["k"], s["v"], s["g"])
    out = {}
    for name, fn in (("chunk", chunk_gla), ("recurrent", fused_recurrent_gla)):
        o, _ = fn(*inputs)
        for var, grad in zip("qkvg", _base.grads(o, inputs, s["do"])):
            out[f"{name}_d{var}"] = grad
        out[f"{name}_o"] = o.detach()
    return out


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
