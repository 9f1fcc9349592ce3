"""Four launches of one kernel at four sizes: four decision keys of different time shares, for the
lanes' tests (``tritune optimize --workers``). CPU under TRITON_INTERPRET=1."""

import os

import torch

from loop_program import scale_add

if __name__ == "__main__":
    device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
    torch.manual_seed(0)
    for n in (300, 1000, 3000, 8000):
        x, y = torch.randn(n, device=device), torch.randn(n, device=device)
        torch.testing.assert_close(scale_add(x, y, 0.5), x * 0.5 + y)
    print("ok")
