"""``tritune capture --out DIR -- <command...>``: record every Triton launch of a program.

Exit status: 0 when the command succeeded and launches were recorded; the command's own status
when it failed (what it recorded until then is still merged and summarised; with ``--force``,
nothing of it is kept and DIR keeps its previous capture); 1 when it ran but launched no Triton
kernel; 2 for a usage error (no command, a Python script that does not exist, DIR already holds a
capture without ``--force``/``--append``, or with ``--append`` one that cannot be read: checked
before the command runs); 126 / 127 when the command cannot be run / is not found.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tritune.commands import RUNS_A_COMMAND
from tritune.commands.checks import runs_kernels, writable_dir


@click.command(context_settings=RUNS_A_COMMAND)
@click.option("--out", "-o", "out_dir", required=True, type=click.Path(path_type=Path), callback=writable_dir,
              help="Capture directory: launches.jsonl, sources/, tensors/.")
@click.option("--force", is_flag=True,
              help="Replace a capture already in DIR, once the command succeeded and launched something.")
@click.option("--append", is_flag=True, help="Add to a capture already in DIR (counts add up).")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="-- COMMAND...")
@runs_kernels("capture")
def capture(out_dir: Path, force: bool, append: bool, command: tuple[str, ...]) -> None:
    """Run COMMAND and record every Triton kernel launch it makes into DIR.

    Covers @triton.jit, @triton.autotune (the chosen config) and @triton.heuristics kernels in
    the command's Python processes and their subprocesses. Identical launches are recorded once
    with a count. Example: tritune capture --out runs/cap -- python train.py --steps 2
    """
    from tritune.capture.program import CaptureError, describe_exit, run
    from tritune.worker import bytecode

    if force and append:
        raise click.UsageError("--force and --append exclude each other")
    mode = "replace" if force else "append" if append else "new"
    try:
        with bytecode.filled_meanwhile(_say, out_dir / bytecode.COMPLETE) as imports:
            result = run(list(command), out_dir, mode=mode, imports=imports)
    except CaptureError as exc:
        click.echo(f"tritune capture: {exc}", err=True)
        sys.exit(exc.exit_code)
    if result.kept:  # --force: the command failed or launched nothing; nothing of it is kept
        what = (f"the command {describe_exit(result.returncode)}" if result.returncode
                else f"no Triton launches captured from: {' '.join(command)}")
        click.echo(f"tritune capture: {what}; {out_dir} keeps its previous capture", err=True)
        sys.exit(result.returncode or 1)
    if result.recorded:  # (--append: a command that launched nothing shows no table as if it had)
        _summary(result)
    _skipped(result.skipped, "tritune capture")
    if result.returncode != 0:
        click.echo(f"tritune capture: the command {describe_exit(result.returncode)}"
                   f"{'; what it launched until then is in ' + str(out_dir) if result.recorded else ''}", err=True)
        sys.exit(result.returncode)
    if not result.recorded:
        kept = f"; {out_dir} keeps its {result.previous} launches" if result.previous else ""
        click.echo(f"tritune capture: no Triton launches captured from: {' '.join(command)}{kept}", err=True)
        sys.exit(1)


def _say(line: str) -> None:
    click.echo(f"tritune capture: {line}", err=True)


def _summary(result) -> None:
    from rich.console import Console
    from rich.table import Table

    per_kernel: dict[tuple[str, str], list[int]] = {}
    for spec in result.specs:
        counts = per_kernel.setdefault((spec.kernel, spec.kind), [0, 0])
        counts[0] += 1
        counts[1] += spec.count
    table = Table(title=None, show_edge=False)
    for column, justify in (("kernel", "left"), ("kind", "left"), ("distinct", "right"), ("launches", "right")):
        table.add_column(column, justify=justify)
    for (kernel, kind), (distinct, total) in sorted(per_kernel.items(), key=lambda item: -item[1][1]):
        table.add_row(kernel, kind, str(distinct), str(total))
    console = Console(file=sys.stdout, width=None if sys.stdout.isatty() else 120)
    console.print(table)
    added = f" ({result.recorded} of them added now)" if result.previous else ""
    console.print(f"{result.distinct} distinct launches ({result.total} launches) of "
                  f"{len(result.kernels)} kernels -> {result.out_dir / 'launches.jsonl'}{added}", highlight=False)


def _skipped(records, prefix: str) -> None:
    """Launches the capture saw and could not record, each with why (stderr)."""
    from tritune.capture.skipped import lines

    for line in lines(records):
        click.echo(f"{prefix}: {line}" if not line.startswith(" ") else line, err=True)
