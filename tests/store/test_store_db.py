"""The decision store in one process: schema and versions, idempotent candidates, the rules for
finishing them, verify-promote-rollback, profiles, resume and export."""

from __future__ import annotations

import json
import sqlite3

import pytest

from tritune.model.variant import Variant
from tritune.store import (INTERRUPTED, MAX_ATTEMPTS, SCHEMA_VERSION, DecisionStore, StoreError, UnverifiedDecision,
                           schema, variant_hash)
from tritune.model.key import DecisionKey

PASSED = {"ok": True, "mode": "tolerance", "checks": []}


def key(name="add_kernel", gpu="NVIDIA H100 80GB HBM3", spec_text='{"args":[]}') -> DecisionKey:
    return DecisionKey("a" * 64, name, spec_text, gpu, 90, "3.6.0")


def warps(n: int) -> Variant:
    return Variant(name=f"w{n}", options={"num_warps": n})


@pytest.fixture
def store(tmp_path):
    with DecisionStore(tmp_path / "store.db") as opened:
        yield opened


def verified(store, run, k, variant, ms=1.0):
    cand = store.add_candidate(run, k, variant)
    store.claim(cand.id, run)
    return store.finish_candidate(cand.id, "verified", verification=PASSED, timings={"median_ms": ms})


# ------------------------------------------------------------------------------- schema

def test_new_store_has_the_schema_and_wal(tmp_path):
    path = tmp_path / "sub" / "store.db"
    DecisionStore(path).close()
    conn = sqlite3.connect(path)
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert {"schema_version", "keys", "runs", "candidates", "decisions", "profiles"} <= tables
    assert conn.execute("SELECT version FROM schema_version").fetchall() == [(SCHEMA_VERSION,)]
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    DecisionStore(path).close()  # reopening changes nothing
    assert conn.execute("SELECT count(*) FROM schema_version").fetchone()[0] == 1


def test_newer_store_is_refused(tmp_path):
    path = tmp_path / "store.db"
    DecisionStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = ?", (SCHEMA_VERSION + 1,))
    with pytest.raises(StoreError, match=f"version {SCHEMA_VERSION + 1}.*upgrade tritune"):
        DecisionStore(path)


def test_older_store_is_migrated_or_refused(tmp_path, monkeypatch):
    path = tmp_path / "store.db"
    DecisionStore(path).close()
    monkeypatch.setattr(schema, "SCHEMA_VERSION", SCHEMA_VERSION + 1)
    with pytest.raises(StoreError, match="cannot be upgraded"):
        DecisionStore(path)

    def add_note(conn):
        conn.execute("ALTER TABLE runs ADD COLUMN note TEXT")

    monkeypatch.setitem(schema.MIGRATIONS, SCHEMA_VERSION + 1, add_note)
    with DecisionStore(path) as store:
        assert store._db.opened_version == SCHEMA_VERSION
        run = store.start_run({})
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION + 1
    assert conn.execute("SELECT note FROM runs WHERE id = ?", (run,)).fetchone() == (None,)


def test_failed_migration_leaves_the_file_as_it_was(tmp_path, monkeypatch):
    path = tmp_path / "store.db"
    DecisionStore(path).close()
    monkeypatch.setattr(schema, "SCHEMA_VERSION", SCHEMA_VERSION + 1)

    def broken(conn):
        conn.execute("ALTER TABLE runs ADD COLUMN note TEXT")
        raise RuntimeError("migration bug")

    monkeypatch.setitem(schema.MIGRATIONS, SCHEMA_VERSION + 1, broken)
    with pytest.raises(RuntimeError, match="migration bug"):
        DecisionStore(path)
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION
    assert "note" not in [r[1] for r in conn.execute("PRAGMA table_info(runs)")]


def test_foreign_files_are_refused(tmp_path):
    junk = tmp_path / "junk.db"
    junk.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="not a tritune decision store"):
        DecisionStore(junk)
    other = tmp_path / "other.db"
    with sqlite3.connect(other) as conn:
        conn.execute("CREATE TABLE t (x)")
    conn.close()
    with pytest.raises(StoreError, match=r"other.db: an SQLite file without tritune's tables \(it has t\)"):
        DecisionStore(other)
    assert other.read_bytes()[18:20] == b"\x01\x01"  # refused before it was switched to WAL (2, 2)


# --------------------------------------------------------------------------- candidates

def test_candidates_are_idempotent_on_key_and_variant(store):
    run = store.start_run({"rounds": 8}, "optimize --launches d")
    first = store.add_candidate(run, key(), warps(8))
    again = store.add_candidate(run, key(), Variant(name="w8", options={"num_warps": 8}))
    as_dict = store.add_candidate(run, key(), warps(8).to_json())
    assert first.id == again.id == as_dict.id and first.status == "pending" and not first.done
    assert first.variant == warps(8) and first.variant_hash == variant_hash(warps(8))
    assert store.add_candidate(run, key(), warps(4)).id != first.id
    assert store.add_candidate(run, key(gpu="A100"), warps(8)).id != first.id
    store.claim(first.id, run)
    store.finish_candidate(first.id, "verified", verification=PASSED, timings={"median_ms": 0.5})
    later_run = store.start_run({"rounds": 8})
    record = store.add_candidate(later_run, key(), warps(8))
    assert record.done and record.id == first.id and record.run_id == run  # not evaluated again
    assert record.timings == {"median_ms": 0.5} and record.verification == PASSED


def test_claim_is_exclusive(store):
    run = store.start_run({})
    cand = store.add_candidate(run, key(), warps(8))
    assert store.claim(cand.id, run).status == "running"
    assert store.claim(cand.id, run) is None


def test_finish_rules(store):
    run = store.start_run({})
    cand = store.add_candidate(run, key(), warps(8))
    with pytest.raises(StoreError, match="needs a failure kind"):
        store.finish_candidate(cand.id, "rejected")
    with pytest.raises(StoreError, match="needs its verification record"):
        store.finish_candidate(cand.id, "verified")
    with pytest.raises(StoreError, match="verification failed"):
        store.finish_candidate(cand.id, "verified", verification={"ok": False})
    with pytest.raises(StoreError, match="cannot finish as 'accepted'"):
        store.finish_candidate(cand.id, "accepted")
    store.finish_candidate(cand.id, "verified", verification=PASSED)
    slow = store.finish_candidate(cand.id, "rejected", failure={"kind": "not_faster", "message": "0.97x"})
    assert (slow.status, slow.failure_kind, slow.verification) == ("rejected", "not_faster", PASSED)
    with pytest.raises(StoreError, match="already rejected"):
        store.finish_candidate(cand.id, "verified", verification=PASSED)
    assert store.reset_candidate(cand.id).status == "pending"


class Failure:  # the worker's Failure, as far as the store cares
    kind, message, detail = "compile_error", "out of resources: shared memory", "Traceback ..."


def test_rejected_lists_reasons_per_key(store):
    run = store.start_run({})
    for n, failure in ((16, Failure()), (32, "timeout")):
        cand = store.add_candidate(run, key(), warps(n))
        store.finish_candidate(cand.id, "rejected", failure=failure)
    store.add_candidate(run, key(), warps(2))  # pending: not a rejection
    other = store.add_candidate(run, key("other"), warps(16))
    store.finish_candidate(other.id, "rejected", failure="crash")
    found = store.rejected(key())
    assert [(c.variant.options["num_warps"], c.failure_kind) for c in found] == [(16, "compile_error"), (32, "timeout")]
    assert found[0].message == "out of resources: shared memory" and found[0].detail == "Traceback ..."


# ---------------------------------------------------------------------------- decisions

def test_unverified_decisions_are_refused(store):
    run = store.start_run({})
    with pytest.raises(UnverifiedDecision, match="no candidate"):
        store.set_decision(key(), warps(8), baseline_ms=2.0, best_ms=1.0)
    cand = store.add_candidate(run, key(), warps(8))
    with pytest.raises(UnverifiedDecision, match="is pending"):
        store.set_decision(key(), warps(8), baseline_ms=2.0, best_ms=1.0)
    store.finish_candidate(cand.id, "rejected", failure="wrong_result")
    with pytest.raises(UnverifiedDecision, match="is rejected"):
        store.set_decision(key(), warps(8), baseline_ms=2.0, best_ms=1.0)
    assert store.decision_for(key()) is None and store.decisions() == []


def test_decision_promote_rollback_enable(store):
    run = store.start_run({})
    store.set_profile(key(), {"bottleneck": "memory", "sol_dram": 0.4})
    verified(store, run, key(), warps(8), ms=1.0)
    decision = store.set_decision(key(), warps(8), baseline_ms=2.0, best_ms=1.0, evidence={"retimed": [2.0, 1.0]})
    assert decision.usable and decision.speedup == pytest.approx(2.0) and decision.key == key()
    assert decision.evidence["verification"] == PASSED and decision.evidence["retimed"] == [2.0, 1.0]
    assert decision.evidence["profile"] == {"bottleneck": "memory", "sol_dram": 0.4}
    assert store.candidate(decision.candidate_id).status == "accepted"
    assert store.decision_for(key()).variant == warps(8)
    assert store.decision_for(key(gpu="A100")) is None  # another GPU: no decision

    assert store.rollback(key()) and store.decision_for(key()) is None
    assert [d.enabled for d in store.decisions()] == [False]  # kept, with its evidence
    assert store.enable(key()) and store.decision_for(key()).variant == warps(8)
    assert not store.rollback(key("never-decided")) and not store.enable(key("never-decided"))

    verified(store, run, key(), warps(2), ms=0.8)  # a better one replaces it
    store.set_decision(key(), warps(2), baseline_ms=2.0, best_ms=0.8)
    assert store.decision_for(key()).variant == warps(2)
    assert store.candidate(decision.candidate_id).status == "verified"


def test_rollback_all_and_per_kernel(store):
    run = store.start_run({})
    for name in ("a", "b", "c"):
        verified(store, run, key(name), warps(8))
        store.set_decision(key(name), warps(8), baseline_ms=1.1, best_ms=1.0)
    assert store.rollback_all(kernel="b") == 1
    assert [d.key.kernel for d in store.decisions(usable_only=True)] == ["a", "c"]
    assert store.rollback_all() == 3
    assert store.decisions(usable_only=True) == [] and len(store.decisions()) == 3


def test_bad_timings_are_refused(store):
    run = store.start_run({})
    verified(store, run, key(), warps(8))
    with pytest.raises(StoreError, match="timings must be positive"):
        store.set_decision(key(), warps(8), baseline_ms=1.0, best_ms=0.0)


# ------------------------------------------------------------------------ resume, export

def test_interrupted_run_resumes_in_process(store):
    run = store.start_run({"budget": 3})
    a, b, c = (store.add_candidate(run, key(), warps(n)) for n in (2, 4, 8))
    store.claim(a.id, run)
    store.finish_candidate(a.id, "verified", verification=PASSED)
    store.claim(b.id, run)
    store.finish_run(run, "interrupted")  # Ctrl-C while b was running
    assert store.find_resumable({"budget": 3}).id == run
    assert store.find_resumable({"budget": 4}) is None
    resumed = store.resume_run(run)
    assert resumed.status == "running" and resumed.resumed == 1
    assert [x.id for x in store.pending(run)] == [b.id, c.id]
    store.finish_run(run)
    assert store.find_resumable({"budget": 3}) is None
    with pytest.raises(StoreError, match="finished"):
        store.resume_run(run)


def test_a_candidate_that_keeps_killing_the_run_is_rejected(store):
    run = store.start_run({})
    cand = store.add_candidate(run, key(), warps(8))
    for attempt in range(MAX_ATTEMPTS):
        assert store.claim(cand.id, run) is not None
        store.resume_run(run)  # the optimizer died while evaluating it
    final = store.candidate(cand.id)
    assert (final.status, final.failure_kind, final.attempts) == ("rejected", INTERRUPTED, MAX_ATTEMPTS)


def test_release_gives_a_dead_lanes_candidates_of_one_key_back_to_its_run(store):
    run = store.start_run({})
    held = store.add_candidate(run, key(), warps(8))
    other = store.add_candidate(run, key("other_kernel"), warps(8))
    for cand in (held, other):
        store.claim(cand.id, run)
    assert store.release(run, key()) == 1  # the lane on key() died; the other lane's key is left alone
    assert (store.candidate(held.id).status, store.candidate(other.id).status) == ("pending", "running")
    assert store.claim(held.id, run) is not None  # another lane of the run takes it over
    for _ in range(MAX_ATTEMPTS - 1):  # one that kills every lane it goes to is given up, as on resume
        store.release(run, key())
        store.claim(held.id, run)
    store.release(run, key())
    final = store.candidate(held.id)
    assert (final.status, final.failure_kind, final.attempts) == ("rejected", INTERRUPTED, MAX_ATTEMPTS)


def test_export_json(store):
    run = store.start_run({"rounds": 8}, "optimize")
    verified(store, run, key(), warps(8))
    store.set_decision(key(), warps(8), baseline_ms=1.5, best_ms=1.0)
    body = json.loads(json.dumps(store.export_json()))
    assert body["tritune_store"] == SCHEMA_VERSION
    assert body["runs"][0]["settings"] == {"rounds": 8}
    assert body["candidates"][0]["variant"]["options"] == {"num_warps": 8}
    assert body["decisions"][0]["speedup"] == pytest.approx(1.5)
    assert body["keys"][0]["gpu_name"] == "NVIDIA H100 80GB HBM3"


def test_timeouts_on_sibling_keys_are_found_for_the_same_source_only(tmp_path):
    """What `KernelLoop` skips: a variant that timed out on another key of the same kernel source,
    GPU and Triton; not one that failed otherwise, not one of another source or GPU, not its own."""
    from tritune.store import variant_hash

    slow, wrong = Variant(name="slow", options={"num_warps": 2}), Variant(name="wrong", options={"num_warps": 8})
    here, sibling = key(spec_text='{"args":[1]}'), key(spec_text='{"args":[2]}')
    other_gpu = key(spec_text='{"args":[3]}', gpu="NVIDIA A100")
    other_source = DecisionKey("b" * 64, "add_kernel", '{"args":[4]}', "NVIDIA H100 80GB HBM3", 90, "3.6.0")
    with DecisionStore(tmp_path / "d.db") as store:
        run_id = store.start_run({})
        for k, variant, kind in ((sibling, slow, "timeout"), (sibling, wrong, "wrong_result"),
                                 (other_gpu, wrong, "timeout"), (other_source, wrong, "timeout"), (here, wrong, "timeout")):
            cand = store.add_candidate(run_id, k, variant)
            store.claim(cand.id, run_id)
            store.finish_candidate(cand.id, "rejected", failure={"kind": kind, "message": "m"})
        assert store.timed_out_on_siblings(here) == {variant_hash(slow): sibling.sha}


def test_a_key_s_records_travel_to_another_store_and_back(tmp_path):
    """``optimize --ray``: the driver ships a key's signed records to a lane's store (signed there
    with a secret of its own), the lane's loop adds to them, and the driver adopts what came back
    in one transaction, signed by its user."""
    import secrets

    from tritune.store.signing import Signer

    with DecisionStore(tmp_path / "driver.db") as driver, \
            DecisionStore(tmp_path / "lane.db", signer=Signer(secrets.token_bytes(32))) as lane:
        run = driver.start_run({})
        verified(driver, run, key(), warps(8))
        driver.set_decision(key(), warps(8), baseline_ms=2.0, best_ms=1.0)
        rejected = driver.add_candidate(run, key(), warps(2))
        driver.claim(rejected.id, run)
        driver.finish_candidate(rejected.id, "rejected", failure={"kind": "wrong_result", "message": "x"})
        driver.add_candidate(run, key(), warps(4))  # pending: not evaluated, not shipped
        driver.set_profile(key(), {"source": "timing"})
        verified(driver, run, key("other_kernel"), warps(8))  # another key: not shipped
        shipped = driver.key_records(key())
        assert [(c["variant"]["name"], c["status"]) for c in shipped["candidates"]] == [("w8", "accepted"),
                                                                                         ("w2", "rejected")]
        assert shipped["profiles"] == [{"variant_hash": "baseline", "profile": {"source": "timing"}}]
        assert shipped["decision"]["variant"]["name"] == "w8" and shipped["decision"]["enabled"]

        lane_run = lane.start_run({})
        assert lane.adopt(lane_run, key(), json.loads(json.dumps(shipped))) == 2  # plain data, as it travels
        assert lane.decision_for(key()).variant.name == "w8" and lane.profile_for(key()) == {"source": "timing"}
        assert lane.add_candidate(lane_run, key(), warps(2)).done  # a resumed key reuses what it was shipped
        verified(lane, lane_run, key(), warps(16), ms=0.5)
        lane.set_decision(key(), warps(16), baseline_ms=2.0, best_ms=0.5)  # w8 goes back to verified

        later = driver.start_run({})
        back = lane.key_records(key())
        assert driver.adopt(later, key(), back) == 2  # w8 (now verified) and w16; w2 unchanged
        assert driver.adopt(later, key(), back) == 0
        assert driver.decision_for(key()).variant.name == "w16"
        found = {c.variant.name: c for c in driver.candidates(key=key())}
        assert {name: c.status for name, c in found.items()} == {"w8": "verified", "w2": "rejected", "w4": "pending",
                                                                 "w16": "accepted"}
        assert all(c.signed for c in found.values()) and found["w2"].run_id == run and found["w16"].run_id == later

        with pytest.raises(StoreError, match="a decision to adopt needs its candidate"):
            driver.adopt(later, key("third_kernel"), {"candidates": [], "decision": back["decision"]})
        assert "third_kernel" not in {k.kernel for k in driver.keys()}  # one transaction: nothing written
    with DecisionStore(tmp_path / "lane.db") as opened:  # under this user's secret, the lane's records are foreign
        assert opened.decision_for(key()) is None and not any(c.signed for c in opened.candidates())


def test_a_version_3_store_gets_the_signed_inductor_cache_table(tmp_path):
    path = tmp_path / "store.db"
    DecisionStore(path).close()
    with sqlite3.connect(path) as conn:  # as tritune before version 4 left it
        conn.execute("DROP TABLE inductor_cache")
        conn.execute("ALTER TABLE decisions DROP COLUMN traits")  # version 5's
        conn.execute("ALTER TABLE decisions DROP COLUMN traits_signature")
        conn.execute("UPDATE schema_version SET version = 3")
    with DecisionStore(path) as store:
        assert store._db.opened_version == 3 and store.inductor_entries() == []
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT version FROM schema_version").fetchone()[0] == SCHEMA_VERSION


def test_a_full_disk_is_one_line_and_the_store_goes_on_after(tmp_path, monkeypatch):
    """SQLite's "database or disk is full" in a write: a StoreError of one line (optimize printed
    an 86-line sqlite3.OperationalError traceback), the transaction rolled back, and the store
    writes again once there is room (the resume)."""
    from tritune.store import connection

    store = connection.Connection(tmp_path / "s.db")
    with store.write() as conn:
        conn.execute("CREATE TABLE notes (text TEXT)")
    real, full = connection._Scrubbing.execute, [True]

    def execute(self, sql, parameters=(), /):
        if full[0] and sql.startswith("INSERT"):
            exc = sqlite3.OperationalError("database or disk is full")
            exc.sqlite_errorname = "SQLITE_FULL"
            raise exc
        return real(self, sql, parameters)

    monkeypatch.setattr(connection._Scrubbing, "execute", execute)
    with pytest.raises(StoreError) as raised:
        with store.write() as conn:
            conn.execute("UPDATE notes SET text = 'x'")
            conn.execute("INSERT INTO notes VALUES ('lost')")
    assert str(raised.value) == (f"{tmp_path / 's.db'}: no room left on its disk (SQLite: database or disk is full); "
                                 "what was recorded before is kept: free some space and run the same command again "
                                 "to resume")
    full[0] = False
    with store.write() as conn:
        conn.execute("INSERT INTO notes VALUES ('kept')")
    assert [row[0] for row in store.query("SELECT text FROM notes")] == ["kept"]
    store.close()
