"""Softmax over the last dimension, one of seed 004's workloads (it names softmax among the fused
kernels it generates but reports no table for it).

Shapes and dtypes are seed 004's: (4,128,768), (8,256,1024), (16,512,2048) in float32 and float16.
TRITUNE_SPEC_SMALL=1 gives one tiny shape instead (read when inputs() is called).
"""
import os

import torch

name = "softmax"
SHAPES = [(4, 128, 768), (8, 256, 1024), (16, 512, 2048)]  # seed 004's
SMALL = [(2, 3, 40)]  # TRITUNE_SPEC_SMALL=1: a CPU smoke run under Triton's interpreter


def reference(x):
    return torch.softmax(x, dim=-1)


def inputs(device):
    shapes = SMALL if os.environ.get("TRITUNE_SPEC_SMALL") == "1" else SHAPES
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(s, generator=g).mul(3.0).to(device, dtype),)
            for s in shapes for dtype in (torch.float32, torch.float16)]
