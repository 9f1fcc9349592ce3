"""Worker jobs for tests/worker/test_containment.py: a payload's candidate run as tritune runs one, in a
worker whose allowlist is off (``preload=(..., "allowlist_off")``), so that only the jail (or
nothing) stands between the payload and the machine.

- ``unchecked_verify``: ``loop.jobs.verify_job``, exactly what the loop runs for a candidate;
- ``unchecked_launch``: the candidate's module imported and its kernel launched once, as replay
  does (a tenth of a verification's time: the corpus's liveness check runs every payload);
- ``program_launch``: the module imported and the kernel launched through its own decorators, as
  a user's program would launch a kernel file it was given (``triton.heuristics`` and
  ``triton.autotune`` hooks run only there: replay launches the ``@triton.jit`` function inside);
- ``audited``: one of those, under an audit hook, returning what the payload tried (the audit
  events that name a watched path, and every ``exec`` of a string, ``os.system``, ``subprocess.Popen``,
  ``os.fork``, ``socket.connect``) and how the job ended: a jail that stopped a payload shows
  the attempt and no effect; one that never saw the payload run would prove nothing.
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

from tritune.loop.jobs import verify_job
from tritune.model.launch import LaunchSpec
from tritune.model.variant import Variant
from tritune.replay import Replay, make_args


def unchecked_verify(payload: dict) -> dict:
    return verify_job(payload)


def unchecked_launch(payload: dict) -> bool:
    spec = LaunchSpec.from_json(payload["spec"])
    replay = Replay(spec, Variant.from_json(payload["variant"]), root=payload["root"], device="cpu")
    replay(make_args(spec, payload["root"], device="cpu"))
    return True


def program_launch(payload: dict) -> bool:
    import torch
    import triton

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


ALWAYS = frozenset({"os.system", "subprocess.Popen", "os.fork", "socket.__new__", "socket.connect", "sqlite3.connect"})
WATCHED = frozenset({"open", "os.listdir", "os.scandir"})
_EVENTS: list[str] = []
_WATCH: list[str] = []


def audited(payload: dict) -> dict:
    """``{"job": "unchecked_verify"|..., "watch": [strings], ...}`` -> ``{"events", "error"}``."""
    if not _WATCH:
        sys.addaudithook(_hook)  # for good: a hook cannot be removed
    _WATCH[:] = list(payload["watch"]) or ["\0"]
    _EVENTS.clear()
    try:
        globals()[payload["job"]](payload)
        error = None
    except BaseException as exc:  # noqa: BLE001 - what the payload met is the result
        error = f"{type(exc).__name__}: {exc}"[:2000]
    return {"events": list(_EVENTS), "error": error}


def _hook(event: str, args: tuple) -> None:
    if event == "exec" and getattr(args[0], "co_filename", "") == "<string>":  # exec of a string: not an import
        _EVENTS.append("exec <string>")
    elif event in ALWAYS or event.startswith("redteam.") or (event in WATCHED and any(w in str(args) for w in _WATCH)):
        if len(_EVENTS) < 200:
            _EVENTS.append(f"{event} {str(args)[:300]}")
