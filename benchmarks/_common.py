"""The one harness tritune's benchmarks share: bootstrap, environment record, checks, timing, results.

Call ``bootstrap()`` before importing torch or triton: it points Triton (and optionally Inductor)
at fresh cache directories, so every kernel really compiles in this run and tritune's hook sees
it (a binary served from an old on-disk cache never passes through the hook), and it makes the
repository's ``src`` importable when tritune is not installed (``PYTHONPATH=src`` on the GPU
machine does the same).
"""

from __future__ import annotations

import csv
import datetime
import json
import math
import os
import pathlib
import platform
import shlex
import subprocess
import sys
import tempfile
from typing import Callable, Iterable, Sequence

REPO = pathlib.Path(__file__).resolve().parent.parent
L2_BYTES = 50 * 2**20       # H100 L2: inputs smaller than this are rotated between runs
FLUSH_BYTES = 256 * 2**20   # written before every timed run of the paired (seed 000) metric
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
# Outputs are poisoned with a signalling-NaN bit pattern that no arithmetic produces (GPUs return
# the canonical quiet NaN), so an element still holding it after a run was never written.

_SENTINEL = {  # float dtype -> (same-size integer dtype, signalling NaN bits)
    "float16": ("int16", 0x7DBA),
    "bfloat16": ("int16", 0x7F9A),
    "float32": ("int32", 0x7FBADBAD),
    "float64": ("int64", 0x7FF4DEADBEEF0000),
}


def _dtype_name(t) -> str:
    return str(t.dtype).removeprefix("torch.")


def _bits(t):
    """The raw bits of a float tensor (same strides); other dtypes as they are."""
    import torch

    entry = _SENTINEL.get(_dtype_name(t))
    return t if entry is None else t.view(getattr(torch, entry[0]))


def poison(tensors: Iterable) -> None:
    for t in tensors:
        entry = _SENTINEL.get(_dtype_name(t))
        if entry is not None:
            _bits(t).fill_(entry[1])


def unwritten(t) -> int:
    entry = _SENTINEL.get(_dtype_name(t))
    return 0 if entry is None else int((_bits(t) == entry[1]).sum())


def mismatched(base: Sequence, cand: Sequence) -> int:
    """Elements whose bits differ (NaN == NaN when the bits agree)."""
    return sum(int((_bits(b) != _bits(c)).sum()) for b, c in zip(base, cand))


def bitwise_check(base: Sequence, cand: Sequence) -> dict:
    """Exact rewrites: every output bit-identical, every element written."""
    differ = mismatched(base, cand)
    holes = sum(unwritten(b) + unwritten(c) for b, c in zip(base, cand))
    return {"ok": differ == 0 and holes == 0, "mismatched_elements": differ, "unwritten": holes}


def fast_math_check(base: Sequence, cand: Sequence, limit: float = REL_ERR_LIMIT) -> dict:
    """Fast-math rewrites: max relative error <= limit where both are finite; NaN and +-Inf at the
    same positions. Computed in float64 over chunks (outputs reach 4 GB)."""
    import torch

    worst, nan_diff, inf_diff, holes = 0.0, 0, 0, 0
    for b, c in zip(base, cand):
        holes += unwritten(b) + unwritten(c)
        fb, fc = b.reshape(-1), c.reshape(-1)
        step = 1 << 24
        for i in range(0, fb.numel(), step):
            x, y = fb[i:i + step].double(), fc[i:i + step].double()
            nan_diff += int((x.isnan() != y.isnan()).sum())
            inf_diff += int(((x == math.inf) != (y == math.inf)).sum() + ((x == -math.inf) != (y == -math.inf)).sum())
            finite = x.isfinite() & y.isfinite()
            x, y = x[finite], y[finite]
            err = (x - y).abs() / x.abs()
            err = torch.where(x == y, torch.zeros_like(err), err)  # 0/0 -> 0; y != x == 0 -> inf
            if err.numel():
                worst = max(worst, float(err.max()))
    ok = worst <= limit and nan_diff == 0 and inf_diff == 0 and holes == 0
    return {"ok": ok, "max_rel_err": worst, "nan_mismatch": nan_diff, "inf_mismatch": inf_diff,
            "unwritten": holes}


# --------------------------------------------------------------------------------------- timing

def do_bench_median(fn: Callable[[], None]) -> float:
    """Triton's do_bench (L2 cleared before every call), median in ms."""
    import triton

    return float(triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median"))


def paired_ratio(base: Callable[[int], None], cand: Callable[[int], None], runs: int = 50,
                 warmup: int = 3) -> dict:
    """Seed 000's metric: ``runs`` alternating runs, each after writing a 256 MB buffer, each timed
    with CUDA events; speedup = mean of the per-run ratios T_base / T_cand. ``base(k)`` and
    ``cand(k)`` launch run k (k lets the caller rotate input sets)."""
    import torch

    flush = torch.empty(FLUSH_BYTES, dtype=torch.int8, device="cuda")
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(2 * runs)]
    for k in range(warmup):
        base(k)
        cand(k)
    for k in range(runs):
        for j, fn in enumerate((base, cand)):
            flush.zero_()
            start, end = events[2 * k + j]
            start.record()
            fn(k)
            end.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in events]
    t_base, t_cand = times[0::2], times[1::2]
    ratios = [b / c for b, c in zip(t_base, t_cand)]
    return {"speedup_mean50": sum(ratios) / runs, "base_mean_ms": sum(t_base) / runs,
            "cand_mean_ms": sum(t_cand) / runs, "ratio_min": min(ratios), "ratio_max": max(ratios)}


def copy_bandwidth_gbps(nbytes: int = 2 * 2**30) -> float:
    """Device-to-device copy, bytes read + written over time: the memory roofline."""
    import torch

    src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
    dst = torch.empty_like(src)
    ms = do_bench_median(lambda: dst.copy_(src))
    return 2 * nbytes / (ms * 1e-3) / 1e9


def rotation_count(working_set_bytes: int) -> int:
    """Input sets to rotate through so repeated runs do not time the L2 (1 for large shapes)."""
    if working_set_bytes >= L2_BYTES:
        return 1
    return min(8, math.ceil(3 * L2_BYTES / max(working_set_bytes, 1)))


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
