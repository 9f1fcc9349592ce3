"""Residual add + LayerNorm, as a pre-LN transformer block (GPT-2, ViT) ends a sub-layer: the sum
becomes the next residual, its normalization the next sub-layer's input. Two outputs:

    h = x + residual;  return layer_norm(h, weight, bias, eps=1e-5), h

Shapes and dtypes are seed 004's: (4,128,768), (8,256,1024), (16,512,2048) in float32 and float16;
weight and bias have the last dimension's size.
TRITUNE_SPEC_SMALL=1 gives one tiny shape instead (read when inputs() is called).
"""
import os

import torch
import torch.nn.functional as F

name = "add_layernorm"
EPS = 1e-5
SHAPES = [(4, 128, 768), (8, 256, 1024), (16, 512, 2048)]  # seed 004's
SMALL = [(2, 3, 40)]  # TRITUNE_SPEC_SMALL=1: a CPU smoke run under Triton's interpreter


def reference(x, residual, weight, bias):
    h = x + residual
    return F.layer_norm(h, (h.shape[-1],), weight, bias, EPS), h


def inputs(device):
    shapes = SMALL if os.environ.get("TRITUNE_SPEC_SMALL") == "1" else SHAPES
    g = torch.Generator().manual_seed(0)
    out = []
    for s in shapes:
        for dtype in (torch.float32, torch.float16):
            x, residual = torch.randn(s, generator=g), torch.randn(s, generator=g)
            weight = 1.0 + 0.1 * torch.randn(s[-1], generator=g)
            bias = 0.1 * torch.randn(s[-1], generator=g)
            out.append(tuple(t.to(device, dtype) for t in (x, residual, weight, bias)))
    return out
