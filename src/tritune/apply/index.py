"""The store's usable decisions for one GPU and Triton version, held in memory.

A launch never queries the store: the applier reads every verified, enabled decision once (at
``enable`` and at each ``refresh``) and keeps those of this target. A key is the kernel's source,
specialization, GPU, capability and Triton version, so a decision made on another GPU or Triton
never matches a live key; the index leaves such decisions out so that a kernel with decisions
only elsewhere costs a launch one dict lookup, like a kernel with none. ``constexprs`` holds,
per kernel and source, the constexpr values its decisions were keyed with: an Inductor tuner
settled on a config with other values can never match one, and its launches skip the hook.
"""

from __future__ import annotations

import collections
import dataclasses
import json
from typing import Any, Iterable, Mapping

from tritune.model.target import Target


@dataclasses.dataclass(frozen=True)
class Index:
    by_sha: Mapping[str, Any]  # DecisionKey.sha -> Decision
    sources: Mapping[str, frozenset[str]]  # kernel name -> source hashes that have a decision
    per_kernel: Mapping[str, int]  # kernel name -> decisions
    constexprs: Mapping[tuple[str, str], tuple[dict, ...]] = dataclasses.field(default_factory=dict)

    @classmethod
    def empty(cls) -> "Index":
        return cls({}, {}, {})


def build(decisions: Iterable[Any], target: Target) -> Index:
    """The usable decisions among ``decisions`` whose key is for ``target`` (``current_target()``)."""
    by_sha, sources, constexprs = {}, collections.defaultdict(set), collections.defaultdict(list)
    for decision in decisions:
        key = decision.key
        if decision.usable and key.target == target.identity:
            by_sha[key.sha] = decision
            sources[key.kernel].add(key.source_hash)
            constexprs[(key.kernel, key.source_hash)].append(json.loads(key.specialization).get("constexprs", {}))
    per_kernel = collections.Counter(d.key.kernel for d in by_sha.values())
    return Index(by_sha, {name: frozenset(found) for name, found in sources.items()}, dict(per_kernel),
                 {k: tuple(v) for k, v in constexprs.items()})
