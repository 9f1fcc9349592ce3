"""A user's program for the loop's end-to-end tests: one kernel written the common way (a fixed
BLOCK, the grid computed from it), launched on odd sizes. CPU under TRITON_INTERPRET=1."""

import os
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def scale_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    y = tl.load(y_ptr + offsets, mask=mask)
    tl.store(out_ptr + offsets, x * alpha + y, mask=mask)


def scale_add(x, y, alpha, block=64):
    out = torch.empty_like(x)
    scale_add_kernel[(triton.cdiv(x.numel(), block),)](x, y, out, x.numel(), alpha, BLOCK=block)
    return out


if __name__ == "__main__":
    device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
    torch.manual_seed(0)
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 300
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    out = scale_add(x, y, 0.5)
    torch.testing.assert_close(out, x * 0.5 + y)
    print(f"checksum {out.double().sum().item():.6f}")
