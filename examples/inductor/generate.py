"""Regenerate the Inductor kernel modules in this folder (needs a CUDA GPU; see README.md).

    TORCHINDUCTOR_BENCHMARK_KERNEL=1 python examples/inductor/generate.py OUT_DIR

Compiles a small LayerNorm + Linear + GELU + softmax block with torch.compile on CUDA, in a fresh
Inductor cache, and copies every generated ``triton_*`` kernel module into OUT_DIR under the
kernel's name. All imports live in ``main`` so that ``tritune analyze examples/`` can import this
file for free.
"""

from __future__ import annotations

import sys


def main(out_dir: str) -> None:
    import os
    import pathlib
    import re
    import shutil
    import tempfile

    cache = tempfile.mkdtemp(prefix="inductor-cache-")
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = cache
    os.environ.setdefault("TORCHINDUCTOR_BENCHMARK_KERNEL", "1")
    os.environ.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")

    import torch

    class Block(torch.nn.Module):
        def __init__(self, d: int) -> None:
            super().__init__()
            self.ln = torch.nn.LayerNorm(d)
            self.fc = torch.nn.Linear(d, d)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.nn.functional.gelu(self.fc(self.ln(x)))
            return torch.softmax(h, dim=-1) + x

    # d=2048 in fp16 makes the LayerNorm a looped reduction (triton_red_*), the shape where seed
    # 000 found loads that differ only in eviction policy; d=256 gives persistent ones (triton_per_*).
    for d, dtype in ((2048, torch.float16), (256, torch.float32)):
        model = Block(d).to("cuda", dtype)
        x = torch.randn(4096, d, device="cuda", dtype=dtype)
        torch.compile(model)(x)
    # A pointwise chain on its own gives a triton_poi_* kernel.
    a, b = (torch.randn(1024, 1000, device="cuda") for _ in range(2))
    torch.compile(lambda a, b: torch.nn.functional.gelu(a) * b + 1.0)(a, b)
    torch.cuda.synchronize()

    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    for path in pathlib.Path(cache).rglob("*.py"):
        text = path.read_text()
        match = re.search(r"^def (triton_(?:poi|per|red)_\w+)\(", text, re.MULTILINE)
        # Kernel modules only: the graph wrapper module (AsyncCompile) embeds the same sources.
        if match is None or "@triton.jit" not in text or "AsyncCompile" in text:
            continue
        target = out / f"{match.group(1)}.py"
        if target.exists():
            target = out / f"{match.group(1)}_{path.stem[:8]}.py"
        shutil.copy(path, target)
        print(target)
    print("torch", torch.__version__, "triton", __import__("triton").__version__,
          torch.cuda.get_device_name())


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "generated")
