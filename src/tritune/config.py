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

``TRITUNE_STORE``
    Path of a decision store whose verified decisions every Python process applies at launch
    time (``tritune.apply``), for programs one cannot edit; set by ``tritune run --store``. Read
    by ``capture/_boot/sitecustomize.py`` (first on ``PYTHONPATH``) before tritune is imported;
    apply starts once the process imports Triton. A missing or unreadable store is one line on
    stderr and the program runs as written.

``TRITUNE_NCU``
    Path of the Nsight Compute CLI that ``tritune.profile`` runs. Unset: ``ncu`` on ``PATH``,
    else ``/usr/local/cuda/bin/ncu``; none of them: profiles fall back to timing + static
    analysis and say so. A path that is not an executable file is reported as such.

``TRITUNE_HOME``
    Where tritune keeps per-user state: the secret that signs decision stores
    (``store.key``, see ``tritune.store.signing``). Default ``~/.tritune``, created with mode
    0700 on first use. Stores signed under one home are not trusted under another: tests and
    sandboxes that set it get a store of their own.

Triton's own ``TRITON_INTERPRET`` is read by ``tritune.replay`` to replay on the CPU.

Code reads ``config.current()``. The scoped switch is ``tritune.compiler.enabled()``: it works
through these variables so that processes started inside it (Inductor's workers) inherit it.
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

ENV_PASSES = "TRITUNE_PASSES"
ENV_FAST_MATH = "TRITUNE_FAST_MATH"
ENV_STAGES = "TRITUNE_STAGES"
ENV_DEBUG = "TRITUNE_DEBUG"
ENV_STORE = "TRITUNE_STORE"  # read by capture/_boot/sitecustomize.py; set by tritune run
ENV_NCU = "TRITUNE_NCU"  # read by tritune.profile.ncu.find_ncu
ENV_HOME = "TRITUNE_HOME"

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


class ConfigError(ValueError):
    """A variable's value cannot be used; the message names the variable and the value."""


def home() -> Path:
    """``$TRITUNE_HOME`` (default ``~/.tritune``), created with mode 0700 if missing."""
    path = Path(os.environ.get(ENV_HOME) or Path.home() / ".tritune").expanduser()
    if path.exists() and not path.is_dir():
        raise ConfigError(f"{ENV_HOME}={path}: exists and is not a directory")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        raise ConfigError(f"{ENV_HOME}={path}: cannot be created ({exc.strerror})") from None
    return path
