"""A variant of a captured launch: what differs from the baseline, as a plain value.

The baseline is ``Variant()``. A variant may change launch options (``num_warps``, ``num_stages``,
``maxnreg``...), override constexprs (the grid is recomputed from the spec's ``grid_rule``), switch
on tritune's compiler passes, or replace the text of the kernel's source file. Variants are
frozen and JSON round-trip, so they travel to worker processes and into the decision store.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str = "baseline"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    constexprs: dict[str, Any] = dataclasses.field(default_factory=dict)
    passes: tuple[str, ...] = ()
    fast_math: bool = False
    source: str | None = None  # replacement text of the kernel's source file

    def __post_init__(self) -> None:
        object.__setattr__(self, "passes", tuple(self.passes))

    @property
    def is_baseline(self) -> bool:
        return not (self.options or self.constexprs or self.passes or self.source is not None)

    def describe(self) -> str:
        """One line: what this variant changes."""
        parts = [f"{k}={v}" for k, v in {**self.options, **self.constexprs}.items()]
        if self.passes:
            parts.append("passes=" + "+".join(self.passes) + (" fast-math" if self.fast_math else ""))
        if self.source is not None:
            parts.append("source@" + hashlib.sha256(self.source.encode()).hexdigest()[:8])
        return ", ".join(parts) or "baseline"

    def to_json(self) -> dict:
        body = dataclasses.asdict(self)
        body["passes"] = list(self.passes)
        return body

    @classmethod
    def from_json(cls, body: dict) -> "Variant":
        return cls(**body)

    def key(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, default=str)
