"""Capture of Inductor kernels: the shim on ``CachingAutotuner.run``, and the public entry points.

Inductor launches its Triton kernels through its own launchers (``triton.compile`` + a generated
``launcher(*args, stream)``), never through ``JITFunction.run``, and has no hook that sees a
launch's arguments. So this module owns one patch: ``SHIM_TARGET``,
``torch._inductor.runtime.triton_heuristics.CachingAutotuner.run(self, *args, stream, ...)``
(the same in torch 2.11 and 2.13). The wrapper lets the original run (it autotunes, picks the
launcher and launches), then hands ``add(spec, values)`` a ``LaunchSpec(kind="inductor")`` for
the launcher that ran (``self.launchers[0]``; ``self.configs[0]`` under ``TRITON_INTERPRET=1``,
as Inductor does). Autotuning trials call the launchers directly and are not recorded. Recording
after ``run`` returns is what makes the spec Inductor's final choice: with
``coordinate_descent_tuning`` on, ``run`` replaces ``launchers`` by coordinate descent's winner
before launching, and the spec says ``config_from="coordinate_descent"`` (the winner's
``found_by_coordesc``, also set when Inductor serves it from its autotune cache).

``install(add)`` / ``uninstall()`` are reversible; installing twice patches once (the newest
``add`` wins). ``install_apply(hook)`` / ``uninstall_apply()`` let one launch hook (``tritune.apply``)
run each launch: ``hook(tuner, args, kwargs, run)`` launches something else or calls ``run()``
(Inductor's own ``run`` with the same arguments); a hook that fails before launching is reported
once per kernel and the launch runs as written. Capture and the hook work together: the spec
recorded is Inductor's own launch. The patch stays while either is installed. A hook with
nothing to do for a tuner's launches says so with ``straight_through(tuner, hook)``: while no
capture is installed, that tuner's later launches skip the patch (``capture.bypass``), until
capture or a hook comes or goes, or ``restore_straight()``.
``check_target()`` fails with a clear message if torch renames the target
(``tests/capture/test_capture_inductor.py`` runs it). A recording failure is reported once per kernel on
stderr and never breaks the program. When ``add`` is a ``Recorder``'s, a repeat launch (same
tuner, config, layouts and scalars) is only counted (``Recorder.bump``), so capture stays cheap
in a training loop. While Inductor's ``run`` runs, the plain-JIT shim is told
that a launch is in hand, so an interpreted Inductor launch is not recorded twice.

Public: ``install``, ``uninstall``, ``install_apply``, ``uninstall_apply``, ``recording``,
``installed``, ``check_target``, ``grid_for``, ``launch_spec``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import sys
import threading
from typing import Any, Callable, Iterator

from tritune.capture import _jit_shim
from tritune.capture._jit_shim import guarded
from tritune.capture.bypass import Bypasses
from tritune.capture.inductor_grid import grid_for, grid_rule  # noqa: F401 - public here
from tritune.capture.inductor_spec import launch_spec

SHIM_TARGET = ("torch._inductor.runtime.triton_heuristics", "CachingAutotuner", "run")

Add = Callable[[Any, dict], Any]
Hook = Callable[[Any, tuple, dict, Callable[[], Any]], Any]

_lock = threading.Lock()
_local = threading.local()
_state: dict[str, Any] = {"add": None, "apply": None, "original": None, "pending": None, "wrapper": None}
_reported: set[str] = set()
_straight = Bypasses()


class InductorShimError(RuntimeError):
    """torch no longer has what the shim patches."""


def _owner() -> type:
    module_name, class_name, _ = SHIM_TARGET
    return getattr(importlib.import_module(module_name), class_name)


def check_target() -> None:
    """Raise ``InductorShimError`` if ``CachingAutotuner.run`` is gone or changed its signature."""
    import inspect

    module_name, class_name, attr = SHIM_TARGET
    try:
        owner = _owner()
    except (ImportError, AttributeError) as exc:
        raise InductorShimError(f"no {module_name}.{class_name}: {exc}") from None
    run = inspect.unwrap(owner.__dict__.get(attr)) if attr in owner.__dict__ else None
    if not callable(run):
        raise InductorShimError(f"{module_name}.{class_name} has no {attr}: tritune's Inductor capture needs updating")
    params = inspect.signature(run).parameters
    kinds = {p.kind for p in params.values()}
    if inspect.Parameter.VAR_POSITIONAL not in kinds or "stream" not in params:
        raise InductorShimError(f"{class_name}.{attr}{inspect.signature(run)} is no longer "
                                "run(self, *args, stream, ...): tritune's Inductor capture needs updating")


def install(add: Add) -> None:
    """Call ``add(spec, values)`` for every launch of an Inductor kernel from now on.

    The patch goes in now if Inductor's runtime is imported, else as soon as it is (importing it
    here, in the middle of the program importing ``torch._inductor``, could be circular).
    """
    with _lock:
        _state["add"] = add
        _straight.restore()
        _ensure_patch()


def install_apply(hook: Hook) -> None:
    """Let ``hook`` run every launch of an Inductor kernel (see the module docstring)."""
    with _lock:
        _state["apply"] = hook
        _straight.restore()
        _ensure_patch()


def uninstall_apply() -> None:
    with _lock:
        _state["apply"] = None
        _straight.restore()
        _release_patch()


def straight_through(tuner: Any, hook: Hook) -> bool:
    """``hook`` has nothing to do with any launch of ``tuner``: while capture is not installed,
    its later launches skip the patch. Returns whether they will."""
    with _lock:
        wrapper = _state["wrapper"]
        if _state["add"] is not None or _state["apply"] != hook or wrapper is None:
            return False
        return _straight.add(tuner, wrapper.__wrapped__, wrapper)


def restore_straight() -> None:
    with _lock:
        _straight.restore()


def _ensure_patch() -> None:
    """Patch now if Inductor's runtime is imported, else as soon as it is (``_lock`` held)."""
    from tritune.capture import _after_import

    if _state["original"] is not None or _state.get("pending") is not None:
        return
    if SHIM_TARGET[0] not in sys.modules:
        _state["pending"] = _after_import.when_imported(SHIM_TARGET[0], _patch_when_imported)
        return
    _patch()


def _patch_when_imported(_module: Any) -> None:
    with _lock:
        _state["pending"] = None
        if (_state["add"] is not None or _state["apply"] is not None) and _state["original"] is None:
            _patch()


def _patch() -> None:
    check_target()
    owner = _owner()
    original = owner.__dict__[SHIM_TARGET[2]]
    wrapper = _wrap(original)
    wrapper._tritune_shim = True  # type: ignore[attr-defined]
    wrapper.__wrapped__ = original  # type: ignore[attr-defined]
    _state["original"], _state["wrapper"] = original, wrapper
    setattr(owner, SHIM_TARGET[2], wrapper)


def uninstall() -> None:
    """Stop recording and restore ``CachingAutotuner.run`` (unless patched over since ours: then
    ours stays and passes every launch straight through)."""
    with _lock:
        _state["add"] = None
        _straight.restore()
        _release_patch()


def _release_patch() -> None:
    """Restore ``CachingAutotuner.run`` once neither capture nor a hook needs it (``_lock`` held)."""
    from tritune.capture import _after_import

    if _state["add"] is not None or _state["apply"] is not None:
        return
    original, _state["original"], _state["wrapper"] = _state["original"], None, None
    pending, _state["pending"] = _state.get("pending"), None
    if pending is not None:
        _after_import.cancel(SHIM_TARGET[0], pending)
    if original is None:
        return
    owner = _owner()
    if getattr(owner.__dict__.get(SHIM_TARGET[2]), "_tritune_shim", False):
        setattr(owner, SHIM_TARGET[2], original)


@contextlib.contextmanager
def recording(add: Add) -> Iterator[None]:
    """``install(add)`` for the duration of a block; whatever was installed before comes back."""
    with _lock:
        previous = _state["add"] if installed() else None
    install(add)
    try:
        yield
    finally:
        if previous is None:
            uninstall()
        else:
            with _lock:
                _state["add"] = previous


def installed() -> bool:
    """True while the patch is in place or waits for Inductor's import (capture or a hook installed)."""
    return _state["original"] is not None or _state["pending"] is not None


def _wrap(original: Callable) -> Callable:
    def run(self, *args, **kwargs):
        add, hook = _state["add"], _state["apply"]
        if (add is None and hook is None) or getattr(_local, "busy", False):
            return original(self, *args, **kwargs)
        _local.busy = True
        # Under the interpreter Inductor launches through InterpretedFunction.run: tell the JIT
        # shim this launch is in hand, so that it is not recorded (or applied) twice.
        token = _jit_shim._busy.set(True)
        try:
            _count_candidates(self)  # also under a hook alone: capture may be installed later
            if hook is None:
                result = original(self, *args, **kwargs)
            else:
                as_written = functools.partial(original, self, *args, **kwargs)
                result = guarded(hook, (self, args, kwargs), as_written, as_written, self)
            if add is not None:
                _record(add, self, args)
            return result
        finally:
            _jit_shim._busy.reset(token)
            _local.busy = False

    run.__name__ = "run"
    return run


def _count_candidates(tuner: Any) -> None:
    """Note how many configs the autotuner has to choose from, the first time we see it: once it
    has compiled them, torch 2.11+ drops ``configs`` (None) and keeps only the winner."""
    if hasattr(tuner, "_tritune_candidates"):
        return
    launchers = len(getattr(tuner, "launchers", None) or ())
    configs = len(getattr(tuner, "configs", None) or ())
    # one launcher already: Inductor chose before we looked, among how many is unknown
    tuner._tritune_candidates = None if launchers == 1 else (launchers or configs or None)


def config_source(tuner: Any, config: Any = None) -> str:
    """How the launched config was chosen: ``coordinate_descent`` (Inductor's coordinate descent
    found it), ``autotuned`` (among several), ``only`` (a single config), ``inductor`` (Inductor
    had settled before capture saw the kernel)."""
    if getattr(config, "found_by_coordesc", False):
        return "coordinate_descent"
    candidates = getattr(tuner, "_tritune_candidates", None)
    if candidates is None:
        return "inductor"
    return "autotuned" if candidates > 1 else "only"


def _record(add: Add, tuner: Any, args: tuple) -> None:
    try:
        if getattr(tuner, "triton_interpret", False):
            config, config_from = tuner.configs[0], "first"
        elif len(getattr(tuner, "launchers", None) or ()) == 1:
            config = tuner.launchers[0].config
            config_from = config_source(tuner, config)
        else:  # a plugin launched without settling on one launcher: which config ran is unknown
            launchers = len(getattr(tuner, "launchers", None) or ())
            _skip(add, tuner, "unsupported", f"Inductor launched it with {launchers} launchers (a plugin): "
                  "which config ran is unknown")
            return
        bump = getattr(getattr(add, "__self__", None), "bump", None)  # a Recorder's hot path
        fast_key = ("inductor", id(tuner), id(config), _arg_key(args)) if bump is not None else None
        if fast_key is not None and bump(fast_key):
            return  # a repeat: counted without building the spec again
        spec, values = launch_spec(tuner, args, config, config_from=config_from)
        if fast_key is None:
            add(spec, values)
        else:
            add(spec, values, fast_key=fast_key)
    except Exception as exc:  # noqa: BLE001 - a capture bug must not break the user's program
        _skip(add, tuner, "error", exc)
        name = getattr(getattr(tuner, "fn", None), "__name__", "?")
        if name not in _reported:
            _reported.add(name)
            print(f"tritune capture: Inductor kernel {name} not recorded: {type(exc).__name__}: {exc}",
                  file=sys.stderr)


def _skip(add: Add, tuner: Any, kind: str, why: Any) -> None:
    """Name a launch that was not recorded in the recorder's ``skipped.jsonl`` (``add`` of a
    ``Recorder``; another ``add`` has no such file)."""
    skip = getattr(getattr(add, "__self__", None), "skip", None)
    if skip is None:
        return
    from tritune.capture import skipped

    try:
        skip(None, skipped.of_launch(getattr(tuner, "fn", tuner), kind, why))
    except Exception:  # noqa: BLE001 - never break the program over a record of a record
        pass


def _arg_key(args: tuple) -> tuple:
    """What tells two launches of one tuner and config apart, cheaply: layouts and scalars."""
    key = []
    for arg in args:
        if hasattr(arg, "data_ptr") and hasattr(arg, "stride"):
            key.append((tuple(arg.shape), arg.stride(), arg.dtype, arg.storage_offset()))
        else:
            key.append(arg)
    return tuple(key)
