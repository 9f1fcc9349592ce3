"""The benchmark of ``tritune generate`` (issue 14, section 3): per input case of the spec, the
generated module(s) against the reference run eagerly, under ``torch.compile`` (default mode) and
under ``torch.compile(mode="max-autotune-no-cudagraphs")``.

Timing is seed 004's counts (CUDA events, 10 warm-ups + 200 timed runs, mean / p50 / p95 ms, L2
cleared before each run outside the events, so every name reads its inputs from DRAM), taken for
all names of a case at once (``tritune.bench.timing.interleaved_event_stats``): every name is
compiled and run once first, then 200 ms of GPU work raise the clocks, then the names' runs go in
interleaved rounds. Timed one after another, each right after its own compile, a name met a GPU
that had idled through that compile: on the H100 (results/generate, 2026-11-26) a 5 us kernel
then read 0.03-0.07 ms and a 28 us one 0.17 ms, and which name it hit was chance. Each
torch.compile variant is compiled fresh for each case (``torch._dynamo.reset()`` per case,
``dynamic=False``: the kernel Inductor makes for that shape, not a dynamic-shape kernel left over
from an earlier case), so compilation is never timed.

Bytes are the floor of issue 14 (``tritune.bench.roofline.io_bytes``): each input tensor read once
and each output tensor written once (``numel * element_size``; a tensor passed twice counts once).
The roofline fraction of a name is ``bytes / its p50 time`` over the measured device-to-device copy
bandwidth (``tritune.bench.timing.copy_bandwidth_gbps``, read + write counted the same way;
``tritune.bench.roofline``'s arithmetic). Speedups are ratios of p50 times (``STAT``): robust to
the odd slow run that moves the mean.

The timing, the copy bandwidth and the roofline arithmetic are ``tritune.bench``'s; what is
generation's own: the names timed (the generated modules against the reference eager and under
two torch.compile modes, each compiled fresh per case), the per-case result and its table.

``bench_job`` runs in a worker on the GPU machine. Without CUDA it refuses in one line
(``BenchError``): under Triton's interpreter a time measures numpy, not the kernel. The arithmetic
(``io_bytes``, ``roofline_fractions``, ``case_result``, ``speedup``, ``rows``) is pure, so CPU tests
check it with made-up times.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Iterable, Mapping, Sequence

from tritune.bench import roofline
from tritune.bench.roofline import io_bytes  # the floor of bytes: benchmarks/generate_family.py reads it here
from tritune.errors import InputError

EAGER = "eager"
COMPILE = "compile"
MAX_AUTOTUNE = "max-autotune-no-cudagraphs"
MODES = (EAGER, COMPILE, MAX_AUTOTUNE)
COMPILE_MODES = {COMPILE: None, MAX_AUTOTUNE: MAX_AUTOTUNE}  # name -> torch.compile's mode
GENERATED = "generated"  # the module ``tritune generate`` emits (payload["modules"]'s main key)
STAT = "p50"  # the statistic speedups and roofline fractions use
WARMUP, RUNS = 10, 200  # seed 004: "200 iterations after 10 warmup runs"
NO_GPU = ("timings need a CUDA GPU (device {device!r}): under Triton's interpreter they would time "
          "numpy, not the kernel; verification alone ran, the benchmark is skipped")


class BenchError(InputError):
    """One line: why the benchmark cannot run here."""


# ---------------------------------------------------------------------------------- pure math

def roofline_fractions(nbytes: int, times: Mapping[str, Mapping[str, float] | None],
                       copy_gbps: float | None) -> dict[str, float | None]:
    """Per name: (bytes / its ``STAT`` time) over the copy bandwidth; None without a time."""
    out = {}
    for name, stats in times.items():
        ms = stats.get(STAT) if stats else None
        out[name] = roofline.roofline_fraction(roofline.achieved_gbps(nbytes, ms), copy_gbps)
    return out


def stats_of(event: Mapping[str, float]) -> dict[str, float]:
    """``event_stats``'s ``mean_ms``/``p50_ms``/``p95_ms`` as the job's ``mean``/``p50``/``p95``."""
    return {"mean": event["mean_ms"], "p50": event["p50_ms"], "p95": event["p95_ms"]}


def case_result(label: str, shapes: str, inputs: Any, outputs: Any,
                times: Mapping[str, Mapping[str, float] | None], copy_gbps: float | None,
                errors: Mapping[str, str] | None = None) -> dict:
    """One case of ``bench_job``'s result. ``shape``/``dtype`` are those of the first input tensor
    (what benchmark tables group by); ``errors``: name -> one line, for names that could not be timed."""
    nbytes = io_bytes(inputs, outputs)
    first = next(iter(roofline.distinct_tensors(inputs)), None)
    return {
        "label": label,
        "shapes": shapes,
        "shape": list(first.shape) if first is not None else [],
        "dtype": str(first.dtype).removeprefix("torch.") if first is not None else None,
        "bytes": nbytes,
        "times": {name: dict(stats) if stats else None for name, stats in times.items()},
        "roofline_fraction": roofline_fractions(nbytes, times, copy_gbps),
        "errors": dict(errors or {}),
    }


def speedup(times: Mapping[str, Mapping[str, float] | None], name: str, base: str) -> float | None:
    """``base``'s time over ``name``'s (``STAT``): above 1, ``name`` is faster; None when either
    has no time."""
    mine, theirs = times.get(name), times.get(base)
    if not mine or not theirs or not mine.get(STAT) or not theirs.get(STAT):
        return None
    value = theirs[STAT] / mine[STAT]
    return value if math.isfinite(value) else None


def ordered_names(times: Mapping[str, Any]) -> list[str]:
    """The generated module first, other modules next, then eager, compile, max-autotune."""
    modules = [n for n in times if n not in MODES]
    modules.sort(key=lambda n: (n != GENERATED, n))
    return modules + [m for m in MODES if m in times]


def rows(bench: Mapping[str, Any]) -> list[dict]:
    """The benchmark table: one row per case and name, with ``mean``/``p50``/``p95`` (ms or None),
    ``vs_eager``, ``vs_compile``, ``vs_max_autotune`` (speedups) and ``roofline``."""
    out = []
    for case in bench.get("cases") or []:
        times = case.get("times") or {}
        fractions = case.get("roofline_fraction") or {}
        for name in ordered_names(times):
            stats = times.get(name) or {}
            out.append({
                "label": case.get("label"), "shapes": case.get("shapes"), "name": name,
                "mean": stats.get("mean"), "p50": stats.get("p50"), "p95": stats.get("p95"),
                "vs_eager": speedup(times, name, EAGER), "vs_compile": speedup(times, name, COMPILE),
                "vs_max_autotune": speedup(times, name, MAX_AUTOTUNE),
                "roofline": fractions.get(name), "error": (case.get("errors") or {}).get(name),
            })
    return out


def check_payload(payload: Mapping[str, Any]) -> tuple[str, list[str]]:
    """(device, modes) of a payload; ``BenchError`` for a device without CUDA or an unknown mode."""
    device = str(payload.get("device") or "cpu")
    if not device.startswith("cuda"):
        raise BenchError(NO_GPU.format(device=device))
    modes = list(payload.get("modes") or MODES)
    unknown = [m for m in modes if m not in MODES]
    if unknown:
        raise BenchError(f"unknown benchmark mode(s) {', '.join(unknown)}: choose from {', '.join(MODES)}")
    return device, modes


# ----------------------------------------------------------------------------- the GPU job

def bench_job(payload: dict) -> dict:
    """Worker entry: ``{"modules": {"generated": path, ...}, "spec": path, "device": "cuda",
    "modes"?, "warmup"?, "runs"?, "copy_cache"?}`` -> ``{"gpu", "torch", "triton", "copy_gbps",
    "cases": [case_result...]}`` (see the module doc). ``BenchError`` without a CUDA GPU."""
    device, modes = check_payload(payload)
    import torch
    import triton

    if not torch.cuda.is_available():
        raise BenchError(NO_GPU.format(device=device) + f" (torch {torch.__version__} sees no CUDA GPU)")
    from tritune.bench import timing
    from tritune.generate.spec import load_spec, shapes_text
    from tritune.imports import import_file

    spec = load_spec(payload["spec"], device=device)
    runs = {name: import_file(path).run for name, path in (payload.get("modules") or {}).items()}
    warmup, count = int(payload.get("warmup", WARMUP)), int(payload.get("runs", RUNS))

    with torch.cuda.device(torch.device(device)):
        copy_gbps = timing.copy_bandwidth_gbps(device, cache_file=payload.get("copy_cache"))
        cases = []
        for case in spec.cases(device):
            args = case.tensors
            outputs = spec.reference(*args)
            torch.cuda.synchronize()
            torch._dynamo.reset()  # nothing compiled for an earlier case is reused
            ready: dict[str, Callable[[], Any]] = {}
            errors: dict[str, str] = {}
            for name, run in runs.items():
                _ready(name, lambda run=run: run, args, ready, errors)
            for mode in modes:
                _ready(mode, lambda mode=mode: _compiled(spec.reference, mode), args, ready, errors)
            times: dict[str, dict | None] = dict.fromkeys([*runs, *modes])
            if ready:
                measured = timing.interleaved_event_stats(ready, warmup=warmup, runs=count)
                times.update({name: stats_of(stats) for name, stats in measured.items()})
            torch._dynamo.reset()  # the compiled variants' code and guards go with the case
            cases.append(case_result(case.label, shapes_text(args), args, outputs, times, copy_gbps, errors))
    return {"gpu": torch.cuda.get_device_name(torch.device(device)), "torch": str(torch.__version__),
            "triton": triton.__version__, "copy_gbps": copy_gbps, "stat": STAT, "warmup": warmup,
            "runs": count, "cases": cases}


def _compiled(reference: Callable, mode: str) -> Callable:
    """``reference`` as ``mode`` runs it: itself (eager), or under torch.compile for static
    shapes (compiled at its first call, ``_ready``'s, so that compilation is not timed). The modes
    of a case live side by side (``bench_job`` resets Dynamo per case, not per mode): Dynamo guards
    each compiled entry with the backend that made it, so each mode's callable runs its own code
    (a CPU test checks it)."""
    if mode == EAGER:
        return reference
    import torch

    return torch.compile(reference, mode=COMPILE_MODES[mode], dynamic=False)


def _ready(name: str, make: Callable[[], Callable], args: Sequence, ready: dict, errors: dict) -> None:
    """``ready[name]``: ``make()`` bound to ``args``, run once (a torch.compile compiles here, untimed).
    An exception (a compile that fails) leaves it out with its line in ``errors``; the other names
    are still timed. A CUDA fault is not survivable here: it ends the worker, and the caller
    reports that."""
    import torch

    from tritune.errors import one_line

    try:
        fn = make()
        fn(*args)
        torch.cuda.synchronize()
        ready[name] = lambda: fn(*args)
    except Exception as exc:  # noqa: BLE001 - one name failing does not hide the others' times
        errors[name] = one_line(exc)[:300]


def names_in(cases: Iterable[Mapping[str, Any]]) -> list[str]:
    """Every name timed in any case, in ``ordered_names`` order."""
    seen: dict[str, None] = {}
    for case in cases:
        seen.update(dict.fromkeys(case.get("times") or {}))
    return ordered_names(seen)
