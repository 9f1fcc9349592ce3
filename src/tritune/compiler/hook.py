"""The pass pipeline inside Triton's compiler, through the documented stages-inspection hook.

Triton's NVIDIA (and AMD) backend calls ``knobs.runtime.add_stages_inspection_hook(backend,
stages, options, language, capability)`` after filling ``stages``. ``PassHook`` chains whatever
hook was there before, then wraps ``stages["ttir"]`` (and ``stages["ttgir"]`` when configured)
so the pipeline runs on the module each stage returns. Gluon kernels have no ``ttir`` stage and
are left alone.

The hook reads ``tritune.config.current()`` at every compilation: with no passes configured it
does nothing. The cache salt (``compiler.cache``) is derived from the same config, so a binary
built with passes is never stored under, or served from, the key of a binary built without.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, Callable

from triton import knobs

from tritune import config, passes


@dataclasses.dataclass
class Compilation:
    """What the pipeline did to one stage of one compilation."""

    stage: str
    counts: dict[str, int]


class PassHook:
    def __init__(self, previous: Callable[..., Any] | None):
        self.previous = previous
        self.history: list[Compilation] = []  # newest last; for tests, benchmarks and reports

    def __call__(self, backend, stages, options, language, capability):
        if self.previous is not None:
            self.previous(backend, stages, options, language, capability)
        cfg = config.current()
        if not cfg.passes:
            return
        names = passes.resolve(cfg.passes)
        for stage in cfg.stages:
            if stage in stages:
                stages[stage] = self._wrap(stage, stages[stage], names, cfg)

    def _wrap(self, stage: str, make_stage: Callable, names: tuple[str, ...], cfg: config.Config) -> Callable:
        def run_stage(src, metadata):
            module = make_stage(src, metadata)
            result = passes.run_pipeline(module, names, fast_math=cfg.fast_math, verify=cfg.debug)
            self.history.append(Compilation(stage, result.counts))
            # Stored with the binary: which passes changed what, and in which process (Inductor
            # compiles in worker processes; benchmarks/inductor_workers.py checks it was there).
            record = metadata.setdefault("tritune", {})
            record[stage] = result.counts
            record["pid"] = os.getpid()
            return module

        return run_stage


def installed() -> PassHook | None:
    hook = knobs.runtime.add_stages_inspection_hook
    return hook if isinstance(hook, PassHook) else None


def install() -> PassHook:
    """Install the hook once per process (idempotent), chaining any hook already there."""
    hook = installed()
    if hook is None:
        hook = PassHook(knobs.runtime.add_stages_inspection_hook)
        knobs.runtime.add_stages_inspection_hook = hook
    return hook


def uninstall() -> None:
    """Remove tritune's hook, restoring the one it chained."""
    hook = installed()
    if hook is not None:
        knobs.runtime.add_stages_inspection_hook = hook.previous
