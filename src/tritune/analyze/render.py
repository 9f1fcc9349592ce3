"""Show analysis records: a rich table for people, JSON for programs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Iterable, TextIO

from rich import box
from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

# TTIR ops worth a column of their own (seed 000's targets); the rest are in --json.
KEY_OPS = ("tt.load", "tt.store", "tt.reduce", "arith.divf")
PIPE_WIDTH = 200


def to_json(records: Iterable[dict[str, Any]]) -> str:
    return json.dumps(list(records), indent=2, default=str)


def console_for(stream: TextIO) -> Console:
    """A console for ``stream``: the terminal's width there, else wide enough for the table."""
    return Console(file=stream, width=None if stream.isatty() else PIPE_WIDTH)


def render_table(records: list[dict[str, Any]], console: Console, *, wide: bool = False) -> None:
    """The analysed kernels as a table that fits ``console``'s width (``DEFAULT_COLUMNS``; with
    ``wide``, every column), then the notes and the count. Errors are not shown here: the
    command says them on stderr (``error_lines``)."""
    good = [r for r in records if r["error"] is None]
    bad = [r for r in records if r["error"] is not None]
    if good:
        table = _table(good, wide)
        fitted = console.width
        if wide:  # every column, at the width they need: not cut at the terminal's (a pager shows them)
            console.width = max(fitted, Measurement.get(console, console.options.update_width(10**4), table).maximum)
        try:
            console.print(table)
        finally:
            console.width = fitted
    notes = {r["rewrites_error"] for r in good if r["rewrites_error"]}
    for note in sorted(notes):
        console.print(f"[yellow]rewrites not shown[/yellow]: {note}", highlight=False)
    more = "" if wide else "--wide shows every column, "
    console.print(f"{len(good)} kernel(s) analysed, {len(bad)} error(s). "
                  f"constexprs marked * were inferred; {more}--json has everything.", highlight=False)


def error_lines(records: list[dict[str, Any]]) -> list[str]:
    """``FILE::KERNEL: error`` for each record that failed (one line each)."""
    return [_short(r["file"]) + (f"::{r['kernel']}" if r["kernel"] else "") + f": {r['error']}"
            for r in records if r["error"] is not None]


# (header, right-aligned, cell, shown by default): the defaults fit 100 columns with a kernel
# name of ~30 characters a line (Inductor's names wrap); --wide shows all of them.
def _columns() -> list[tuple[str, bool, Callable[[dict[str, Any]], str], bool]]:
    return [
        ("constexprs", False, _constexprs, False),
        ("warps", True, lambda r: str(r["num_warps"]), True),
        ("ld/st/red/divf", True, lambda r: "/".join(str(r["ttir_ops"].get(op, 0)) for op in KEY_OPS), False),
        ("rewrites", False, lambda r: _rewrites(r["rewrites"]), True),
        ("ld bits x n", False, lambda r: _widths(r["ptx"]["global_loads"]), False),
        ("div / rcp", False, lambda r: _divisions(r["ptx"]), False),
        ("regs", True, lambda r: str(r["registers"]), True),
        ("spill B", True, lambda r: str(r["spills"]), True),
        ("smem B", True, lambda r: str(r["shared_bytes"]), True),
        ("occ", True, lambda r: f"{r['occupancy']:.0%}", True),
        ("occ limited by", False, lambda r: r["occupancy_limiter"] if r["occupancy"] < 1 else "-", False),
    ]


def _table(records: list[dict[str, Any]], wide: bool = False) -> Table:
    target = records[0]["target"]
    columns = [column for column in _columns() if wide or column[3]]
    table = Table(title=f"tritune analyze ({target})", title_justify="left", box=box.SIMPLE_HEAD,
                  show_edge=False, pad_edge=False, collapse_padding=True)
    # the column that wraps: kernel names and file captions (at most 48 wide, where --wide has room)
    table.add_column("kernel", overflow="fold", max_width=48)
    for header, right, _, _ in columns:
        # a number never wraps; a list (rewrites: one per line) folds only past its width
        table.add_column(header, justify="right" if right else "left", no_wrap=right, min_width=len(header),
                         overflow="fold")
    previous_file = None
    for r in records:
        # A caption row per file, unless the file is named after its only kernel (Inductor's).
        if r["file"] != previous_file and Path(r["file"]).stem != r["kernel"]:
            table.add_row(f"[bold]{escape(_short(r['file']))}[/bold]")
        previous_file = r["file"]
        table.add_row(r["kernel"], *(cell(r) for _, _, cell, _ in columns))
    return table


def _constexprs(record: dict[str, Any]) -> str:
    inferred = set(record["inferred"] or ())
    return " ".join(f"{k}={v}{'*' if k in inferred else ''}" for k, v in record["constexprs"].items())


def _rewrites(rewrites: dict[str, int] | None) -> str:
    if rewrites is None:
        return "n/a"
    fired = [f"{name} {count}" for name, count in rewrites.items() if count]
    return escape("\n".join(fired)) or "-"  # "name[noalias]" is no markup


def _widths(loads: dict) -> str:
    return " ".join(f"{bits}x{count}" for bits, count in sorted(loads.items(), key=lambda kv: int(kv[0]))) or "-"


def _divisions(stats: dict[str, Any]) -> str:
    parts = [f"{op} {n}" for op, n in {**stats["divisions"], **stats["reciprocals"]}.items()]
    return "\n".join(parts) or "-"


def _short(path: str) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return path
    return relative if not relative.startswith("..") else path
