"""Replay a captured launch once, as captured: the fidelity check (``benchmarks/fidelity.py``).

"Replayed" means what the optimizer needs of a launch before anything else: the kernel's file
imports, its constexprs decode, inputs in the captured layout are made, the kernel builds and
runs once to completion (on a GPU: synchronized, so a fault surfaces here). It raises whatever
stops that; the worker running ``replay_job`` classifies it (``tritune.worker.failures``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritune.model.launch import LaunchSpec


def replay_once(spec: LaunchSpec, root: str | Path, *, device: str | None = None, seed: int = 0) -> dict[str, Any]:
    """Build and run ``spec`` once on fresh inputs; ``{"grid", "device", "compiled"}``."""
    from tritune.replay.inputs import make_args
    from tritune.replay.launch import Replay

    replay = Replay(spec, root=root, device=device)
    args = make_args(spec, root, seed=seed, device=replay.device)
    replay.compile(args)
    replay(args)
    if str(replay.device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(torch.device(replay.device))
    return {"grid": list(replay.grid), "device": replay.device, "compiled": replay.compiles}


def replay_job(payload: dict) -> dict[str, Any]:
    """Worker entry: ``{"spec": spec.to_json(), "root", "device"?, "seed"?}`` -> ``replay_once``'s."""
    spec = LaunchSpec.from_json(payload["spec"])
    return replay_once(spec, payload["root"], device=payload.get("device"), seed=int(payload.get("seed", 0)))
