"""RMSNorm + bias (+ scale), seed 004's Table I, computed the way its unfused baseline does
("element-wise bias addition, mean of squares computation using torch.mean(), square root using
torch.sqrt(), normalization, and scale multiplication"):

    h = x + bias;  out = h / sqrt(mean(h * h, last dim) + eps) * weight

Shapes and dtypes are seed 004's: (4,128,768), (8,256,1024), (16,512,2048) in float32 and float16;
bias and weight have the last dimension's size.
TRITUNE_SPEC_SMALL=1 gives one tiny shape instead (read when inputs() is called).
"""
import os

import torch

name = "rmsnorm_bias_scale"
EPS = 1e-6
SHAPES = [(4, 128, 768), (8, 256, 1024), (16, 512, 2048)]  # seed 004's
SMALL = [(2, 3, 40)]  # TRITUNE_SPEC_SMALL=1: a CPU smoke run under Triton's interpreter


def reference(x, bias, weight):
    h = x + bias
    rms = torch.sqrt(torch.mean(h * h, dim=-1, keepdim=True) + EPS)
    return h / rms * weight


def inputs(device):
    shapes = SMALL if os.environ.get("TRITUNE_SPEC_SMALL") == "1" else SHAPES
    g = torch.Generator().manual_seed(0)
    out = []
    for s in shapes:
        for dtype in (torch.float32, torch.float16):
            x, bias = torch.randn(s, generator=g), torch.randn(s[-1], generator=g)
            weight = 1.0 + 0.1 * torch.randn(s[-1], generator=g)
            out.append(tuple(t.to(device, dtype) for t in (x, bias, weight)))
    return out
