"""Liger-Kernel cross_entropy (liger_kernel/ops/cross_entropy.py): loss and gradient of the logits.

Shapes from linkedin/Liger-Kernel benchmark/scripts/benchmark_cross_entropy.py: fp32 logits
(B*T, V), B*T swept from 2**10 (here 4096), V the benchmark model's vocabulary (here 32000,
Llama-2's). Liger writes the gradient into the logits in the forward pass, so each step takes a
fresh copy of them (as a training step gets fresh logits from its LM head).
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "liger"
BT, V = 4096, 32000


def make(device: str, small: bool = False) -> dict:
    bt, v = (16, 128) if small else (BT, V)
    g = torch.Generator(device="cpu").manual_seed(0)
    return {"logits": torch.randn(bt, v, generator=g).to(device),
            "target": torch.randint(v, (bt,), generator=g).to(device)}


def step(s: dict) -> dict:
    from liger_kernel.transformers.functional import liger_cross_entropy

    x = s["logits"].clone().requires_grad_()
    loss = liger_cross_entropy(x, s["target"])
    (dx,) = _base.grads(loss, (x,), torch.ones_like(loss))
    return {"loss": loss.detach(), "dlogits": dx}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
