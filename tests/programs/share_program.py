"""A program whose most-launched kernel is not where its time goes: a test-sized launch made three
times, and the one that matters made once (the session's ranking by time share). Other sizes on
the command line instead (the lanes' tests: four keys of four shares). CPU under
TRITON_INTERPRET=1."""

import os
import sys

import torch

from loop_program import scale_add

if __name__ == "__main__":
    device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
    torch.manual_seed(0)
    for n in [int(arg) for arg in sys.argv[1:]] or (300, 300, 300, 4000):
        x, y = torch.randn(n, device=device), torch.randn(n, device=device)
        torch.testing.assert_close(scale_add(x, y, 0.5), x * 0.5 + y)
    print("ok")
