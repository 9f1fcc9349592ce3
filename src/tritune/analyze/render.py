"""Show analysis records: a rich table for people, JSON for programs."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, TextIO

from rich.console import Console
from rich.markup import escape
from rich.table import Table

# TTIR ops worth a column of their own (seed 000's targets); the rest are in --json.
KEY_OPS = ("tt.load", "tt.store", "tt.reduce", "arith.divf")
PIPE_WIDTH = 200


def to_json(records: Iterable[dict[str, Any]]) -> str:
    return json.dumps(list(records), indent=2, default=str)


def console_for(stream: TextIO) -> Console:
    """A console for ``stream``: the terminal's width there, else wide enough for the table."""
    return Console(file=stream, width=None if stream.isatty() else PIPE_WIDTH)


def render_table(records: list[dict[str, Any]], console: Console) -> None:
    good = [r for r in records if r["error"] is None]
    bad = [r for r in records if r["error"] is not None]
    if good:
        console.print(_table(good))
    for record in bad:
        where = _short(record["file"]) + (f"::{record['kernel']}" if record["kernel"] else "")
        console.print(f"[red]error[/red] {where}: {record['error']}", markup=True, highlight=False)
    notes = {r["rewrites_error"] for r in good if r["rewrites_error"]}
    for note in sorted(notes):
        console.print(f"[yellow]rewrites not shown[/yellow]: {note}", highlight=False)
    console.print(f"{len(good)} kernel(s) analysed, {len(bad)} error(s). "
                  "constexprs marked * were inferred; --json has everything.", highlight=False)


def _table(records: list[dict[str, Any]]) -> Table:
    target = records[0]["target"]
    table = Table(title=f"tritune analyze ({target})", title_justify="left")
    table.add_column("kernel", max_width=48, overflow="fold")
    for column in ("constexprs", "warps", "ld/st/red/divf", "rewrites", "ld bits x n", "div / rcp",
                   "regs", "spill B", "smem B", "occ", "occ limited by"):
        right = column in ("warps", "ld/st/red/divf", "regs", "spill B", "smem B", "occ")
        table.add_column(column, justify="right" if right else "left", min_width=len(column) if right else None)
    previous_file = None
    for r in records:
        # A caption row per file, unless the file is named after its only kernel (Inductor's).
        if r["file"] != previous_file and Path(r["file"]).stem != r["kernel"]:
            table.add_row(f"[bold]{_short(r['file'])}[/bold]")
        previous_file = r["file"]
        table.add_row(
            r["kernel"],
            _constexprs(r),
            str(r["num_warps"]),
            "/".join(str(r["ttir_ops"].get(op, 0)) for op in KEY_OPS),
            _rewrites(r["rewrites"]),
            _widths(r["ptx"]["global_loads"]),
            _divisions(r["ptx"]),
            str(r["registers"]),
            str(r["spills"]),
            str(r["shared_bytes"]),
            f"{r['occupancy']:.0%}",
            r["occupancy_limiter"] if r["occupancy"] < 1 else "-",
        )
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
