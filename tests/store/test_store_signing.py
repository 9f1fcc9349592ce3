"""Signed stores: a store made by anyone else (another TRITUNE_HOME, or edited with sqlite3) runs
no code and is not reused; ``tritune store import`` judges it again here and signs what passes."""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from test_apply_run import RUN, interpreted, program  # noqa: F401 - the program fixture
from test_loop import PROGRAM as LOOP_PROGRAM  # scale_add_kernel at BLOCK 64
from test_loop import block_speed, captured, worker  # noqa: F401 - BLOCK/64 faster; the two fixtures
from tritune.capture.spec import read_launches
from tritune.commands.store import store as store_command
from tritune.loop.evaluate import Evaluator
from tritune.loop.families import families_for
from tritune.loop.imports import IMPORTED, REJECTED, SKIPPED, import_decisions
from tritune.model.request import RunRequest
from tritune.model.settings import ArbiterSettings
from tritune.model.target import Target
from tritune.model.variant import Variant
from tritune.store import DecisionStore, StoreError, current_target, key_for, signing

ELSEWHERE = signing.Signer(b"another user's secret, not ours!")
MARK_LINE = "open({mark!r}, 'w').write('code from the store ran')\n"


def decided(path: Path, cap: Path, variant: Variant, signer=None):
    """A store whose decision for the capture's one launch is ``variant``, everything in it
    'verified', made with tritune's own library (by ``signer``, default this user); its key."""
    (spec,) = read_launches(cap)
    key = key_for(spec, current_target("cpu"))
    with DecisionStore(path, signer=signer) as store:
        run = store.start_run({})
        cand = store.add_candidate(run, key, variant)
        store.finish_candidate(cand.id, "verified", verification={"ok": True}, timings={"time_ms": 0.01})
        store.set_decision(key, variant, baseline_ms=2.0, best_ms=0.02)
        assert store.decision_for(key) is not None  # usable where it was made
    return key


def foreign_store(path: Path, cap: Path, variant: Variant) -> None:
    """The same, made by someone else."""
    decided(path, cap, variant, ELSEWHERE)


def evil_variant(cap: Path, mark: Path) -> Variant:
    (spec,) = read_launches(cap)
    source = (cap / spec.source).read_text() + MARK_LINE.format(mark=str(mark))
    return Variant(name="evil", source=source, constexprs={"BLOCK": 64})


# ------------------------------------------------------------------------------ run and enable

CRAFT = """
import json, sys
from tritune.capture.spec import read_launches
from tritune.model.variant import Variant
from tritune.store import DecisionStore, current_target, key_for
store, cap, variant = sys.argv[1], sys.argv[2], Variant.from_json(json.loads(sys.argv[3]))
(spec,) = read_launches(cap)
key = key_for(spec, current_target("cpu"))
with DecisionStore(store) as made:
    cand = made.add_candidate(made.start_run({}), key, variant)
    made.finish_candidate(cand.id, "verified", verification={"ok": True}, timings={"time_ms": 0.01})
    made.set_decision(key, variant, baseline_ms=2.0, best_ms=0.02)
    assert made.decision_for(key) is not None
"""


def test_a_foreign_store_runs_no_code_and_the_program_runs_as_written(program, tmp_path):
    """The store is made by tritune's own library under another TRITUNE_HOME (another user)."""
    mark = tmp_path / "ran"
    variant = evil_variant(program / "cap", mark)
    made = subprocess.run([sys.executable, "-c", CRAFT, str(tmp_path / "foreign.db"), str(program / "cap"),
                           json.dumps(variant.to_json())],
                          env={**os.environ, "TRITUNE_HOME": str(tmp_path / "other-home")}, capture_output=True,
                          text=True, timeout=300)
    assert made.returncode == 0, made.stderr[-2000:]
    assert (tmp_path / "other-home" / "store.key").exists() and not mark.exists()
    done = interpreted([*RUN, "--store", str(tmp_path / "foreign.db"), "--", sys.executable,
                        str(program / "prog.py"), "0"])
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "4 [32] True"  # as written: BLOCK 32, not the store's 64
    assert not mark.exists()
    assert ("tritune apply: decision for scale_kernel not signed by this user: skipped; `tritune store import` "
            "re-verifies it") in done.stderr
    assert "decisions applied" not in done.stderr


def test_a_variant_edited_after_signing_is_refused(program, tmp_path):
    path = tmp_path / "mine.db"
    key = decided(path, program / "cap", Variant(name="block 64", constexprs={"BLOCK": 64}))
    edited = Variant(name="block 64", constexprs={"BLOCK": 16}).to_json()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE decisions SET variant = ?", (json.dumps(edited),))
    with DecisionStore(path) as mine:
        (decision,) = mine.decisions()
        assert not decision.signed and not decision.usable and mine.decision_for(key) is None
    done = interpreted([*RUN, "--store", str(path), "--", sys.executable, str(program / "prog.py"), "0"])
    assert done.stdout.strip() == "4 [32] True" and "not signed by this user" in done.stderr


def test_a_decision_moved_to_another_gpu_no_longer_verifies(program, tmp_path):
    path = tmp_path / "moved.db"
    decided(path, program / "cap", Variant(name="block 64", constexprs={"BLOCK": 64}))
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE keys SET gpu_name = 'NVIDIA H100 80GB HBM3', capability = 90")
    with DecisionStore(path) as mine:
        assert [d.signed for d in mine.decisions()] == [False]


def test_optimize_never_reuses_a_foreign_verdict(tmp_path):
    """A candidate another user's store holds as verified (or rejected) is evaluated again here,
    with this process's own variant; its foreign record is dropped."""
    path = tmp_path / "shared.db"
    (key,) = _keys()
    variant = Variant(name="block 64", constexprs={"BLOCK": 64})
    with DecisionStore(path, signer=ELSEWHERE) as other:
        run = other.start_run({})
        cand = other.add_candidate(run, key, variant)
        other.finish_candidate(cand.id, "verified", verification={"ok": True}, timings={"time_ms": 1e-6})
    with DecisionStore(path) as mine:
        assert [c.signed for c in mine.candidates()] == [False]
        again = mine.add_candidate(mine.start_run({}), key, variant)
        assert (again.status, again.verification, again.timings, again.signed) == ("pending", None, None, True)
        mine.finish_candidate(again.id, "rejected", failure="wrong_result")
        assert mine.candidate(again.id).signed
    with sqlite3.connect(path) as conn:  # an edited verdict: rejected -> verified
        conn.execute("UPDATE candidates SET status = 'verified', failure_kind = NULL")
    with DecisionStore(path) as mine:
        assert [c.signed for c in mine.candidates()] == [False]
        with pytest.raises(StoreError, match="not made and verified by this user"):
            mine.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)


def _keys():
    from tritune.model.key import DecisionKey

    return [DecisionKey("a" * 64, "scale_kernel", "[]", "interpreter", 0, "3.6.0")]


# ------------------------------------------------------------------------------------ import



def _import(cap: Path, worker, foreign: Path, mine: Path):
    evaluator = Evaluator(cap, retime=block_speed, worker=worker)
    with DecisionStore(foreign) as other, DecisionStore(mine) as target:
        return import_decisions(other, target, read_launches(cap), evaluator, current_target("cpu"),
                                settings=ArbiterSettings(require_meaningful=False))


def test_import_verifies_times_and_signs_then_run_applies(captured, worker, tmp_path):
    variant = Variant(name="block 128", constexprs={"BLOCK": 128})
    foreign_store(tmp_path / "foreign.db", captured, variant)
    (result,) = _import(captured, worker, tmp_path / "foreign.db", tmp_path / "mine.db")
    assert result.status == IMPORTED and result.speedup == pytest.approx(2.0), result
    with DecisionStore(tmp_path / "mine.db") as mine:
        (decision,) = mine.decisions()
        assert decision.usable and decision.evidence["imported_from"] == str(tmp_path / "foreign.db")
        assert decision.evidence["verification"]["ok"] and len(decision.evidence["verification"]["input_sets"]) >= 3
    plain = interpreted([sys.executable, str(LOOP_PROGRAM)])
    done = interpreted([*RUN, "--store", str(tmp_path / "mine.db"), "--", sys.executable, str(LOOP_PROGRAM)])
    assert done.returncode == 0 and done.stdout == plain.stdout, done.stderr[-2000:]
    assert "decisions applied to 1 of 1 launches" in done.stderr
    again = _import(captured, worker, tmp_path / "foreign.db", tmp_path / "mine.db")
    assert [r.status for r in again] == [SKIPPED] and "already decided" in again[0].reason


def test_import_rejects_a_wrong_foreign_variant(captured, worker, tmp_path):
    (spec,) = read_launches(captured)
    text = (captured / spec.source).read_text()
    assert text.count("x * alpha + y") == 1
    wrong = Variant(name="fast and wrong", source=text.replace("x * alpha + y", "x * alpha - y"))
    foreign_store(tmp_path / "foreign.db", captured, wrong)
    (result,) = _import(captured, worker, tmp_path / "foreign.db", tmp_path / "mine.db")
    assert result.status == REJECTED and result.reason.startswith("wrong_result"), result
    with DecisionStore(tmp_path / "mine.db") as mine:
        assert mine.decisions() == [] and [c.status for c in mine.candidates()] == ["rejected"]


def test_import_refuses_a_foreign_source_that_fails_the_allowlist_whatever_rule_it_names(captured, worker, tmp_path):
    """Checked in the parent against the user's own capture, before any worker imports it: the
    rule the other store names (one of tritune's here) proves nothing."""
    (spec,) = read_launches(captured)
    sentinel = tmp_path / "sentinel"
    text = (captured / spec.source).read_text() + f"\nopen({str(sentinel)!r}, 'w').write('ran')\n"
    claimed = Variant(name="pipelined", source=text, rewrite={"rule": "pipeline-loop", "exact": "exact", "params": {}})
    foreign_store(tmp_path / "foreign.db", captured, claimed)
    (result,) = _import(captured, worker, tmp_path / "foreign.db", tmp_path / "mine.db")
    assert result.status == REJECTED and result.reason.startswith("unsafe: line "), result
    assert "a call at module level is not allowed" in result.reason and not sentinel.exists()
    with DecisionStore(tmp_path / "mine.db") as mine:
        assert mine.decisions() == [] and [(c.status, c.failure_kind) for c in mine.candidates()] == [
            ("rejected", "unsafe")]


def test_import_skips_decisions_for_another_gpu(captured, worker, tmp_path):
    (spec,) = read_launches(captured)
    key = key_for(spec, Target("NVIDIA H100 80GB HBM3", 90, "3.6.0"))
    variant = Variant(name="block 128", constexprs={"BLOCK": 128})
    with DecisionStore(tmp_path / "foreign.db", signer=ELSEWHERE) as other:
        run = other.start_run({})
        other.finish_candidate(other.add_candidate(run, key, variant).id, "verified", verification={"ok": True})
        other.set_decision(key, variant, baseline_ms=2.0, best_ms=1.0)
    (result,) = _import(captured, worker, tmp_path / "foreign.db", tmp_path / "mine.db")
    assert result.status == SKIPPED and "made for NVIDIA H100" in result.reason


# ------------------------------------------------------------------------------ the secret, CLI

def test_the_secret_is_private_and_made_once(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITUNE_HOME", str(tmp_path / "home"))
    signing._signer_at.cache_clear()
    first = signing.local_signer()
    path = signing.key_path()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    signing._signer_at.cache_clear()
    assert signing.local_signer().decision("k", {}) == first.decision("k", {})
    path.chmod(0o644)
    signing._signer_at.cache_clear()
    with pytest.raises(StoreError, match="signing key is open to others \\(mode 644\\).*chmod 600"):
        signing.local_signer()
    path.chmod(0o600)
    path.parent.chmod(0o777)  # others could replace the key
    signing._signer_at.cache_clear()
    with pytest.raises(StoreError, match="signing folder is open to others \\(mode 777\\).*chmod 700"):
        signing.local_signer()
    path.parent.chmod(0o700)
    signing._signer_at.cache_clear()
    assert signing.local_signer().decision("k", {}) == first.decision("k", {})
    signing._signer_at.cache_clear()


@pytest.mark.skipif(os.name != "posix" or os.getuid() != 0, reason="lchown to another uid needs root")
def test_a_home_or_key_that_is_another_users_link_is_refused(tmp_path, monkeypatch):
    """TRITUNE_HOME (or the key) as a link that another user owns (uid 65534 here) is refused,
    although what it points to is ours and private: they could point it at a folder of theirs."""
    real = tmp_path / "real"
    real.mkdir(mode=0o700)
    home = tmp_path / "home"
    home.symlink_to(real)
    monkeypatch.setenv("TRITUNE_HOME", str(home))
    signing._signer_at.cache_clear()
    first = signing.local_signer()  # a link of our own is fine
    os.lchown(home, 65534, 65534)
    signing._signer_at.cache_clear()
    with pytest.raises(StoreError, match="signing folder is a link that belongs to another user \\(uid 65534\\)"):
        signing.local_signer()
    monkeypatch.setenv("TRITUNE_HOME", str(real))
    key = real / signing.KEY_FILE
    (real / "theirs.key").write_text(key.read_text())
    (real / "theirs.key").chmod(0o600)
    key.unlink()
    key.symlink_to(real / "theirs.key")
    signing._signer_at.cache_clear()
    assert signing.local_signer().decision("k", {}) == first.decision("k", {})  # our own link
    os.lchown(key, 65534, 65534)
    signing._signer_at.cache_clear()
    with pytest.raises(StoreError, match="signing key is a link that belongs to another user"):
        signing.local_signer()
    signing._signer_at.cache_clear()


def test_a_key_that_cannot_be_made_is_one_line(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    monkeypatch.setenv("TRITUNE_HOME", str(home))
    monkeypatch.setattr(signing.os, "link", lambda *a: (_ for _ in ()).throw(OSError(95, "Operation not supported")))
    signing._signer_at.cache_clear()
    with pytest.raises(StoreError, match="store signing key cannot be made \\(Operation not supported\\)"):
        signing.local_signer()
    signing._signer_at.cache_clear()


def test_damaged_and_hand_edited_rows_are_listed_not_tracebacks(program, tmp_path):
    path = tmp_path / "edited.db"
    decided(path, program / "cap", Variant(name="block 64", constexprs={"BLOCK": 64}), ELSEWHERE)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE decisions SET variant = ?", (json.dumps({"name": "x", "extra": 1}),))
        conn.execute("UPDATE candidates SET variant = '{not json'")
    result = CliRunner().invoke(store_command, ["verify", str(path)])
    assert result.exit_code == 1, result.output
    assert "NOT signed  scale_kernel  unreadable variant (TypeError)" in result.output
    assert "0 of 1 candidates" in result.output
    done = interpreted([*RUN, "--store", str(path), "--", sys.executable, str(program / "prog.py"), "0"])
    assert done.returncode == 0 and done.stdout.strip() == "4 [32] True" and "Traceback" not in done.stderr


def test_store_verify_says_what_is_signed_and_why_not(program, tmp_path):
    foreign_store(tmp_path / "foreign.db", program / "cap", Variant(name="block 64", constexprs={"BLOCK": 64}))
    result = CliRunner().invoke(store_command, ["verify", str(tmp_path / "foreign.db")])
    assert result.exit_code == 1, result.output
    assert "NOT signed  scale_kernel" in result.output and "signed under another TRITUNE_HOME" in result.output
    assert "0 of 1 decisions signed by this user" in result.output
    missing = CliRunner().invoke(store_command, ["verify", str(tmp_path / "nope.db")])
    assert missing.exit_code == 2 and missing.output.strip() == f"tritune store: {tmp_path / 'nope.db'}: no such " \
                                                                "decision store"


@pytest.mark.parametrize("args", [["verify"], ["inductor-cache"], ["inductor-cache", "--remove"]])
def test_a_store_command_that_reads_leaves_an_empty_file_empty(tmp_path, args):
    """SQLite opens an empty file as a new database: opening it as a store wrote 68 KB of schema
    into a file the user only asked to read."""
    empty = tmp_path / "empty.db"
    empty.touch()
    result = CliRunner().invoke(store_command, [args[0], str(empty), *args[1:]])
    assert result.exit_code == 2
    assert result.output.splitlines() == [
        f"tritune store: {empty}: an empty file, not a decision store (tritune optimize makes one)"]
    assert empty.stat().st_size == 0 and sorted(tmp_path.iterdir()) == [empty]


def test_inductor_cache_refuses_what_is_no_store(tmp_path):
    missing = CliRunner().invoke(store_command, ["inductor-cache", str(tmp_path / "nope.db")])
    assert missing.exit_code == 2
    assert missing.output.splitlines() == [f"tritune store: {tmp_path / 'nope.db'}: no such decision store"]
    text = tmp_path / "notes.db"
    text.write_text("not a store\n" * 100)
    other = CliRunner().invoke(store_command, ["inductor-cache", str(text), "--remove"])
    assert other.exit_code == 2
    assert other.output.splitlines() == [f"tritune store: {text}: not an SQLite file, so not a tritune decision store"]
    assert not (tmp_path / "nope.db").exists()


def test_the_store_commands_are_on_the_cli():
    done = subprocess.run([sys.executable, "-m", "tritune", "store", "--help"], capture_output=True, text=True,
                          env=os.environ, timeout=120)
    assert done.returncode == 0 and "verify" in done.stdout and "import" in done.stdout


def test_optimize_says_it_does_not_reuse_a_foreign_store(captured, worker, tmp_path):
    from tritune.loop import optimize
    from tritune.model.settings import LoopSettings

    variant = Variant(name="block 128", constexprs={"BLOCK": 128})
    foreign_store(tmp_path / "shared.db", captured, variant)  # a 'verified' 100x candidate and decision
    lines: list[str] = []
    settings = LoopSettings(arbiter=ArbiterSettings(require_meaningful=False), max_candidates=4, per_round=2)

    def configs(spec):  # launch-config alone reaches BLOCK=128 within 4 candidates
        return [f for f in families_for(spec) if f.name == "launch-config"]

    results = optimize(captured, RunRequest(tmp_path / "out", store_path=tmp_path / "shared.db", settings=settings), evaluator=Evaluator(captured, retime=block_speed, worker=worker), log=lines.append, families=configs)
    assert ("tritune optimize: scale_add_kernel: 1 candidate(s) and 1 decision(s) in "
            f"{tmp_path / 'shared.db'} not signed by this user: candidates are evaluated again here, decisions ignored "
            "(`tritune store import` judges them)") in lines
    (kernel,) = results.kernels
    assert not any(c.reused for c in kernel.candidates)
    tried = {c.variant: c for c in kernel.candidates}
    assert tried["BLOCK=128"].status in ("accepted", "verified") and tried["BLOCK=128"].speedup == 2.0
    with DecisionStore(tmp_path / "shared.db") as store:
        (decision,) = store.decisions()
        block = decision.variant.constexprs["BLOCK"]  # judged here (scripted: BLOCK / 64 faster), not the foreign 100x
        assert decision.signed and decision.speedup == pytest.approx(block / 64) and block >= 128


def test_store_import_command_runs_the_gates_and_says_what_it_did(captured, tmp_path):
    """On the CPU the interpreter's times mean nothing: the command verifies the foreign decision,
    then the arbiter refuses to accept it on such times, and nothing is signed."""
    foreign_store(tmp_path / "foreign.db", captured, Variant(name="block 128", constexprs={"BLOCK": 128}))
    done = subprocess.run([sys.executable, "-m", "tritune", "store", "import", str(tmp_path / "foreign.db"), "--into",
                           str(tmp_path / "mine.db"), "--launches", str(captured)],
                          env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "rejected: scale_add_kernel BLOCK=128: not_meaningful" in done.stdout, done.stdout
    assert done.stdout.strip().endswith(f"0 of 1 decisions of {tmp_path / 'foreign.db'} verified, timed and signed "
                                        f"into {tmp_path / 'mine.db'}")
    with DecisionStore(tmp_path / "mine.db") as mine:
        assert mine.decisions() == [] and [c.failure_kind for c in mine.candidates()] == ["not_meaningful"]
    same = subprocess.run([sys.executable, "-m", "tritune", "store", "import", str(tmp_path / "mine.db"), "--into",
                           str(tmp_path / "mine.db"), "--launches", str(captured)], capture_output=True, text=True,
                          timeout=120)
    assert same.returncode == 2 and same.stderr.count("\n") == 1 and "into itself" in same.stderr


def test_an_import_refused_on_timing_alone_is_judged_again_later(captured, worker, tmp_path):
    variant = Variant(name="block 128", constexprs={"BLOCK": 128})
    foreign_store(tmp_path / "foreign.db", captured, variant)
    evaluator = Evaluator(captured, retime=lambda spec, v, ms: 1.0, worker=worker)  # no gain this time
    with DecisionStore(tmp_path / "foreign.db") as other, DecisionStore(tmp_path / "mine.db") as mine:
        (first,) = import_decisions(other, mine, read_launches(captured), evaluator, current_target("cpu"),
                                    settings=ArbiterSettings(require_meaningful=False))
        assert first.status == REJECTED and first.reason.startswith("below_threshold")
        assert [c.status for c in mine.candidates()] == ["verified"]  # not a final verdict
    (second,) = _import(captured, worker, tmp_path / "foreign.db", tmp_path / "mine.db")
    assert second.status == IMPORTED and second.speedup == pytest.approx(2.0), second


def test_an_imported_code_change_is_kept_as_assuming_no_alias(captured, worker, tmp_path):
    """Verification gives every argument its own buffer, so it cannot tell a foreign source that
    is right only on disjoint arguments (its no-alias record dropped) from one right always: the
    import keeps it as assuming no-alias, and the applier guards each launch."""
    (spec,) = read_launches(captured)
    text = (captured / spec.source).read_text()
    faster = Variant(name="block 128 in the source", constexprs={"BLOCK": 128}, source=text + "\n# foreign\n")
    foreign_store(tmp_path / "foreign.db", captured, faster)
    (result,) = _import(captured, worker, tmp_path / "foreign.db", tmp_path / "mine.db")
    assert result.status == IMPORTED, result
    with DecisionStore(tmp_path / "mine.db") as mine:
        (decision,) = mine.decisions()
    assert decision.variant.assumes == ("noalias",) and decision.variant.source == faster.source
    again = _import(captured, worker, tmp_path / "foreign.db", tmp_path / "mine.db")
    assert [r.status for r in again] == [SKIPPED] and "already decided" in again[0].reason
    from tritune.loop.imports import as_imported

    assert as_imported(Variant(constexprs={"BLOCK": 128})).assumes == ()  # no code of theirs: nothing to assume


def test_an_import_replaces_a_held_decision_only_with_a_faster_one(captured, worker, tmp_path):
    """README: a decision ``--into`` already has is replaced only by a faster one. A foreign 1.20x
    passes every gate on its own but not over the held 1.50x; at 1.80x it replaces it."""
    held = Variant(name="block 256", constexprs={"BLOCK": 256})
    key = decided(tmp_path / "mine.db", captured, held)
    with DecisionStore(tmp_path / "mine.db") as mine:  # held at 1.50x
        mine.set_decision(key, held, baseline_ms=1.5, best_ms=1.0)
    foreign_store(tmp_path / "foreign.db", captured, Variant(name="block 128", constexprs={"BLOCK": 128}))

    def at(speedup):
        def retime(spec, variant, measured_ms):
            return 1.0 if variant.constexprs.get("BLOCK", 64) == 64 else 1.0 / speedup
        return Evaluator(captured, retime=retime, worker=worker)

    def imported(speedup):
        with DecisionStore(tmp_path / "foreign.db") as other, DecisionStore(tmp_path / "mine.db") as mine:
            (result,) = import_decisions(other, mine, read_launches(captured), at(speedup), current_target("cpu"),
                                         settings=ArbiterSettings(require_meaningful=False))
            return result, mine.decision_for(key)

    slower, decision = imported(1.20)
    assert slower.status == REJECTED and slower.reason.startswith("not_better"), slower
    assert "1.200x does not beat" in slower.reason and "1.500x" in slower.reason
    assert decision.variant.constexprs == {"BLOCK": 256} and decision.speedup == pytest.approx(1.5)
    faster, decision = imported(1.80)  # not_better is no final verdict: judged again
    assert faster.status == IMPORTED and faster.speedup == pytest.approx(1.8), faster
    assert decision.variant.constexprs == {"BLOCK": 128} and decision.speedup == pytest.approx(1.8)
