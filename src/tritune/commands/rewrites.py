"""``tritune rewrites PATH``: the source rewrites tritune's rules would make to each kernel; no GPU.

Kernels are found as ``tritune analyze`` finds them (each .py file imported, its own
``@triton.jit`` kernels); every rule of ``tritune.rewrites.RULES`` runs on the kernel's file text.
A kernel where no rule applies is listed with no rewrites (and, for people, why each rule did not
fire; ``--why`` says it for every kernel). A file that cannot be imported is one line on stderr, and the other files go on.

Exit status, as ``analyze``'s: 0 when at least one kernel was looked at (whether or not any rule
applies, and even if some files could not be imported); 1 when none was (no kernel found, or
every file failed); 2 a usage error (PATH does not exist).

``--json`` prints a list of ``{"kernel", "file", "rewrites": [{"rule", "exact", "why", "diff",
"params"}], "not_applied": {rule: why}}``: a rule may offer one rewrite per parameter value
(persistent-grid's programs per SM), which ``params`` tells apart.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from tritune.commands.checks import Finite


@click.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--kernel", "kernel_filter", default=None, metavar="NAME", help="Only the kernel named NAME.")
@click.option("--diff", "show_diff", is_flag=True, help="Print each rewrite's unified diff.")
@click.option("--why", "show_why", is_flag=True,
              help="Say why each rule that did not fire did not, for every kernel (else only where none fired).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of per-kernel objects (diffs included).")
@click.option("--timeout", "timeout_s", type=Finite(0, min_open=True), default=60, show_default=True,
              metavar="S", help="Seconds each file's import may take; a file that takes longer is skipped.")
def rewrites(path: Path, kernel_filter: str | None, show_diff: bool, show_why: bool, as_json: bool,
             timeout_s: float) -> None:
    """The source rewrites tritune's rules make to every @triton.jit kernel in PATH (a .py file or
    a directory): each with its rule, its class (exact, tolerance, fast_math: how it is verified)
    and why it is legal there. No GPU needed."""
    from tritune.analyze import discover
    from tritune.imports import interpreter_off

    records, errors = [], 0
    with interpreter_off():  # discover finds JITFunctions, which the interpreter does not make
        for file in discover.python_files(path):
            kernels, error = discover.discover_file(file, timeout_s=timeout_s)
            if error is not None:
                errors += 1
                click.echo(f"tritune rewrites: {error.file}: {error.error}", err=True)
            for kernel in kernels:
                if kernel_filter is None or kernel.name == kernel_filter:
                    records.append(_record(kernel.name, kernel.file))
    if as_json:
        click.echo(json.dumps(records, indent=2))
    else:
        _render(records, errors, show_diff, show_why)
    if not records and not errors:
        which = f"named {kernel_filter!r} " if kernel_filter else ""
        click.echo(f"tritune rewrites: no @triton.jit kernel {which}found in {path}", err=True)
    sys.exit(0 if records else 1)


def _record(kernel: str, file: str) -> dict:
    from tritune.rewrites.applicable import applicable

    try:
        text = Path(file).read_bytes().decode()  # bytes: a "\r\n" file keeps its line ends in the diff
    except (OSError, UnicodeDecodeError) as exc:
        return {"kernel": kernel, "file": file, "rewrites": [], "not_applied": {"source": f"cannot read it: {exc}"}}
    found = applicable(text, kernel)
    listed = [{"rule": r.rule, "exact": r.exact, "why": r.why, "diff": r.diff(text, file), "params": r.params}
              for r in found.rewrites]
    return {"kernel": kernel, "file": file, "rewrites": listed, "not_applied": found.reasons}


def _render(records: list[dict], errors: int, show_diff: bool, show_why: bool) -> None:
    from rich.markup import escape

    from tritune.analyze.render import console_for
    from tritune.rewrites.base import Rewrite

    console = console_for(sys.stdout)
    for record in records:
        console.print(f"[bold]{escape(record['file'])}::{escape(record['kernel'])}[/bold]", highlight=False)
        for rewrite in record["rewrites"]:
            name = Rewrite(rewrite["rule"], rewrite["exact"], "", "", rewrite["params"]).name
            console.print(f"  {escape(name)} [dim]({rewrite['exact']})[/dim]: {escape(rewrite['why'])}",
                          highlight=False)
            if show_diff:
                console.print(rewrite["diff"].rstrip("\n"), markup=False, highlight=False, soft_wrap=True)
        if not record["rewrites"]:
            console.print("  no rewrite applies" + ("" if record["not_applied"] else " (no rule is registered)"),
                          highlight=False)
        if show_why or not record["rewrites"]:
            for rule, why in record["not_applied"].items():
                console.print(f"    [dim]{escape(rule)}: {escape(why)}[/dim]", highlight=False)
    count = sum(len(r["rewrites"]) for r in records)
    console.print(f"{count} rewrite(s) in {len(records)} kernel(s), {errors} file(s) not imported"
                  + ("" if show_diff or not count else "; --diff shows them"), highlight=False)
