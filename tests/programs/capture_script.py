"""A tiny program for `tritune capture` tests: a few launches, then exits with the status in argv[1].

On the CPU under TRITON_INTERPRET=1, else on the GPU. argv[2] == "fork" also launches from a
forked child (CPU only: CUDA does not survive a fork).
"""

import os
import sys

import torch
import triton

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import capture_kernels as k  # noqa: E402

device = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
x, out = torch.randn(30, device=device), torch.empty(30, device=device)
for _ in range(4):
    k.add_kernel[(triton.cdiv(30, 16),)](x, None, 1, out, 30, 2.0, BLOCK=16)
k.gather_kernel[(1,)](x, torch.randint(0, 30, (20,), device=device), out, 20, BLOCK=32)
if len(sys.argv) > 2 and sys.argv[2] == "fork":
    pid = os.fork()
    if pid == 0:
        if device == "cpu":
            k.inplace_kernel[(1,)](x, 30)
        os._exit(0)
    os.waitpid(pid, 0)
print("script done", flush=True)
sys.exit(int(sys.argv[1]) if len(sys.argv) > 1 else 0)
