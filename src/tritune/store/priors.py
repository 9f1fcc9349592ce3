"""What the store knows that can start a new search (``search.prior`` turns it into configs).

Two queries, both over the decisions this user signed and still uses (``Decision.usable``: a
foreign, edited, unsigned or rolled-back decision never seeds anything):

``decided_for_source(key)``
    the decisions of the same kernel (name and source hash) on other keys: another shape
    bucket, another run, another GPU of the same kind (same GPU name and capability), the most
    confident first (highest confirmed speedup).
``decided_like(key, category, size_class)``
    the decisions of other kernel sources on this kind of GPU whose signed traits (what
    ``set_decision`` recorded: category, size class, the decided config by knob role) name
    ``category`` and a size class within one of ``size_class``. A decision without signed
    traits (made before store version 5, or adopted without them) is not among them.

``except_run``: decisions of that run are left out. A run's decisions seed its next runs, not
its own other keys: with several lanes, which keys of a run decided first depends on timing, and
N lanes must decide what one lane decides (a resumed run, likewise, starts each key from the
same prior as before its interruption).

The Triton version is not matched: a config is plain knob values, and a seed is built, verified
and timed as any candidate. ``size_class`` is the store's measure of a key's size, from its
specialization alone, so that a decision's and a new key's are computed the same way.
"""

from __future__ import annotations

import json
import math
from typing import Any

from tritune.model.key import DecisionKey
from tritune.store.keys import itemsize
from tritune.store.records import DECISION_SELECT, Decision
from tritune.store.schema import StoreError

NEAR_SIZE = 1  # size classes apart that still count as the same size (a factor of 2-4 in bytes)


def size_class(key: DecisionKey) -> int | None:
    """floor(log2) of the largest tensor's bytes in the key's specialization (its dimensions are
    shape buckets: powers of two), or None for a key without a tensor."""
    try:
        args = json.loads(key.specialization).get("args") or []
    except (ValueError, AttributeError):
        return None
    largest = 0
    for arg in args:
        if len(arg) < 4 or arg[1] != "T":
            continue
        try:
            size = itemsize(arg[2])
        except (AttributeError, TypeError):
            size = 4
        largest = max(largest, math.prod(int(d) for d in arg[3]) * size)
    return largest.bit_length() - 1 if largest > 0 else None


class PriorsMixin:
    """The prior queries of ``DecisionStore`` (which provides ``_db`` and ``_checked_decision``)."""

    def decided_for_source(self, key: DecisionKey, *, except_run: int | None = None) -> list[Decision]:
        rows = self._db.query(DECISION_SELECT + " WHERE k.source_hash = ? AND k.kernel = ? AND k.gpu_name = ? "
                              "AND k.capability = ? AND d.key_sha != ?",
                              (key.source_hash, key.kernel, key.gpu_name, key.capability, key.sha))
        return sorted(self._usable(rows, except_run), key=lambda d: -d.speedup)

    def decided_like(self, key: DecisionKey, category: str, size: int | None, *,
                     except_run: int | None = None) -> list[Decision]:
        if size is None:
            return []
        rows = self._db.query(DECISION_SELECT + " WHERE k.gpu_name = ? AND k.capability = ? AND k.source_hash != ? "
                              "AND d.traits IS NOT NULL", (key.gpu_name, key.capability, key.source_hash))
        return [d for d in self._usable(rows, except_run) if d.traits and d.traits.get("category") == category
                and _near(d.traits.get("size_class"), size)]

    def _usable(self, rows: list[Any], except_run: int | None) -> list[Decision]:
        found = []
        for row in rows:
            try:
                decision = self._checked_decision(row)
            except StoreError:  # a damaged row seeds nothing; listing the store says what is wrong
                continue
            if decision.usable and (except_run is None or decision.run_id != except_run):
                found.append(decision)
        return found


def _near(found: Any, size: int) -> bool:
    return isinstance(found, int) and not isinstance(found, bool) and abs(found - size) <= NEAR_SIZE
