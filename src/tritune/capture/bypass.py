"""Launches that go straight to Triton or Inductor, past our patch, at no cost.

The shims patch ``run`` on a class (``JITFunction``, ``Autotuner``, ``CachingAutotuner``...), so
every launch of every kernel pays for our wrapper (about 0.5 us of Python on the dev machine),
even when nothing of tritune cares about that kernel. A launch reaches ``run`` through the
instance (``fn[grid](...)`` calls ``self.run``, Inductor's code calls ``kernel.run``), so the
original method bound to the instance, put in the instance's ``__dict__``, is found first: later
launches of that one object call Triton's own ``run`` directly, as if tritune were not there
(measured faster than through the class, since the bound method is made once).

``Bypasses.add(obj, original, patched)`` does that for one object (``put`` puts another
function there: a hook's own fast path for that one object), unless its class overrides ``run``
below the patched class (then our wrapper is not what its launches reach), it already has a
``run`` of its own (a test's stub), or it cannot hold one (``__slots__``). ``restore()`` takes
every bypass out again: the shims call it whenever a listener or hook comes or goes, so a bypass
never hides a launch from anyone who wants to see it. Objects are held weakly.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any, Callable


class Bypasses:
    def __init__(self) -> None:
        self._held: dict[int, tuple[weakref.ref, Any]] = {}
        self._lock = threading.Lock()

    def add(self, obj: Any, original: Callable, patched: Callable) -> bool:
        """Let ``obj``'s launches call ``original`` (the class's own ``run``) directly; ``patched``
        is our wrapper, which ``type(obj).run`` must be. Returns whether the bypass is in place."""
        return self.put(obj, original.__get__(obj, type(obj)), patched)

    def put(self, obj: Any, run: Callable, patched: Callable) -> bool:
        """Let ``obj``'s launches call ``run`` (called as ``obj.run(...)``, without ``self``)."""
        if getattr(type(obj), "run", None) is not patched:
            return False
        try:
            attrs = vars(obj)
            ref = weakref.ref(obj)
        except TypeError:  # no __dict__ or no weak references: stays on the patched path
            return False
        if "run" in attrs:
            return False
        bound = run
        with self._lock:
            attrs["run"] = bound
            self._held[id(obj)] = (ref, bound)
        return True

    def restore(self) -> None:
        with self._lock:
            held, self._held = self._held, {}
        for ref, bound in held.values():
            obj = ref()
            if obj is not None and vars(obj).get("run") is bound:
                del vars(obj)["run"]

    def __len__(self) -> int:
        return len(self._held)
