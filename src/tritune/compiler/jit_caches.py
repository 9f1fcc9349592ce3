"""Shim: keep Triton's in-memory JIT caches apart per pass configuration.

``JITFunction.device_caches`` holds compiled kernels in memory, keyed by specialization and
options only; the pass configuration is not part of that key. Switching passes on or off in a
running process would otherwise keep serving the kernels compiled before the switch. There is no
hook for this, so this module owns the patch: on every switch it parks each live JITFunction's
``device_caches`` under the old salt and brings back (or creates) the one for the new salt.
``tests/passes/test_compiler_hook.py`` fails if Triton renames the attribute or its factory.
"""

from __future__ import annotations

import collections
import gc

from triton.runtime.jit import JITFunction

_PARKED = "_tritune_parked_caches"


def live_jit_functions() -> list[JITFunction]:
    # type() rather than isinstance(): isinstance reads __class__, which some lazy proxies
    # (torch's deprecated aliases) turn into warnings or imports.
    return [obj for obj in gc.get_objects() if issubclass(type(obj), JITFunction)]


def switch(old_salt: str, new_salt: str) -> int:
    """Park the caches of every live JIT function under ``old_salt``; restore ``new_salt``'s."""
    if old_salt == new_salt:
        return 0
    functions = live_jit_functions()
    for fn in functions:
        parked = fn.__dict__.setdefault(_PARKED, {})
        parked[old_salt] = fn.device_caches
        restored = parked.pop(new_salt, None)
        fn.device_caches = collections.defaultdict(fn.create_binder) if restored is None else restored
    return len(functions)
