"""Typed configuration: the one place that reads tritune's environment variables.

Environment variables (all optional):

``TRITUNE_PASSES``
    Comma-separated pass names to install into Triton's compiler in every process that imports
    tritune's cache manager (Inductor's compile workers included). ``exact`` names the default
    exact set, ``fast`` the exact set plus the fast-math passes. Empty or unset: no passes.
``TRITUNE_FAST_MATH``
    ``1`` allows fast-math rewrites (division reassociation, reciprocal of non-power-of-two
    constants). Off by default: exact rewrites only.
``TRITUNE_STAGES``
    Which IR stages the passes run on: ``ttir`` (default) or ``ttir,ttgir``.
``TRITUNE_DEBUG``
    ``1`` verifies the module after every pass and fails loudly if a pass leaves it invalid.

``TRITUNE_CAPTURE_DIR``
    Set by ``tritune capture`` for the command it runs: every Python process of that command
    records its Triton launches into this directory. Read by ``capture/_boot/sitecustomize.py``
    before tritune is imported (so processes outside a capture pay nothing); the name lives in
    ``tritune.capture.program.ENV_CAPTURE_DIR``.

Triton's own ``TRITON_INTERPRET`` is read by ``tritune.replay`` to replay on the CPU.

Code reads ``config.current()``. The scoped switch is ``tritune.compiler.enabled()``: it works
through these variables so that processes started inside it (Inductor's workers) inherit it.
"""

from __future__ import annotations

import dataclasses
import os

ENV_PASSES = "TRITUNE_PASSES"
ENV_FAST_MATH = "TRITUNE_FAST_MATH"
ENV_STAGES = "TRITUNE_STAGES"
ENV_DEBUG = "TRITUNE_DEBUG"

_TRUE = {"1", "true", "yes", "on"}


@dataclasses.dataclass(frozen=True)
class Config:
    passes: tuple[str, ...] = ()
    fast_math: bool = False
    stages: tuple[str, ...] = ("ttir",)
    debug: bool = False

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> "Config":
        env = os.environ if environ is None else environ
        return cls(
            passes=_split(env.get(ENV_PASSES, "")),
            fast_math=env.get(ENV_FAST_MATH, "").strip().lower() in _TRUE,
            stages=_split(env.get(ENV_STAGES, "")) or ("ttir",),
            debug=env.get(ENV_DEBUG, "").strip().lower() in _TRUE,
        )

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces this config in another process."""
        return {
            ENV_PASSES: ",".join(self.passes),
            ENV_FAST_MATH: "1" if self.fast_math else "0",
            ENV_STAGES: ",".join(self.stages),
            ENV_DEBUG: "1" if self.debug else "0",
        }


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def current() -> Config:
    """The config in force, read from the environment at each call."""
    return Config.from_env()
