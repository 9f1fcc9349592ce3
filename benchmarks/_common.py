"""The one harness tritune's benchmarks share: bootstrap, environment record, checks, timing, results.

Call ``bootstrap()`` before importing torch or triton: it points Triton (and optionally Inductor)
at fresh cache directories, so every kernel really compiles in this run and tritune's hook sees
it (a binary served from an old on-disk cache never passes through the hook), and it makes the
repository's ``src`` importable when tritune is not installed (``PYTHONPATH=src`` on the GPU
machine does the same).
"""

from __future__ import annotations

import argparse
import csv
import datetime
import json
import os
import pathlib
import platform
import shlex
import subprocess
import sys
import tempfile
from typing import Iterable, Sequence

REPO = pathlib.Path(__file__).resolve().parent.parent
REL_ERR_LIMIT = 1e-4        # seed 000's accuracy gate for fast-math rewrites


# ---------------------------------------------------------------------------------------- setup

def bootstrap(*, inductor: bool = False) -> dict[str, str]:
    """Fresh Triton (and Inductor) caches for this process; tritune importable. Returns the dirs."""
    dirs = {"TRITON_CACHE_DIR": tempfile.mkdtemp(prefix="tritune-bench-triton-")}
    if inductor:
        dirs["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="tritune-bench-inductor-")
    os.environ.update(dirs)
    try:
        import tritune  # noqa: F401  (only: is it importable?)
    except ImportError:
        sys.path.insert(0, str(REPO / "src"))
    return dirs


def default_out_dir() -> str:
    return os.environ.get("OUT") or str(REPO / "benchmarks" / "results")


def require_cuda(script: str) -> None:
    """Fail in one clear line on a machine without a CUDA GPU, before any GPU work starts."""
    import torch

    if not torch.cuda.is_available():
        sys.exit(f"{script}: no CUDA GPU here (torch {torch.__version__}); this part needs the GPU "
                 "machine. On a CPU-only machine run seed000_passes.py --dry-run instead.")


def environment() -> dict:
    """What every result file records: GPU, versions, date, the exact command."""
    import torch
    import triton

    env = {
        # Portable, not this machine's paths: the interpreter as python3, the script relative to
        # the repo, and the output directory as $OUT when it is the device tool's.
        "command": portable_command(sys.argv),
        "utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "triton": triton.__version__,
        "host": platform.node(),
        "git": _git_head(),
        "gpu": None,
        "capability": None,
    }
    if torch.cuda.is_available():
        env["gpu"] = torch.cuda.get_device_name()
        env["capability"] = "%d.%d" % torch.cuda.get_device_capability()
    try:
        from tritune.compiler import cache

        env["tritune_passes_hash"] = cache._implementation_hash()[:16]
    except Exception as error:  # noqa: BLE001 - recorded, not fatal
        env["tritune_passes_hash"] = f"unavailable: {error}"
    return env


def portable_command(argv: Sequence[str]) -> str:
    """The command as one would type it in the repo root: ``PYTHONPATH=src python3 benchmarks/...``."""
    script = pathlib.Path(argv[0]).resolve()
    try:
        script_text = str(script.relative_to(REPO))
    except ValueError:
        script_text = script.name
    out = os.environ.get("OUT")
    args = ["$OUT" if out and arg == out else arg for arg in argv[1:]]
    return "PYTHONPATH=src python3 " + shlex.join([script_text, *args]).replace("'$OUT'", "$OUT")


def _git_head() -> str | None:
    try:
        out = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True,
                             text=True, timeout=10)
        dirty = subprocess.run(["git", "-C", str(REPO), "status", "--porcelain"], capture_output=True,
                               text=True, timeout=10).stdout.strip()
        return out.stdout.strip() + ("+dirty" if dirty else "") if out.returncode == 0 else None
    except Exception:  # noqa: BLE001 - git may be missing on the GPU machine
        return None


def log(*parts) -> None:
    print(*parts, flush=True)


# ------------------------------------------------------------------------------------ IR counts

COUNTED_OPS = ("tt.load", "tt.store", "tt.reduce", "arith.divf", "tt.precise_divf", "arith.mulf")


def ttir_op_counts(ttir: str, names: Iterable[str] = COUNTED_OPS) -> dict[str, int]:
    """How many of each op a TTIR module holds (``tritune analyze``'s counts, not grepped)."""
    from tritune.analyze.ttir import count_ops

    counts = count_ops(ttir)
    return {name: counts.get(name, 0) for name in names}


# --------------------------------------------------------------------------------------- checks
# The checks are tritune.verify's (one tolerance table, one poison: signalling-NaN bit patterns no
# arithmetic produces, so an element still holding one was never written). These wrappers keep the
# dicts the scripts record. tritune is imported on use: this module is imported before
# ``bootstrap()`` has made it importable.

def _verify():
    import tritune.verify

    return tritune.verify


def poison(tensors: Iterable) -> None:
    _verify().poison(list(tensors))


def unwritten(t) -> int:
    return _verify().unwritten(t)


def mismatched(base: Sequence, cand: Sequence) -> int:
    """Elements whose bits differ (NaN == NaN when the bits agree)."""
    compare = _verify().compare
    return sum(compare(f"out{i}", b, c, "bitwise", poisoned=False).bad for i, (b, c) in enumerate(zip(base, cand)))


def _holes(result) -> int:
    """Unwritten elements on either side (a benchmark's kernels write their whole outputs)."""
    return result.unwritten + result.extra_writes + 2 * result.both_unwritten


def _worst(results) -> str | None:
    bad = [r for r in results if not r.ok]
    return bad[0].message() if bad else None


def bitwise_check(base: Sequence, cand: Sequence) -> dict:
    """Exact rewrites: every output bit-identical, every element written."""
    compare = _verify().compare
    results = [compare(f"out{i}", b, c, "bitwise") for i, (b, c) in enumerate(zip(base, cand))]
    differ = mismatched(base, cand)
    holes = sum(_holes(r) for r in results)
    return {"ok": differ == 0 and holes == 0, "mismatched_elements": differ, "unwritten": holes,
            "worst": _worst(results)}


def fast_math_check(base: Sequence, cand: Sequence, limit: float = REL_ERR_LIMIT) -> dict:
    """Fast-math rewrites: max relative error <= limit where both are finite; NaN and +-Inf at the
    same positions. Computed in float64 over chunks (outputs reach 4 GB)."""
    verify = _verify()
    gate = verify.Tolerance(limit, 0.0, "seed 000's gate: max relative error <= limit")
    results = [verify.compare(f"out{i}", b, c, "fast_math", gate) for i, (b, c) in enumerate(zip(base, cand))]
    holes = sum(_holes(r) for r in results)
    worst = max((r.max_rel_err for r in results), default=0.0)
    nan_diff = sum(r.nan_mismatch for r in results)
    inf_diff = sum(r.inf_mismatch for r in results)
    return {"ok": all(r.ok for r in results) and holes == 0, "max_rel_err": worst, "nan_mismatch": nan_diff,
            "inf_mismatch": inf_diff, "unwritten": holes, "worst": _worst(results)}


# --------------------------------------------------------------------------------------- timing
# The timing helpers live in the library (``tritune.bench.timing``) so that `tritune bench` and
# these scripts time the same way. They are looked up on first use, not imported here: this module
# is imported before ``bootstrap()`` has made tritune importable and pointed Triton at its cache.

_FROM_TRITUNE = ("do_bench_median", "paired_ratio", "copy_bandwidth_gbps", "rotation_count")


def __getattr__(name: str):
    if name in _FROM_TRITUNE:
        from tritune.bench import timing

        return getattr(timing, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


# -------------------------------------------------------------------------------------- results

def write_results(out_dir: str, stem: str, env: dict, records: list[dict], columns: Sequence[str],
                  extra: dict | None = None) -> tuple[pathlib.Path, pathlib.Path]:
    """``stem.json`` (environment + full records) and ``stem.csv`` (one line per record, the
    environment repeated in a comment header so the CSV stands alone)."""
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    json_path, csv_path = out / f"{stem}.json", out / f"{stem}.csv"
    json_path.write_text(json.dumps({"environment": env, **(extra or {}), "records": records},
                                    indent=1, default=str))
    with csv_path.open("w", newline="") as handle:
        for key in ("gpu", "capability", "torch", "triton", "utc", "command"):
            handle.write(f"# {key}: {env.get(key)}\n")
        writer = csv.DictWriter(handle, fieldnames=list(columns), extrasaction="ignore")
        writer.writeheader()
        for record in records:
            writer.writerow({k: _cell(record.get(k)) for k in columns})
    return json_path, csv_path


def _cell(value):
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, dict):
        return ";".join(f"{k}={v}" for k, v in value.items() if v)
    return value


def print_table(rows: list[dict], columns: Sequence[str]) -> None:
    cells = [[str(_cell(r.get(c, "")) if r.get(c) is not None else "") for c in columns] for r in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    log("  ".join(c.ljust(w) for c, w in zip(columns, widths)))
    for row in cells:
        log("  ".join(v.ljust(w) for v, w in zip(row, widths)))


class OneLineParser(argparse.ArgumentParser):
    """An argument parser whose errors are one line on stderr and exit status 2 (argparse would
    print its usage first)."""

    def error(self, message: str):
        print(f"{self.prog}: {message}", file=sys.stderr)
        raise SystemExit(2)
