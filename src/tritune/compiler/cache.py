"""Separate cache keys for optimized binaries.

Triton's compile cache key ignores the stages-inspection hook: without a salt, a binary built with
passes would be stored under the baseline's key and later served to programs that never asked for
it, and a baseline binary already in the cache would be served before the hook runs.
``SaltedCacheManager`` is Triton's ``FileCacheManager`` under a key salted with the pass
configuration and the source of tritune's passes; with no passes configured the key is Triton's
own, so baseline binaries are shared with plain Triton.

It is installed through Triton's documented ``TRITON_CACHE_MANAGER`` variable
(``tritune.compiler.cache:SaltedCacheManager``). Triton imports this module in every process that
compiles, Inductor's compile workers included, and importing it installs the pass hook when
``TRITUNE_PASSES`` is set: that is how the pipeline reaches processes tritune never ran code in.
"""

from __future__ import annotations

import base64
import functools
import hashlib
import pathlib

from triton.runtime.cache import FileCacheManager

from tritune import config
from tritune.compiler import hook

MANAGER_PATH = "tritune.compiler.cache:SaltedCacheManager"


@functools.cache
def _implementation_hash() -> str:
    """Hash of the code that transforms IR: a changed pass must not reuse old binaries."""
    root = pathlib.Path(__file__).resolve().parent.parent
    digest = hashlib.sha256()
    for path in sorted([*root.glob("ir/*.py"), *root.glob("passes/*.py")]):
        digest.update(path.name.encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def salt(cfg: config.Config | None = None) -> str:
    """'' when no passes are configured (Triton's own key), else a hash of what will run."""
    cfg = cfg or config.current()
    if not cfg.passes:
        return ""
    from tritune.passes import resolve

    spec = f"{resolve(cfg.passes)}|fast_math={cfg.fast_math}|stages={cfg.stages}|{_implementation_hash()}"
    return hashlib.sha256(spec.encode()).hexdigest()[:32]


def salted_key(key: str, cfg: config.Config | None = None) -> str:
    current = salt(cfg)
    if not current:
        return key
    digest = hashlib.sha256(f"{key}-tritune-{current}".encode()).digest()
    return base64.b32encode(digest).decode().rstrip("=")


class SaltedCacheManager(FileCacheManager):
    def __init__(self, key, override=False, dump=False):
        # Override and dump directories are keyed by source hash on purpose: leave them be.
        super().__init__(key if (override or dump) else salted_key(key), override, dump)


if config.current().passes:
    hook.install()
