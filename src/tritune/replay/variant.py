"""A variant of a captured launch: what differs from the baseline, as a plain value.

The baseline is ``Variant()``. A variant may change launch options (``num_warps``, ``num_stages``,
``maxnreg``...), override constexprs (the grid is recomputed from the spec's ``grid_rule``), switch
on tritune's compiler passes, or replace the text of the kernel's source file. Variants are
frozen and JSON round-trip, so they travel to worker processes and into the decision store.

``assumes`` names what the variant is only correct under (``"noalias"``: the kernel's distinct
tensor arguments do not overlap in memory, ``tritune.aliasing``). Replay gives every argument a
tensor of its own, so verification holds the assumption; the applier checks it at each live
launch and runs the baseline where it fails. Left out of the JSON when empty, so a variant
without it has the text, hash and signature it had before the field existed.
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
    assumes: tuple[str, ...] = ()  # e.g. ("noalias",): correct only while the assumption holds

    def __post_init__(self) -> None:
        object.__setattr__(self, "passes", tuple(self.passes))
        object.__setattr__(self, "assumes", tuple(self.assumes))

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
        if self.assumes and parts:
            parts.append("assumes " + "+".join(self.assumes))
        return ", ".join(parts) or "baseline"

    def to_json(self) -> dict:
        body = dataclasses.asdict(self)
        body["passes"] = list(self.passes)
        if self.assumes:
            body["assumes"] = list(self.assumes)
        else:
            del body["assumes"]
        return body

    @classmethod
    def from_json(cls, body: dict) -> "Variant":
        return cls(**body)

    def key(self) -> str:
        return json.dumps(self.to_json(), sort_keys=True, default=str)
