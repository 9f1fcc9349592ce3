"""flash-linear-attention delta_rule (fla/ops/delta_rule): chunk_delta_rule, forward and backward.

Shapes from fla-org/flash-linear-attention benchmarks/ops/benchmark_delta_rule.py: bf16, model dim
2048, (B, T) = (8, 2048), head dim 128 (H = 16); k L2-normalized, beta = sigmoid(rand), the loss
o.sum() (upstream gradient ones), as there.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "fla"
# The capture autotunes the delta rule's chunk kernels (fla/ops/delta_rule/wy_fast.py, fla/ops/common/chunk_h.py)
# over 8-36 configs a kernel, each compiled once on a fresh Triton cache: expected to take minutes (an estimate).
CAPTURE_S = 300
B, T, DIM, D = 8, 2048, 2048, 128


def make(device: str, small: bool = False) -> dict:
    b, t, h, d = (1, 64, 2, 16) if small else (B, T, DIM // D, D)
    g = torch.Generator(device="cpu").manual_seed(0)
    k = torch.nn.functional.normalize(torch.randn(b, t, h, d, generator=g), p=2, dim=-1)
    s = {"q": torch.randn(b, t, h, d, generator=g), "k": k, "v": torch.randn(b, t, h, d, generator=g),
         "beta": torch.rand(b, t, h, generator=g).sigmoid()}
    s = {n: x.to(device, torch.bfloat16).requires_grad_() for n, x in s.items()}
    s["do"] = torch.ones(b, t, h, d, device=device, dtype=torch.bfloat16)
    return s


def step(s: dict) -> dict:
    from fla.ops.delta_rule import chunk_delta_rule

    inputs = (s["q"], s["k"], s["v"], s["beta"])
    o, _ = chunk_delta_rule(*inputs)
    dq, dk, dv, dbeta = _base.grads(o, inputs, s["do"])
    return {"o": o.detach(), "dq": dq, "dk": dk, "dv": dv, "dbeta": dbeta}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
