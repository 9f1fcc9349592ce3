"""Liger-Kernel rope (liger_kernel/ops/rope.py): rotary embedding of q and k, forward and backward.

Shapes from linkedin/Liger-Kernel benchmark/scripts/benchmark_rope.py (its seq-len sweep): bf16,
batch 1, 32 query heads, 8 key/value heads, hidden size 8192 (head dim 256), seq len swept over
2**10..2**14 (here 2048); q and k made (1, T, H, D) then transposed, as there. cos/sin are
Llama's (base 10000), built here instead of by transformers' LlamaRotaryEmbedding. Liger rotates
q and k in place (and the incoming gradients in the backward), so each step takes fresh copies of
them, as a training step gets fresh ones from its projections.
"""

from __future__ import annotations

import sys

import torch

if __package__:
    from . import _base
else:  # run as a program (what tritune capture starts)
    import _base

LIBRARY = "liger"
T, HQ, HKV, HIDDEN = 2048, 32, 8, 8192


def make(device: str, small: bool = False) -> dict:
    t, hq, hkv, d = (16, 4, 2, 16) if small else (T, HQ, HKV, HIDDEN // HQ)
    g = torch.Generator(device="cpu").manual_seed(0)
    q = torch.randn(1, t, hq, d, generator=g).to(device, torch.bfloat16)
    k = torch.randn(1, t, hkv, d, generator=g).to(device, torch.bfloat16)
    inv_freq = 1.0 / (10000 ** (torch.arange(0, d, 2, dtype=torch.float32) / d))
    freqs = torch.outer(torch.arange(t, dtype=torch.float32), inv_freq)
    emb = torch.cat((freqs, freqs), dim=-1)[None]
    return {"q": q, "k": k,
            "cos": emb.cos().to(device, torch.bfloat16), "sin": emb.sin().to(device, torch.bfloat16),
            "pos": torch.arange(t, device=device).unsqueeze(0),
            "dq": torch.randn(q.shape, generator=g).to(device, torch.bfloat16).transpose(1, 2),
            "dk": torch.randn(k.shape, generator=g).to(device, torch.bfloat16).transpose(1, 2)}


def step(s: dict) -> dict:
    from liger_kernel.transformers.functional import liger_rope

    q = s["q"].clone().transpose(1, 2).requires_grad_()
    k = s["k"].clone().transpose(1, 2).requires_grad_()
    q_out, k_out = liger_rope(q, k, s["cos"], s["sin"], s["pos"])
    dq, dk = _base.grads((q_out, k_out), (q, k), (s["dq"].clone(), s["dk"].clone()))
    return {"q_out": q_out.detach(), "k_out": k_out.detach(), "dq": dq, "dk": dk}


if __name__ == "__main__":
    sys.exit(_base.main(sys.modules[__name__]))
