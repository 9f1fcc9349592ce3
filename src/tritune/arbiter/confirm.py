"""Confirm a speedup by re-timing baseline and candidate interleaved, before the arbiter accepts it.

The benchmark timed baseline and candidate minutes apart, in different worker processes; GPU
clocks and temperature drift in between and can fake a few percent. Here both are timed in
alternation in one process: round k takes one sample of each, the order flipping every round
(AB, BA, AB, ...), so a steady drift or a penalty for going first falls on both equally. The
ratio of a round is base/candidate of its two adjacent samples; the result is the median ratio
over rounds, and ``spread``, the interquartile range of the ratios over their median: a gain
smaller than that is not distinguishable from the re-timing's own scatter. (The IQR and not the
full range: one sample hit by another process should not veto a real 1.3x.)

A sample is one call of a ``Timer`` on a no-argument launch. ``cuda_timer`` takes Triton's
``do_bench`` median (L2 cleared before every run, as DESIGN.md's protocol asks). Without CUDA
(``TRITON_INTERPRET=1`` on the CPU) the default is ``cpu_timer``: wall-clock medians of the
interpreter, marked ``meaningful=False``, so the loop runs end to end and the arbiter refuses to
decide on them. Tests pass a scripted timer (any ``callable(launch) -> ms``).
"""

from __future__ import annotations

import dataclasses
import statistics
import time
from pathlib import Path
from typing import Any, Callable

from tritune.bench.timing import percentile

DEFAULT_ROUNDS = 6  # even: each order (AB, BA) occurs equally often
CUDA_WARMUP_MS = 10  # do_bench's warm-up and repetition budget per sample (ms)
CUDA_REP_MS = 40  # 6 rounds x 2 samples x ~50 ms: about 0.6 s per confirmed candidate
CPU_RUNS = 3

Launch = Callable[[], None]


class ConfirmError(RuntimeError):
    """Confirmation could not produce a ratio (a timer failed, or returned no usable time)."""


@dataclasses.dataclass(frozen=True)
class Timer:
    """Times one launch, returns ms. ``meaningful``: its numbers may decide anything."""

    name: str
    measure: Callable[[Launch], float]
    meaningful: bool = True

    def __call__(self, launch: Launch) -> float:
        return self.measure(launch)


@dataclasses.dataclass(frozen=True)
class Confirmation:
    ratio: float  # median over rounds of base_ms / cand_ms (> 1: candidate faster)
    base_ms: float  # median baseline sample
    cand_ms: float  # median candidate sample
    spread: float  # interquartile range of the per-round ratios over their median
    samples: tuple[tuple[float, float], ...]  # (base_ms, cand_ms) per round
    order: tuple[str, ...]  # "AB" or "BA" per round: which was timed first
    meaningful: bool = True
    timer: str = "do_bench"

    def to_json(self) -> dict[str, Any]:
        return {**dataclasses.asdict(self), "samples": [list(s) for s in self.samples], "order": list(self.order)}


def confirm(base_launch: Launch, cand_launch: Launch, *, rounds: int = DEFAULT_ROUNDS,
            timer: Timer | Callable[[Launch], float] | None = None) -> Confirmation:
    """Time ``base_launch`` and ``cand_launch`` interleaved (module docstring). ``timer`` None:
    ``cuda_timer`` when CUDA is available, else ``cpu_timer`` (not meaningful)."""
    if rounds < 1:
        raise ValueError(f"confirmation needs at least one round, got {rounds}")
    clock = _as_timer(timer) if timer is not None else default_timer()
    samples, order = [], []
    for k in range(rounds):
        base_first = k % 2 == 0
        if base_first:
            base_ms = _sample(clock, base_launch, "baseline")
            cand_ms = _sample(clock, cand_launch, "candidate")
        else:
            cand_ms = _sample(clock, cand_launch, "candidate")
            base_ms = _sample(clock, base_launch, "baseline")
        samples.append((base_ms, cand_ms))
        order.append("AB" if base_first else "BA")
    ratios = [b / c for b, c in samples]
    ratio = statistics.median(ratios)
    spread = (percentile(ratios, 75) - percentile(ratios, 25)) / ratio
    return Confirmation(ratio=ratio, base_ms=statistics.median(b for b, _ in samples),
                        cand_ms=statistics.median(c for _, c in samples), spread=spread,
                        samples=tuple(samples), order=tuple(order), meaningful=clock.meaningful, timer=clock.name)


def confirm_spec(spec: Any, root: str | Path, candidate: Any, *, baseline: Any = None, device: str | None = None,
                 seed: int = 0, rounds: int = DEFAULT_ROUNDS, timer: Timer | Callable | None = None) -> Confirmation:
    """Confirm ``candidate`` (a replay ``Variant``) against ``baseline`` (default: the captured
    launch) for one spec, both launched on the same fresh inputs, built before any timing."""
    from tritune.model.variant import Variant
    from tritune.replay import Replay, device_of, make_args

    dev = device_of(spec, device)
    args = make_args(spec, root, seed=seed, device=dev)
    launches = []
    for variant in (baseline or Variant(), candidate):
        replay = Replay(spec, variant=variant, root=root, device=dev)
        replay.compile(args)
        launches.append(replay.launcher(args))
    if timer is None and not str(dev).startswith("cuda"):
        timer = cpu_timer()
    return confirm(launches[0], launches[1], rounds=rounds, timer=timer)


def confirm_job(payload: dict) -> dict:
    """Worker entry: ``{"spec", "root", "candidate", "baseline"?, "device"?, "seed"?, "rounds"?}``
    (spec and variants as JSON) -> ``Confirmation.to_json()``."""
    from tritune.model.launch import LaunchSpec
    from tritune.model.variant import Variant

    spec = LaunchSpec.from_json(payload["spec"])
    baseline = Variant.from_json(payload["baseline"]) if payload.get("baseline") else None
    result = confirm_spec(spec, payload["root"], Variant.from_json(payload["candidate"]), baseline=baseline,
                          device=payload.get("device"), seed=int(payload.get("seed", 0)),
                          rounds=int(payload.get("rounds", DEFAULT_ROUNDS)))
    return result.to_json()


def confirmation_from_json(body: dict) -> Confirmation:
    return Confirmation(**{**body, "samples": tuple(tuple(s) for s in body["samples"]), "order": tuple(body["order"])})


# ---------------------------------------------------------------------------------------- timers

def cuda_timer(warmup_ms: int = CUDA_WARMUP_MS, rep_ms: int = CUDA_REP_MS) -> Timer:
    """One sample = Triton's do_bench median, L2 cleared before every run."""
    from tritune.bench.timing import do_bench_median

    return Timer("do_bench", lambda launch: do_bench_median(launch, warmup=warmup_ms, rep=rep_ms))


def cpu_timer(runs: int = CPU_RUNS) -> Timer:
    """One sample = median wall time of ``runs`` launches after one warm-up. Not meaningful: under
    the interpreter this measures numpy, not the kernel."""

    def measure(launch: Launch) -> float:
        launch()
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            launch()
            times.append((time.perf_counter() - start) * 1e3)
        return statistics.median(times)

    return Timer("cpu-wall", measure, meaningful=False)


def default_timer() -> Timer:
    import torch

    return cuda_timer() if torch.cuda.is_available() else cpu_timer()


def _as_timer(timer: Timer | Callable[[Launch], float]) -> Timer:
    if isinstance(timer, Timer):
        return timer
    return Timer(getattr(timer, "__name__", "custom"), timer)


def _sample(timer: Timer, launch: Launch, which: str) -> float:
    ms = timer(launch)
    if not isinstance(ms, (int, float)) or not ms > 0 or ms == float("inf"):
        raise ConfirmError(f"{timer.name} timer returned {ms!r} ms for the {which}: no usable time")
    return float(ms)
