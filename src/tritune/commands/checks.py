"""Checks a command makes before it starts any work, so that a bad path is one line and exit 2
at once, not a traceback after minutes of capturing or compiling, with half the output written."""

from __future__ import annotations

import functools
import math
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

import click


class Finite(click.FloatRange):
    """A float option's type: ``click.FloatRange`` that also refuses ``nan`` and the infinities
    (``1e309`` reads as ``inf``), which a range check lets through (``nan`` compares false with
    every bound) and which reach a result file as invalid JSON (``NaN``). Every float option
    takes this type (a test looks for any other)."""

    def convert(self, value, param, ctx):
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)


def finite(text: str) -> float:
    """``text`` as a finite float, else ``ValueError`` (for options that parse several numbers)."""
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text!r} is not a finite number")
    return number


def unwritable(directory: Path) -> str | None:
    """Why files cannot be written into ``directory`` (created later where missing), or None.
    Writes and removes one temporary file: permission bits do not stop root, and a read-only
    filesystem stops everyone."""
    existing = directory
    while not existing.exists() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        if existing == directory:
            return f"{directory} exists and is not a directory"
        return f"{directory}: cannot be created, {existing} is a file"
    try:
        with tempfile.TemporaryFile(dir=existing):
            pass
    except OSError as exc:
        where = "it" if existing == directory else existing
        return f"{directory}: cannot write into {where}: {exc.strerror or exc}"
    return None


def writable_dir(ctx: click.Context, param: click.Parameter, value: Path | None) -> Path | None:
    """Click callback of an ``--out`` directory: a usage error unless files can be written there."""
    problem = None if value is None else unwritable(value)
    if problem is not None:
        raise click.BadParameter(problem)
    return value


def store_problem(path: Path) -> str | None:
    """Why the decision store at ``path`` cannot be used (not SQLite, truncated, damaged, of a
    newer schema, read-only, not creatable), or None. An existing store is opened and read
    through; a missing one needs a writable folder."""
    from tritune.store.connection import Connection
    from tritune.store.schema import StoreError

    if not path.exists():
        problem = unwritable(path.parent)
        return f"no store can be made at {path}: {problem}" if problem else None
    if not path.is_file():
        return f"{path}: not a file, so not a decision store"
    if not os.access(path, os.R_OK | os.W_OK):  # SQLite would open it read-only, then fail at a write
        return (f"{path}: read-only or unreadable: tritune writes its decisions there; "
                "give write permission or use a copy")
    problem = unwritable(path.parent)
    if problem is not None:
        return f"{path}: read-only folder: SQLite writes {path.name}-wal and -shm beside the store ({problem})"
    try:
        connection = Connection(path)
        try:
            connection.check()
        finally:
            connection.close()
    except StoreError as exc:
        return str(exc)
    return None


def runs_kernels(name: str) -> Callable[[Callable], Callable]:
    """Decorator (under ``@click.command``) of a command that launches kernels, here or in the
    processes it starts: without a GPU it runs under Triton's interpreter and says so in one
    line as the first such process starts (``tritune.gpu``), or says to set TRITON_INTERPRET=1
    and exits 2."""
    def wrap(command: Callable) -> Callable:
        @functools.wraps(command)
        def run(*args, **kwargs):
            from tritune import gpu

            try:
                with gpu.interpreted_without_gpu(lambda line: click.echo(f"tritune {name}: {line}", err=True)):
                    return command(*args, **kwargs)
            except gpu.NoGPU:
                sys.exit(2)
        return run
    return wrap
