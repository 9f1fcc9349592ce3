"""The one place that patches Triton: every ``kernel[grid](...)`` launch, with its args and grid.

Triton has no hook that sees a launch's arguments and grid (``launch_enter_hook`` sees only the
compiled kernel's metadata, and none runs under ``TRITON_INTERPRET=1``), so this module wraps:

``JITFunction.run`` / ``InterpretedFunction.run``   ``run(self, *args, grid, warmup, **kwargs)``:
    every launch; the listeners see it before it runs and (optionally) its result after.
``Autotuner.run`` / ``Heuristics.run``
    only to know the outermost wrapper of a launch (its ``kind``) and, for ``triton.autotune``,
    which config it chose: they call ``self.fn.run(*args, **kwargs, **config.all_kwargs())``, so
    the chosen config reaches the JIT launch as keyword arguments.
``Autotuner._bench``
    only to leave out the autotuner's timing trials: the program's own launches are recorded,
    with the config that won, not every config tried.

``TARGETS`` lists these; ``check_targets()`` fails with a clear message when Triton renames one
(tests/test_capture_shim.py runs it). Installing twice patches once; ``uninstall`` of the last
listener restores the original functions (unless someone patched over ours since: then ours stay
in place and pass every launch straight through). A launch made while a launch is being handled
(a subclass calling ``super().run``, a listener compiling) is never seen twice.

A listener is ``listener(launch) -> after | None``; ``after(result)`` is called once the launch
ran, with what ``run`` returned (the ``CompiledKernel`` on a GPU, None under the interpreter).
A listener that raises is reported once per kernel on stderr and never breaks the program.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib
import sys
import threading
from typing import Any, Callable, Iterator

# (module, class, attribute, what the wrapper does)
TARGETS = (
    ("triton.runtime.jit", "JITFunction", "run", "launch"),
    ("triton.runtime.interpreter", "InterpretedFunction", "run", "launch"),
    ("triton.runtime.autotuner", "Autotuner", "run", "wrapper"),
    ("triton.runtime.autotuner", "Heuristics", "run", "wrapper"),
    ("triton.runtime.autotuner", "Autotuner", "_bench", "trial"),
)

WRAPPER_KINDS = {"Autotuner": "autotune", "Heuristics": "heuristics"}


def is_interpreted(obj: Any) -> bool:
    """A kernel run by ``TRITON_INTERPRET=1`` (``InterpretedFunction``), told by its type's name so
    that asking never imports the interpreter."""
    return type(obj).__name__ == "InterpretedFunction"


@dataclasses.dataclass(slots=True)
class Launch:
    """One launch as the program made it: ``fn[grid](*args, **kwargs)``."""

    fn: Any  # JITFunction or InterpretedFunction
    args: tuple
    kwargs: dict
    grid: Any  # a tuple, or a callable of the bound arguments
    wrappers: tuple  # the Autotuner/Heuristics objects it went through, outermost first

    @property
    def kind(self) -> str:
        if not self.wrappers:
            return "jit"
        return WRAPPER_KINDS.get(type(self.wrappers[0]).__name__, "jit")

    @property
    def interpreted(self) -> bool:
        return is_interpreted(self.fn)

    @property
    def autotuner(self) -> Any | None:
        for wrapper in self.wrappers:
            if type(wrapper).__name__ == "Autotuner":
                return wrapper
        return None


Listener = Callable[[Launch], "Callable[[Any], None] | None"]

_wrappers: contextvars.ContextVar[tuple] = contextvars.ContextVar("tritune_wrappers", default=())
_busy: contextvars.ContextVar[bool] = contextvars.ContextVar("tritune_busy", default=False)
_listeners: list[Listener] = []
_originals: dict[tuple[str, str, str], Callable] = {}
_lock = threading.Lock()
_reported: set[str] = set()


class ShimError(RuntimeError):
    """Triton no longer has what the shim patches."""


def check_targets() -> None:
    """Raise ``ShimError`` naming every patched Triton attribute that is missing."""
    missing = []
    for module_name, class_name, attr, _ in TARGETS:
        try:
            owner = getattr(importlib.import_module(module_name), class_name)
        except (ImportError, AttributeError):
            missing.append(f"{module_name}.{class_name}")
            continue
        if not callable(owner.__dict__.get(attr)):  # defined on the class itself, as _patch needs
            missing.append(f"{module_name}.{class_name}.{attr}")
    if missing:
        import triton

        raise ShimError(f"triton {triton.__version__} has no {', '.join(missing)}: "
                        "tritune capture needs updating for this Triton")


def install(listener: Listener) -> None:
    """Start calling ``listener`` for every launch; patches Triton on the first listener."""
    with _lock:
        if not _originals:
            check_targets()
            for target in TARGETS:
                _patch(*target)
        if listener not in _listeners:
            _listeners.append(listener)


def uninstall(listener: Listener) -> None:
    """Stop calling ``listener``; the last one out restores Triton's functions."""
    with _lock:
        if listener in _listeners:
            _listeners.remove(listener)
        if _listeners:
            return
        for (module_name, class_name, attr), original in list(_originals.items()):
            owner = getattr(importlib.import_module(module_name), class_name)
            if getattr(owner.__dict__.get(attr), "_tritune_shim", False):
                setattr(owner, attr, original)
            # else: patched over since; our wrapper stays and passes launches through
            del _originals[(module_name, class_name, attr)]


def installed() -> bool:
    return bool(_originals)


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """Launches inside are not reported (another recorder, e.g. Inductor's, has them in hand)."""
    token = _busy.set(True)
    try:
        yield
    finally:
        _busy.reset(token)


def _patch(module_name: str, class_name: str, attr: str, role: str) -> None:
    owner = getattr(importlib.import_module(module_name), class_name)
    original = owner.__dict__[attr]
    wrapper = {"launch": _launch_wrapper, "wrapper": _outer_wrapper, "trial": _trial_wrapper}[role](original)
    wrapper._tritune_shim = True
    wrapper.__wrapped__ = original
    wrapper.__name__ = attr
    _originals[(module_name, class_name, attr)] = original
    setattr(owner, attr, wrapper)


def _launch_wrapper(original: Callable) -> Callable:
    def run(self, *args, grid, warmup, **kwargs):
        if warmup or _busy.get() or not _listeners:
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        token = _busy.set(True)
        try:
            launch = Launch(self, args, kwargs, grid, _wrappers.get())  # kwargs: ours, run gets a copy
            afters = [_safe(listener, launch) for listener in list(_listeners)]
            result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
            for after in afters:
                if after is not None:
                    _safe(after, result, launch=launch)
            return result
        finally:
            _busy.reset(token)

    return run


def _outer_wrapper(original: Callable) -> Callable:
    def run(self, *args, **kwargs):
        token = _wrappers.set(_wrappers.get() + (self,))
        try:
            return original(self, *args, **kwargs)
        finally:
            _wrappers.reset(token)

    return run


def _trial_wrapper(original: Callable) -> Callable:
    def bench(self, *args, **kwargs):
        token = _busy.set(True)  # the autotuner timing one config: not a launch of the program
        try:
            return original(self, *args, **kwargs)
        finally:
            _busy.reset(token)

    return bench


def _safe(function: Callable, argument: Any, launch: Launch | None = None) -> Any:
    """Call a listener (or its ``after``) so that no failure of ours reaches the program."""
    try:
        return function(argument)
    except Exception as exc:  # noqa: BLE001 - a capture bug must not break the user's program
        launch = launch or argument
        name = getattr(getattr(launch, "fn", None), "__name__", "?")
        if name not in _reported:
            _reported.add(name)
            print(f"tritune capture: kernel {name} not recorded: {type(exc).__name__}: {exc}", file=sys.stderr)
        return None
