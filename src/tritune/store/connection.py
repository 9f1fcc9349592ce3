"""One SQLite connection to a store file, set up so that several processes can share the file.

- WAL journal: readers never block the writer and the writer never blocks readers; a process
  killed mid-transaction leaves its uncommitted pages in the WAL, which the next opener ignores.
- ``synchronous=FULL``: a committed transaction survives a crash of the machine, not only of the
  process ("nothing recorded is lost"); commits are few (one per candidate step).
- Every write is one short ``BEGIN IMMEDIATE`` transaction: the write lock is taken up front, so
  two writers queue on the busy timeout instead of failing with "database is locked" half way
  (a deferred transaction that upgrades a read lock cannot wait: SQLite fails it at once).
  ``BEGIN IMMEDIATE`` itself is retried until ``timeout_s`` in case SQLite answers busy without
  calling the busy handler (e.g. while another opener recovers the WAL).
- A connection is not carried across ``fork``: a child that uses the store gets its own.
  One ``Connection`` object per thread (sqlite3's own rule).

WAL needs shared memory between the processes: the file must be on a local filesystem, not NFS.

Every text a statement carries goes through ``secrets.scrub`` (``_Scrubbing``): no secret (an LLM
key, the signing key) enters any column, whatever wrote it (a candidate's message, a failure's
detail, an exchange's prompt, reply or outcome). A signed field that held one no longer matches
its signature once scrubbed: that entry is then never used, as any entry not signed here.
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from pathlib import Path
from typing import Any, Iterator

from tritune.secrets import scrub_each
from tritune.store.schema import StoreError, prepare
from tritune.version import __version__

DEFAULT_TIMEOUT_S = 60.0
_ABANDONED: list[sqlite3.Connection] = []  # a parent's connections seen in a forked child: never closed there


def empty_store(path: Path) -> str | None:
    """Why a command that only reads the store at ``path`` refuses it because the file is empty,
    or None: SQLite opens an empty file as a new database, and the store's opening writes its
    schema there (68 KB), changing a file the user only asked to read."""
    try:
        empty = path.is_file() and path.stat().st_size == 0
    except OSError:
        return None
    return f"{path}: an empty file, not a decision store (tritune optimize makes one)" if empty else None


def _is_busy(exc: sqlite3.OperationalError) -> bool:
    text = str(exc).lower()
    return "locked" in text or "busy" in text


def _no_room(exc: sqlite3.Error) -> bool:
    """A write the disk had no room for (SQLITE_FULL), or that the disk failed (SQLITE_IOERR...)."""
    code = getattr(exc, "sqlite_errorname", "")
    return code == "SQLITE_FULL" or code.startswith("SQLITE_IOERR")


class _Scrubbing(sqlite3.Connection):
    """A connection whose statements' text parameters are scrubbed of secrets (module docstring)."""

    def execute(self, sql: str, parameters: Any = (), /) -> sqlite3.Cursor:
        return super().execute(sql, _scrubbed(parameters))

    def executemany(self, sql: str, parameters: Any, /) -> sqlite3.Cursor:
        return super().executemany(sql, (_scrubbed(row) for row in parameters))


def _scrubbed(parameters: Any) -> Any:
    if isinstance(parameters, dict):
        return dict(zip(parameters, scrub_each(parameters.values())))
    return scrub_each(parameters) if parameters else parameters


class Connection:
    """The store file, opened and checked; ``write()`` and ``read()`` give transactions."""

    def __init__(self, path: str | Path, *, timeout_s: float = DEFAULT_TIMEOUT_S):
        self.path = Path(path)
        self.timeout_s = float(timeout_s)
        self.opened_version = 0  # the schema version the file had (0: created now)
        self._pid = -1
        self._conn: sqlite3.Connection | None = None
        self.connection()

    def connection(self) -> sqlite3.Connection:
        if self._conn is not None and self._pid == os.getpid():
            return self._conn
        if self._conn is not None:  # forked: the parent's connection stays the parent's
            _ABANDONED.append(self._conn)
        self._conn = self._open()
        self._pid = os.getpid()
        return self._conn

    def _open(self) -> sqlite3.Connection:
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            conn = sqlite3.connect(str(self.path), timeout=self.timeout_s, isolation_level=None, factory=_Scrubbing)
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(self._why(exc)) from None
        conn.row_factory = sqlite3.Row
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.timeout_s * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            conn.execute("PRAGMA synchronous = FULL")
            self._not_foreign(conn)
            self._wal(conn)
            with self._transaction(conn):
                self.opened_version = prepare(conn, str(self.path), f"tritune {__version__}")
        except sqlite3.DatabaseError as exc:
            conn.close()
            raise StoreError(self._why(exc)) from None
        except StoreError:
            conn.close()
            raise
        return conn

    def _not_foreign(self, conn: sqlite3.Connection) -> None:
        """Refuse another program's SQLite file before switching it to WAL (which rewrites its
        header): ``prepare`` would refuse it too, but only after that."""
        names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if names and "schema_version" not in names:
            raise StoreError(f"{self.path}: an SQLite file without tritune's tables (it has "
                             f"{', '.join(sorted(names)[:3])}{', ...' if len(names) > 3 else ''}): "
                             "not a tritune decision store")

    def _why(self, exc: BaseException) -> str:
        """One line for a store that cannot be opened, by SQLite's error code (Python >= 3.11)."""
        if isinstance(exc, OSError):
            return f"{self.path}: cannot create its folder: {exc.strerror or exc}"
        if isinstance(exc, sqlite3.OperationalError) and _is_busy(exc):
            return f"{self.path}: locked by another process for {self.timeout_s:.0f} s"
        code = getattr(exc, "sqlite_errorname", "")
        if code == "SQLITE_FULL":
            return (f"{self.path}: no room left on its disk (SQLite: {exc}); what was recorded before is kept: "
                    "free some space and run the same command again to resume")
        if code.startswith("SQLITE_IOERR"):
            return (f"{self.path}: the disk failed a write (SQLite: {exc}); what was recorded before is kept: "
                    "run the same command again to resume once it is mended")
        if code == "SQLITE_NOTADB":
            return f"{self.path}: not an SQLite file, so not a tritune decision store"
        if code.startswith("SQLITE_CORRUPT"):
            return f"{self.path}: a damaged or truncated SQLite file ({exc}): not a usable decision store"
        if code.startswith("SQLITE_READONLY"):
            return (f"{self.path}: read-only ({exc}): tritune writes to its store and beside it "
                    f"({self.path.name}-wal): give write permission to both, or use a copy")
        if code.startswith("SQLITE_CANTOPEN"):
            return f"{self.path}: cannot open it ({exc}): is its folder readable and writable?"
        return f"{self.path}: not a tritune decision store ({exc})"

    def _wal(self, conn: sqlite3.Connection) -> None:
        deadline = time.monotonic() + self.timeout_s
        while True:
            try:
                mode = conn.execute("PRAGMA journal_mode").fetchone()[0]
                if mode.lower() != "wal":
                    mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
                break
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.01)
        if mode.lower() != "wal":
            raise StoreError(f"{self.path}: SQLite refused WAL mode (journal_mode={mode}): "
                             "put the store on a local filesystem")

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """A write transaction (``BEGIN IMMEDIATE``): committed when the block ends, rolled back if it raises."""
        conn = self.connection()
        with self._transaction(conn):
            yield conn

    @contextlib.contextmanager
    def read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction: every query in the block sees the same snapshot."""
        conn = self.connection()
        conn.execute("BEGIN")
        try:
            yield conn
        finally:
            conn.execute("COMMIT")

    def query(self, sql: str, params: tuple | list = ()) -> list[sqlite3.Row]:
        return self.connection().execute(sql, params).fetchall()

    @contextlib.contextmanager
    def _transaction(self, conn: sqlite3.Connection) -> Iterator[None]:
        self._begin_immediate(conn)
        try:
            yield
            conn.execute("COMMIT")
        except BaseException as exc:
            with contextlib.suppress(sqlite3.Error):  # COMMIT may have failed: nothing left to roll back
                conn.execute("ROLLBACK")
            if isinstance(exc, sqlite3.OperationalError) and _no_room(exc):
                raise StoreError(self._why(exc)) from None  # one line, not an 86-line traceback
            raise

    def _begin_immediate(self, conn: sqlite3.Connection) -> None:
        deadline = time.monotonic() + self.timeout_s
        pause = 0.005
        while True:
            try:
                conn.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if not _is_busy(exc):
                    raise
                if time.monotonic() > deadline:
                    raise StoreError(f"{self.path}: another process held the write lock for more than "
                                     f"{self.timeout_s:.0f} s") from None
                time.sleep(pause)
                pause = min(pause * 2, 0.2)

    def check(self) -> None:
        """Read every page (``PRAGMA quick_check``): a store truncated at a page boundary opens
        fine and fails half way through a run; a command checks it up front instead."""
        try:
            problems = [row[0] for row in self.query("PRAGMA quick_check")]
        except sqlite3.DatabaseError as exc:
            raise StoreError(self._why(exc)) from None
        if problems != ["ok"]:
            raise StoreError(f"{self.path}: a damaged or truncated SQLite file ({problems[0]}): "
                             "not a usable decision store")

    def close(self) -> None:
        if self._conn is not None and self._pid == os.getpid():
            self._conn.close()
        self._conn = None

