"""A variant of a captured launch: what differs from the baseline, as a plain value.

The baseline is ``Variant()``. A variant may change launch options (``num_warps``, ``num_stages``,
``maxnreg``...), override constexprs (the grid is recomputed from the spec's ``grid_rule``), switch
on tritune's compiler passes, or replace the text of the kernel's source file. Variants are
frozen and JSON round-trip, so they travel to worker processes and into the decision store.

``grid`` says how a rewritten source is launched when that differs from the program's grid:
``{"persistent": {"k": 4, "tiles": "_tritune_tiles"[, "g0": "_tritune_g0"]}}`` (``replay.
persistent``). ``rewrite`` names the source rewrite rule that made ``source`` (``tritune.
rewrites``): ``{"rule": name, "exact": class, "params": {...}}``, so a decision keeps its chain
(the rule, its parameters, then the options and constexprs set on top of it). Both are left out
of the JSON while None (the default), so variants without them keep their hash and stored rows
without them load unchanged.

``tiled`` says that the grid its constexprs were verified on followed the capture's rule read from
the kernel's source (``capture.grid_blocks``; set by ``search.proposers.variant_of`` from the spec's
``grid_rule``): the applier recomputes a fixed grid by that rule, and by arithmetic alone for a
decision stored before (its grid then). Left out of the JSON while False.

``knobs`` names what a source written by a proposer of tritune's changes (``["evict:load0=
evict_first"]``, ``["persistent->looped", "R0_BLOCK"]``): the results say what won from it
(``search.changes``), never from the variant's display name. Left out of the JSON when empty,
and always out of the variant's key and hash (``DESCRIBES``): it describes, it does not identify.

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

# The no-alias assumption (``assumes``): the kernel's distinct tensor arguments do not overlap in
# memory. Its one name, in variants, in the pass list the compiler hook reads, and in rewrites.
NOALIAS = "noalias"
# Fields that describe a variant without changing what runs: left out of its key and hash, so a
# store written before they existed finds the same candidates (and their final verdicts).
DESCRIBES = ("knobs",)


def identity(body: dict) -> dict:
    """A variant's JSON less what only describes it (``DESCRIBES``): what its key and hash are of."""
    return {name: value for name, value in body.items() if name not in DESCRIBES}


@dataclasses.dataclass(frozen=True)
class Variant:
    name: str = "baseline"
    options: dict[str, Any] = dataclasses.field(default_factory=dict)
    constexprs: dict[str, Any] = dataclasses.field(default_factory=dict)
    passes: tuple[str, ...] = ()
    fast_math: bool = False
    source: str | None = None  # replacement text of the kernel's source file
    grid: dict | None = None   # how the source is launched, when not on the program's grid
    rewrite: dict | None = None  # the rule that made ``source`` (module docstring), JSON values only
    assumes: tuple[str, ...] = ()  # e.g. ("noalias",): correct only while the assumption holds
    tiled: bool = False  # its grid rule read the kernel's source (module docstring)
    knobs: tuple[str, ...] = ()  # what its source changes, as the proposer that wrote it names them

    def __post_init__(self) -> None:
        object.__setattr__(self, "passes", tuple(self.passes))
        object.__setattr__(self, "assumes", tuple(self.assumes))
        object.__setattr__(self, "knobs", tuple(self.knobs))

    @property
    def is_baseline(self) -> bool:
        return not (self.options or self.constexprs or self.passes or self.source is not None
                    or self.grid is not None)

    def describe(self) -> str:
        """One line: what this variant changes."""
        parts = [f"{k}={v}" for k, v in {**self.options, **self.constexprs}.items()]
        if self.passes:
            parts.append("passes=" + "+".join(self.passes) + (" fast-math" if self.fast_math else ""))
        if self.source is not None:
            parts.append("source@" + hashlib.sha256(self.source.encode()).hexdigest()[:8])
        if self.grid is not None:
            parts.append("grid=" + json.dumps(self.grid, sort_keys=True, separators=(",", ":")))
        if self.assumes and parts:
            parts.append("assumes " + "+".join(self.assumes))
        return ", ".join(parts) or "baseline"

    def to_json(self) -> dict:
        body = dataclasses.asdict(self)
        body["passes"] = list(self.passes)
        for optional in ("grid", "rewrite"):
            if body[optional] is None:
                del body[optional]
        if self.assumes:
            body["assumes"] = list(self.assumes)
        else:
            del body["assumes"]
        if not self.tiled:
            del body["tiled"]
        if self.knobs:
            body["knobs"] = list(self.knobs)
        else:
            del body["knobs"]
        return body

    @classmethod
    def from_json(cls, body: dict) -> "Variant":
        return cls(**body)

    def key(self) -> str:
        """What identifies the variant (its JSON, less ``DESCRIBES``): the store's candidates and
        decisions are found by it."""
        return json.dumps(identity(self.to_json()), sort_keys=True, default=str)
