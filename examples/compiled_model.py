"""A torch.compile'd block, to capture Inductor's kernels from a user's program (GPU only):

    tritune capture --out runs/compiled -- python examples/compiled_model.py
    tritune bench runs/compiled

Inductor generates the Triton kernels (layer norm, GELU, softmax, residual adds); capture records
each launch at the config Inductor chose, as it runs in this program.
"""

from __future__ import annotations

import torch


class Block(torch.nn.Module):
    def __init__(self, dim: int = 768, heads: int = 12) -> None:
        super().__init__()
        self.norm1, self.norm2 = torch.nn.LayerNorm(dim), torch.nn.LayerNorm(dim)
        self.attn = torch.nn.MultiheadAttention(dim, heads, batch_first=True)
        self.mlp = torch.nn.Sequential(torch.nn.Linear(dim, 4 * dim), torch.nn.GELU(), torch.nn.Linear(4 * dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


def main() -> None:
    if not torch.cuda.is_available():
        raise SystemExit("compiled_model.py needs a CUDA GPU (Inductor's CPU backend emits C++, not Triton)")
    torch.manual_seed(0)
    model = Block().cuda()
    compiled = torch.compile(model)
    x = torch.randn(16, 197, 768, device="cuda", requires_grad=True)
    for _ in range(3):
        compiled(x).sum().backward()
    torch.cuda.synchronize()
    print("3 training steps of a compiled transformer block")


if __name__ == "__main__":
    main()
