"""What every corpus driver shares: a driver module defines ``LIBRARY``, ``make(device, small)``
(its inputs, built once) and ``step(state)`` (one call of the library's op as a user makes it,
forward and backward, returning every output and gradient by name). ``main`` runs a few steps as
a program, which is what ``tritune capture`` records; ``benchmarks/corpus/measure.py`` imports the
same two functions to run them with tritune enabled and disabled in one process.

``step`` must be a pure function of ``state``: the library's ops that overwrite their inputs
(Liger's cross entropy stores the gradient in the logits) get a fresh copy each step, so every
call computes the same thing and on/off outputs can be compared.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from types import ModuleType

CALLS = 3  # a handful of calls: the first compiles and autotunes, the rest are what a loop repeats


def device_default() -> str:
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def run(module: ModuleType, calls: int = CALLS, device: str | None = None, small: bool = False) -> dict:
    """``calls`` steps of ``module``; returns the last step's outputs (synchronized)."""
    import torch

    state = module.make(device or device_default(), small)
    out = {}
    for _ in range(calls):
        out = module.step(state)
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return out


def main(module: ModuleType) -> int:
    parser = argparse.ArgumentParser(description=(module.__doc__ or "").splitlines()[0])
    parser.add_argument("--calls", type=int, default=CALLS)
    parser.add_argument("--small", action="store_true", help="tiny shapes (a CPU run under TRITON_INTERPRET=1)")
    parser.add_argument("--device", default=None)
    args = parser.parse_args()
    out = run(module, args.calls, args.device, args.small)
    shapes = ", ".join(f"{name} {tuple(t.shape)}" for name, t in out.items())
    print(f"{Path(module.__file__).stem}: {args.calls} calls; outputs {shapes}", flush=True)
    return 0


def grads(outputs, inputs, grad_outputs) -> tuple:
    """d(outputs)/d(inputs) without accumulating into ``.grad`` (each step starts clean)."""
    import torch

    return torch.autograd.grad(outputs, inputs, grad_outputs)
