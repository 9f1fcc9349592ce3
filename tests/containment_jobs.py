"""Worker jobs for tests/test_containment.py: a payload's candidate run as tritune runs one, with
the allowlist's checks in the worker switched off first, so that only the jail (or nothing) stands
between the payload and the machine.

- ``unchecked_verify``: ``loop.jobs.verify_job``, exactly what the loop runs for a candidate;
- ``unchecked_launch``: the candidate's module imported and its kernel launched once, as replay
  does (a tenth of a verification's time: the corpus's liveness check runs every payload);
- ``program_launch``: the module imported and the kernel launched through its own decorators, as
  a user's program would launch a kernel file it was given (``triton.heuristics`` and
  ``triton.autotune`` hooks run only there: replay launches the ``@triton.jit`` function inside).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tritune.capture.spec import LaunchSpec
from tritune.loop.jobs import verify_job
from tritune.replay import Replay, Variant, make_args


def unchecked_verify(payload: dict) -> dict:
    allowlist_off()
    return verify_job(payload)


def unchecked_launch(payload: dict) -> bool:
    allowlist_off()
    spec = LaunchSpec.from_json(payload["spec"])
    replay = Replay(spec, Variant.from_json(payload["variant"]), root=payload["root"], device="cpu")
    replay(make_args(spec, payload["root"], device="cpu"))
    return True


def program_launch(payload: dict) -> bool:
    import torch
    import triton

    allowlist_off()
    text = Variant.from_json(payload["variant"]).source
    path = Path.cwd() / f"program_{abs(hash(text))}.py"  # the worker's scratch directory
    path.write_text(text)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[path.stem] = module
    spec.loader.exec_module(module)
    x, y = torch.randn(300), torch.randn(300)
    out = torch.empty_like(x)
    module.scale_add_kernel[(triton.cdiv(300, 64),)](x, y, out, 300, 0.5, BLOCK=64)
    return bool(torch.allclose(out, x * 0.5 + y))


def allowlist_off() -> None:
    """Make every check of untrusted source in this process accept anything."""
    from tritune.llm import sandbox

    sandbox.check = lambda *args, **kwargs: None
