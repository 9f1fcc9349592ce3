"""The entries tritune wrote into Inductor's autotune cache, kept signed in the store (``inductor_cache``).

``apply.inductor_cache`` writes a decided config as a kernel's ``.best_config`` in Inductor's
cache, and keeps here what it wrote and what was there before, so that ``remove`` can put it
back. Putting back writes or deletes a file, so an entry is followed only when this user's
tritune stored it (``signing.Signer.inductor_entry``, over every field): a row added or edited by
anyone else, or a store made elsewhere, writes and deletes nothing. Where the path may lie is
``apply.inductor_cache``'s to check (under Inductor's cache directory); this table only keeps.

``inductor_entries_locked()`` is one write transaction: the data-parallel ranks of one program
write the same entries at once, and each reads, changes and writes back the list in turn.
"""

from __future__ import annotations

import contextlib
import dataclasses
import time
from typing import Any, Iterator

_COLUMNS = "path, key_sha, kernel, previous, written, signature"


@dataclasses.dataclass(frozen=True)
class InductorEntry:
    path: str  # the .best_config file written
    key: str  # the decision's key sha
    kernel: str
    previous: str | None  # the file's text before (None: there was none)
    written: str  # the text written
    signed: bool = False  # stored by this user: it may be followed

    def fields(self) -> tuple:
        return self.path, self.key, self.kernel, self.previous, self.written


class InductorEntriesMixin:
    """The Inductor cache entries of ``DecisionStore`` (which provides ``_db`` and ``signer``)."""

    signer: Any

    def inductor_entries(self) -> list[InductorEntry]:
        """Every entry, ``signed`` or not, by path."""
        return [self._inductor_entry(row) for row in
                self._db.query(f"SELECT {_COLUMNS} FROM inductor_cache ORDER BY path")]

    @contextlib.contextmanager
    def inductor_entries_locked(self) -> Iterator[tuple[list[InductorEntry], list[InductorEntry]]]:
        """``(signed, unsigned)`` entries in one write transaction. The ``signed`` list as the block
        leaves it replaces the table, each entry signed anew (the caller removes what it undid and
        adds what it wrote); the unsigned ones are dropped, never signed: they are for the caller
        to report."""
        with self._db.write() as conn:
            rows = conn.execute(f"SELECT {_COLUMNS} FROM inductor_cache ORDER BY path").fetchall()
            found = [self._inductor_entry(row) for row in rows]
            signed = [entry for entry in found if entry.signed]
            yield signed, [entry for entry in found if not entry.signed]
            conn.execute("DELETE FROM inductor_cache")
            now = time.time()
            for entry in {entry.path: entry for entry in signed}.values():  # one per file: the last one
                conn.execute("INSERT INTO inductor_cache (path, key_sha, kernel, previous, written, created, signature) "
                             "VALUES (?, ?, ?, ?, ?, ?, ?)",
                             (*entry.fields(), now, self.signer.inductor_entry(*entry.fields())))

    def _inductor_entry(self, row: Any) -> InductorEntry:
        path, key, kernel, previous, written, signature = row
        entry = InductorEntry(path, key, kernel, previous, written)
        return dataclasses.replace(entry, signed=self.signer.inductor_entry_ok(signature, *entry.fields()))
