"""Per arm of ``benchmarks/containment_gpu.sh``: kernels reached, candidates evaluated, decisions,
where each key's profile came from, and the run's wall time, from ``optimize.json``.

    python3 benchmarks/containment/summary.py optimize-jailed.json optimize-unjailed.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path


def summary(path: Path) -> str:
    data = json.loads(path.read_text())
    kernels = data.get("kernels", [])
    candidates = sum(len(k.get("candidates", [])) for k in kernels)
    decided = [k for k in kernels if k.get("decision")]
    speedups = ", ".join(f"{k.get('kernel')} {k.get('speedup') or 0:.3f}x" for k in decided) or "none"
    profiles = sorted({str((k.get("profile") or {}).get("source") or k.get("profile_source")) for k in kernels})
    walls = sum(k.get("wall_s") or 0 for k in kernels)
    return (f"{path.stem}: {len(kernels)} kernels, {candidates} candidates, {len(decided)} decided ({speedups}); "
            f"profiles from {', '.join(profiles)}; key time {walls:.1f} s")


if __name__ == "__main__":
    for name in sys.argv[1:]:
        try:
            print(summary(Path(name)))
        except (OSError, ValueError) as exc:
            print(f"{name}: {exc}")
