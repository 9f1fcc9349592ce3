"""The decision store's tables, its version, and what happens to a store of another version.

``schema_version`` holds one row. Opening a store:

- empty file: the tables are created at ``SCHEMA_VERSION``;
- same version: used as is;
- older: upgraded step by step through ``MIGRATIONS`` (version v -> function that turns a v-1
  store into a v store), inside the opening transaction: a failed upgrade leaves the file as it was;
  an older version with no path up is refused;
- newer: refused (this tritune would misread it): upgrade tritune;
- tables but no ``schema_version``, or not SQLite at all: refused, it is not a tritune store.

JSON columns hold text (``json.dumps``); times are Unix seconds (REAL).
"""

from __future__ import annotations

import sqlite3
from typing import Callable

SCHEMA_VERSION = 5

STATUSES = ("pending", "running", "verified", "rejected", "accepted")
RUN_STATUSES = ("running", "finished", "interrupted", "failed")

TABLES = f"""
CREATE TABLE schema_version (
    version INTEGER NOT NULL,
    written_by TEXT NOT NULL
);
CREATE TABLE keys (
    sha TEXT PRIMARY KEY,
    kernel TEXT NOT NULL,
    source_hash TEXT NOT NULL,
    specialization TEXT NOT NULL,
    specialization_sha TEXT NOT NULL,
    gpu_name TEXT NOT NULL,
    capability INTEGER NOT NULL,
    triton_version TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE INDEX keys_kernel ON keys(kernel);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    started REAL NOT NULL,
    finished REAL,
    status TEXT NOT NULL CHECK (status IN {RUN_STATUSES}),
    command TEXT NOT NULL,
    tritune_version TEXT NOT NULL,
    settings TEXT NOT NULL,
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    resumed INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE candidates (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    key_sha TEXT NOT NULL REFERENCES keys(sha),
    variant TEXT NOT NULL,
    variant_hash TEXT NOT NULL,
    status TEXT NOT NULL CHECK (status IN {STATUSES}),
    failure_kind TEXT,
    message TEXT,
    detail TEXT,
    verification TEXT,
    timings TEXT,
    attempts INTEGER NOT NULL DEFAULT 0,
    created REAL NOT NULL,
    updated REAL NOT NULL,
    signature TEXT,
    outcome_signature TEXT,
    UNIQUE (key_sha, variant_hash),
    CHECK (status != 'rejected' OR failure_kind IS NOT NULL)
);
CREATE INDEX candidates_run ON candidates(run_id, status);
CREATE TABLE decisions (
    key_sha TEXT PRIMARY KEY REFERENCES keys(sha),
    candidate_id INTEGER NOT NULL REFERENCES candidates(id),
    run_id INTEGER REFERENCES runs(id),
    variant TEXT NOT NULL,
    variant_hash TEXT NOT NULL,
    baseline_ms REAL NOT NULL CHECK (baseline_ms > 0),
    best_ms REAL NOT NULL CHECK (best_ms > 0),
    speedup REAL NOT NULL,
    evidence TEXT NOT NULL,
    verified INTEGER NOT NULL CHECK (verified IN (0, 1)),
    enabled INTEGER NOT NULL CHECK (enabled IN (0, 1)),
    created REAL NOT NULL,
    updated REAL NOT NULL,
    signature TEXT,
    traits TEXT,
    traits_signature TEXT
);
CREATE TABLE profiles (
    key_sha TEXT NOT NULL REFERENCES keys(sha),
    variant_hash TEXT NOT NULL,
    run_id INTEGER REFERENCES runs(id),
    profile TEXT NOT NULL,
    created REAL NOT NULL,
    signature TEXT,
    PRIMARY KEY (key_sha, variant_hash)
);
CREATE TABLE llm_exchanges (
    prompt_sha TEXT PRIMARY KEY,
    key_sha TEXT NOT NULL REFERENCES keys(sha),
    run_id INTEGER REFERENCES runs(id),
    role TEXT NOT NULL,
    model TEXT NOT NULL,
    template TEXT NOT NULL,
    request TEXT NOT NULL,
    reply TEXT NOT NULL,
    usage TEXT NOT NULL,
    seconds REAL NOT NULL,
    outcome TEXT,
    created REAL NOT NULL,
    signature TEXT
);
CREATE INDEX llm_exchanges_key ON llm_exchanges(key_sha, created);
CREATE TABLE inductor_cache (
    path TEXT PRIMARY KEY,
    key_sha TEXT NOT NULL,
    kernel TEXT NOT NULL,
    previous TEXT,
    written TEXT NOT NULL,
    created REAL NOT NULL,
    signature TEXT
);
"""



def _signatures(conn: sqlite3.Connection) -> None:
    """Version 2: signatures (``tritune.store.signing``). Entries of a version-1 store stay
    unsigned, so they are not used until ``tritune store import`` verifies them again."""
    conn.execute("ALTER TABLE candidates ADD COLUMN signature TEXT")
    conn.execute("ALTER TABLE candidates ADD COLUMN outcome_signature TEXT")
    conn.execute("ALTER TABLE decisions ADD COLUMN signature TEXT")
    conn.execute("ALTER TABLE profiles ADD COLUMN signature TEXT")


def _llm_exchanges(conn: sqlite3.Connection) -> None:
    """Version 3: the LLM proposer's requests and replies (``store.exchanges``)."""
    for statement in _statements(TABLES[TABLES.index("CREATE TABLE llm_exchanges"):
                                        TABLES.index("CREATE TABLE inductor_cache")]):
        conn.execute(statement)


def _inductor_cache(conn: sqlite3.Connection) -> None:
    """Version 4: the entries written into Inductor's autotune cache, signed (``store.inductor_entries``);
    they were an unsigned ``<store>.inductor-cache.json`` beside the store, which is not carried over."""
    for statement in _statements(TABLES[TABLES.index("CREATE TABLE inductor_cache"):]):
        conn.execute(statement)


def _decision_traits(conn: sqlite3.Connection) -> None:
    """Version 5: what a decision's kernel was (its category, size class and decided config by knob
    role: ``store.priors``), signed apart from the decision. Older decisions have none: they seed
    the search of their own kernel source only, from their variant."""
    conn.execute("ALTER TABLE decisions ADD COLUMN traits TEXT")
    conn.execute("ALTER TABLE decisions ADD COLUMN traits_signature TEXT")


# version -> the step from version - 1 to it, run inside the opening transaction.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {2: _signatures, 3: _llm_exchanges,
                                                                4: _inductor_cache, 5: _decision_traits}


class StoreError(RuntimeError):
    """The store cannot be used as asked; the message names the file or record and the problem."""


def prepare(conn: sqlite3.Connection, path: str, written_by: str) -> int:
    """Create, check or upgrade the schema of an open store; call inside a write transaction.
    Returns the version the store had when opened (0 for a new one)."""
    names = {row[0] for row in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if not names:
        for statement in _statements(TABLES):
            conn.execute(statement)
        conn.execute("INSERT INTO schema_version VALUES (?, ?)", (SCHEMA_VERSION, written_by))
        return 0
    if "schema_version" not in names:
        raise StoreError(f"{path}: has tables but no schema_version: not a tritune decision store")
    row = conn.execute("SELECT version FROM schema_version").fetchone()
    if row is None:
        raise StoreError(f"{path}: empty schema_version table: not a usable tritune decision store")
    found = int(row[0])
    if found > SCHEMA_VERSION:
        raise StoreError(f"{path}: written by store schema version {found}, this tritune reads up to "
                         f"{SCHEMA_VERSION}: upgrade tritune to use it")
    for version in range(found + 1, SCHEMA_VERSION + 1):
        step = MIGRATIONS.get(version)
        if step is None:
            raise StoreError(f"{path}: store schema version {found} cannot be upgraded to {SCHEMA_VERSION} "
                             f"(no migration to version {version}): start a new store")
        step(conn)
        conn.execute("UPDATE schema_version SET version = ?, written_by = ?", (version, written_by))
    return found


def _statements(script: str) -> list[str]:
    """The statements of ``script`` (``executescript`` would commit the open transaction)."""
    return [part.strip() for part in script.split(";") if part.strip()]
