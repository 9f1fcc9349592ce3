"""``write_report``: optimize.json -> report.md, report.html (self-contained) and plots/*.png."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from tritune.model.results import RunResults
from tritune.report import document, html, markdown, plots
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
    written = {"markdown": out_dir / "report.md", "html": out_dir / "report.html"}
    written["markdown"].write_text(scrub(markdown.render(blocks)), encoding="utf-8")  # no secret in a message
    written["html"].write_text(scrub(html.render(blocks)), encoding="utf-8")
    return {**written, **drawn}
