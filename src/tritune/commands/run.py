"""``tritune run --store S -- <command...>``: run a program with a store's decisions applied.

Every Python process of the command (its subprocesses and Inductor's workers too) starts with
tritune's boot folder (``tritune.boot``) and ``TRITUNE_STORE`` set, so its launches of kernels
with verified, enabled decisions for this GPU and Triton run the decided variants (see
``tritune.apply``); each process that launched such a kernel says on stderr, at exit, how many
of those launches it applied. The program is not modified.

Exit status: the command's own (a signal N as 128 + N, like a shell); 2 for a usage error (no
command, no store at S); 126 / 127 when the command cannot be run / is not found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tritune.config import ENV_STORE


@click.command(context_settings={"ignore_unknown_options": True, "allow_interspersed_args": False})
@click.option("--store", "-s", "store", required=True, type=click.Path(path_type=Path),
              help="Decision store (written by tritune optimize) whose decisions to apply.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- COMMAND...")
def run(store: Path, command: tuple[str, ...]) -> None:
    """Run COMMAND with the verified decisions in STORE applied at launch time.

    Covers @triton.jit, @triton.autotune, @triton.heuristics and Inductor kernels in the
    command's Python processes. Example: tritune run --store runs/decisions.db -- python train.py
    """
    from tritune import boot

    if not command:
        click.echo("tritune run: no command given: tritune run --store STORE -- python your_script.py", err=True)
        sys.exit(2)
    if not store.is_file():
        click.echo(f"tritune run: no decision store at {store}", err=True)
        sys.exit(2)
    try:
        returncode = boot.run(command, {ENV_STORE: str(store.resolve())})
    except boot.CommandError as exc:
        click.echo(f"tritune run: {exc}", err=True)
        sys.exit(exc.exit_code)
    sys.exit(returncode)

