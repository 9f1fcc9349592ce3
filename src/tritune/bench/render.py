"""Show bench results: a rich table for people (costliest launch first), JSON for programs.

Times measured under the interpreter are marked in the title, in every time cell (``*``) and in
the summary, so nobody reads a numpy timing as a GPU one.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from rich.console import Console
from rich.table import Table

COLUMNS = ("launch", "count", "grid", "median", "p50 / p95", "graph", "noise", "bytes", "GB/s", "roofline",
           "total", "share")


def to_json(results: Iterable[dict[str, Any]]) -> str:
    return json.dumps(list(results), indent=2, default=str)


def order(results: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Timed launches by total time (time x count), largest first; failures after them."""
    timed = sorted((r for r in results if not r.get("failure")), key=lambda r: -(r.get("total_ms") or 0.0))
    return timed + [r for r in results if r.get("failure")]


def render_table(results: list[dict[str, Any]], console: Console, *, copy_gbps: float | None = None,
                 gpu: str | None = None) -> None:
    rows = order(results)
    timed = [r for r in rows if not r.get("failure")]
    interpreted = any(not r.get("meaningful") for r in timed)
    console.print(_table(rows, interpreted, copy_gbps, gpu))
    for r in rows:
        if r.get("failure"):
            console.print(f"[red]{r['failure']}[/red] {r['id']}: {r.get('message') or ''}",
                          markup=True, highlight=False)
    console.print(summary(rows, copy_gbps), highlight=False)


def summary(results: list[dict[str, Any]], copy_gbps: float | None = None) -> str:
    timed = [r for r in results if not r.get("failure") and r.get("total_ms") is not None]
    failed = len(results) - len(timed)
    total = sum(r["total_ms"] for r in timed)
    line = f"{len(timed)} launch(es) timed, {failed} failed; total {fmt_ms(total)} weighted by count"
    if timed and not all(r.get("meaningful") for r in timed):
        return line + ". * times NOT meaningful (CPU interpreter): they time numpy, not the kernel."
    floor = sum(r["floor_ms"] * r["count"] for r in timed
                if r.get("floor_ms") is not None and not overestimated(r))
    if floor > 0 and copy_gbps:
        line += (f"; roofline floor {fmt_ms(floor)} at {copy_gbps:.0f} GB/s copy bandwidth "
                 f"({total / floor:.2f}x above it)")
    if any(overestimated(r) for r in timed):
        line += (". + bytes estimated from whole tensors exceed what a copy could move in that time: "
                 "the kernel reads only part of them (a gather, a slice); left out of the floor")
    return line + ". --json has every number."


def overestimated(result: dict[str, Any]) -> bool:
    """An estimated byte count that implies beating copy bandwidth: an upper bound, not a roofline."""
    return result.get("bytes_source") == "estimate" and (result.get("roofline") or 0) > 1.0


def _table(rows: list[dict[str, Any]], interpreted: bool, copy_gbps: float | None, gpu: str | None) -> Table:
    if interpreted:
        title = "tritune bench ([bold red]CPU interpreter: times NOT meaningful[/bold red])"
    else:
        where = (gpu or "") + (f", copy {copy_gbps:.0f} GB/s" if copy_gbps else "")
        title = f"tritune bench ({where.strip(', ')})" if where else "tritune bench"
    table = Table(title=title, title_justify="left")
    table.add_column("launch", max_width=48, overflow="fold")
    for column in COLUMNS[1:]:
        table.add_column(column, justify="left" if column == "grid" else "right")
    grand = sum(r.get("total_ms") or 0.0 for r in rows if not r.get("failure"))
    for r in rows:
        table.add_row(*_cells(r, grand))
    return table


def _cells(r: dict[str, Any], grand: float) -> list[str]:
    head = [r["id"], str(r.get("count", "")), fmt_grid(r.get("grid"))]
    if r.get("failure"):
        return head + [f"[red]{r['failure']}[/red]"] + [""] * (len(COLUMNS) - len(head) - 1)
    mark = "" if r.get("meaningful") else "*"
    graph = fmt_ms(r.get("graph_ms"), mark)
    if r.get("graph_method") == "events":
        graph += " (no graph)"
    share = f"{r['total_ms'] / grand:.0%}" if grand and r.get("total_ms") is not None else "-"
    return head + [
        fmt_ms(r.get("median_ms"), mark),
        f"{fmt_ms(r.get('p50_ms'), mark)} / {fmt_ms(r.get('p95_ms'), mark)}",
        graph,
        f"{r['noise']:.1%}" if r.get("noise") is not None else "-",
        fmt_bytes(r.get("bytes"), r.get("bytes_source")),
        f"{r['gbps']:.0f}" if r.get("gbps") is not None else "-",
        (f"{r['roofline']:.0%}" + ("+" if overestimated(r) else "")) if r.get("roofline") is not None else "-",
        fmt_ms(r.get("total_ms"), mark),
        share,
    ]


def fmt_ms(ms: float | None, mark: str = "") -> str:
    """Microseconds below 1 ms (kernels mostly are), milliseconds above; '-' when absent."""
    if ms is None:
        return "-"
    if ms < 1.0:
        return f"{ms * 1e3:.1f} us{mark}"
    return f"{ms:.3f} ms{mark}"


def fmt_grid(grid: list[int] | None) -> str:
    return "x".join(str(g) for g in grid) if grid else "-"


def fmt_bytes(nbytes: int | None, source: str | None) -> str:
    """Decimal units like GB/s; '~' marks a count estimated from the tensors (not Inductor's)."""
    if nbytes is None:
        return "-"
    approx = "~" if source != "inductor" else ""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if nbytes >= scale:
            return f"{approx}{nbytes / scale:.1f} {unit}"
    return f"{approx}{nbytes} B"
