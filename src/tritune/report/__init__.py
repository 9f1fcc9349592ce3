"""Report: what an optimize run did, as tables and plots a person would rather look at than read.

``write_report(results, out_dir)`` reads the loop's ``optimize.json`` (or its dict) and writes
``report.md``, a self-contained ``report.html`` (plots embedded, no network) and PNG plots under
``plots/``; ``summarize(results)`` gives the numbers alone (success rate, geomean, sums, tallies).

- ``load``      read and check the file; ``KernelFacts``: one record with missing fields made safe
- ``summary``   the figures, TritonForge's (seed 002 Table 1) and the time sums
- ``document``  the report as blocks; ``markdown`` and ``html`` render them, escaping user text
- ``plots``     the four PNGs (matplotlib optional)
- ``write``     ties them together
"""

from tritune.report.load import ReportError, load_results
from tritune.report.summary import summarize
from tritune.report.write import write_report

__all__ = ["ReportError", "load_results", "summarize", "write_report"]
