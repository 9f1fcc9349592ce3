"""The LLM exchanges in the decision store: kept under the prompt's hash, signed, and a reply
reused only when this user stored it (a reply is code); an older store gains the table."""

from __future__ import annotations

import sqlite3

from tritune.model.key import DecisionKey
from tritune.store import DecisionStore, signing
from tritune.store.schema import SCHEMA_VERSION

ELSEWHERE = signing.Signer(b"another user's secret, not ours!")
KEY = DecisionKey("ab" * 32, "scale_add_kernel", "spec", "INTERPRETER", 0, "3.6.0")
MESSAGES = [{"role": "system", "content": "rules"}, {"role": "user", "content": "make it faster"}]


def exchange(store: DecisionStore, prompt_sha: str = "p1", reply: str = "```python\npass\n```") -> None:
    store.add_llm_exchange(KEY, prompt_sha, role="propose", model="m", template="t1", request=MESSAGES,
                           reply=reply, usage={"prompt_tokens": 10, "completion_tokens": 5}, seconds=1.5)


def test_an_exchange_reads_back_trusted_with_its_outcome(tmp_path):
    with DecisionStore(tmp_path / "d.db") as store:
        exchange(store)
        store.set_llm_outcome("p1", {"failure": "unsafe", "message": "line 3: import of os"})
        found = store.llm_exchange("p1")
        assert store.llm_exchange("other") is None
        assert [e.prompt_sha for e in store.llm_exchanges(KEY)] == ["p1"]
    assert found.trusted and found.request == MESSAGES and found.usage["prompt_tokens"] == 10
    assert found.outcome == {"failure": "unsafe", "message": "line 3: import of os"}


def test_a_reply_edited_or_stored_by_someone_else_is_not_trusted(tmp_path):
    with DecisionStore(tmp_path / "d.db", signer=ELSEWHERE) as store:
        exchange(store, "theirs")
    with DecisionStore(tmp_path / "d.db") as store:
        exchange(store, "ours")
    with sqlite3.connect(tmp_path / "d.db") as conn:
        conn.execute("UPDATE llm_exchanges SET reply = 'import os' WHERE prompt_sha = 'ours'")
    with DecisionStore(tmp_path / "d.db") as store:
        assert not store.llm_exchange("theirs").trusted
        assert not store.llm_exchange("ours").trusted
        exchange(store, "ours")  # asked again: the new reply replaces the edited one, signed
        assert store.llm_exchange("ours").trusted


def test_a_version_2_store_gains_the_exchanges_table(tmp_path):
    with DecisionStore(tmp_path / "d.db") as store:
        store.start_run({})
    with sqlite3.connect(tmp_path / "d.db") as conn:  # as a tritune before the LLM family left it
        conn.execute("DROP TABLE llm_exchanges")
        conn.execute("DROP TABLE inductor_cache")  # version 4's
        conn.execute("ALTER TABLE decisions DROP COLUMN traits")  # version 5's
        conn.execute("ALTER TABLE decisions DROP COLUMN traits_signature")
        conn.execute("UPDATE schema_version SET version = 2")
    with DecisionStore(tmp_path / "d.db") as store:
        exchange(store)
        assert store.llm_exchange("p1").trusted
    with sqlite3.connect(tmp_path / "d.db") as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION
