"""Benchmark one captured launch (a spec, optionally a variant of it) through the replay API.

On a GPU: fresh inputs from ``make_args`` (never zeros), the kernel built before any timing, then
the methods asked for (``timing``): the do_bench median twice (the second gives the noise), CUDA
event mean/p50/p95, CUDA-graph replay. When a launch's bytes fit in L2 several input sets are
made and launches rotate through them, so back-to-back runs (the graph method) do not time the
L2; do_bench and the event method also clear L2 before every run.

On the CPU (``TRITON_INTERPRET=1``: the interpreter runs the kernel with numpy) the launch runs a
few times under ``time.perf_counter`` so the whole flow works in CI, and the result says
``"meaningful": False``: those times measure numpy, not the kernel.

``bench_job`` and ``bandwidth_job`` take and return JSON-able dicts, so they run in an isolated
worker (``tritune.worker``: ``"tritune.bench.run:bench_job"``) as well as in-process.
"""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from typing import Any, Callable

from tritune.bench import roofline, timing
from tritune.model.launch import LaunchSpec

METHODS = ("median", "events", "graph")
CPU_RUNS = 3  # timed interpreter runs after one warm-up: enough to show the flow, meaningless anyway
ROTATION_BYTES_CAP = 2 * 2**30  # never allocate more than this for rotated input sets

# Every key of a result, in order (failed launches carry the same keys, times None).
RESULT_KEYS = (
    "id", "kernel", "kind", "count", "grid", "variant", "device", "gpu", "meaningful", "methods",
    "time_ms", "total_ms", "median_ms", "median2_ms", "noise", "mean_ms", "p50_ms", "p95_ms",
    "graph_ms", "graph_method", "graph_fallback", "graph_launches", "bytes", "bytes_source",
    "gbps", "copy_gbps", "roofline", "floor_ms", "rotation", "failure", "message",
)


def bench_spec(spec: LaunchSpec, root: str | Path, variant: Any = None, *, device: str | None = None,
               methods: tuple[str, ...] = METHODS, seed: int = 0, copy_gbps: float | None = None,
               replay: Any = None, medians: int = 2, bench_ms: tuple[int, int] | None = None) -> dict:
    """Time one launch of ``spec`` (as ``variant``, default the baseline) on fresh inputs.

    ``copy_gbps`` is the roofline bandwidth; None measures it here (once per process). Raises the
    replay's or compiler's error when the launch cannot be built or run: the caller classifies.
    ``replay``: that launch's ``Replay``, already built (a caller that compiles before it takes
    the GPU to itself). ``medians``: the do_bench median is taken twice by default, the second
    giving ``noise``; 1 takes it once (``noise`` None), for a time that is only screened.
    ``bench_ms``: do_bench's (warm-up, runs) in ms for a single median (default do_bench's 25,
    100): the ranking's shorter one (``loop.jobs.RANK_BENCH_MS``), where a share to a few percent
    is enough.
    """
    from tritune.model.variant import Variant
    from tritune.replay import Replay, device_of

    methods = check_methods(methods)
    variant = Variant() if variant is None else variant
    dev = device_of(spec, device)
    result = empty_result(spec, variant_name=variant.name, methods=methods)
    result["device"] = dev
    moved = roofline.traffic(spec)
    result.update(bytes=moved.bytes, bytes_source=moved.source)

    if _is_cuda(dev):
        _require_cuda(spec, dev)
    if replay is None:
        replay = Replay(spec, variant=variant, root=root, device=dev)
    result["grid"] = list(replay.grid)
    if not _is_cuda(dev):
        result.update(_cpu_times(spec, root, replay, dev, seed))
        return _finish(result)

    import torch

    with torch.cuda.device(torch.device(dev)):
        result.update(meaningful=True, gpu=torch.cuda.get_device_name())
        launch, result["rotation"] = _rotating_launch(spec, root, replay, dev, seed, moved.bytes)
        launch()
        torch.cuda.synchronize()  # a fault surfaces here, before any timing
        result.update(_gpu_times(launch, methods, medians, bench_ms))
        result["copy_gbps"] = copy_gbps if copy_gbps is not None else timing.copy_bandwidth_gbps(dev)
    return _finish(result)


def check_methods(methods: tuple[str, ...] | list[str]) -> tuple[str, ...]:
    unknown = [m for m in methods if m not in METHODS]
    if unknown or not methods:
        raise ValueError(f"unknown timing method(s) {unknown or '(none given)'}: choose from {', '.join(METHODS)}")
    return tuple(dict.fromkeys(methods))


def empty_result(spec: LaunchSpec, *, variant_name: str = "baseline", methods: tuple[str, ...] = METHODS) -> dict:
    """A result with every key: what a failed launch reports besides its failure."""
    result: dict[str, Any] = dict.fromkeys(RESULT_KEYS)
    result.update(id=spec.id, kernel=spec.kernel, kind=spec.kind, count=spec.count, grid=list(spec.grid),
                  variant=variant_name, meaningful=False, methods=list(methods), rotation=1)
    return result


# ------------------------------------------------------------------------------- worker entries

def bench_job(payload: dict) -> dict:
    """Worker entry: ``{"spec": spec.to_json(), "root", "variant"?, "device"?, "methods"?,
    "seed"?, "copy_gbps"?}`` -> ``bench_spec``'s result."""
    from tritune.model.variant import Variant

    spec = LaunchSpec.from_json(payload["spec"])
    variant = Variant.from_json(payload["variant"]) if payload.get("variant") else None
    return bench_spec(spec, payload["root"], variant, device=payload.get("device"),
                      methods=tuple(payload.get("methods") or METHODS), seed=int(payload.get("seed", 0)),
                      copy_gbps=payload.get("copy_gbps"))


def bandwidth_job(payload: dict) -> dict:
    """Worker entry: ``{"device"?: "cuda:0", "cache_file"?}`` -> ``{"gpu", "copy_gbps"}`` (both
    None without a CUDA GPU)."""
    import torch

    if not torch.cuda.is_available():
        return {"gpu": None, "copy_gbps": None}
    device = payload.get("device") or "cuda"
    return {"gpu": torch.cuda.get_device_name(torch.device(device)),
            "copy_gbps": timing.copy_bandwidth_gbps(device, cache_file=payload.get("cache_file"))}


# ---------------------------------------------------------------------------------- the timing

def _gpu_times(launch: Callable[[], None], methods: tuple[str, ...], medians: int = 2,
               bench_ms: tuple[int, int] | None = None) -> dict:
    times: dict[str, Any] = {}
    if "median" in methods and medians == 1:
        budget = {"warmup": bench_ms[0], "rep": bench_ms[1]} if bench_ms else {}
        times.update(median_ms=timing.do_bench_median(launch, **budget))
    elif "median" in methods:
        twice = timing.noise(launch)
        times.update(median_ms=twice["first_ms"], median2_ms=twice["second_ms"], noise=twice["spread"])
    if "events" in methods:
        stats = timing.event_stats(launch)
        times.update(mean_ms=stats["mean_ms"], p50_ms=stats["p50_ms"], p95_ms=stats["p95_ms"])
    if "graph" in methods:
        graph = timing.graph_time(launch)
        times.update(graph_ms=graph["graph_ms"], graph_method=graph["method"],
                     graph_fallback=graph["fallback"], graph_launches=graph["launches"])
    return times


def _cpu_times(spec: LaunchSpec, root: str | Path, replay: Any, dev: str, seed: int) -> dict:
    from tritune.replay import make_args

    args = make_args(spec, root, seed=seed, device=dev)
    replay(args)  # warm-up: the interpreter's first run pays for parsing the kernel
    samples = []
    for _ in range(CPU_RUNS):
        start = time.perf_counter()
        replay(args)
        samples.append((time.perf_counter() - start) * 1e3)
    stats = timing.summarize(samples)
    return {"meaningful": False, "median_ms": stats["p50_ms"], "mean_ms": stats["mean_ms"],
            "p50_ms": stats["p50_ms"], "p95_ms": stats["p95_ms"]}


def _rotating_launch(spec: LaunchSpec, root: str | Path, replay: Any, dev: str, seed: int,
                     moved_bytes: int) -> tuple[Callable[[], None], int]:
    """A launch that cycles through enough input sets that they do not all fit in L2."""
    from tritune.replay import make_args

    wanted = timing.rotation_count(moved_bytes, timing.l2_bytes(dev))
    storage = sum(a.storage_size * roofline.itemsize(a.dtype) for a in spec.tensors) or 1
    count = max(1, min(wanted, ROTATION_BYTES_CAP // storage))
    # Replay.launcher goes straight to the compiled kernel: no argument binding inside the timing.
    launchers = [replay.launcher(make_args(spec, root, seed=seed + k, device=dev)) for k in range(count)]
    turn = itertools.count()

    def launch() -> None:
        launchers[next(turn) % count]()

    return launch, count


def _finish(result: dict) -> dict:
    """The headline time (do_bench median, else event p50, else graph), totals and the roofline."""
    headline = next((result[k] for k in ("median_ms", "p50_ms", "graph_ms") if result[k] is not None), None)
    result["time_ms"] = headline
    result["total_ms"] = headline * result["count"] if headline is not None else None
    if result["meaningful"]:
        result["gbps"] = roofline.achieved_gbps(result["bytes"], headline)
        result["roofline"] = roofline.roofline_fraction(result["gbps"], result["copy_gbps"])
        if result["copy_gbps"]:
            result["floor_ms"] = roofline.floor_ms(result["bytes"], result["copy_gbps"])
    return result


def _require_cuda(spec: LaunchSpec, dev: str) -> None:
    import torch

    if not torch.cuda.is_available():
        raise RuntimeError(f"launch {spec.id} runs on {dev} but this machine has no CUDA GPU; "
                           "set TRITON_INTERPRET=1 to replay it on the CPU (times not meaningful)")


def _is_cuda(device: str) -> bool:
    return str(device).startswith("cuda")
