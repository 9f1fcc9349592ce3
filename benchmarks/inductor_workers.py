"""Check on the GPU machine that tritune's passes run inside Inductor's compile worker processes.

Sets only the environment (TRITUNE_PASSES, TRITON_CACHE_MANAGER), as a user of an unmodified
program would, compiles a layer norm + softmax with torch.compile using subprocess compile
workers, then reads the compiled kernels' metadata from the (fresh) Triton cache: each binary
built with the hook records its pass counts and the pid of the process that compiled it.

    PYTHONPATH=src python3 benchmarks/inductor_workers.py
"""

from __future__ import annotations

import glob
import json
import os
import sys
import tempfile
import time

import _common

ROOT = tempfile.mkdtemp(prefix="tritune-workers-")
os.environ.update({
    "TRITUNE_PASSES": "exact",
    "TRITON_CACHE_MANAGER": "tritune.compiler.cache:SaltedCacheManager",
    "TORCHINDUCTOR_CACHE_DIR": os.path.join(ROOT, "inductor"),
    "TORCHINDUCTOR_FORCE_DISABLE_CACHES": "1",
    "TORCHINDUCTOR_COMPILE_THREADS": "4",
})
TRITON_CACHE = _common.bootstrap()["TRITON_CACHE_DIR"]  # fresh: only this run's binaries


def main() -> int:
    import torch
    import torch._inductor.config as inductor_config

    _common.require_cuda("inductor_workers.py")

    def block(x, weight, bias):
        y = torch.nn.functional.layer_norm(x, (256,), weight, bias)
        return torch.softmax(y * 0.5, dim=-1) + torch.nn.functional.gelu(y)

    # Inductor compiles in the parent until its worker pool is up: start it and let it warm.
    from torch._inductor.async_compile import AsyncCompile

    AsyncCompile.warm_pool()
    if hasattr(AsyncCompile, "wait_pool_ready"):
        AsyncCompile.wait_pool_ready(timeout=120)
    else:
        time.sleep(20)
    args = [torch.randn(4096, 256, device="cuda"), torch.randn(256, device="cuda"), torch.randn(256, device="cuda")]
    compiled = torch.compile(block)
    out = compiled(*args)
    torch.cuda.synchronize()
    reference = block(*args)
    records = []
    # Inductor points Triton at a cache under its own directory: search both trees.
    paths = [*glob.glob(os.path.join(TRITON_CACHE, "**", "*.json"), recursive=True),
             *glob.glob(os.path.join(ROOT, "**", "*.json"), recursive=True)]
    for path in sorted(set(paths)):
        with open(path) as handle:
            meta = json.load(handle)
        if isinstance(meta, dict) and "name" in meta:
            where = "inductor cache" if path.startswith(ROOT) else "triton cache"
            records.append({"kernel": meta["name"], "tritune": meta.get("tritune"), "found_in": where})
    parent = os.getpid()
    optimized = [r for r in records if r["tritune"]]
    in_workers = [r for r in optimized if r["tritune"].get("pid") != parent]
    summary = {
        "environment": _common.environment(),
        "compile_threads": inductor_config.compile_threads,
        "worker_start_method": getattr(inductor_config, "worker_start_method", None),
        "parent_pid": parent,
        "kernels": records,
        "kernels_compiled": len(records),
        "kernels_with_tritune_record": len(optimized),
        "compiled_in_worker_processes": len(in_workers),
        "max_abs_diff_vs_eager": float((out - reference).abs().max()),
    }
    out_dir = _common.default_out_dir()
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "inductor_workers.json"), "w") as handle:
        json.dump(summary, handle, indent=1)
    for r in records:
        print(r["kernel"], r["tritune"])
    print({k: v for k, v in summary.items() if k not in ("kernels", "environment")})
    return 0 if records and len(in_workers) == len(records) else 1


if __name__ == "__main__":
    sys.exit(main())
