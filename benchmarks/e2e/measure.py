"""What ``benchmarks/e2e.py`` measures, one process per call (the driver runs these; so can you):

    python3 benchmarks/e2e/measure.py modes MODEL --mode MODE --json FILE
    python3 benchmarks/e2e/measure.py abab MODEL --mode MODE --store DB --json FILE

``modes``: the program compiled in MODE, its first steps timed (``compile_s`` = first step minus
a steady step: Dynamo, Inductor, its autotuning and coordinate descent all happen in that step),
then timed blocks, then the profiler. ``abab``: ``tritune.enable(DB)`` before compiling (as
``tritune run`` does), then blocks with the store enabled and disabled, interleaved, in one
process on one compiled model, then the profiler on each side. A decision that takes effect when
a kernel is loaded (served through Inductor's own config cache) cannot be switched off for a kernel
already loaded: the disabled side then runs it too, and the speedup reads low, never high; the
``applier`` stats and both sides' per-kernel times show which kernels ran what.

Definitions, recorded with the results:
- a block is ``block_steps`` steps between two device syncs, timed on the host clock; its value is
  its mean step time. ``step_ms`` is the median over blocks; ``noise`` is the blocks' half-range
  relative to that median, ``(max - min) / (2 * median)``: a difference below it is not a speedup.
- ``abab``: after one untimed block per side, ``pairs`` rounds of (disabled, enabled); after each
  switch ``warmup_steps`` untimed steps (a new applier builds its variants there). ``speedup`` is
  the median of the per-pair ratios disabled / enabled; ``verdict`` says "faster" only when every
  pair agrees, "slower" likewise, else "within noise".
- ``kernel_ms``: torch.profiler over ``profile_steps`` steps, the summed time of the kernels named
  ``triton_*`` (Inductor names every kernel it generates so), per step; ``gpu_ms``: every kernel,
  copy and memset on the device, per step. ``gpu_busy`` = gpu_ms / step_ms: below 0.9 the step is
  partly CPU-bound (host time the GPU waits on), which no kernel speedup shortens.
- ``loss``: the first ``loss_steps`` losses from the seeded weights on the fixed batches. In
  ``abab`` the enabled side, the disabled side, and the disabled side again each train from one
  snapshot (weights, optimizer, RNG); they agree when the largest relative difference between
  enabled and disabled is within ``max(floor, 4 x the disabled side's own run-to-run difference)``,
  floor by precision (``LOSS_FLOOR``).
"""

from __future__ import annotations

import json
import math
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Sequence

HERE = Path(__file__).resolve().parent
TRITON_PREFIX = "triton_"  # Inductor's kernel names: triton_poi_/per_/red_/tem_...
GPU_BUSY_MIN = 0.9
# Relative loss difference allowed between enabled and disabled with no measured spread: a reordered
# fp32/TF32 reduction moves a mean loss by ~1e-6 relative, bf16 rounding of activations by ~1e-4;
# 8 optimizer steps grow that, a wrong kernel moves it by far more.
LOSS_FLOOR = {"fp32": 1e-4, "tf32": 1e-4, "bf16": 2e-3}
SPREAD_FACTOR = 4.0
DEFAULTS = {"loss_steps": 8, "blocks": 7, "block_steps": 12, "pairs": 8, "warmup_steps": 2, "profile_steps": 3}


# ------------------------------------------------------------------------------------ statistics

def block_summary(blocks: Sequence[float]) -> dict:
    """``step_ms`` (median of the blocks' mean step times) and ``noise`` (half-range / median)."""
    median = statistics.median(blocks)
    return {"step_ms": median, "noise": (max(blocks) - min(blocks)) / (2 * median) if median else None,
            "blocks": list(blocks)}


def paired(off: Sequence[float], on: Sequence[float]) -> dict:
    """Per-pair ratios off / on (> 1: enabled is faster), their median and the verdict."""
    ratios = [a / b for a, b in zip(off, on)]
    if min(ratios) > 1:
        verdict = "faster"
    elif max(ratios) < 1:
        verdict = "slower"
    else:
        verdict = "within noise"
    return {"speedup": statistics.median(ratios), "range": [min(ratios), max(ratios)], "verdict": verdict,
            "ratios": ratios}


def kernel_summary(kernels: Iterable[tuple[str, float]], steps: int, top: int = 12) -> dict:
    """Per step: Triton kernel time and all device time (ms), from (name, microseconds) events."""
    per_name: dict[str, float] = {}
    for name, us in kernels:
        per_name[name] = per_name.get(name, 0.0) + us / 1e3 / steps
    triton = {name: ms for name, ms in per_name.items() if name.startswith(TRITON_PREFIX)}
    ranked = sorted(triton.items(), key=lambda item: -item[1])
    return {"kernel_ms": sum(triton.values()), "gpu_ms": sum(per_name.values()), "triton_kernels": len(triton),
            "per_kernel_ms": dict(ranked), "top": [{"kernel": n, "ms": ms} for n, ms in ranked[:top]]}


def bound(step_ms: float, gpu_ms: float, kernel_ms: float) -> dict:
    """Where the step's time goes, in one plain sentence."""
    busy, share = gpu_ms / step_ms, kernel_ms / step_ms
    cpu_bound = busy < GPU_BUSY_MIN
    note = (f"CPU-bound in part: the GPU is busy {busy:.0%} of the step; the rest is host time that no kernel "
            f"speedup shortens" if cpu_bound else f"GPU-bound: the GPU is busy {busy:.0%} of the step")
    note += (f"; Triton kernels are {share:.0%} of the step, so 1.10x on them gives at most "
             f"{1 / (1 - share + share / 1.1):.3f}x on the step")
    return {"gpu_busy": busy, "triton_share": share, "cpu_bound": cpu_bound, "note": note}


def _rel(a: float, b: float) -> float:
    return abs(a - b) / max(abs(a), 1e-12)


def loss_check(off: Sequence[float], on: Sequence[float], again: Sequence[float], precision: str) -> dict:
    """Enabled vs disabled losses against the tolerance (module docstring)."""
    finite = all(math.isfinite(x) for x in (*off, *on, *again))
    spread = max((_rel(a, b) for a, b in zip(off, again)), default=0.0)
    diff = max((_rel(a, b) for a, b in zip(off, on)), default=0.0)
    tolerance = max(LOSS_FLOOR[precision], SPREAD_FACTOR * spread)
    return {"ok": finite and diff <= tolerance, "max_rel_diff": diff, "first_step_rel_diff": _rel(off[0], on[0]),
            "baseline_spread": spread, "tolerance": tolerance,
            "rule": f"max over steps of |on - off| / |off| <= max({LOSS_FLOOR[precision]:g} ({precision}), "
                    f"{SPREAD_FACTOR:g} x the disabled side's run-to-run difference); all finite"}


def decided_share(per_kernel_ms: dict[str, float], names: Iterable[str]) -> float | None:
    """Share of the measured Triton kernel time in the kernels named."""
    total = sum(per_kernel_ms.values())
    wanted = set(names)
    return sum(ms for name, ms in per_kernel_ms.items() if name in wanted) / total if total else None


# ---------------------------------------------------------------------------------------- timing

@dataclass
class Side:
    name: str
    enter: Callable[[], None]  # switch to this side (tritune.enable / tritune.disable)


class Stepper:
    """Runs training steps on a running index (step i trains on batch i % 4), and times blocks."""

    def __init__(self, step: Callable[[int], object], sync: Callable[[], None],
                 clock: Callable[[], float] = time.perf_counter):
        self.step, self.sync, self.clock, self.index = step, sync, clock, 0

    def run(self, steps: int) -> list:
        out = [self.step(self.index + i) for i in range(steps)]
        self.index += steps
        return out

    def block(self, steps: int) -> float:
        """Mean step time (ms) of ``steps`` steps between two syncs."""
        self.sync()
        start = self.clock()
        self.run(steps)
        self.sync()
        return 1e3 * (self.clock() - start) / steps

    def blocks(self, count: int, steps: int) -> list[float]:
        return [self.block(steps) for _ in range(count)]

    def interleave(self, sides: Sequence[Side], pairs: int, steps: int, warmup_steps: int) -> dict[str, list[float]]:
        """One untimed block per side, then ``pairs`` rounds of one block per side (ABAB...)."""
        times: dict[str, list[float]] = {side.name: [] for side in sides}
        for round_ in range(pairs + 1):
            for side in sides:
                side.enter()
                self.run(warmup_steps)
                value = self.block(steps)
                if round_:
                    times[side.name].append(value)
        return times


def first_steps(trainer, steps: int) -> list[float]:
    """The losses of steps 0..steps-1 (each synced: a loss is read every step)."""
    return [float(trainer.step(i).item()) for i in range(steps)]


def profile(stepper: Stepper, steps: int, cuda: bool) -> dict:
    """``kernel_summary`` of ``steps`` steps under torch.profiler."""
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    stepper.sync()
    with torch_profile(activities=activities) as prof:
        stepper.run(steps)
        stepper.sync()
    # Device events are kernels, copies and memsets, and the GPU side of record_function ranges
    # (user annotations), which span kernels: those are left out, or gpu_ms would count twice.
    kernels = [(e.name, e.time_range.elapsed_us()) for e in prof.events()
               if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)]
    return kernel_summary(kernels, steps)


# --------------------------------------------------------------------------------------- workers

def compile_step(trainer, phase: Callable[[str], None]) -> tuple[tuple, float]:
    """A snapshot of the fresh trainer, then its first step (everything compiles and autotunes
    there, and may draw random numbers: max-autotune benchmarks on random inputs); returns the
    snapshot, to train from after it, and that step's wall time (s)."""
    snap = trainer.snapshot()
    phase("compile")
    start = time.perf_counter()
    trainer.step(0)
    trainer.sync()
    phase("measure")
    return snap, time.perf_counter() - start


def run_modes(args, phase: Callable[[str], None]) -> dict:
    from train import Trainer

    trainer = Trainer(args.model, args.mode, device=args.device)
    snap, first_s = compile_step(trainer, phase)
    trainer.restore(snap)
    losses = first_steps(trainer, args.loss_steps)
    stepper = Stepper(trainer.step, trainer.sync)
    stepper.index = args.loss_steps
    stepper.blocks(1, args.block_steps)  # warm-up
    timing = block_summary(stepper.blocks(args.blocks, args.block_steps))
    kernels = profile(stepper, args.profile_steps, args.device.startswith("cuda"))
    return {**timing, "compile_s": first_s - timing["step_ms"] / 1e3, "first_step_s": first_s,
            "loss": losses, **kernels, **bound(timing["step_ms"], kernels["gpu_ms"], kernels["kernel_ms"]),
            **_model_facts(trainer)}


def run_abab(args, phase: Callable[[str], None]) -> dict:
    import tritune
    from train import Trainer
    from tritune.apply import inductor_cache

    # The disabled side must run Inductor's own choice: no decided config served from Inductor's
    # autotune cache (`tritune run` writes such entries; enable() here serves at launch only).
    inductor_cache.remove(args.store)
    appliers = [tritune.enable(args.store)]  # before compiling, as `tritune run` does

    def enable() -> None:
        appliers.append(tritune.enable(args.store))

    trainer = Trainer(args.model, args.mode, device=args.device)
    snap, first_s = compile_step(trainer, phase)
    runs = {}
    for name, enter in (("on", enable), ("off", tritune.disable), ("again", tritune.disable)):
        enter()
        trainer.restore(snap)
        runs[name] = first_steps(trainer, args.loss_steps)

    stepper = Stepper(trainer.step, trainer.sync)
    stepper.index = args.loss_steps
    sides = [Side("off", tritune.disable), Side("on", enable)]
    times = stepper.interleave(sides, args.pairs, args.block_steps, args.warmup_steps)
    cuda = args.device.startswith("cuda")
    kernels = {}
    for side in sides:
        side.enter()
        stepper.run(args.warmup_steps)
        kernels[side.name] = profile(stepper, args.profile_steps, cuda)
    tritune.disable()
    stats = merged_stats(a.stats() for a in appliers)
    result = {}
    for name in ("off", "on"):
        timing = block_summary(times[name])
        result[name] = {**timing, **kernels[name], "loss": runs[name],
                        **bound(timing["step_ms"], kernels[name]["gpu_ms"], kernels[name]["kernel_ms"])}
    off_kernels, on_kernels = result["off"]["kernel_ms"], result["on"]["kernel_ms"]
    return {**result, "paired": paired(times["off"], times["on"]),
            "kernel_speedup": off_kernels / on_kernels if on_kernels else None,
            "loss_check": loss_check(runs["off"], runs["on"], runs["again"], trainer.spec.precision),
            "first_step_s": first_s, "applier": applier_summary(stats, result["off"]["per_kernel_ms"]),
            **_model_facts(trainer)}


def applier_summary(stats: dict[str, dict[str, int]], per_kernel_ms: dict[str, float]) -> dict:
    """What the appliers did, and the share of the disabled side's Triton time in kernels that
    have a decision here (``decided_time_share``) and in kernels launched with one (``applied_``)."""
    decided = [name for name, s in stats.items() if s["decisions"]]
    applied = [name for name, s in stats.items() if s["applied"]]
    totals = {field: sum(s[field] for s in stats.values()) for field in ("launches", "applied", "skipped")}
    return {"kernels_with_decisions": len(decided), "kernels_applied": len(applied), **totals,
            "decided_time_share": decided_share(per_kernel_ms, decided),
            "applied_time_share": decided_share(per_kernel_ms, applied), "per_kernel": stats}


def merged_stats(all_stats: Iterable[dict[str, dict[str, int]]]) -> dict[str, dict[str, int]]:
    """The appliers' per-kernel stats summed (each ``tritune.enable`` makes a new applier)."""
    merged: dict[str, dict[str, int]] = {}
    for stats in all_stats:
        for name, s in stats.items():
            into = merged.setdefault(name, {"launches": 0, "applied": 0, "skipped": 0, "decisions": 0})
            for field in ("launches", "applied", "skipped"):
                into[field] += s.get(field, 0)
            into["decisions"] = max(into["decisions"], s.get("decisions", 0))
    return merged


def _model_facts(trainer) -> dict:
    spec = trainer.spec
    return {"model_facts": {"name": spec.name, "what": spec.what, "precision": spec.precision, "batch": spec.batch,
                            "params": trainer.params, "mode": trainer.mode}}


def main(argv: Sequence[str] | None = None) -> int:
    sys.path[:0] = [str(HERE), str(HERE.parent)]
    import _common

    parser = _common.OneLineParser(prog="measure.py", description=__doc__.splitlines()[0])
    parser.add_argument("kind", choices=("modes", "abab"))
    parser.add_argument("model")
    parser.add_argument("--mode", default="default")
    parser.add_argument("--store", default=None)
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--device", default="cuda")
    for name, value in DEFAULTS.items():
        parser.add_argument("--" + name.replace("_", "-"), type=int, default=value)
    args = parser.parse_args(argv)
    if args.kind == "abab" and not args.store:
        parser.error("abab needs --store")
    if args.device.startswith("cuda"):
        _common.require_cuda("measure.py")
    phase_file = args.json.with_suffix(".phase")

    def phase(name: str) -> None:
        phase_file.write_text(name)

    run = run_modes if args.kind == "modes" else run_abab
    result = run(args, phase)
    settings = {name: getattr(args, name) for name in DEFAULTS}
    args.json.write_text(json.dumps({"environment": _common.environment(), "settings": settings, **result},
                                    indent=1, default=str))
    phase("done")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
