"""``DecisionStore``: runs and candidates (this file), decisions and profiles (``decisions.py``), a
key's records out of one store and into another (``remote.py``, ``optimize --ray``), the
decisions that can seed a new search (``priors.py``).

How ``optimize`` uses it, so that an interrupted run continues where it stopped::

    with DecisionStore(path) as store:
        run = store.find_resumable(settings)            # an unfinished run with these settings
        run_id = store.resume_run(run.id).id if run else store.start_run(settings, command)
        for key, variant in proposals:
            cand = store.add_candidate(run_id, key, variant)   # idempotent on (key, variant)
            if cand.done:                                        # evaluated before: its record
                continue
            if store.claim(cand.id, run_id):                     # pending -> running
                ... evaluate ...
                store.finish_candidate(cand.id, "verified", verification=..., timings=...)
        store.finish_run(run_id)

Every call is its own short transaction, so whatever was finished before a crash is there after
it. A run whose process died stays ``running``; ``resume_run`` puts the candidates it was
evaluating back to ``pending`` (after ``MAX_ATTEMPTS`` interruptions a candidate is rejected as
``interrupted``: one that takes the optimizer down every time is not tried forever).
A run is "live" while its status is ``running`` and its process exists (checked on this host;
a run from another host counts as live until it finishes or is resumed with ``force``).

Trust (``signing``): every candidate is signed when it is added and its outcome when it is
finished; a candidate whose signatures do not verify under this user's secret (a store made
elsewhere, or edited) is never reused: ``add_candidate`` takes it back to ``pending`` with this
process's own variant, so it is built and verified again here.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from tritune.model.key import DecisionKey
from tritune.store.connection import DEFAULT_TIMEOUT_S, Connection
from tritune.store.decisions import DecisionsMixin, key_sha
from tritune.store.exchanges import ExchangesMixin
from tritune.store.inductor_entries import InductorEntriesMixin
from tritune.store.priors import PriorsMixin
from tritune.store.records import DONE, Candidate, Run, to_text, variant_hash, variant_json
from tritune.store.remote import RemoteMixin
from tritune.store.schema import StoreError
from tritune.store.signing import Signer, local_signer
from tritune.version import __version__
from tritune.worker.pool import pid_alive

MAX_ATTEMPTS = 3
INTERRUPTED = "interrupted"  # failure kind of a candidate the optimizer died on MAX_ATTEMPTS times
FINISH_STATUSES = ("verified", "rejected")


class DecisionStore(DecisionsMixin, ExchangesMixin, InductorEntriesMixin, PriorsMixin, RemoteMixin):
    """The decision store at ``path`` (created if missing). A context manager; one per thread."""

    def __init__(self, path: str | Path, *, timeout_s: float = DEFAULT_TIMEOUT_S, signer: Signer | None = None):
        self.path = Path(path)
        self._signer = signer
        self._db = Connection(self.path, timeout_s=timeout_s)

    @property
    def signer(self) -> Signer:
        """This user's signer (made on first use: opening a store to read its runs needs none)."""
        if self._signer is None:
            self._signer = local_signer()
        return self._signer

    def __enter__(self) -> "DecisionStore":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        self._db.close()

    # ------------------------------------------------------------------------------- runs

    def start_run(self, settings: dict, command: str = "") -> int:
        now = time.time()
        with self._db.write() as conn:
            cursor = conn.execute(
                "INSERT INTO runs (started, status, command, tritune_version, settings, host, pid) "
                "VALUES (?, 'running', ?, ?, ?, ?, ?)",
                (now, command, __version__, _canonical(settings), socket.gethostname(), os.getpid()))
            return cursor.lastrowid

    def run(self, run_id: int) -> Run:
        rows = self._db.query("SELECT * FROM runs WHERE id = ?", (run_id,))
        if not rows:
            raise StoreError(f"{self.path}: no run {run_id}")
        return Run.from_row(rows[0])

    def runs(self) -> list[Run]:
        return [Run.from_row(r) for r in self._db.query("SELECT * FROM runs ORDER BY id")]

    def finish_run(self, run_id: int, status: str = "finished") -> Run:
        """Close a run: ``finished``, ``failed``, or ``interrupted`` (resumable, e.g. on Ctrl-C)."""
        if status not in ("finished", "failed", "interrupted"):
            raise StoreError(f"cannot finish run {run_id} as {status!r}: use finished, failed or interrupted")
        with self._db.write() as conn:
            conn.execute("UPDATE runs SET status = ?, finished = ? WHERE id = ?", (status, time.time(), run_id))
            if status == "interrupted":  # what it was evaluating was not evaluated
                conn.execute("UPDATE candidates SET status = 'pending', updated = ? WHERE run_id = ? "
                             "AND status = 'running'", (time.time(), run_id))
        return self.run(run_id)

    def is_live(self, run: Run) -> bool:
        """Running in a process that still exists (any run from another host counts as live)."""
        if run.status != "running":
            return False
        if run.host != socket.gethostname():
            return True
        return pid_alive(run.pid)

    def find_resumable(self, settings: dict | None = None, command: str | None = None) -> Run | None:
        """The latest run that did not finish, is not live elsewhere and matches ``settings``/``command``."""
        for run in reversed(self.runs()):
            if run.status in ("finished", "failed"):
                continue
            if settings is not None and _canonical(run.settings) != _canonical(settings):
                continue
            if command is not None and run.command != command:
                continue
            if run.status == "running" and self.is_live(run) and run.pid != os.getpid():
                continue
            return run
        return None

    def resume_run(self, run_id: int, *, force: bool = False) -> Run:
        """Take over an unfinished run: its interrupted candidates go back to ``pending``."""
        run = self.run(run_id)
        if run.status == "finished":
            raise StoreError(f"{self.path}: run {run_id} finished: start a new run instead")
        if not force and self.is_live(run) and not (run.pid == os.getpid() and run.host == socket.gethostname()):
            raise StoreError(f"{self.path}: run {run_id} is still running (pid {run.pid} on {run.host}): "
                             "stop it first, or resume with force=True")
        with self._db.write() as conn:
            conn.execute("UPDATE runs SET status = 'running', finished = NULL, host = ?, pid = ?, "
                         "resumed = resumed + 1 WHERE id = ?", (socket.gethostname(), os.getpid(), run_id))
            self._put_back(conn, "run_id = ?", (run_id,))
        return self.run(run_id)

    def release(self, run_id: int, key: DecisionKey | str) -> int:
        """The candidates of ``key`` that ``run_id`` was evaluating back to ``pending``, as a resume
        puts them (``MAX_ATTEMPTS`` applies): the lane evaluating them died, and another lane of
        the same run takes the key over. Returns how many went back."""
        with self._db.write() as conn:
            return self._put_back(conn, "run_id = ? AND key_sha = ?", (run_id, key_sha(key)))

    def _put_back(self, conn, where: str, params: tuple) -> int:
        """Running candidates (``where``) back to pending; those interrupted ``MAX_ATTEMPTS`` times rejected."""
        now = time.time()
        given_up = [row[0] for row in conn.execute(
            f"SELECT id FROM candidates WHERE {where} AND status = 'running' AND attempts >= ?",
            (*params, MAX_ATTEMPTS))]
        for candidate_id in given_up:
            conn.execute("UPDATE candidates SET status = 'rejected', failure_kind = ?, message = ?, updated = ? "
                         "WHERE id = ?", (INTERRUPTED, f"the optimizer stopped {MAX_ATTEMPTS} times while "
                                          "evaluating it", now, candidate_id))
            self._sign_outcome(conn, candidate_id)
        cursor = conn.execute(f"UPDATE candidates SET status = 'pending', updated = ? WHERE {where} "
                              "AND status = 'running'", (now, *params))
        return cursor.rowcount

    # ------------------------------------------------------------------------- candidates

    def add_candidate(self, run_id: int, key: DecisionKey, variant: Any) -> Candidate:
        """The candidate (key, variant), created ``pending`` if new. One already recorded is
        returned as it is (``done`` if evaluated); an unfinished one of a run that is no longer
        live is taken over by ``run_id``."""
        body, digest, now = variant_json(variant), variant_hash(variant), time.time()
        signature = self.signer.candidate(key.sha, body)
        with self._db.write() as conn:
            self._ensure_key(conn, key)
            conn.execute(
                "INSERT INTO candidates (run_id, key_sha, variant, variant_hash, status, created, updated, signature) "
                "VALUES (?, ?, ?, ?, 'pending', ?, ?, ?) ON CONFLICT (key_sha, variant_hash) DO NOTHING",
                (run_id, key.sha, to_text(body), digest, now, now, signature))
            found = self._checked(conn.execute("SELECT * FROM candidates WHERE key_sha = ? AND variant_hash = ?",
                                               (key.sha, digest)).fetchone())
            if not found.signed:  # not made (or not judged) here: start it over with our own variant
                conn.execute("UPDATE candidates SET run_id = ?, variant = ?, signature = ?, status = 'pending', "
                             "failure_kind = NULL, message = NULL, detail = NULL, verification = NULL, "
                             "timings = NULL, outcome_signature = NULL, attempts = 0, updated = ? WHERE id = ?",
                             (run_id, to_text(body), signature, now, found.id))
                return self._candidate_in(conn, found.id)
            if found.done or found.run_id == run_id:
                return found
            owner = Run.from_row(conn.execute("SELECT * FROM runs WHERE id = ?", (found.run_id,)).fetchone())
            if self.is_live(owner):
                return found
            conn.execute("UPDATE candidates SET run_id = ?, status = 'pending', updated = ? WHERE id = ?",
                         (run_id, now, found.id))
            return self._candidate_in(conn, found.id)

    def claim(self, candidate_id: int, run_id: int) -> Candidate | None:
        """``pending`` -> ``running`` for ``run_id``; None if it is not pending (someone else has it)."""
        with self._db.write() as conn:
            cursor = conn.execute("UPDATE candidates SET status = 'running', run_id = ?, attempts = attempts + 1, "
                                  "updated = ? WHERE id = ? AND status = 'pending'",
                                  (run_id, time.time(), candidate_id))
            if cursor.rowcount != 1:
                return None
        return self.candidate(candidate_id)

    def finish_candidate(self, candidate_id: int, status: str, failure: Any = None, verification: Any = None,
                         timings: Any = None) -> Candidate:
        """Record the outcome: ``verified`` (needs a verification record that passed) or
        ``rejected`` (needs ``failure``: a worker ``Failure``, a dict with ``kind``/``message``/
        ``detail``, or a kind string). A verified candidate may still be rejected (the arbiter's
        re-timing); a rejected or accepted one is final."""
        if status not in FINISH_STATUSES:
            raise StoreError(f"candidate {candidate_id}: cannot finish as {status!r} "
                             f"(expected one of {FINISH_STATUSES})")
        kind, message, detail = _failure(failure)
        ver_text, time_text = to_text(verification), to_text(timings)
        with self._db.write() as conn:
            row = conn.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)).fetchone()
            if row is None:
                raise StoreError(f"{self.path}: no candidate {candidate_id}")
            old = Candidate.from_row(row)
            if old.status in ("rejected", "accepted"):
                raise StoreError(f"candidate {candidate_id} is already {old.status}: its record is final")
            if status == "rejected" and kind is None:
                raise StoreError(f"candidate {candidate_id}: a rejection needs a failure kind (the reason)")
            if status == "verified":
                record = json.loads(ver_text) if ver_text is not None else old.verification
                if record is None:
                    raise StoreError(f"candidate {candidate_id}: 'verified' needs its verification record")
                if record.get("ok") is False:
                    raise StoreError(f"candidate {candidate_id}: its verification failed: finish it as rejected")
            conn.execute(
                "UPDATE candidates SET status = ?, failure_kind = ?, message = ?, detail = ?, "
                "verification = COALESCE(?, verification), timings = COALESCE(?, timings), updated = ? WHERE id = ?",
                (status, kind, message, detail, ver_text, time_text, time.time(), candidate_id))
            self._sign_outcome(conn, candidate_id)
        return self.candidate(candidate_id)

    def reset_candidate(self, candidate_id: int) -> Candidate:
        """Back to ``pending`` (e.g. a timeout on a busy machine), to be evaluated again."""
        with self._db.write() as conn:
            conn.execute("UPDATE candidates SET status = 'pending', failure_kind = NULL, message = NULL, "
                         "detail = NULL, outcome_signature = NULL, attempts = 0, updated = ? "
                         "WHERE id = ? AND status != 'accepted'",
                         (time.time(), candidate_id))
        return self.candidate(candidate_id)

    def candidate(self, candidate_id: int) -> Candidate:
        rows = self._db.query("SELECT * FROM candidates WHERE id = ?", (candidate_id,))
        if not rows:
            raise StoreError(f"{self.path}: no candidate {candidate_id}")
        return self._checked(rows[0])

    def _candidate_in(self, conn, candidate_id: int) -> Candidate:
        return self._checked(conn.execute("SELECT * FROM candidates WHERE id = ?", (candidate_id,)).fetchone())

    def _checked(self, row) -> Candidate:
        """The candidate with ``signed`` set: its variant signed here, and its outcome too once done."""
        try:
            found = Candidate.from_row(row)
        except (TypeError, ValueError) as exc:
            raise StoreError(f"{self.path}: candidate {row['id']} is damaged ({exc}): not a usable store") from None
        signed = self.signer.candidate_ok(found.signature, found.key_sha, found.variant_json)
        if signed and found.done:
            signed = self.signer.outcome_ok(found.outcome_signature, *_outcome_fields(found))
        return dataclasses.replace(found, signed=signed)

    def _sign_outcome(self, conn, candidate_id: int) -> None:
        """Sign a finished candidate's outcome, only if this user made the candidate."""
        found = self._candidate_in(conn, candidate_id)
        made_here = self.signer.candidate_ok(found.signature, found.key_sha, found.variant_json)
        signature = self.signer.outcome(*_outcome_fields(found)) if made_here and found.done else None
        conn.execute("UPDATE candidates SET outcome_signature = ? WHERE id = ?", (signature, candidate_id))

    def candidates(self, run_id: int | None = None, key: DecisionKey | str | None = None,
                   status: str | None = None) -> list[Candidate]:
        where, params = [], []
        for column, value in (("run_id", run_id), ("key_sha", key_sha(key) if key is not None else None),
                              ("status", status)):
            if value is not None:
                where.append(f"{column} = ?")
                params.append(value)
        sql = "SELECT * FROM candidates" + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY id"
        return [self._checked(r) for r in self._db.query(sql, params)]

    def pending(self, run_id: int) -> list[Candidate]:
        """What ``run_id`` still has to evaluate (after ``resume_run``, what was interrupted too)."""
        return self.candidates(run_id=run_id, status="pending")

    def rejected(self, key: DecisionKey | str) -> list[Candidate]:
        """Every rejected candidate of ``key``, with its failure kind and message: for proposers."""
        return self.candidates(key=key, status="rejected")

    def timed_out_on_siblings(self, key: DecisionKey) -> dict[str, str]:
        """Variant hash -> the sibling kernel's key sha, for this user's candidates that timed out on
        another key of the same kernel source, GPU and Triton version (the same code compiled for
        other shapes: a compile that ran past its limit there will here too)."""
        rows = self._db.query(
            "SELECT c.* FROM candidates c JOIN keys k ON c.key_sha = k.sha WHERE c.status = 'rejected' "
            "AND c.failure_kind = 'timeout' AND k.source_hash = ? AND k.kernel = ? AND k.gpu_name = ? "
            "AND k.capability = ? AND k.triton_version = ? AND k.sha != ? ORDER BY c.id",
            (key.source_hash, key.kernel, key.gpu_name, key.capability, key.triton_version, key.sha))
        found: dict[str, str] = {}
        for row in rows:
            cand = self._checked(row)
            if cand.signed:
                found.setdefault(cand.variant_hash, cand.key_sha)
        return found

    def evaluated(self, key: DecisionKey | str) -> list[Candidate]:
        return [c for c in self.candidates(key=key) if c.status in DONE]


def _outcome_fields(found: Candidate) -> tuple:
    return (found.key_sha, found.variant_hash, found.status, found.failure_kind, found.verification, found.timings)


def _canonical(settings: Any) -> str:
    return json.dumps(settings, sort_keys=True, default=str)


def _failure(failure: Any) -> tuple[str | None, str | None, str | None]:
    if failure is None:
        return None, None, None
    if isinstance(failure, str):
        return failure, None, None
    if isinstance(failure, dict):
        return failure.get("kind"), failure.get("message"), failure.get("detail")
    return getattr(failure, "kind", None), getattr(failure, "message", None), getattr(failure, "detail", None)


