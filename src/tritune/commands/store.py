"""``tritune store verify DB``, ``tritune store import OTHER --into MINE --launches DIR`` and
``tritune store inductor-cache DB [--remove]``.

Decisions and candidates are used only when this user's tritune signed them
(``tritune.store.signing``). ``verify`` says, per decision, whether it is signed here and why
not; ``import`` judges another store's decisions again on this GPU (``tritune.loop.imports``)
and signs those that pass into the target store.

``inductor-cache`` lists the entries of Inductor's autotune cache that applying DB wrote (kept in
DB, signed; see ``tritune.apply.inductor_cache``) and, with ``--remove``, takes them all out,
putting back what Inductor had there before. An entry not signed by this user, or whose file is
not under Inductor's cache directory, is said on stderr and left alone.

Exit status: ``verify`` 0 when every decision is signed, 1 when some are not; ``import`` 0 when
it ran (whatever it imported); ``inductor-cache`` 0 when it listed or removed; 2 for a usage
error or an unusable input (one line): a store that is missing, empty (never written into by a
command that reads it) or not a store.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tritune.commands.checks import Finite, runs_kernels


@click.group()
def store() -> None:
    """Check and import decision stores (signed per user; see `tritune store verify --help`)."""


def _open(path: Path, *, must_exist: bool = True):
    from tritune.store import DecisionStore, StoreError

    from tritune.store.connection import empty_store

    if must_exist and not path.is_file():
        _fail(f"{path}: no such decision store")
    if must_exist and (empty := empty_store(path)):  # read, not made: an empty file stays empty
        _fail(empty)
    try:
        return DecisionStore(path)
    except StoreError as exc:
        _fail(str(exc))


def _fail(message: str) -> None:
    click.echo(f"tritune store: {message}", err=True)
    sys.exit(2)


def why_unsigned(decision) -> str:
    if not decision.signature:
        return "no signature (written before stores were signed, or not by tritune)"
    return "signature does not verify: signed under another TRITUNE_HOME, or edited after signing"


@store.command("verify")
@click.argument("db", type=click.Path(path_type=Path, dir_okay=False))
def verify(db: Path) -> None:
    """Say which decisions of DB are signed by this user (and so applied), and why others are not."""
    from tritune.store import StoreError
    from tritune.store.records import describe_variant

    opened = _open(db)
    try:
        decisions, candidates = opened.decisions(), opened.candidates()
        cache_entries = opened.inductor_entries()
    except StoreError as exc:
        _fail(str(exc))
    unsigned = 0
    for decision in decisions:
        state = "enabled" if decision.enabled else "rolled back"
        what = f"{decision.key.kernel}  {describe_variant(decision.variant_json)}  ({state})"
        if decision.signed:
            line = f"signed      {what}"
        else:
            unsigned += 1
            line = f"NOT signed  {what}: {why_unsigned(decision)}"
        click.echo(line)
    foreign = sum(not c.signed for c in candidates)
    click.echo(f"{len(decisions) - unsigned} of {len(decisions)} decisions signed by this user; "
               f"{len(candidates) - foreign} of {len(candidates)} candidates"
               + (f" ({foreign} are evaluated again before any use)" if foreign else ""))
    if cache_entries:
        foreign = sum(not e.signed for e in cache_entries)
        click.echo(f"{len(cache_entries) - foreign} of {len(cache_entries)} Inductor cache entries signed by this user"
                   + (f" ({foreign} write and delete nothing)" if foreign else ""))
    if unsigned:
        click.echo(f"`tritune store import {db} --into MINE.db --launches DIR` verifies and times them again here",
                   err=True)
    sys.exit(1 if unsigned else 0)


@store.command("import")
@click.argument("other", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--into", "into", required=True, type=click.Path(path_type=Path, dir_okay=False),
              help="The store to sign the imported decisions into (created if missing).")
@click.option("--launches", required=True, type=click.Path(path_type=Path, exists=True, file_okay=False),
              help="A `tritune capture` directory of the program the decisions are for.")
@click.option("--threshold", type=Finite(min=1.0), default=1.05, show_default=True,
              help="Speedup each decision must show again here, confirmed by interleaved re-timing.")
@click.option("--fast-math", is_flag=True, help="Also import fast-math decisions (max relative error 1e-4).")
@click.option("--unsafe-no-jail", is_flag=True,
              help="Run the workers unjailed (where this machine lacks Landlock or seccomp, a store with source "
                   "variants needs it): the other store's code then reaches everything you can.")
@runs_kernels("store import")
def import_(other: Path, into: Path, launches: Path, threshold: float, fast_math: bool, unsafe_no_jail: bool) -> None:
    """Verify and time OTHER's decisions again on this GPU; sign those that pass into --into.

    Its source variants and the capture's kernel files run only in jailed workers
    (``tritune.worker.jail``); where the jail is missing, a store with source variants is
    refused unless --unsafe-no-jail."""
    from tritune.capture.spec import read_launches
    from tritune.loop.evaluate import Evaluator
    from tritune.loop.imports import IMPORTED, import_decisions
    from tritune.loop.session import OptimizeError, machine
    from tritune.model.launch import SpecError
    from tritune.model.settings import ArbiterSettings
    from tritune.store import StoreError
    from tritune.worker import jail

    jail.protect_parent()  # this process signs with the user's key: no worker reads its memory
    if other.resolve() == into.resolve():
        _fail(f"{other}: importing a store into itself verifies nothing new; give another --into")
    foreign = _open(other)
    try:  # before anything runs
        jail.check(untrusted=_has_source(foreign), unsafe_no_jail=unsafe_no_jail)
    except jail.JailUnavailable as exc:
        _fail(f"{other}: {exc}")
    try:
        specs = read_launches(launches)
    except SpecError as exc:
        _fail(str(exc))
    policy = jail.for_workers(launches, untrusted=_has_source(foreign), unsafe_no_jail=unsafe_no_jail)
    evaluator = Evaluator(launches, jail=policy)
    try:
        try:
            target = machine(evaluator.worker)
        except OptimizeError as exc:
            _fail(str(exc))
        evaluator.copy_gbps = target.copy_gbps
        mine = _open(into, must_exist=False)  # made only once there is something to judge with
        results = import_decisions(foreign, mine, specs, evaluator, target,
                                   settings=ArbiterSettings(threshold=threshold), fast_math=fast_math,
                                   command=f"tritune store import {other} --into {into}", log=click.echo)
    except StoreError as exc:
        _fail(str(exc))
    except KeyboardInterrupt:
        click.echo(f"tritune store import: interrupted; what was judged is in {into}", err=True)
        sys.exit(130)
    finally:
        evaluator.close()
    for result in results:
        if result.status != IMPORTED:
            click.echo(f"{result.status}: {result.kernel} {result.variant}: {result.reason}")
    imported = sum(r.status == IMPORTED for r in results)
    click.echo(f"{imported} of {len(results)} decisions of {other} verified, timed and signed into {into}")


def _has_source(foreign) -> bool:
    """Whether any decision of ``foreign`` carries source (code of the other store's; passes and
    options are tritune's own); an unreadable one counts, as it might."""
    from tritune.store import StoreError

    try:
        decisions = foreign.decisions()
    except StoreError:
        return True
    for decision in decisions:
        try:
            variant = decision.variant
        except (TypeError, ValueError, AttributeError):
            return True
        if variant.source is not None:
            return True
    return False


@store.command("inductor-cache")
@click.argument("db", type=click.Path(path_type=Path, dir_okay=False))
@click.option("--remove", is_flag=True, help="Take every entry out, putting back what Inductor had there before.")
def inductor_cache(db: Path, remove: bool) -> None:
    """List (or --remove) the decisions of DB that Inductor serves from its own autotune cache."""
    from tritune.apply import inductor_cache as cache
    from tritune.store import StoreError

    try:
        with _open(db) as opened:  # missing, empty or no store: one line and exit 2, as verify
            found = cache.entries(opened)  # signed by this user only; the others are said on stderr
            for entry in found:
                why = cache.outside_cache(entry.path)
                click.echo(f"{entry.kernel}  {entry.path}" + (f"  (left alone: {why})" if why else ""))
            removed = cache.remove(opened) if remove else []
    except StoreError as exc:
        _fail(str(exc))
    if remove:
        click.echo(f"removed {len(removed)} entries from Inductor's autotune cache")
    else:
        click.echo(f"{len(found)} entries in Inductor's autotune cache"
                   + (f" (`tritune store inductor-cache {db} --remove` takes them out)" if found else ""))
