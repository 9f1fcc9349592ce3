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
(tests/capture/test_capture_shim.py runs it). Installing twice patches once; ``uninstall`` of the last
listener restores the original functions (unless someone patched over ours since: then ours stay
in place and pass every launch straight through). A launch made while a launch is being handled
(a subclass calling ``super().run``, a listener compiling) is never seen twice.

A listener is ``listener(launch) -> after | None``; ``after(result)`` is called once the launch
ran, with what ``run`` returned (the ``CompiledKernel`` on a GPU, None under the interpreter).
A listener that raises is reported once per kernel on stderr and never breaks the program.

An *around hook* (``install_around``; ``tritune.apply`` is one) may launch something else in
place of the launch: ``hook(launch, run) -> result`` calls ``run(chosen)`` with the launch or a
replacement ``Launch`` (another jit function, arguments, grid) and returns what it returned.
Listeners always see the launch as the program made it, before any hook. A hook that raises
before it launched anything is reported once per kernel and the launch runs as written; an
error of the launch itself (inside ``run``) reaches the program unchanged. A hook treats the
``Launch`` it gets (and the ``kwargs`` of one it makes) as read-only: Triton's ``run`` gets
copies, and a hook may hand the same dict to many launches.

A hook with nothing to do for any launch of a kernel says so with ``straight_through(launch,
hook)``: while it is the only hook and no listener is installed, that kernel's later launches
(and those of the ``Autotuner``/``Heuristics`` objects around it) skip the wrapper entirely
(``capture.bypass``); any listener or hook coming or going, or ``restore_straight()``, puts
them back on the wrapper.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import importlib
import sys
import threading
from typing import Any, Callable, Iterator

from tritune.capture.bypass import Bypasses

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
Around = Callable[[Launch, Callable[[Launch], Any]], Any]

_wrappers: contextvars.ContextVar[tuple] = contextvars.ContextVar("tritune_wrappers", default=())
_busy: contextvars.ContextVar[bool] = contextvars.ContextVar("tritune_busy", default=False)
_listeners: list[Listener] = []
_arounds: list[Around] = []
_originals: dict[tuple[str, str, str], Callable] = {}
_patched: dict[type, Callable] = {}  # patched class -> our wrapper of its run (for the bypass check)
_straight = Bypasses()
_lock = threading.Lock()
_reported: set = set()


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
    _add(_listeners, listener)


def uninstall(listener: Listener) -> None:
    """Stop calling ``listener``; the last one out (listener or hook) restores Triton's functions."""
    _remove(_listeners, listener)


def install_around(hook: Around) -> None:
    """Let ``hook`` run every launch (see the module docstring); hooks installed later run inside."""
    _add(_arounds, hook)


def uninstall_around(hook: Around) -> None:
    _remove(_arounds, hook)


def straight_through(launch: Launch, hook: Around) -> bool:
    """``hook`` has nothing to do with any launch of ``launch.fn``: if it is the only hook and no
    listener is installed, that function's later launches (and its wrappers') skip the shim.
    Returns whether they will."""
    return _past_the_shim(launch, hook, None)


def direct(launch: Launch, hook: Around, make: Callable[[Callable], Callable]) -> bool:
    """``hook`` takes over every later launch of ``launch.fn`` itself: while it is the only hook
    and no listener is installed, ``fn.run`` is ``make(original)`` (``original``: Triton's own
    ``run``, unbound), and the wrappers around ``fn`` go straight to Triton (nobody needs to know
    them). Removed like a bypass. Returns whether it is in place."""
    return _past_the_shim(launch, hook, make)


def _past_the_shim(launch: Launch, hook: Around, make: Callable[[Callable], Callable] | None) -> bool:
    if _listeners or len(_arounds) != 1 or _arounds[0] != hook:
        return False
    with _lock:  # the same lock as install/uninstall, which take every bypass out
        if _listeners or len(_arounds) != 1 or _arounds[0] != hook:
            return False
        patched = _patched_for(launch.fn)
        if patched is None:
            return False
        run = patched.__wrapped__.__get__(launch.fn, type(launch.fn)) if make is None else make(patched.__wrapped__)
        if not _straight.put(launch.fn, run, patched):
            return False
        for wrapper in launch.wrappers:
            _bypass(wrapper)
    return True


def restore_straight() -> None:
    """Put every launch back on the shim (e.g. the hook's decisions changed)."""
    with _lock:
        _straight.restore()


def _bypass(obj: Any) -> bool:
    patched = _patched_for(obj)
    return patched is not None and _straight.add(obj, patched.__wrapped__, patched)


def _patched_for(obj: Any) -> Callable | None:
    for cls in type(obj).__mro__:
        patched = _patched.get(cls)
        if patched is not None:
            return patched
    return None


def _add(registry: list, item: Callable) -> None:
    with _lock:
        if not _originals:
            check_targets()
            for target in TARGETS:
                _patch(*target)
        if item not in registry:
            registry.append(item)
        _straight.restore()  # a newcomer sees every launch


def _remove(registry: list, item: Callable) -> None:
    with _lock:
        if item in registry:
            registry.remove(item)
        _straight.restore()
        if _listeners or _arounds:
            return
        for (module_name, class_name, attr), original in list(_originals.items()):
            owner = getattr(importlib.import_module(module_name), class_name)
            if getattr(owner.__dict__.get(attr), "_tritune_shim", False):
                setattr(owner, attr, original)
            # else: patched over since; our wrapper stays and passes launches through
            del _originals[(module_name, class_name, attr)]
        _patched.clear()


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
    if attr == "run":
        _patched[owner] = wrapper
    setattr(owner, attr, wrapper)


def _launch_wrapper(original: Callable) -> Callable:
    def go(chosen: Launch) -> Any:
        return original(chosen.fn, *chosen.args, grid=chosen.grid, warmup=False, **chosen.kwargs)

    def run(self, *args, grid, warmup, **kwargs):
        if warmup or not (_listeners or _arounds) or _busy.get():
            return original(self, *args, grid=grid, warmup=warmup, **kwargs)
        token = _busy.set(True)
        try:
            launch = Launch(self, args, kwargs, grid, _wrappers.get())  # kwargs: ours, run gets a copy
            if not _listeners:  # apply alone: the common case, kept short
                hooks = _arounds
                if len(hooks) == 1:
                    return guarded(hooks[0], (launch,), go, None, launch)
                return _around(tuple(hooks), launch, go)
            afters = [_safe(listener, launch) for listener in list(_listeners)]
            if _arounds:
                result = _around(tuple(_arounds), launch, go)
            else:
                result = original(self, *args, grid=grid, warmup=warmup, **kwargs)
            for after in afters:
                if after is not None:
                    _safe(after, result, launch=launch)
            return result
        finally:
            _busy.reset(token)

    return run


def _around(hooks: tuple, launch: Launch, go: Callable[[Launch], Any]) -> Any:
    """``hooks[0]`` around the launch, the other hooks inside it, ``go`` (Triton's run) innermost."""
    inner = go if len(hooks) == 1 else (lambda chosen: _around(hooks[1:], chosen, go))
    return guarded(hooks[0], (launch,), inner, None, launch)


def guarded(hook: Callable, args: tuple, inner: Callable, as_written: Callable[[], Any] | None,
            launch: Any) -> Any:
    """``hook(*args, run)`` where ``run`` is ``inner``; a failure of the hook itself (not of a
    launch it made) is reported once per kernel (``launch.fn``'s name, or ``launch`` itself when
    it is a name) and the launch runs as written: ``as_written()``, or ``inner(launch)``."""
    state = [0, None]  # 1: started the launch, 2: the launch returned (state[1]: its result)

    def run(*chosen: Any, **kwargs: Any) -> Any:
        state[0] = 1
        result = state[1] = inner(*chosen, **kwargs)
        state[0] = 2
        return result

    try:
        return hook(*args, run)
    except Exception as exc:  # noqa: BLE001 - a tritune bug must not break the user's program
        name = launch if isinstance(launch, str) else getattr(getattr(launch, "fn", None), "__name__", "?")
        if state[0] == 2:  # launched, then failed afterwards: the launch stands
            _report_hook(name, exc)
            return state[1]
        if state[0] == 1:  # the launch itself failed: the program's error
            raise
        _report_hook(name, exc)
        return as_written() if as_written is not None else inner(launch)


def _report_hook(name: str, exc: Exception) -> None:
    if ("hook", name) not in _reported:
        _reported.add(("hook", name))
        print(f"tritune: kernel {name} launched as written (launch hook failed: {type(exc).__name__}: {exc})",
              file=sys.stderr)


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
