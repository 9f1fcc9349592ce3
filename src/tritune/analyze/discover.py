"""Find the ``@triton.jit`` kernels of a file or a directory, by importing each file.

A kernel is reported with what its wrappers know about launching it:

- ``triton.autotune`` (``Autotuner``): its configs;
- ``triton.heuristics`` (``Heuristics``): its value functions;
- Inductor's ``CachingAutotuner`` (``@triton_heuristics.pointwise/reduction/...``): its configs
  and ``triton_meta`` (signature, constants, divisibility attributes).

Files are imported by ``tritune.imports.import_file`` (once per process and content, prints kept
off stdout, ``sys.exit`` and a deadline turned into one-line errors). Only kernels defined in the
file itself are reported, so a helper kernel imported from elsewhere is not counted twice. torch
is imported only by files that import it, or that are Inductor modules (see
``tritune._inductor_shim``). An import that fails becomes a ``FileError`` with a one-line
message; the other files go on.
"""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from triton.runtime.autotuner import Autotuner, Heuristics
from triton.runtime.jit import JITFunction

from tritune.errors import one_line
from tritune.imports import FileError, import_file

INDUCTOR_HEURISTICS = "torch._inductor.runtime.triton_heuristics"
SKIPPED_DIRS = {"__pycache__"}


@dataclasses.dataclass(frozen=True)
class Config:
    """One launch configuration a wrapper proposes."""

    kwargs: dict[str, Any]
    num_warps: int | None = None
    num_stages: int | None = None


@dataclasses.dataclass
class Kernel:
    name: str
    file: str
    fn: JITFunction
    kind: str  # "jit", "autotune", "heuristics" or "inductor" (the outermost wrapper)
    configs: list[Config] = dataclasses.field(default_factory=list)
    heuristics: dict[str, Callable[[dict], Any]] = dataclasses.field(default_factory=dict)
    signature: dict[str, str] | None = None  # Inductor's triton_meta["signature"]
    constants: dict[str, Any] = dataclasses.field(default_factory=dict)  # Inductor's
    attrs: dict[tuple[int, ...], list] | None = None  # Inductor's triton_meta["configs"][0]


def python_files(path: str | Path) -> list[Path]:
    """``path`` itself if it is a file, else every ``*.py`` below it (sorted, caches skipped)."""
    root = Path(path)
    if root.is_file():
        return [root]
    return sorted(
        file for file in root.rglob("*.py")
        if not any(part in SKIPPED_DIRS or part.startswith(".") for part in file.relative_to(root).parts[:-1])
    )


def discover_file(path: str | Path, *, timeout_s: float | None = None) -> tuple[list[Kernel], FileError | None]:
    try:
        module = import_file(path, timeout_s=timeout_s)
    except BaseException as exc:  # noqa: BLE001 - a user's file may raise anything, SystemExit too
        if isinstance(exc, KeyboardInterrupt):
            raise
        return [], FileError(str(path), one_line(exc))
    return kernels_of(module, str(path)), None


def discover(path: str | Path, *, timeout_s: float | None = None) -> tuple[list[Kernel], list[FileError]]:
    kernels: list[Kernel] = []
    errors: list[FileError] = []
    for file in python_files(path):
        found, error = discover_file(file, timeout_s=timeout_s)
        kernels.extend(found)
        errors.extend([error] if error else [])
    return kernels, errors


def kernels_of(module: ModuleType, file: str) -> list[Kernel]:
    """The module's own kernels, each once, the outermost wrapper winning over a bare JITFunction."""
    found: dict[int, Kernel] = {}
    for value in vars(module).values():
        kernel = unwrap(value, file)
        if kernel is None or not _defined_in(kernel.fn, module):
            continue
        if id(kernel.fn) not in found or found[id(kernel.fn)].kind == "jit":
            found[id(kernel.fn)] = kernel
    return list(found.values())


def unwrap(obj: Any, file: str) -> Kernel | None:
    """Peel wrappers down to the JITFunction, collecting what each wrapper knows."""
    kind = None
    configs: list[Config] = []
    heuristics: dict[str, Callable] = {}
    meta: dict[str, Any] = {}
    for _ in range(8):  # wrappers nest a few deep at most
        if isinstance(obj, JITFunction):
            return Kernel(
                name=obj.__name__, file=file, fn=obj, kind=kind or "jit", configs=configs,
                heuristics=heuristics, signature=meta.get("signature"),
                constants=dict(meta.get("constants") or {}), attrs=_first_attrs(meta),
            )
        if _is_caching_autotuner(obj):
            kind = kind or "inductor"
            meta = dict(getattr(obj, "triton_meta", None) or {})
            configs = configs or [_config(c) for c in getattr(obj, "configs", None) or []]
        elif isinstance(obj, Autotuner):
            kind = kind or "autotune"
            configs = configs or [_config(c) for c in obj.configs]
        elif isinstance(obj, Heuristics):
            kind = kind or "heuristics"
            heuristics = {**obj.values, **heuristics}
        else:
            return None
        obj = obj.fn
    return None


def _config(config: Any) -> Config:
    return Config(
        kwargs=dict(getattr(config, "kwargs", {}) or {}),
        num_warps=getattr(config, "num_warps", None),
        num_stages=getattr(config, "num_stages", None),
    )


def _first_attrs(meta: dict[str, Any]) -> dict | None:
    configs = meta.get("configs")
    if isinstance(configs, (list, tuple)) and configs and isinstance(configs[0], dict):
        return {tuple(key): value for key, value in configs[0].items()}
    return None


def _is_caching_autotuner(obj: Any) -> bool:
    heuristics = sys.modules.get(INDUCTOR_HEURISTICS)  # loaded only if the file imported it
    caching = getattr(heuristics, "CachingAutotuner", None)
    return caching is not None and isinstance(obj, caching)


def _defined_in(fn: JITFunction, module: ModuleType) -> bool:
    return getattr(fn.fn, "__module__", None) == module.__name__
