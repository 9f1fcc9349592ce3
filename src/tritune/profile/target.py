"""The program ncu profiles: ``python -m tritune.profile.target PAYLOAD.json``.

It rebuilds one captured launch (``tritune.replay``) on fresh inputs, compiles it (Triton's
``warmup=True`` path: nothing is launched), then launches it ``warmup`` times and once more, and
waits for the GPU. ncu skips the first ``warmup`` launches of the kernel (``--launch-skip``) and
profiles the last one. All launches share one input set: ncu saves and restores the memory a
profiled kernel writes between its replay passes, and the kernel's speed does not depend on the
values (a kernel that reads its own outputs back sees them once overwritten; so does a program).

The payload is ``{"spec": LaunchSpec.to_json(), "root": DIR, "variant"?: Variant.to_json(),
"warmup"?: 1, "seed"?: 0, "device"?: str, "result"?: PATH}``. With ``result`` the target writes
what it did there (JSON: kernel, grid, launches, device, and per written tensor the sum of its
values: a test compares that with the kernel's reference). Its stdout goes to stderr: ncu prints
its CSV on stdout, and nothing of the program's may land in the table.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from tritune.profile.ncu import WARMUP_LAUNCHES


def run(payload: dict[str, Any]) -> dict[str, Any]:
    """Replay the payload's launch ``warmup + 1`` times; what was launched."""
    from tritune.model.launch import LaunchSpec
    from tritune.model.variant import Variant
    from tritune.replay import Replay, make_args, outputs

    spec = LaunchSpec.from_json(payload["spec"])
    variant = Variant.from_json(payload["variant"]) if payload.get("variant") else Variant()
    root = Path(payload["root"])
    replay = Replay(spec, variant, root=root, device=payload.get("device"))
    args = make_args(spec, root, seed=int(payload.get("seed", 0)), device=replay.device)
    replay.compile(args)
    launch = replay.launcher(args)
    launches = int(payload.get("warmup", WARMUP_LAUNCHES)) + 1
    for _ in range(launches):
        launch()
    _synchronize(replay.device)
    return {
        "kernel": spec.kernel, "grid": list(replay.grid), "launches": launches, "device": replay.device,
        "variant": variant.describe(),
        "sums": {name: float(tensor.double().sum()) for name, tensor in outputs(spec, args).items()},
    }


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m tritune.profile.target PAYLOAD.json", file=sys.stderr)
        return 2
    sys.stdout.flush()
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the program's prints must not reach ncu's CSV
    payload = json.loads(Path(argv[0]).read_text())
    done = run(payload)
    print(f"tritune.profile.target: {done['launches']} launches of {done['kernel']} grid {done['grid']} "
          f"on {done['device']} ({done['variant']})", file=sys.stderr)
    if payload.get("result"):
        Path(payload["result"]).write_text(json.dumps(done))
    return 0


def _synchronize(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


if __name__ == "__main__":
    sys.exit(main())
