"""Decisions (verify-promote-rollback), profiles and the JSON export of a ``DecisionStore``.

A decision is the variant to use for one key. It is promoted only from a candidate the store
holds as verified, with a verification record that passed (``set_decision`` refuses anything
else), and it is used only while enabled: ``rollback`` switches it off without losing it,
``enable`` switches it back on. ``decision_for`` is what the apply step asks; it answers None
for a key with no usable decision, and the kernel then runs exactly as written.

A decision is signed when it is set (``signing``), and usable only while its signature
verifies under this user's secret: one from another store or edited since is never applied.
"""

from __future__ import annotations

import dataclasses
import sqlite3
import time
from pathlib import Path
from typing import Any

from tritune.model.key import DecisionKey
from tritune.store.records import (DECISION_SELECT, Decision, from_row_text, from_text, to_text,
                                   variant_hash, variant_json)
from tritune.store.schema import SCHEMA_VERSION, StoreError

BASELINE = "baseline"  # the variant_hash under which a key's baseline profile is kept
_JSON_COLUMNS = {"settings", "variant", "verification", "timings", "evidence", "profile", "traits"}


class UnverifiedDecision(StoreError):
    """``set_decision`` for a variant the store does not hold as verified."""


def key_sha(key: DecisionKey | str) -> str:
    return key.sha if isinstance(key, DecisionKey) else key


class DecisionsMixin:
    """The decision, profile and export methods of ``DecisionStore`` (which provides ``_db``)."""

    path: Path
    signer: Any

    def _ensure_key(self, conn: sqlite3.Connection, key: DecisionKey) -> None:
        conn.execute(
            "INSERT INTO keys (sha, kernel, source_hash, specialization, specialization_sha, gpu_name, capability, "
            "triton_version, created) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (sha) DO NOTHING",
            (key.sha, key.kernel, key.source_hash, key.specialization, key.specialization_sha, key.gpu_name,
             key.capability, key.triton_version, time.time()))

    def set_decision(self, key: DecisionKey, variant: Any, *, baseline_ms: float, best_ms: float,
                     evidence: dict | None = None, run_id: int | None = None, traits: dict | None = None) -> Decision:
        """Promote the verified candidate (key, variant) to the key's decision, enabled.

        ``evidence`` (re-timings, profile, the arbiter's reasons) is stored with the candidate's
        verification record and timings. ``traits``: what the kernel was (``search.prior.traits``:
        category, size class, the decided config by knob role), signed, so that the decision seeds
        other kernels' searches (``store.priors``). The key's previous decision, if any, is
        replaced; its candidate goes back to ``verified``."""
        if not (baseline_ms > 0 and best_ms > 0):
            raise StoreError(f"{key.describe()}: timings must be positive "
                             f"(baseline {baseline_ms} ms, best {best_ms} ms)")
        digest, body, now = variant_hash(variant), variant_json(variant), time.time()
        with self._db.write() as conn:
            row = conn.execute("SELECT * FROM candidates WHERE key_sha = ? AND variant_hash = ?",
                               (key.sha, digest)).fetchone()
            if row is None:
                raise UnverifiedDecision(f"{key.describe()}: the store holds no candidate for this variant: "
                                         "evaluate and verify it before deciding on it")
            cand = self._checked(row)
            if not cand.signed:
                raise UnverifiedDecision(f"{key.describe()}: candidate {cand.id} was not made and verified by this "
                                         "user's tritune: evaluate it here first (`tritune store import`)")
            if cand.status not in ("verified", "accepted"):
                raise UnverifiedDecision(f"{key.describe()}: candidate {cand.id} is {cand.status}, not verified: "
                                         "only a verified variant becomes a decision")
            if not cand.verification or cand.verification.get("ok") is False:
                raise UnverifiedDecision(f"{key.describe()}: candidate {cand.id} has no passing verification record")
            full = {"verification": cand.verification, "timings": cand.timings, **(evidence or {})}
            if "profile" not in full:
                full["profile"] = self._signed_profile(conn, key.sha, BASELINE)
            conn.execute("UPDATE candidates SET status = 'verified', updated = ? WHERE key_sha = ? "
                         "AND status = 'accepted' AND id != ?", (now, key.sha, cand.id))
            conn.execute("UPDATE candidates SET status = 'accepted', updated = ? WHERE id = ?", (now, cand.id))
            self._put_decision(conn, key.sha, cand.id, run_id if run_id is not None else cand.run_id, body,
                               baseline_ms, best_ms, full, traits=traits)
        return self._decision(key.sha)

    def _put_decision(self, conn: sqlite3.Connection, sha: str, candidate_id: int, run_id: int | None, body: dict,
                      baseline_ms: float, best_ms: float, evidence: Any, enabled: bool = True,
                      traits: dict | None = None) -> None:
        """The key's decision row (replacing the one it had, and its traits), verified and signed by this user."""
        now = time.time()
        traits_text = to_text(traits)
        traits_signature = None if traits is None else self.signer.traits(sha, from_text(traits_text))
        conn.execute(
            "INSERT INTO decisions (key_sha, candidate_id, run_id, variant, variant_hash, baseline_ms, best_ms, "
            "speedup, evidence, verified, enabled, created, updated, signature, traits, traits_signature) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (key_sha) DO UPDATE SET candidate_id = excluded.candidate_id, run_id = excluded.run_id, "
            "variant = excluded.variant, variant_hash = excluded.variant_hash, baseline_ms = excluded.baseline_ms, "
            "best_ms = excluded.best_ms, speedup = excluded.speedup, evidence = excluded.evidence, verified = 1, "
            "enabled = excluded.enabled, updated = excluded.updated, signature = excluded.signature, "
            "traits = excluded.traits, traits_signature = excluded.traits_signature",
            (sha, candidate_id, run_id, to_text(body), variant_hash(body), float(baseline_ms), float(best_ms),
             baseline_ms / best_ms, to_text(evidence), int(bool(enabled)), now, now, self.signer.decision(sha, body),
             traits_text, traits_signature))

    def _decision(self, sha: str) -> Decision | None:
        rows = self._db.query(DECISION_SELECT + " WHERE d.key_sha = ?", (sha,))
        return self._checked_decision(rows[0]) if rows else None

    def _checked_decision(self, row: sqlite3.Row) -> Decision:
        """The decision with ``signed`` set. The key's sha is recomputed from its fields, so a
        decision moved to another key, GPU or Triton version no longer verifies."""
        try:
            found = Decision.from_row(row)
        except (TypeError, ValueError) as exc:  # a key column edited into nonsense
            raise StoreError(f"{self.path}: the decision for key {row['key_sha'][:12]} is damaged ({exc}): "
                             "not a usable store") from None
        signed = row["key_sha"] == found.key.sha and self.signer.decision_ok(found.signature, found.key.sha,
                                                                               found.variant_json)
        traits_ok = signed and found.traits is not None and self.signer.traits_ok(found.traits_signature,
                                                                                  found.key.sha, found.traits)
        return dataclasses.replace(found, signed=signed, traits=found.traits if traits_ok else None)

    def decision_for(self, key: DecisionKey | str) -> Decision | None:
        """The decision to apply for ``key``: only a verified, enabled one; else None."""
        found = self._decision(key_sha(key))
        return found if found is not None and found.usable else None

    def decisions(self, kernel: str | None = None, usable_only: bool = False) -> list[Decision]:
        """All decisions (rolled back ones too, unless ``usable_only``), optionally of one kernel."""
        sql, params = DECISION_SELECT, []
        if kernel is not None:
            sql += " WHERE k.kernel = ?"
            params.append(kernel)
        found = [self._checked_decision(r) for r in self._db.query(sql + " ORDER BY k.kernel, d.key_sha", params)]
        return [d for d in found if d.usable] if usable_only else found

    def rollback(self, key: DecisionKey | str) -> bool:
        """Stop using the key's decision (kept, with its evidence). False if there is none."""
        return self._set_enabled("key_sha = ?", (key_sha(key),), 0) > 0

    def rollback_all(self, kernel: str | None = None) -> int:
        """Roll back every decision, or every decision of ``kernel``; returns how many."""
        if kernel is None:
            return self._set_enabled("1 = 1", (), 0)
        return self._set_enabled("key_sha IN (SELECT sha FROM keys WHERE kernel = ?)", (kernel,), 0)

    def enable(self, key: DecisionKey | str) -> bool:
        """Use a rolled-back decision again (verified ones only). False if there is none."""
        return self._set_enabled("key_sha = ? AND verified = 1", (key_sha(key),), 1) > 0

    def _set_enabled(self, where: str, params: tuple, enabled: int) -> int:
        with self._db.write() as conn:
            cursor = conn.execute(f"UPDATE decisions SET enabled = ?, updated = ? WHERE {where}",
                                  (enabled, time.time(), *params))
            return cursor.rowcount

    # --------------------------------------------------------------------------- profiles

    def set_profile(self, key: DecisionKey, profile: Any, *, variant: Any = None, run_id: int | None = None) -> None:
        """The profile of the key's baseline (``variant=None``) or of a variant; replaces an older one."""
        digest = BASELINE if variant is None else variant_hash(variant)
        with self._db.write() as conn:
            self._ensure_key(conn, key)
            self._put_profile(conn, key.sha, digest, profile, run_id)

    def _put_profile(self, conn: sqlite3.Connection, sha: str, digest: str, profile: Any, run_id: int | None) -> None:
        """One profile row (replacing an older one), signed by this user."""
        text = to_text(profile)
        signature = self.signer.profile(sha, digest, from_text(text))
        conn.execute("INSERT INTO profiles (key_sha, variant_hash, run_id, profile, created, signature) "
                     "VALUES (?, ?, ?, ?, ?, ?) "
                     "ON CONFLICT (key_sha, variant_hash) DO UPDATE SET run_id = excluded.run_id, "
                     "profile = excluded.profile, created = excluded.created, signature = excluded.signature",
                     (sha, digest, run_id, text, time.time(), signature))

    def profile_for(self, key: DecisionKey | str, variant: Any = None) -> Any:
        digest = BASELINE if variant is None else variant_hash(variant)
        return self._signed_profile(self._db.connection(), key_sha(key), digest)

    def _signed_profile(self, conn: sqlite3.Connection, sha: str, digest: str) -> Any:
        """The stored profile, or None when there is none or this user did not sign it (a foreign
        profile could steer the search, e.g. claim the roofline is reached)."""
        row = conn.execute("SELECT profile, signature FROM profiles WHERE key_sha = ? AND variant_hash = ?",
                           (sha, digest)).fetchone()
        if row is None:
            return None
        profile = from_row_text(row[0])
        return profile if self.signer.profile_ok(row[1], sha, digest, profile) else None

    def unsigned_by_kernel(self) -> dict[str, tuple[int, int]]:
        """Kernel -> (candidates, decisions) this user's tritune did not sign: never reused or
        applied (``optimize`` evaluates such candidates again; ``tritune store import`` judges them)."""
        kernels = {key.sha: key.kernel for key in self.keys()}
        found: dict[str, list[int]] = {}
        for cand in self.candidates():
            if not cand.signed:
                found.setdefault(kernels.get(cand.key_sha, "?"), [0, 0])[0] += 1
        for decision in self.decisions():
            if not decision.signed:
                found.setdefault(decision.key.kernel, [0, 0])[1] += 1
        return {kernel: (counts[0], counts[1]) for kernel, counts in sorted(found.items())}

    def keys(self) -> list[DecisionKey]:
        rows = self._db.query("SELECT * FROM keys ORDER BY kernel, sha")
        return [DecisionKey.from_json(dict(r)) for r in rows]

    # ----------------------------------------------------------------------------- export

    def export_json(self) -> dict:
        """Everything in the store as one JSON-ready dict (one consistent snapshot)."""
        tables = ("runs", "keys", "candidates", "decisions", "profiles")
        with self._db.read() as conn:
            body: dict[str, Any] = {"tritune_store": SCHEMA_VERSION, "path": str(self.path)}
            for table in tables:
                rows = conn.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
                body[table] = [_plain(row) for row in rows]
        return body


def _plain(row: sqlite3.Row) -> dict:
    return {name: from_text(row[name]) if name in _JSON_COLUMNS else row[name] for name in row.keys()}
