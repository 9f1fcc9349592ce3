"""SwiGLU, the gated activation of LLaMA- and Mistral-style MLPs: silu(gate) * up, where gate and
up are the outputs of the two input projections (the projections stay matmuls; this is the
elementwise part that follows them).

Shapes and dtypes are seed 004's: (4,128,768), (8,256,1024), (16,512,2048) in float32 and float16.
TRITUNE_SPEC_SMALL=1 gives one tiny shape instead (read when inputs() is called).
"""
import os

import torch
import torch.nn.functional as F

name = "swiglu"
SHAPES = [(4, 128, 768), (8, 256, 1024), (16, 512, 2048)]  # seed 004's
SMALL = [(2, 3, 40)]  # TRITUNE_SPEC_SMALL=1: a CPU smoke run under Triton's interpreter


def reference(gate, up):
    return F.silu(gate) * up


def inputs(device):
    shapes = SMALL if os.environ.get("TRITUNE_SPEC_SMALL") == "1" else SHAPES
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(s, generator=g).to(device, dtype), torch.randn(s, generator=g).to(device, dtype))
            for s in shapes for dtype in (torch.float32, torch.float16)]
