"""``tritune run --store S -- <command...>``: run a program with a store's decisions applied.

Every Python process of the command (its subprocesses and Inductor's workers too) starts with
``capture/_boot/`` first on ``PYTHONPATH`` and ``TRITUNE_STORE`` set, so its launches of kernels
with verified, enabled decisions for this GPU and Triton run the decided variants (see
``tritune.apply``); each process that launched such a kernel says on stderr, at exit, how many
of those launches it applied. The program is not modified.

Exit status: the command's own (a signal N as 128 + N, like a shell); 2 for a usage error (no
command, no store at S); 126 / 127 when the command cannot be run / is not found.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import click

from tritune.commands import RUNS_A_COMMAND
from tritune.config import ENV_STORE  # read in capture/_boot/sitecustomize.py


@click.command(context_settings=RUNS_A_COMMAND)
@click.option("--store", "-s", "store", required=True, type=click.Path(path_type=Path),
              help="Decision store (written by tritune optimize) whose decisions to apply.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- COMMAND...")
def run(store: Path, command: tuple[str, ...]) -> None:
    """Run COMMAND with the verified decisions in STORE applied at launch time.

    Covers @triton.jit, @triton.autotune, @triton.heuristics and Inductor kernels in the
    command's Python processes. Example: tritune run --store runs/decisions.db -- python train.py
    """
    if not command:
        click.echo("tritune run: no command given: tritune run --store STORE -- python your_script.py", err=True)
        sys.exit(2)
    if not store.is_file():
        click.echo(f"tritune run: no decision store at {store}", err=True)
        sys.exit(2)
    if shutil.which(command[0]) is None and not Path(command[0]).is_file():
        click.echo(f"tritune run: command not found: {command[0]}", err=True)
        sys.exit(127)
    try:
        process = subprocess.Popen(list(command), env=child_env(store))
    except OSError as exc:  # not executable, bad interpreter line, ...
        click.echo(f"tritune run: cannot run {command[0]}: {exc.strerror or exc}", err=True)
        sys.exit(126)
    try:
        returncode = process.wait()
    except KeyboardInterrupt:  # the child got the SIGINT too: let it finish
        returncode = process.wait()
    sys.exit(128 - returncode if returncode < 0 else returncode)


def child_env(store: Path, environ: dict[str, str] | None = None) -> dict[str, str]:
    from tritune.capture.program import BOOT_DIR

    env = dict(os.environ if environ is None else environ)
    env[ENV_STORE] = str(store.resolve())
    path = env.get("PYTHONPATH")
    if not path or path.split(os.pathsep)[0] != str(BOOT_DIR):  # already first under tritune capture
        env["PYTHONPATH"] = str(BOOT_DIR) + (os.pathsep + path if path else "")
    return env
