"""A candidate's outcome as the proposers see it: ``Trial``."""

from __future__ import annotations

import dataclasses

from tritune.model.variant import Variant


@dataclasses.dataclass(frozen=True)
class Trial:
    """A variant that went through build, verify and bench."""

    variant: Variant
    ok: bool  # built, verified and timed
    time_ms: float | None = None
    failure: str | None = None  # a failure kind (tritune.worker.failures) or "wrong_result"
    message: str = ""
