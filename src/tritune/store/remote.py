"""A key's records as plain data, out of one store and into another (``tritune optimize --ray``).

A Ray lane (``loop.ray_lanes``) runs a key's loop on another machine, against a temporary store
of its own: SQLite is never shared over a network. ``key_records`` is what travels each way:
the key's evaluated candidates (variant, status, failure, verification, timings), its profiles
and its decision, as JSON-ready dicts, and only what this store's user signed:

    driver store --key_records--> the lane's store (``adopt``: the key resumes as it would here)
    the lane's store --key_records--> the driver store (``adopt``: what the loop found)

``adopt`` writes a key's records in one transaction, signed by this store's signer. That is a
statement of trust: the records were not made here, and signing them says this user's tritune
made them. The driver adopts what its own Ray lanes return, because the user pointed tritune at
that cluster (the cluster is trusted as the user); a store made by someone else still goes
through ``tritune store import``, which verifies and times its decisions again. A lane's store
is signed with a throwaway secret of its own, never the user's (``signing``).

A candidate whose record is already here, signed and with the same outcome, is left as it is
(its run and attempts kept); any other is written with the outcome it came with (a candidate
the lane judged again, e.g. verified, then rejected by the arbiter's re-timing, or a foreign
one it evaluated afresh). A decision is written only when it changed.
"""

from __future__ import annotations

import sqlite3
import time
from typing import Any

from tritune.model.key import DecisionKey
from tritune.store.decisions import key_sha
from tritune.store.records import DONE, Candidate, to_text, variant_hash
from tritune.store.schema import StoreError

_OUTCOME = ("status", "failure_kind", "message", "detail", "verification", "timings")


class RemoteMixin:
    """``key_records`` and ``adopt`` of ``DecisionStore`` (which provides ``_db``, ``signer``,
    ``_checked``, ``_ensure_key``, ``_sign_outcome``, ``_decision``, ``_put_profile`` and
    ``_put_decision``)."""

    signer: Any

    def key_records(self, key: DecisionKey | str) -> dict:
        """``{"candidates", "profiles", "decision"}`` of one key, signed by this user: the evaluated
        candidates (not those pending or running), every profile, the decision (rolled back or
        not) or None."""
        sha = key_sha(key)
        with self._db.read() as conn:
            rows = conn.execute("SELECT * FROM candidates WHERE key_sha = ? ORDER BY id", (sha,)).fetchall()
            candidates = [self._checked(row) for row in rows]
            profiles = [(digest, self._signed_profile(conn, sha, digest))
                        for (digest,) in conn.execute("SELECT variant_hash FROM profiles WHERE key_sha = ? "
                                                      "ORDER BY variant_hash", (sha,))]
        decision = self._decision(sha)
        return {
            "candidates": [_candidate_record(c) for c in candidates if c.signed and c.done],
            "profiles": [{"variant_hash": digest, "profile": profile} for digest, profile in profiles
                         if profile is not None],
            "decision": None if decision is None or not decision.signed else {
                "variant": decision.variant_json, "baseline_ms": decision.baseline_ms, "best_ms": decision.best_ms,
                "evidence": decision.evidence, "enabled": decision.enabled, "traits": decision.traits},
        }

    def adopt(self, run_id: int | None, key: DecisionKey, records: dict) -> int:
        """Write ``records`` (``key_records`` of another store) for ``key`` in one transaction,
        signed here (module docstring: only for records this user trusts as their own); new and
        changed entries get ``run_id``. Returns how many candidates were written."""
        written = 0
        with self._db.write() as conn:
            self._ensure_key(conn, key)
            for body in records.get("candidates") or ():
                if body.get("status") not in DONE:
                    raise StoreError(f"{key.describe()}: a candidate to adopt must be evaluated, not "
                                     f"{body.get('status')!r}")
                written += self._adopt_candidate(conn, run_id, key, body)
            for body in records.get("profiles") or ():
                digest = str(body["variant_hash"])
                if self._signed_profile(conn, key.sha, digest) != body["profile"]:
                    self._put_profile(conn, key.sha, digest, body["profile"], run_id)
            decision = records.get("decision")
            if decision is not None:
                self._adopt_decision(conn, run_id, key, decision)
        return written

    def _adopt_candidate(self, conn: sqlite3.Connection, run_id: int | None, key: DecisionKey, body: dict) -> int:
        variant, now = body["variant"], time.time()
        digest = variant_hash(variant)
        row = conn.execute("SELECT * FROM candidates WHERE key_sha = ? AND variant_hash = ?",
                           (key.sha, digest)).fetchone()
        if row is not None:
            held = self._checked(row)
            if held.signed and _candidate_record(held) == _plain(body):
                return 0
        conn.execute(
            "INSERT INTO candidates (run_id, key_sha, variant, variant_hash, status, failure_kind, message, detail, "
            "verification, timings, attempts, created, updated, signature) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?) "
            "ON CONFLICT (key_sha, variant_hash) DO UPDATE SET run_id = excluded.run_id, variant = excluded.variant, "
            "status = excluded.status, failure_kind = excluded.failure_kind, message = excluded.message, "
            "detail = excluded.detail, verification = excluded.verification, timings = excluded.timings, "
            "attempts = MAX(attempts, 1), updated = excluded.updated, signature = excluded.signature",
            (run_id, key.sha, to_text(variant), digest, body["status"], body.get("failure_kind"), body.get("message"),
             body.get("detail"), to_text(body.get("verification")), to_text(body.get("timings")), now, now,
             self.signer.candidate(key.sha, variant)))
        candidate_id = conn.execute("SELECT id FROM candidates WHERE key_sha = ? AND variant_hash = ?",
                                    (key.sha, digest)).fetchone()[0]
        self._sign_outcome(conn, candidate_id)
        return 1

    def _adopt_decision(self, conn: sqlite3.Connection, run_id: int | None, key: DecisionKey, body: dict) -> None:
        digest = variant_hash(body["variant"])
        held = self._decision(key.sha)
        if (held is not None and held.signed and held.variant_hash == digest and held.enabled == body["enabled"]
                and (held.baseline_ms, held.best_ms) == (body["baseline_ms"], body["best_ms"])
                and held.traits == body.get("traits")):
            return
        row = conn.execute("SELECT * FROM candidates WHERE key_sha = ? AND variant_hash = ?",
                           (key.sha, digest)).fetchone()
        cand = self._checked(row) if row is not None else None
        if cand is None or not cand.signed or cand.status != "accepted":
            raise StoreError(f"{key.describe()}: a decision to adopt needs its candidate among the records, accepted")
        self._put_decision(conn, key.sha, cand.id, run_id, body["variant"], body["baseline_ms"], body["best_ms"],
                           body["evidence"], enabled=body["enabled"], traits=body.get("traits"))


def _candidate_record(found: Candidate) -> dict:
    return {"variant": found.variant_json, **{name: getattr(found, name) for name in _OUTCOME}}


def _plain(body: dict) -> dict:
    """A record as ``_candidate_record`` makes it (absent fields None), to compare with one."""
    return {"variant": body["variant"], **{name: body.get(name) for name in _OUTCOME}}

