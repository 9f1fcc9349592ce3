"""The LLM proposer's requests and replies, kept with the key they were for (``llm_exchanges``).

An exchange is keyed by the hash of its prompt (``prompt_sha``: the model, the template version and
the messages), so an interrupted run that builds the same prompt again reads the reply it already
paid for instead of asking the model again, and a person can read why a decision exists (the
report prints them). A reply is code: it is reused only when this user's tritune stored it (its
signature, ``signing.Signer.exchange``); a reply stored elsewhere is asked for again. The request
holds the messages only (never headers, so never the key); ``outcome`` is what became of the
reply (the candidate it made, or why it was refused before it ran), filled in afterwards.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any

from tritune.model.key import DecisionKey
from tritune.store.records import from_row_text, to_text


@dataclasses.dataclass(frozen=True)
class Exchange:
    prompt_sha: str
    key_sha: str
    role: str  # "propose" | "fix"
    model: str
    template: str  # the prompt templates' version
    request: list[dict]  # the chat messages sent
    reply: str
    usage: dict  # prompt_tokens, completion_tokens
    seconds: float
    outcome: dict | None
    created: float
    trusted: bool  # signed by this user: its reply may be reused


class ExchangesMixin:
    """The exchange methods of ``DecisionStore`` (which provides ``_db``, ``signer`` and ``_ensure_key``)."""

    signer: Any

    def add_llm_exchange(self, key: DecisionKey, prompt_sha: str, *, role: str, model: str, template: str,
                         request: list[dict], reply: str, usage: dict, seconds: float,
                         run_id: int | None = None) -> None:
        """Store one request and its reply (replacing an untrusted one with the same prompt)."""
        signature = self.signer.exchange(prompt_sha, key.sha, reply)
        with self._db.write() as conn:
            self._ensure_key(conn, key)
            conn.execute(
                "INSERT INTO llm_exchanges (prompt_sha, key_sha, run_id, role, model, template, request, reply, usage, "
                "seconds, outcome, created, signature) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?) "
                "ON CONFLICT (prompt_sha) DO UPDATE SET key_sha = excluded.key_sha, run_id = excluded.run_id, "
                "role = excluded.role, model = excluded.model, template = excluded.template, "
                "request = excluded.request, reply = excluded.reply, usage = excluded.usage, "
                "seconds = excluded.seconds, outcome = NULL, created = excluded.created, "
                "signature = excluded.signature",
                (prompt_sha, key.sha, run_id, role, model, template, to_text(request), reply, to_text(usage),
                 float(seconds), time.time(), signature))

    def set_llm_outcome(self, prompt_sha: str, outcome: dict) -> None:
        with self._db.write() as conn:
            conn.execute("UPDATE llm_exchanges SET outcome = ? WHERE prompt_sha = ?", (to_text(outcome), prompt_sha))

    def llm_exchange(self, prompt_sha: str) -> Exchange | None:
        """The exchange of this prompt, or None; ``trusted`` says whether its reply may be reused."""
        rows = self._db.query(f"SELECT {_COLUMNS} FROM llm_exchanges WHERE prompt_sha = ?", (prompt_sha,))
        return self._exchange(rows[0]) if rows else None

    def llm_exchanges(self, key: DecisionKey | str | None = None) -> list[Exchange]:
        """Every exchange (of one key), oldest first."""
        if key is None:
            rows = self._db.query(f"SELECT {_COLUMNS} FROM llm_exchanges ORDER BY created, rowid")
        else:
            sha = key.sha if isinstance(key, DecisionKey) else key
            rows = self._db.query(f"SELECT {_COLUMNS} FROM llm_exchanges WHERE key_sha = ? ORDER BY created, rowid",
                                  (sha,))
        return [self._exchange(row) for row in rows]

    def _exchange(self, row: Any) -> Exchange:
        prompt_sha, key_sha, role, model, template, request, reply, usage, seconds, outcome, created, signature = row
        return Exchange(prompt_sha, key_sha, role, model, template, from_row_text(request) or [], reply,
                        from_row_text(usage) or {}, float(seconds), from_row_text(outcome) if outcome else None,
                        float(created), self.signer.exchange_ok(signature, prompt_sha, key_sha, reply))


_COLUMNS = ("prompt_sha, key_sha, role, model, template, request, reply, usage, seconds, outcome, created, signature")
