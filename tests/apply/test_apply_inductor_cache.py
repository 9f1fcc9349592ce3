"""What the Inductor cache entries of a store may touch (``apply.inductor_cache``): only entries this
user's tritune signed, and only ``.best_config`` files inside Inductor's cache directory once links
are resolved. Each payload below names a file to overwrite (``previous`` is what ``remove`` puts
back) or to delete (``previous`` None); after ``remove`` (what ``tritune run``, ``tritune.enable``
and ``tritune store inductor-cache --remove`` do) every target is as it was, and each ignored entry
is one line on stderr."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from types import SimpleNamespace

import pytest

from tritune.apply import inductor_cache
from tritune.store import DecisionStore, signing
from tritune.store.inductor_entries import InductorEntry

ELSEWHERE = signing.Signer(b"another user's secret, not ours!")
PAYLOAD = "import os; os.system('echo owned')\n"
THERE = '{"XBLOCK": 64}'  # what each target holds: what a real entry would have written


@pytest.fixture
def cache(tmp_path, monkeypatch) -> Path:
    """Inductor's cache directory (``TORCHINDUCTOR_CACHE_DIR``), with the user's files beside it."""
    root = tmp_path / "inductor"
    root.mkdir()
    (tmp_path / "outside").mkdir()
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(root))
    return root


def target(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(THERE)
    return path


def plant(store: Path, path: Path | str, previous: str | None, signer=None) -> None:
    with DecisionStore(store, signer=signer) as made, made.inductor_entries_locked() as (signed, _):
        signed.append(InductorEntry(str(path), "k", "triton_k", previous, THERE))


def untouched(*paths: Path) -> bool:
    return all(p.read_text() == THERE for p in paths)


def ignored_lines(err: str, what: str) -> int:
    return sum(what in line for line in err.splitlines())


def test_an_unsigned_manifest_beside_the_store_is_never_followed(cache, tmp_path, capsys):
    """The json manifest of tritune before signing: read by nothing (a file beside a shared store
    is anyone's), even for a path inside Inductor's cache; one line says so."""
    store = tmp_path / "team.db"
    DecisionStore(store).close()
    inside, pth = target(cache / "k.best_config"), target(tmp_path / "outside" / "site-packages" / "evil.pth")
    entries = [{"path": str(inside), "key": "k", "kernel": "triton_k", "previous": PAYLOAD, "written": THERE},
               {"path": str(pth), "key": "k", "kernel": "triton_k", "previous": PAYLOAD, "written": THERE}]
    Path(f"{store}.inductor-cache.json").write_text(json.dumps({"entries": entries}))
    assert inductor_cache.entries(store) == [] and inductor_cache.remove(store) == []
    assert untouched(inside, pth)
    err = capsys.readouterr().err
    assert ignored_lines(err, "an unsigned manifest of an older tritune: ignored") == 1


def test_an_entry_not_signed_by_this_user_writes_and_deletes_nothing(cache, tmp_path, capsys):
    """Rows signed under another key (a colleague's store), or added with sqlite3 (no signature),
    for files inside Inductor's cache: only the signature stops them."""
    store = tmp_path / "team.db"
    written, deleted, edited = (target(cache / f"{n}.best_config") for n in ("written", "deleted", "edited"))
    plant(store, written, PAYLOAD, signer=ELSEWHERE)
    plant(store, deleted, None, signer=ELSEWHERE)
    with sqlite3.connect(store) as conn:
        conn.execute("INSERT INTO inductor_cache VALUES (?, 'k', 'triton_k', ?, ?, 0, NULL)",
                     (str(edited), PAYLOAD, THERE))
    assert inductor_cache.remove(store) == []
    assert untouched(written, deleted, edited)
    err = capsys.readouterr().err
    assert ignored_lines(err, "not signed by this user's tritune") == 3
    with DecisionStore(store) as kept:
        assert kept.inductor_entries() == []  # dropped: never followed, never signed anew


def test_store_verify_counts_the_unsigned_entries(cache, tmp_path):
    from click.testing import CliRunner

    from tritune.cli import main

    store = tmp_path / "team.db"
    plant(store, target(cache / "mine.best_config"), None)
    theirs = (str(target(cache / "theirs.best_config")), "k", "triton_k", None, THERE)
    with sqlite3.connect(store) as conn:  # planting through the store's API would drop ours (not theirs)
        conn.execute("INSERT INTO inductor_cache VALUES (?, ?, ?, ?, ?, 0, ?)",
                     (*theirs, ELSEWHERE.inductor_entry(*theirs)))
    done = CliRunner().invoke(main, ["store", "verify", str(store)])
    assert "1 of 2 Inductor cache entries signed by this user (1 write and delete nothing)" in done.output


@pytest.mark.parametrize("where, why", [
    ("outside/evil.best_config", "outside Inductor's cache directory"),  # absolute, elsewhere
    ("inductor/sub/../../outside/up.best_config", "outside Inductor's cache directory"),  # .. out
    ("inductor/dirlink/x.best_config", "outside Inductor's cache directory"),  # a folder link out
    ("inductor/link.best_config", "a link"),  # the file itself a link (to a file out)
    ("inductor/k.py", "not an autotune cache file"),  # a module Inductor would import
    ("outside/site-packages/evil.pth", "not an autotune cache file"),
])
def test_a_signed_entry_touches_only_best_config_files_inside_inductors_cache(cache, tmp_path, capsys, where, why):
    """This user's own signature, so only the path checks stop each one, for a write and a delete."""
    store, outside = tmp_path / "mine.db", tmp_path / "outside"
    (cache / "sub").mkdir()
    (cache / "dirlink").symlink_to(outside)
    target(outside / "x.best_config")
    target(outside / "up.best_config")
    (cache / "link.best_config").symlink_to(target(outside / "linked.best_config"))
    path = tmp_path / where
    if not path.is_symlink():
        target(path)
    plant(store, path, PAYLOAD)
    assert inductor_cache.remove(store) == []
    assert untouched(path, outside / "linked.best_config")
    plant(store, path, None)  # the same entry, to delete
    assert inductor_cache.remove(store) == []
    assert path.exists() and untouched(path, outside / "linked.best_config")
    err = capsys.readouterr().err
    assert ignored_lines(err, f"{str(path)!r} ignored: {why}") == 1  # once, though seen twice
    (entry,) = inductor_cache.entries(store)  # kept (signed), for when the cache directory is back
    assert entry.path == str(path)


def test_a_link_inside_inductors_cache_is_not_written_through(cache, tmp_path):
    """A link whose target is inside the cache too: refused for being a link (the file is opened
    without following links: one swapped in after the check is refused as well)."""
    store = tmp_path / "mine.db"
    real = target(cache / "real.best_config")
    (cache / "link.best_config").symlink_to(real)
    plant(store, cache / "link.best_config", PAYLOAD)
    assert inductor_cache.remove(store) == [] and untouched(real)


def test_a_signed_entry_inside_the_cache_is_put_back(cache, tmp_path):
    """The control: the same entry where it may be is followed (written back, then deleted)."""
    store = tmp_path / "mine.db"
    path = target(cache / "sub" / "k.best_config")
    plant(store, path, '{"XBLOCK": 1024}')
    assert inductor_cache.remove(store) == ["triton_k"] and path.read_text() == '{"XBLOCK": 1024}'
    target(path)
    plant(store, path, None)
    assert inductor_cache.remove(store) == ["triton_k"] and not path.exists()


def test_inductors_own_file_outside_its_cache_directory_is_not_written(cache, tmp_path):
    """``write`` checks the path Inductor's tuner gives too: a kernel module outside the cache
    (its ``.best_config`` beside it) gets no entry and no file."""
    from triton import Config

    best = tmp_path / "outside" / "k.best_config"

    class Cache:  # Inductor's AutotuneCache as write uses it
        local_cache, remote_cache = (None, str(best)), None

        def save(self, config, time_taken_ns, found_by_coordesc=False):
            best.write_text(json.dumps(config.kwargs))

        def read_best(self, inductor_meta, configs):
            return configs[0]

        def hook(self, *args):
            pass

    config = Config({"XBLOCK": 64}, num_warps=4, num_stages=1)
    tuner = SimpleNamespace(save_cache_hook=Cache().hook, inductor_meta={})
    decision = SimpleNamespace(variant=SimpleNamespace(constexprs={}, options={}),
                               key=SimpleNamespace(sha="k", kernel="triton_k"))
    why = inductor_cache.write(tuner, config, decision, tmp_path / "mine.db", [config])
    assert why is not None and "is outside Inductor's cache directory" in why
    assert not best.exists() and inductor_cache.entries(tmp_path / "mine.db") == []


def test_enable_on_a_planted_store_writes_nothing(cache, tmp_path, capsys):
    """``tritune.enable`` (and so ``tritune run --store``) on a shared store with a planted json
    and a forged row: the applier reads the entries as it starts, and touches nothing."""
    from tritune import apply

    store = tmp_path / "team.db"
    inside = target(cache / "k.best_config")
    plant(store, inside, None, signer=ELSEWHERE)
    Path(f"{store}.inductor-cache.json").write_text(json.dumps({"entries": [
        {"path": str(inside), "key": "k", "kernel": "triton_k", "previous": PAYLOAD, "written": THERE}]}))
    try:
        apply.enable(store, device="cpu", inductor_cache=True)
    finally:
        apply.disable()
    assert untouched(inside)
    err = capsys.readouterr().err
    assert "not signed by this user's tritune" in err and "an unsigned manifest of an older tritune" in err
