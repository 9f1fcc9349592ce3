"""``tritune report RESULTS --out DIR``: turn an optimize run's results into report.md/.html and plots.

Exit status: 0 when the report was written, 2 when RESULTS is not a readable optimize.json or
the report cannot be written (a one-line error naming the file and the problem).
"""

from __future__ import annotations

import sys
from pathlib import Path

import click


@click.command()
@click.argument("results", metavar="RESULTS", type=click.Path(path_type=Path))
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Folder for report.md, report.html and plots/ (default: 'report' beside RESULTS).")
def report(results: Path, out_dir: Path | None) -> None:
    """Write a report of RESULTS (an optimize.json, or the folder holding it).

    report.md and a self-contained report.html (plots embedded) hold: the GPU, date and command,
    whether the times mean anything (CPU interpreter runs do not), success rate, geomean and mean
    speedups, time sums against the roofline floor, a per-kernel table, TritonForge-style tables
    by category and kind, and tallies of candidate failures and rejection reasons.
    """
    from tritune.report import ReportError, load_results, summarize, write_report
    from tritune.report.document import fmt_pct, fmt_x
    from tritune.report.plots import SKIPPED_NO_MATPLOTLIB, load

    if out_dir is None:
        out_dir = (results if results.is_dir() else results.parent) / "report"
    try:
        data = load_results(results)
        written = write_report(data, out_dir)
    except ReportError as exc:
        click.echo(f"tritune report: {exc}", err=True)
        sys.exit(2)
    except OSError as exc:
        click.echo(f"tritune report: cannot write the report into {out_dir}: {exc.strerror or exc}", err=True)
        sys.exit(2)
    figures = summarize(data)
    for name, path in written.items():
        click.echo(f"{name}: {path}")
    if load() is None:
        click.echo(SKIPPED_NO_MATPLOTLIB, err=True)
    warning = "  (CPU interpreter: times NOT meaningful)" if figures["meaningful"] is False else ""
    click.echo(f"{figures['improved']} of {figures['optimized']} optimized kernel(s) improved "
               f"({fmt_pct(figures['success_rate'])}), geomean {fmt_x(figures['geomean_speedup'])}{warning}")
