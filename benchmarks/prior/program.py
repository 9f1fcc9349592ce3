"""Issue 24's store-seeded starts on the GPU: two elementwise kernels written with a far-off
BLOCK=16, launched on one size given on the command line (``prior_gpu.sh`` optimizes them at
one size, then at another with and without that store).

    python3 benchmarks/prior/program.py add 67108864     # the vector add, 64M elements
    python3 benchmarks/prior/program.py scale 67108864   # another source, the same category
"""

import os
import sys

import torch
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) + tl.load(y_ptr + offsets, mask=mask), mask=mask)


@triton.jit
def scale_kernel(x_ptr, out_ptr, n, alpha, BLOCK_SIZE: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK_SIZE + tl.arange(0, BLOCK_SIZE)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * alpha, mask=mask)


def main(which: str, n: int, block: int = 16) -> None:
    device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
    x, y = torch.randn(n, device=device), torch.randn(n, device=device)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, block),)
    if which == "add":
        add_kernel[grid](x, y, out, n, BLOCK=block)
        torch.testing.assert_close(out, x + y)
    elif which == "scale":
        scale_kernel[grid](x, out, n, 0.5, BLOCK_SIZE=block)
        torch.testing.assert_close(out, x * 0.5)
    else:
        raise SystemExit(f"which kernel: add or scale, not {which!r}")
    print(f"{which} n={n} ok")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
