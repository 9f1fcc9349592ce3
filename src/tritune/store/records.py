"""What the store hands back: plain records built from its rows (JSON columns decoded).

Variants are kept as JSON in the store and turned into ``tritune.model.Variant`` on access,
so that opening a store does not import torch or Triton.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import sqlite3
from typing import Any

from tritune.model.variant import identity
from tritune.model.key import DecisionKey

DONE = frozenset({"verified", "rejected", "accepted"})  # a candidate in these is not evaluated again


def variant_json(variant: Any) -> dict:
    """A variant as JSON: ``Variant.to_json()``, or an already plain dict."""
    body = variant.to_json() if hasattr(variant, "to_json") else variant
    if not isinstance(body, dict):
        raise TypeError(f"a variant must be a Variant or a dict, got {type(variant).__name__}")
    return body


def variant_hash(variant: Any) -> str:
    """sha256 of the variant's canonical JSON, less what only describes it (the same text as
    ``Variant.key()``)."""
    return hashlib.sha256(json.dumps(identity(variant_json(variant)), sort_keys=True, default=str).encode()).hexdigest()


def to_text(value: Any) -> str | None:
    """A JSON column's text: objects with ``to_json()``, dataclasses and plain values; None stays NULL."""
    if value is None:
        return None
    if hasattr(value, "to_json"):
        value = value.to_json()
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        value = dataclasses.asdict(value)
    return json.dumps(value, sort_keys=True, default=str)


def from_text(text: str | None) -> Any:
    return None if text is None else json.loads(text)


def from_row_text(text: str | None) -> Any:
    """A JSON column of a row that may come from anyone's store: text that does not parse is kept
    as ``{"unreadable": text}`` (such an entry is never signed, so never used) instead of failing
    every command that lists the store."""
    try:
        return from_text(text)
    except ValueError:
        return {UNREADABLE: str(text)[:200]}


UNREADABLE = "unreadable"


def _variant(body: dict) -> Any:
    from tritune.model.variant import Variant

    return Variant.from_json(body)


def describe_variant(body: Any) -> str:
    """What a stored variant changes, or why it cannot be read (a damaged or foreign row)."""
    try:
        return _variant(body).describe()
    except (TypeError, ValueError, AttributeError) as exc:
        return f"unreadable variant ({type(exc).__name__})"


@dataclasses.dataclass(frozen=True)
class Run:
    id: int
    started: float
    finished: float | None
    status: str
    command: str
    tritune_version: str
    settings: dict
    host: str
    pid: int
    resumed: int

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Run":
        body = dict(row)
        body["settings"] = from_text(body["settings"])
        return cls(**body)


@dataclasses.dataclass(frozen=True)
class Candidate:
    id: int
    run_id: int
    key_sha: str
    variant_json: dict
    variant_hash: str
    status: str
    failure_kind: str | None
    message: str | None
    detail: str | None
    verification: dict | None
    timings: dict | None
    attempts: int
    created: float
    updated: float
    signature: str | None = None
    outcome_signature: str | None = None
    signed: bool = False  # set by the store: made (and, when done, judged) by this user's tritune

    @property
    def variant(self) -> Any:
        return _variant(self.variant_json)

    @property
    def done(self) -> bool:
        """Evaluated already (verified, rejected or accepted): not to be evaluated again."""
        return self.status in DONE

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Candidate":
        body = dict(row)
        body["variant_json"] = from_row_text(body.pop("variant"))
        body["verification"] = from_row_text(body["verification"])
        body["timings"] = from_row_text(body["timings"])
        return cls(**body)


@dataclasses.dataclass(frozen=True)
class Decision:
    key: DecisionKey
    candidate_id: int
    run_id: int | None
    variant_json: dict
    variant_hash: str
    baseline_ms: float
    best_ms: float
    speedup: float
    evidence: dict
    verified: bool
    enabled: bool
    created: float
    updated: float
    signature: str | None = None
    signed: bool = False  # set by the store: the signature verifies under this user's secret
    # what the decided kernel was (``store.priors``): None when absent, or not signed by this user
    traits: dict | None = None
    traits_signature: str | None = None

    @property
    def variant(self) -> Any:
        return _variant(self.variant_json)

    @property
    def usable(self) -> bool:
        """Verified, enabled, and signed by this user: the only decisions that are applied."""
        return self.verified and self.enabled and self.signed

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> "Decision":
        """From a ``decisions JOIN keys`` row (``KEY_COLUMNS`` prefixed ``k_``)."""
        body = dict(row)
        key = DecisionKey(**{name: body.pop("k_" + name) for name in KEY_COLUMNS})
        body.pop("key_sha")
        body["variant_json"] = from_row_text(body.pop("variant"))
        body["evidence"] = from_row_text(body["evidence"])
        body["traits"] = from_row_text(body.get("traits"))
        body["verified"], body["enabled"] = bool(body["verified"]), bool(body["enabled"])
        return cls(key=key, **body)


KEY_COLUMNS = ("source_hash", "kernel", "specialization", "gpu_name", "capability", "triton_version")
DECISION_SELECT = ("SELECT d.*, " + ", ".join(f"k.{c} AS k_{c}" for c in KEY_COLUMNS)
                   + " FROM decisions d JOIN keys k ON k.sha = d.key_sha")
