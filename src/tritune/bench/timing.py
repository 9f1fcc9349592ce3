"""How tritune times a GPU launch: the methods DESIGN.md's evaluation protocol names, in one place.

- ``do_bench_median``  Triton's ``do_bench``, L2 cleared before every run, median ms: the number
                       tritune compares variants by.
- ``event_stats``      seed 004's report: CUDA events around each of 200 runs after 10 warm-ups,
                       mean/p50/p95 ms. L2 is cleared before every run (outside the events), as
                       ``do_bench`` does, so p50 here and the median above measure the same thing
                       (cold L2, inputs from DRAM) and differ only by method noise; without the
                       clear, a kernel whose inputs fit in L2 would be timed reading L2.
- ``interleaved_event_stats``  ``event_stats`` for several callables at once, their runs
                       interleaved in rounds after a clock ramp: what ``tritune generate``
                       compares its kernel with eager and torch.compile by (see its docstring).
- ``paired_ratio``     seed 000's speedup: mean of 50 per-run ratios, runs alternating.
- ``graph_time``       launches captured back to back in a CUDA graph, replays timed: for
                       microsecond kernels, whose event-timed runs are dominated by launch gaps.
- ``noise``            the baseline timed twice: a difference between variants below this
                       spread is noise.
- ``copy_bandwidth_gbps``  the memory roofline, measured once per process and GPU.

torch and triton are imported inside the functions: ``benchmarks/_common.py`` re-exports these
before its ``bootstrap()`` has pointed Triton at a fresh cache. Statistics helpers (``summarize``,
``percentile``, ``relative_spread``, ``ratio_summary``) are pure, so CPU tests check them.
"""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path
from typing import Callable, Sequence

DEFAULT_L2_BYTES = 50 * 2**20  # H100's L2, when the device cannot be asked
COPY_BYTES = 2 * 2**30  # the copy that measures bandwidth: 2 GiB read + 2 GiB written
GRAPH_TARGET_MS = 1.0  # a captured graph holds about this much GPU work (launches are chosen)
GRAPH_MAX_LAUNCHES = 200

_COPY_GBPS: dict[str, float] = {}  # per process: GPU (index and name) -> measured GB/s


# ----------------------------------------------------------------------------------- statistics

def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile (0..100) with linear interpolation between ranks (numpy's default)."""
    if not values:
        raise ValueError("percentile of no values")
    if not 0 <= q <= 100:
        raise ValueError(f"percentile {q} is outside 0..100")
    ordered = sorted(values)
    position = (len(ordered) - 1) * q / 100
    low = math.floor(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def summarize(times_ms: Sequence[float]) -> dict[str, float]:
    """mean/p50/p95/min/max of per-run times (ms), and how many runs."""
    return {
        "runs": len(times_ms),
        "mean_ms": statistics.fmean(times_ms),
        "p50_ms": percentile(times_ms, 50),
        "p95_ms": percentile(times_ms, 95),
        "min_ms": min(times_ms),
        "max_ms": max(times_ms),
    }


def relative_spread(first: float, second: float) -> float:
    """|a - b| / min(a, b): how far two timings of the same thing disagree (0.03 = 3%)."""
    low = min(first, second)
    if low <= 0:
        return math.inf if first != second else 0.0
    return abs(first - second) / low


def ratio_summary(t_base: Sequence[float], t_cand: Sequence[float]) -> dict[str, float]:
    """Seed 000's metric from paired times: speedup = mean of per-run T_base / T_cand."""
    if len(t_base) != len(t_cand) or not t_base:
        raise ValueError(f"need equally many base and candidate times, got {len(t_base)} and {len(t_cand)}")
    ratios = [b / c for b, c in zip(t_base, t_cand)]
    runs = len(ratios)
    return {"speedup_mean50": sum(ratios) / runs, "base_mean_ms": sum(t_base) / runs,
            "cand_mean_ms": sum(t_cand) / runs, "ratio_min": min(ratios), "ratio_max": max(ratios)}


def rotation_count(working_set_bytes: int, l2_bytes: int = DEFAULT_L2_BYTES) -> int:
    """Input sets to rotate through so repeated runs do not time the L2 (1 for large shapes)."""
    if working_set_bytes >= l2_bytes:
        return 1
    return min(8, math.ceil(3 * l2_bytes / max(working_set_bytes, 1)))


def l2_bytes(device: str | int | None = None) -> int:
    """The GPU's L2 size in bytes (``DEFAULT_L2_BYTES`` where torch does not say)."""
    import torch

    props = torch.cuda.get_device_properties(torch.device("cuda", _index(device)))
    return int(getattr(props, "L2_cache_size", 0) or DEFAULT_L2_BYTES)


# ------------------------------------------------------------------------------------- GPU timing

def do_bench_median(fn: Callable[[], None], warmup: int = 25, rep: int = 100) -> float:
    """Triton's do_bench (L2 cleared before every run; warmup/rep in ms), median in ms."""
    import triton

    return float(triton.testing.do_bench(fn, warmup=warmup, rep=rep, return_mode="median"))


def event_stats(fn: Callable[[], None], warmup: int = 10, runs: int = 200, flush: bool = True) -> dict:
    """Seed 004's timing: ``warmup`` untimed runs, then ``runs`` runs each between two CUDA events;
    mean/p50/p95 ms. ``flush`` clears L2 before each run, outside the events (module docstring).
    The one-callable case of ``interleaved_event_stats``, without its clock ramp."""
    return interleaved_event_stats({"fn": fn}, warmup=warmup, runs=runs, flush=flush, rounds=1, ramp_ms=0.0)["fn"]


RAMP_MS = 200.0  # interleaved_event_stats: GPU work run before any timed run, so clocks are up
ROUNDS = 10


def interleave_order(names: Sequence[str], runs: int, rounds: int = ROUNDS) -> list[str]:
    """The order ``interleaved_event_stats`` times in: ``rounds`` rounds, each name's runs split
    evenly over them (the first ``runs % rounds`` rounds one run more), names in turn within a
    round, the first name moving one place each round; every name gets exactly ``runs`` runs."""
    if runs < 1 or rounds < 1:
        raise ValueError(f"runs and rounds must be at least 1, got {runs} and {rounds}")
    rounds = min(rounds, runs)
    order: list[str] = []
    for r in range(rounds):
        per = runs // rounds + (1 if r < runs % rounds else 0)
        turn = [names[(r + i) % len(names)] for i in range(len(names))]
        for name in turn:
            order += [name] * per
    return order


def interleaved_event_stats(fns: dict[str, Callable[[], None]], warmup: int = 10, runs: int = 200,
                            flush: bool = True, rounds: int = ROUNDS, ramp_ms: float = RAMP_MS
                            ) -> dict[str, dict]:
    """``event_stats`` for each of ``fns``, timed together: ``ramp_ms`` of the callables in turn
    first (timed alone right after a torch.compile, through which the GPU sat idle, a 5 us kernel
    read 0.03-0.07 ms and a 28 us one 0.17 ms on the H100, results/generate of 2026-11-26; low
    clocks after the idle spell are the likely cause, not read from the GPU), then ``warmup`` runs
    each, then ``runs`` runs each between two CUDA events, in ``interleave_order`` (so a slow
    stretch of the GPU or the host falls on every name alike). L2 cleared before each run,
    outside the events. Returns name -> ``summarize``'s statistics plus ``l2_flushed``."""
    import time

    import torch

    clear = _l2_clearer() if flush else None
    names = list(fns)
    began = time.perf_counter()
    while (time.perf_counter() - began) * 1e3 < ramp_ms:  # the L2 clears keep the GPU busy between tiny runs
        for name in names:
            if clear is not None:
                clear()
            fns[name]()
        torch.cuda.synchronize()
    for name in names:
        for _ in range(warmup):
            fns[name]()
    torch.cuda.synchronize()
    order = interleave_order(names, runs, rounds)
    events = [(name, torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for name in order]
    for name, start, end in events:
        if clear is not None:
            clear()
        start.record()
        fns[name]()
        end.record()
    torch.cuda.synchronize()
    times: dict[str, list[float]] = {name: [] for name in names}
    for name, start, end in events:
        times[name].append(start.elapsed_time(end))
    return {name: {**summarize(values), "l2_flushed": flush} for name, values in times.items()}


def paired_ratio(base: Callable[[int], None], cand: Callable[[int], None], runs: int = 50,
                 warmup: int = 3) -> dict:
    """Seed 000's metric: ``runs`` alternating runs, each after clearing L2 (256 MB written), each
    timed with CUDA events; speedup = mean of the per-run ratios T_base / T_cand. ``base(k)`` and
    ``cand(k)`` launch run k (k lets the caller rotate input sets)."""
    import torch

    clear = _l2_clearer()
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
              for _ in range(2 * runs)]
    for k in range(warmup):
        base(k)
        cand(k)
    for k in range(runs):
        for j, fn in enumerate((base, cand)):
            clear()
            start, end = events[2 * k + j]
            start.record()
            fn(k)
            end.record()
    torch.cuda.synchronize()
    times = [s.elapsed_time(e) for s, e in events]
    return ratio_summary(times[0::2], times[1::2])


def graph_time(fn: Callable[[], None], launches: int | None = None, replays: int = 30) -> dict:
    """Per-launch time (ms) of ``fn`` captured ``launches`` times back to back in one CUDA graph,
    median over ``replays`` event-timed replays. Without launch gaps this is what a microsecond
    kernel costs inside a program that streams launches (or one run under CUDA graphs). L2 is
    not cleared inside the graph: rotate inputs in ``fn`` when they fit in L2.

    ``launches=None`` picks enough launches for about ``GRAPH_TARGET_MS`` of work. If capture
    fails (a launch that cannot be captured), falls back to event timing without the L2 clear
    and says so: ``method`` is then ``"events"`` and ``fallback`` holds the reason.
    """
    import torch

    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):  # warm-up off the default stream, as torch's graph recipe asks
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    torch.cuda.synchronize()
    if launches is None:
        launches = _launches_for(fn)
    graph = torch.cuda.CUDAGraph()
    try:
        with torch.cuda.graph(graph):
            for _ in range(launches):
                fn()
        graph.replay()
        torch.cuda.synchronize()
    except Exception as exc:  # noqa: BLE001 - any capture failure falls back, reported in the result
        torch.cuda.synchronize()
        stats = event_stats(fn, warmup=3, runs=max(replays, 20), flush=False)
        reason = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}".strip()
        return {"graph_ms": stats["p50_ms"], "method": "events", "fallback": reason,
                "launches": 1, "replays": stats["runs"]}
    events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(replays)]
    for start, end in events:
        start.record()
        graph.replay()
        end.record()
    torch.cuda.synchronize()
    per_replay = [s.elapsed_time(e) for s, e in events]
    del graph
    return {"graph_ms": statistics.median(per_replay) / launches, "method": "graph", "fallback": None,
            "launches": launches, "replays": replays}


def noise(base_fn: Callable[[], None]) -> dict:
    """Two independent ``do_bench`` medians of the same launch and their relative spread."""
    first = do_bench_median(base_fn)
    second = do_bench_median(base_fn)
    return {"first_ms": first, "second_ms": second, "spread": relative_spread(first, second)}


def copy_bandwidth_gbps(device: str | int | None = None, nbytes: int = COPY_BYTES,
                        cache_file: str | Path | None = None) -> float:
    """Device-to-device copy, bytes read + written over the do_bench median: the memory roofline.

    Measured once per process and GPU. With ``cache_file`` (JSON), the value is also kept on disk
    keyed by the GPU's name, so later processes on the same kind of GPU skip the 4 GiB copy.
    """
    import torch

    index = _index(device)
    name = torch.cuda.get_device_name(index)
    key = f"{index}:{name}"
    if key in _COPY_GBPS:
        return _COPY_GBPS[key]
    stored = _read_cache(cache_file)
    if name in stored:
        _COPY_GBPS[key] = float(stored[name])
        return _COPY_GBPS[key]
    with torch.cuda.device(index):
        src = torch.empty(nbytes // 4, dtype=torch.float32, device="cuda").uniform_()
        dst = torch.empty_like(src)
        ms = do_bench_median(lambda: dst.copy_(src))
        del src, dst
        torch.cuda.empty_cache()
    gbps = 2 * nbytes / (ms * 1e-3) / 1e9
    _COPY_GBPS[key] = gbps
    if cache_file is not None:
        _write_cache(Path(cache_file), {**stored, name: gbps})
    return gbps


# --------------------------------------------------------------------------------------- helpers

def _index(device: str | int | None) -> int:
    import torch

    if isinstance(device, int):
        return device
    parsed = torch.device(device) if device is not None else torch.device("cuda")
    return parsed.index if parsed.index is not None else torch.cuda.current_device()


def _l2_clearer() -> Callable[[], None]:
    """The clear that do_bench uses (Triton's driver: 256 MB written), as a callable."""
    from triton import runtime

    driver = runtime.driver.active
    cache = driver.get_empty_cache_for_benchmark()
    return lambda: driver.clear_cache(cache)


def _launches_for(fn: Callable[[], None]) -> int:
    """Launches per graph for about GRAPH_TARGET_MS of work, from 5 event-timed runs."""
    estimate = event_stats(fn, warmup=0, runs=5, flush=False)["p50_ms"]
    return max(1, min(GRAPH_MAX_LAUNCHES, math.ceil(GRAPH_TARGET_MS / max(estimate, 1e-4))))


def _read_cache(cache_file: str | Path | None) -> dict:
    if cache_file is None or not Path(cache_file).exists():
        return {}
    try:
        body = json.loads(Path(cache_file).read_text())
    except (OSError, json.JSONDecodeError):
        return {}  # a damaged cache is remeasured and rewritten
    return body if isinstance(body, dict) else {}


def _write_cache(path: Path, body: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(body, indent=1, sort_keys=True))
    tmp.replace(path)
