"""Liger-Kernel jsd (liger_kernel/ops/jsd.py): generalized Jensen-Shannon divergence, loss and gradient.

Shapes from linkedin/Liger-Kernel benchmark/scripts/benchmark_jsd.py: fp32 log-probabilities
(B*T, V), B*T swept from 2**10 (here 1024), V the benchmark model's vocabulary (here 128256,
Llama-3's); beta 0.5, no labels.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "liger"
BT, V = 1024, 128256


def make(device: str, small: bool = False) -> dict:
    bt, v = (8, 128) if small else (BT, V)
    g = torch.Generator(device="cpu").manual_seed(0)
    return {"input": torch.randn(bt, v, generator=g).log_softmax(-1).to(device).requires_grad_(),
            "target": torch.randn(bt, v, generator=g).log_softmax(-1).to(device)}


def step(s: dict) -> dict:
    from liger_kernel.transformers.functional import liger_jsd

    loss = liger_jsd(s["input"], s["target"])
    (dx,) = _base.grads(loss, (s["input"],), torch.ones_like(loss))
    return {"loss": loss.detach(), "dinput": dx}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
