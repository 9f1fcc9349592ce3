"""The table of ``prior_gpu.sh``: per arm, what the kernel's first candidate was, whether it came
from the store (``prior`` in its record), the candidates tried, the decision and its speedup, and
the roofline fraction before and after.

    python3 benchmarks/prior_summary.py ARM=OUT_DIR ...   (each OUT_DIR holds an optimize.json)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def arm_row(name: str, optimize: dict) -> dict:
    """One row per kernel of an arm's ``optimize.json``."""
    rows = []
    for kernel in optimize.get("kernels") or []:
        candidates = kernel.get("candidates") or []
        first = candidates[0] if candidates else {}
        rows.append({"arm": name, "kernel": kernel.get("kernel"), "first": first.get("variant"),
                     "first_prior": bool(first.get("prior")), "from_prior": sum(1 for c in candidates if c.get("prior")),
                     "candidates": len(candidates), "decision": kernel.get("decision"),
                     "speedup": kernel.get("speedup"), "roofline_before": kernel.get("roofline_before"),
                     "roofline_after": kernel.get("roofline_after"), "wall_s": kernel.get("wall_s")})
    return rows


def table(rows: list[dict]) -> str:
    head = ["arm", "kernel", "first", "first_prior", "from_prior", "candidates", "decision", "speedup",
            "roofline_before", "roofline_after", "wall_s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for row in rows:
        lines.append("| " + " | ".join(_cell(row[h]) for h in head) + " |")
    return "\n".join(lines)


def _cell(value) -> str:
    return f"{value:.3g}" if isinstance(value, float) else str(value)


def main(argv: list[str]) -> None:
    rows = []
    for item in argv:
        name, _, folder = item.partition("=")
        rows += arm_row(name, json.loads((Path(folder) / "optimize.json").read_text()))
    print(table(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
