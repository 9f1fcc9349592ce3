"""One corpus file with tritune enabled and disabled in ONE process: outputs compared, output memory
poisoned before every compared call, the file's step and each kernel timed in interleaved blocks.

    python3 benchmarks/corpus/measure.py FILE --store DB --json OUT.json

Order, all in one process on one set of inputs (the driver's ``make``):
1. warm-up: one step disabled and one enabled (compiles, autotunes, builds the applier's variants);
2. compared calls: disabled, enabled, disabled, enabled. Before each, every output of the step is
   freed and blocks of the outputs' sizes are taken from the caching allocator, filled with 0xFF
   bytes (NaN in every float dtype, -1 in integers) and freed again, so the next step's outputs
   land in poisoned memory: a variant that skips part of its output leaves NaN there, which the
   comparison catches. Each result is copied at once (on the device: comparing a 1 GB gradient
   there takes milliseconds), so nothing the library keeps can change it later.
   ``reproducible``: the two disabled calls agree within the table (else the driver or the library
   is not deterministic, and the spread below is what the enabled side is held to).
   ``wrong``: an enabled output outside the tolerance table (``tritune.verify``'s, the one the
   optimizer verifies with) of the first disabled one, its absolute part widened to 4x the
   disabled side's own run-to-run spread (atomics), or with NaN/Inf where the disabled side has none.
3. step time: after one untimed block per side, ``pairs`` rounds of (disabled, enabled) blocks of
   ``block_steps`` steps between two syncs, host clock (``benchmarks/e2e/measure.py``'s
   ``Stepper.interleave``); ``speedup`` is the median of the per-pair ratios.
4. per kernel: torch.profiler over ``profile_steps`` steps per side, ``profile_rounds`` rounds in
   ABAB order; each kernel's time per step, the median over rounds per side; the appliers' stats say
   which kernels ran a decision (``applied`` launches).
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
POISON_BYTE = 0xFF
DEFAULTS = {"pairs": 5, "block_ms": 60.0, "max_block_steps": 50, "profile_steps": 3, "profile_rounds": 2}


# ----------------------------------------------------------------------------- memory and checks

def poison(nbytes: list[int], device: str) -> None:
    """Take blocks of these sizes from the caching allocator, fill them with 0xFF, give them back:
    the next tensors of those sizes are allocated in poisoned memory."""
    import torch

    blocks = [torch.empty(n, dtype=torch.uint8, device=device) for n in nbytes if n]
    for b in blocks:
        b.fill_(POISON_BYTE)
    del blocks


def output_bytes(outputs: dict) -> list[int]:
    return [t.numel() * t.element_size() for t in outputs.values()]


def keep(outputs: dict) -> dict:
    return {name: t.detach().clone() for name, t in outputs.items()}


def spread(a: dict, b: dict, chunk: int = 1 << 24) -> dict[str, float]:
    """Largest |a - b| per output over elements finite in both (0 when identical); in chunks, so a
    large output needs no float64 copy of itself."""
    out = {}
    for name, x in a.items():
        xf, yf = x.reshape(-1), b[name].reshape(-1)
        worst = 0.0
        for start in range(0, xf.numel(), chunk):
            xd, yd = xf[start:start + chunk].double(), yf[start:start + chunk].double()
            if not x.dtype.is_floating_point:
                worst = max(worst, 0.0 if bool((xd == yd).all()) else math.inf)
                continue
            both = xd.isfinite() & yd.isfinite()
            if bool(both.any()):
                worst = max(worst, float((xd - yd).abs()[both].max()))
        out[name] = worst
    return out


def compare_outputs(base: dict, cand: dict, spreads: dict[str, float]) -> list[dict]:
    """Each output of ``cand`` against ``base`` under the tolerance table, widened by ``spreads``."""
    from tritune.verify import compare, tolerance_for, widen
    from tritune.verify.compare import dtype_name

    rows = []
    for name, b in base.items():
        c = cand.get(name)
        if c is None or tuple(c.shape) != tuple(b.shape) or c.dtype != b.dtype:
            rows.append({"output": name, "ok": False, "message": f"{name}: missing or of another shape/dtype"})
            continue
        tol = widen(tolerance_for(dtype_name(b), "tolerance"), spreads.get(name, 0.0))
        result = compare(name, b, c, "tolerance", tol, poisoned=False)
        rows.append({"output": name, "ok": result.ok, "bad": result.bad, "elements": result.elements,
                     "nan_mismatch": result.nan_mismatch, "inf_mismatch": result.inf_mismatch,
                     "max_abs_err": result.max_abs_err, "max_rel_err": result.max_rel_err,
                     "bitwise_equal": bool(_bits_equal(b, c)), "message": result.message()})
    return rows


def _bits_equal(a, b) -> bool:
    import torch

    return torch.equal(a.reshape(-1).view(torch.uint8), b.reshape(-1).view(torch.uint8))


# ---------------------------------------------------------------------------------- per kernel

def kernel_times(events, steps: int) -> dict[str, float]:
    """Milliseconds per step per kernel name, from (name, microseconds) device events."""
    per: dict[str, float] = {}
    for name, us in events:
        per[name] = per.get(name, 0.0) + us / 1e3 / steps
    return per


def kernel_rows(off_rounds: list[dict], on_rounds: list[dict], stats: dict, triton_names: set[str],
                threshold: float = 1.05) -> list[dict]:
    """Per Triton kernel: the median time per step on each side, their ratio, the applier's counts,
    and ``improved`` (a decision applied and >= ``threshold`` faster measured here)."""
    rows = []
    for name in sorted(triton_names):
        off = statistics.median(r.get(name, 0.0) for r in off_rounds) if off_rounds else None
        on = statistics.median(r.get(name, 0.0) for r in on_rounds) if on_rounds else None
        s = stats.get(name, {})
        ratio = off / on if off and on else None
        applied = s.get("applied", 0)
        rows.append({"kernel": name, "off_ms": off, "on_ms": on, "speedup": ratio,
                     "launches": s.get("launches", 0), "applied": applied, "decisions": s.get("decisions", 0),
                     "improved": bool(applied and ratio is not None and ratio >= threshold)})
    return rows


# -------------------------------------------------------------------------------------- running

def _e2e_measure():
    """benchmarks/e2e/measure.py (the interleaving and applier stats it defines), loaded by path:
    benchmarks/e2e.py shadows the folder as a package."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("e2e_measure", REPO / "benchmarks" / "e2e" / "measure.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def captured_kernels(capture: Path | None) -> set[str]:
    """The kernel names a ``tritune capture`` directory recorded (its launches.jsonl)."""
    from tritune.capture.spec import read_launches

    if capture is None or not (capture / "launches.jsonl").is_file():
        return set()
    return {spec.kernel for spec in read_launches(capture)}


def measure(name: str, store: Path, settings: dict, device: str = "cuda", capture: Path | None = None,
            small: bool = False) -> dict:
    import torch

    import tritune
    from benchmarks.corpus import drivers

    e2e = _e2e_measure()
    Side, Stepper, block_summary, merged_stats, paired = (e2e.Side, e2e.Stepper, e2e.block_summary,
                                                          e2e.merged_stats, e2e.paired)
    module = drivers.load(name)
    state = module.make(device, small)
    appliers = []

    def enable() -> None:
        appliers.append(tritune.enable(store))

    sides = {"off": tritune.disable, "on": enable}
    sync = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    for enter in sides.values():  # warm-up: compile, autotune, the applier's variants
        enter()
        sizes = output_bytes(module.step(state))
        sync()

    results = {}
    for label in ("off", "on", "off2", "on2"):
        sides[label[:-1] if label.endswith("2") else label]()
        poison(sizes, device)
        results[label] = keep(module.step(state))
        sync()
    tritune.disable()
    spreads = spread(results["off"], results["off2"])
    checks = {"on": compare_outputs(results["off"], results["on"], spreads),
              "on2": compare_outputs(results["off"], results["on2"], spreads)}
    wrong = [r for rows in checks.values() for r in rows if not r["ok"]]
    # The disabled side against itself, under the table alone: a driver whose step is not a pure
    # function of its inputs (a library op that overwrites them) shows here, not as "wrong".
    off_again = compare_outputs(results["off"], results["off2"], {})
    reproducible = all(r["ok"] for r in off_again)
    del results

    def one_step(_index: int) -> None:
        module.step(state)

    stepper = Stepper(one_step, sync)
    start = time.perf_counter()
    stepper.run(3)
    sync()
    step_s = (time.perf_counter() - start) / 3
    block_steps = max(1, min(settings["max_block_steps"], math.ceil(settings["block_ms"] / 1e3 / max(step_s, 1e-6))))
    times = stepper.interleave([Side("off", tritune.disable), Side("on", enable)], settings["pairs"], block_steps, 1)

    rounds: dict[str, list[dict]] = {"off": [], "on": []}
    triton_names = captured_kernels(capture)
    for _ in range(settings["profile_rounds"]):
        for side, enter in sides.items():
            enter()
            stepper.run(1)
            rounds[side].append(kernel_times(_profile(stepper, settings["profile_steps"]), settings["profile_steps"]))
    tritune.disable()
    stats = merged_stats(a.stats() for a in appliers)
    triton_names |= {k for k, s in stats.items() if s.get("launches")}
    return {"file": name, "library": module.LIBRARY, "settings": {**settings, "block_steps": block_steps},
            "step": {"off": block_summary(times["off"]), "on": block_summary(times["on"]),
                     "paired": paired(times["off"], times["on"])},
            "kernels": kernel_rows(rounds["off"], rounds["on"], stats, triton_names),
            "wrong": len(wrong), "checks": checks, "spread_off": spreads, "reproducible": reproducible,
            "off_again": off_again, "applier": stats}


def _profile(stepper, steps: int) -> list[tuple[str, float]]:
    """Device events (name, us) of ``steps`` steps: kernels, copies, memsets."""
    import torch
    from torch.autograd import DeviceType
    from torch.profiler import ProfilerActivity, profile

    stepper.sync()
    cuda = [ProfilerActivity.CUDA] if torch.cuda.is_available() else []
    with profile(activities=[ProfilerActivity.CPU, *cuda]) as prof:
        stepper.run(steps)
        stepper.sync()
    return [(e.name, e.time_range.elapsed_us()) for e in prof.events()
            if e.device_type == DeviceType.CUDA and not getattr(e, "is_user_annotation", False)]


def main(argv=None) -> int:
    sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--store", required=True, type=Path)
    parser.add_argument("--json", required=True, type=Path)
    parser.add_argument("--device", default="cuda", help="cpu: a smoke run under TRITON_INTERPRET=1")
    parser.add_argument("--small", action="store_true", help="the drivers' tiny shapes (with --device cpu)")
    parser.add_argument("--capture", type=Path, default=None, help="its tritune capture (names the Triton kernels)")
    for key, value in DEFAULTS.items():
        parser.add_argument("--" + key.replace("_", "-"), type=type(value), default=value)
    args = parser.parse_args(argv)
    import _common

    if args.device.startswith("cuda"):
        _common.require_cuda("measure.py")
    settings = {key: getattr(args, key) for key in DEFAULTS}
    result = measure(args.file, args.store, settings, args.device, args.capture, args.small)
    result["environment"] = _common.environment()
    args.json.write_text(json.dumps(result, indent=1, default=str))
    p = result["step"]["paired"]
    improved = [k for k in result["kernels"] if k["improved"]]
    print(f"{args.file}: step {p['speedup']:.3f}x ({p['verdict']}); {len(improved)} kernels improved; "
          f"wrong {result['wrong']}" + ("" if result["reproducible"] else "; the disabled side is not reproducible"),
          flush=True)
    return 0  # wrong outputs are a result (the table's column); a nonzero exit means the measurement broke


if __name__ == "__main__":
    sys.exit(main())
