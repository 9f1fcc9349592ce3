"""tritune inside Triton's compiler: the pass hook, salted cache keys, and the switch.

Switch the pipeline on for a scope::

    import tritune.compiler
    with tritune.compiler.enabled(["exact"]):          # or ["fast"], fast_math=True
        kernel[grid](...)                              # compiled with tritune's passes

or for a program one cannot edit, Inductor's compile workers included::

    TRITUNE_PASSES=exact TRITON_CACHE_MANAGER=tritune.compiler.cache:SaltedCacheManager python prog.py

The switch works through the environment (``tritune.config``), so processes started inside the
scope inherit it. Kernels compiled with passes live under their own cache keys, on disk and in
memory; leaving the scope brings back the baseline binaries.
"""

from __future__ import annotations

import contextlib
from typing import Iterable, Iterator

from tritune import config, passes
from tritune.compiler import cache, hook, jit_caches

__all__ = ["disable", "enable", "enabled", "installed_hook"]

_MANAGER_ENV = config.ENV_CACHE_MANAGER
_ENV_KEYS = (config.ENV_PASSES, config.ENV_FAST_MATH, config.ENV_STAGES, config.ENV_DEBUG, _MANAGER_ENV)


class CacheManagerConflict(RuntimeError):
    pass


def installed_hook() -> hook.PassHook | None:
    return hook.installed()


def enable(names: Iterable[str] = ("exact",), *, fast_math: bool = False,
           stages: Iterable[str] = ("ttir",), debug: bool = False) -> dict[str, str | None]:
    """Switch the pipeline on in this process and its future children; returns the old env."""
    manager = config.cache_manager()
    if manager not in (None, "", cache.MANAGER_PATH):
        raise CacheManagerConflict(
            f"{_MANAGER_ENV}={manager} is set; tritune needs {cache.MANAGER_PATH} to keep "
            "optimized binaries apart from baseline ones")
    stages = tuple(stages)
    unknown = set(stages) - {"ttir", "ttgir"}
    if unknown:
        raise ValueError(f"unknown stage(s) {sorted(unknown)}: tritune runs on 'ttir' and 'ttgir'")
    cfg = config.Config(passes=passes.resolve(names), fast_math=fast_math, stages=stages, debug=debug)
    return _apply_env({**cfg.to_env(), _MANAGER_ENV: cache.MANAGER_PATH})


def disable() -> dict[str, str | None]:
    """Switch the pipeline off; baseline binaries are served again. Returns the old env."""
    return _apply_env({key: None for key in _ENV_KEYS})


def _apply_env(values: dict[str, str | None]) -> dict[str, str | None]:
    old_salt = cache.salt()
    previous = config.update(values)
    hook.install()
    jit_caches.switch(old_salt, cache.salt())
    return previous


@contextlib.contextmanager
def enabled(names: Iterable[str] = ("exact",), **options) -> Iterator[hook.PassHook]:
    """Scoped ``enable``: everything is as before when the block exits, even on error."""
    previous = enable(names, **options)
    try:
        yield hook.install()
    finally:
        _apply_env(previous)
