"""``tritune run --store S -- <command...>``: run a program with a store's decisions applied.

Every Python process of the command (its subprocesses and Inductor's workers too) starts with
tritune's boot folder (``tritune.boot``) and ``TRITUNE_STORE`` set, so its launches of kernels
with verified, enabled decisions for this GPU and Triton run the decided variants (see
``tritune.apply``); each process that launched such a kernel says on stderr, at exit, how many
of those launches it applied. The program is not modified.

The store is opened here first. One that cannot be used (missing, not a decision store, written
by a newer tritune) is one line on stderr before the program's output, saying that nothing is
applied and why, and the program runs as written: the user's job matters more than its speed-up.
With ``--strict`` it is exit status 2 instead, and the program does not run.

Exit status: the command's own (a signal N as 128 + N, like a shell); 2 for a usage error (no
command) or, with ``--strict``, an unusable store; 126 / 127 when the command cannot be run / is
not found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tritune.commands import RUNS_A_COMMAND
from tritune.commands.checks import runs_kernels
from tritune.config import ENV_SERVE_INDUCTOR, ENV_STORE


@click.command(context_settings=RUNS_A_COMMAND)
@click.option("--store", "-s", "store", required=True, type=click.Path(path_type=Path),
              help="Decision store (written by tritune optimize) whose decisions to apply.")
@click.option("--strict", is_flag=True,
              help="Exit with status 2, without running COMMAND, if the store cannot be used "
                   "(default: say so and run COMMAND as written).")
@click.option("--inductor-cache/--no-inductor-cache", default=True, show_default=True,
              help="Also write Inductor decisions that only change config knobs into Inductor's autotune "
                   "cache, so that later compiles launch them with no hook (undo: tritune store "
                   "inductor-cache STORE --remove).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- COMMAND...")
@runs_kernels("run")
def run(store: Path, strict: bool, inductor_cache: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND with the verified decisions in STORE applied at launch time.

    Covers @triton.jit, @triton.autotune, @triton.heuristics and Inductor kernels in the
    command's Python processes. Example: tritune run --store runs/decisions.db -- python train.py
    """
    from tritune import boot

    if not command:
        click.echo("tritune run: no command given: tritune run --store STORE -- python your_script.py", err=True)
        sys.exit(2)
    problem = store_problem(store)
    if problem and strict:
        click.echo(f"tritune run: nothing applied, the program was not run (--strict): {problem}", err=True)
        sys.exit(2)
    if problem:
        click.echo(f"tritune run: nothing applied, running the program as written: {problem}", err=True)
    try:
        env = {ENV_STORE: str(store.resolve()), ENV_SERVE_INDUCTOR: "1" if inductor_cache else None}
        returncode = boot.run(command, None if problem else env)
    except boot.CommandError as exc:
        click.echo(f"tritune run: {exc}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(returncode)


def store_problem(store: Path) -> str | None:
    """Why the decision store at ``store`` cannot be used, in one line, or None if it can: it
    must exist and not be empty (run makes none, nor writes a schema into a file), then the
    checks ``optimize`` makes (``commands.checks``)."""
    from tritune.commands import checks
    from tritune.store.connection import empty_store

    if not store.is_file():
        return f"no decision store at {store}"
    return empty_store(store) or checks.store_problem(store)
