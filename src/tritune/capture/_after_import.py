"""Run a callback once a module has been imported, now if it already is.

Capture starts at interpreter start-up (``_boot/sitecustomize.py``), long before the program
imports Triton or ``torch._inductor``, and importing them eagerly would slow every Python process
of the captured command (and import Inductor into programs that never use it). A finder at the
front of ``sys.meta_path`` wraps the loader of the named module so the callback runs right after
the module's body.
"""

from __future__ import annotations

import importlib.abc
import sys
import threading
from typing import Any, Callable

Callback = Callable[[Any], None]

_pending: dict[str, list[Callback]] = {}
_lock = threading.RLock()


def when_imported(name: str, callback: Callback) -> Callback:
    """Call ``callback(module)`` once ``name`` is imported; returns it, for ``cancel``."""
    with _lock:
        module = sys.modules.get(name)
        if module is None:
            _pending.setdefault(name, []).append(callback)
            if _finder not in sys.meta_path:
                sys.meta_path.insert(0, _finder)
    if module is not None:
        callback(module)
    return callback


def cancel(name: str, callback: Callback) -> None:
    with _lock:
        callbacks = _pending.get(name, [])
        if callback in callbacks:
            callbacks.remove(callback)
        if not callbacks:
            _pending.pop(name, None)
        if not _pending and _finder in sys.meta_path:
            sys.meta_path.remove(_finder)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self) -> None:
        self._busy = threading.local()

    def find_spec(self, fullname, path, target=None):
        if fullname not in _pending or getattr(self._busy, "on", False):
            return None
        self._busy.on = True
        try:
            spec = _find_with_others(self, fullname, path, target)
        finally:
            self._busy.on = False
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _Loader(spec.loader, fullname)
        return spec


def _find_with_others(me, fullname, path, target):
    for finder in sys.meta_path:
        if finder is me or not hasattr(finder, "find_spec"):
            continue
        spec = finder.find_spec(fullname, path, target)
        if spec is not None:
            return spec
    return None


class _Loader(importlib.abc.Loader):
    def __init__(self, loader, name: str):
        self.loader = loader
        self.name = name

    def create_module(self, spec):
        return self.loader.create_module(spec)

    def exec_module(self, module) -> None:
        self.loader.exec_module(module)
        module.__loader__ = self.loader
        if getattr(module, "__spec__", None) is not None:
            module.__spec__.loader = self.loader
        with _lock:
            callbacks = _pending.pop(self.name, [])
            if not _pending and _finder in sys.meta_path:
                sys.meta_path.remove(_finder)
        for callback in callbacks:
            try:
                callback(module)
            except Exception as exc:  # noqa: BLE001 - our failure must not fail the program's import
                print(f"tritune capture: not active after import of {self.name}: {type(exc).__name__}: {exc}",
                      file=sys.stderr)

    def __getattr__(self, attr):  # get_source, get_filename, is_package, ... of the real loader
        return getattr(self.loader, attr)


_finder = _Finder()
