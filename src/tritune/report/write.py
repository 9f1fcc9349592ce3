"""``write_report``: optimize.json -> report.md, report.html (self-contained) and plots/*.png;
``write_pages``: any report's blocks as those two files (``tritune generate``'s too)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from tritune.model.results import RunResults
from tritune.report import document, html, markdown, plots
from tritune.report.blocks import Block
from tritune.report.load import load_results
from tritune.report.summary import facts_of, summarize
from tritune.secrets import scrub


def write_report(results: RunResults | Mapping[str, Any] | str | Path, out_dir: str | Path) -> dict[str, Path]:
    """Write the report into ``out_dir`` (created); returns what was written: ``markdown``,
    ``html`` and one entry per plot drawn (``speedup``, ``roofline``, ``categories``,
    ``wall_time``, ``amdahl``). Raises ``ReportError`` (one line) when ``results`` is not an optimize.json."""
    results = load_results(results)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    summary = summarize(results)
    facts = facts_of(results)
    drawn, notes = plots.draw_all(facts, summary, out_dir / "plots")
    blocks = document.build(results, summary, facts, drawn, notes, out_dir)
    md, page = write_pages(blocks, out_dir)
    return {"markdown": md, "html": page, **drawn}


def write_pages(blocks: Sequence[Block], out_dir: Path, title: str = html.TITLE) -> tuple[Path, Path]:
    """``out_dir/report.md`` and a self-contained ``out_dir/report.html`` (``title``) of ``blocks``,
    every secret scrubbed (a candidate's or a model's message may hold one); returns both paths."""
    md, page = out_dir / "report.md", out_dir / "report.html"
    md.write_text(scrub(markdown.render(blocks)), encoding="utf-8")
    page.write_text(scrub(html.render(blocks, title=title)), encoding="utf-8")
    return md, page
