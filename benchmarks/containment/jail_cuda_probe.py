"""Which of the jail's mechanisms CUDA needs: a jailed worker runs ``tests/jail_jobs.py:gpu_add``
with each mechanism turned off in turn, and with extra paths granted (GPU machine).

    PYTHONPATH=$PWD/src python3 benchmarks/containment/jail_cuda_probe.py
"""

from __future__ import annotations

import dataclasses
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "tests"))

from tritune.worker import jail  # noqa: E402
from tritune.worker.pool import Worker  # noqa: E402


def main() -> None:
    base = jail.policy()
    print("read:", base.read)
    print("read_write:", base.read_write)
    print("devices:", base.devices)
    off = dataclasses.replace(base, landlock=False, seccomp=False, caps=False)
    everything = {k: v for k, v in os.environ.items() if k not in ("TRITUNE_LLM_API_KEY", "OPENAI_API_KEY")}
    arms = {
        "all off": (off, None),
        "all off, user's env": (off, everything),
        "landlock only": (dataclasses.replace(off, landlock=True), None),
        "seccomp only": (dataclasses.replace(off, seccomp=True), None),
        "caps drop only": (dataclasses.replace(off, caps=True), None),
        "full, user's env": (base, everything),
        "full": base,
    }
    for name, arm in arms.items():
        policy, env = arm if isinstance(arm, tuple) else (arm, None)
        try:
            with Worker(120, env=env, preload=("torch",), jail=policy) as worker:
                out = worker.call("jail_jobs:gpu_add")
            said = "ok" if out.ok and out.value.get("ok") else f"FAILED {out.failure.message[:160] if out.failure else out.value}"
        except Exception as exc:  # a policy this kernel refuses: say so and go on
            said = f"FAILED to start: {type(exc).__name__}: {exc}"[:200]
        print(f"{name:22s} {said}", flush=True)


if __name__ == "__main__":
    main()
