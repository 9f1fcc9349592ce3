"""Liger-Kernel fused_linear_cross_entropy (liger_kernel/ops/fused_linear_cross_entropy.py): LM head + loss.

Shapes from linkedin/Liger-Kernel benchmark/scripts/benchmark_fused_linear_cross_entropy.py: the
benchmark model's hidden size, vocabulary and dtype (here Llama-3-8B's: 4096, 128256, bf16), B*T
swept from 2**10 (here 1024, the script's probe size). The matmuls are cuBLAS; the Triton kernels
are the chunked cross entropy and the gradient scaling.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "liger"
BT, H, V = 1024, 4096, 128256


def make(device: str, small: bool = False) -> dict:
    bt, h, v = (16, 32, 128) if small else (BT, H, V)
    g = torch.Generator(device="cpu").manual_seed(0)
    return {"x": torch.randn(bt, h, generator=g).to(device, torch.bfloat16).requires_grad_(),
            "w": (torch.randn(v, h, generator=g) / h ** 0.5).to(device, torch.bfloat16).requires_grad_(),
            "target": torch.randint(v, (bt,), generator=g).to(device)}


def step(s: dict) -> dict:
    from liger_kernel.transformers.functional import liger_fused_linear_cross_entropy

    loss = liger_fused_linear_cross_entropy(s["x"], s["w"], s["target"])
    dx, dw = _base.grads(loss, (s["x"], s["w"]), torch.ones_like(loss))
    return {"loss": loss.detach(), "dx": dx, "dw": dw}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
