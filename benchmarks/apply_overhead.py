"""Microseconds per launch that ``tritune.enable(store)`` adds, against plain Triton, in one process.

Cases (each a tiny kernel, so that the launch path, not the GPU, sets the pace):

  jit_no_decision      a @triton.jit kernel the store has no decision for (the shim lets its
                       launches go straight to Triton after the first)
  jit_decision         a kernel with a decision, the same tensors every call
  jit_decision_fresh   the same, with tensors allocated in every call (allocation in both modes)
  autotune_decision    a @triton.autotune kernel with a decision for the config it chose
  inductor_decision    a torch.compile'd function's Triton kernel with a decision, applied at
                       launch time (the fallback path; a decision served through Inductor's
                       autotune cache costs nothing, Inductor launches it itself)

Each decision's variant launches the very binary the program would (options equal to the
defaults or to the autotuner's choice), so the difference between the modes is the applier's
cost alone. The store is made here, as a user's would be: the launches captured, each key
decided through the store API (verified candidate, then ``set_decision``), signed by this user.

Timing: blocks of launches with the store enabled and disabled, interleaved (off, on, on, off,
...), ``tritune.enable``/``disable`` toggled between blocks as the end-to-end benchmark does; per
block the host clock (``perf_counter`` around the loop, synchronized before and after) and CUDA
events, both per launch; a case's figure is the median over its blocks, ``added`` = on - off.

    PYTHONPATH=$PWD/src python3 benchmarks/apply_overhead.py --out $OUT      # GPU: ~1 minute
    TRITON_INTERPRET=1 PYTHONPATH=src python3 benchmarks/apply_overhead.py --smoke --out DIR

``--smoke`` (CPU, interpreter) runs the same flow with a few launches and an Inductor kernel from
``examples/inductor`` instead of torch.compile (which makes no Triton kernel on a CPU); its JSON
says ``"meaningful": false``. Writes ``OUT/apply_overhead.json``.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _common  # noqa: E402

KERNELS = '''
import triton
import triton.language as tl


def cpu_bench(fn, quantiles=None, **_):  # the interpreter has no GPU timer: every config ties
    fn()
    return [1.0] * len(quantiles) if quantiles else 1.0


@triton.jit
def copy_decided(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@triton.jit
def copy_undecided(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)


@triton.autotune(configs=[triton.Config({"BLOCK": 512}, num_warps=4), triton.Config({"BLOCK": 1024}, num_warps=4)],
                 key=["n"]BENCH)
@triton.jit
def copy_tuned(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=offs < n) + 1, mask=offs < n)
'''
N = 4096
BLOCK = 1024


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="directory for apply_overhead.json (default $OUT)")
    parser.add_argument("--smoke", action="store_true", help="CPU check of the flow (TRITON_INTERPRET=1)")
    parser.add_argument("--launches", type=int, default=None, help="launches per block")
    parser.add_argument("--blocks", type=int, default=None, help="blocks per mode")
    args = parser.parse_args()
    _common.bootstrap(inductor=True)
    import torch

    from tritune import config

    if args.smoke and not config.interpreting():
        parser.error("--smoke runs under TRITON_INTERPRET=1")
    if not args.smoke:
        _common.require_cuda("apply_overhead.py")
    launches = args.launches or (3 if args.smoke else 5000)
    blocks = args.blocks or (2 if args.smoke else 10)
    device = "cpu" if args.smoke else "cuda"
    work = Path(tempfile.mkdtemp(prefix="tritune-apply-overhead-"))
    cases = make_cases(work, device, args.smoke)
    store = decide(work, cases)
    results = {name: measure(case, store, launches, blocks, device) for name, case in cases.items()}
    env = _common.environment()
    report = {"gpu": env["gpu"] or "none (interpreter)", "date": env["utc"], "command": env["command"],
              "meaningful": not args.smoke, "environment": env, "launches_per_block": launches,
              "blocks_per_mode": blocks,
              "us_per_launch": {name: r["us_per_launch"] for name, r in results.items()},
              "applied": {name: r["applied"] for name, r in results.items()},
              "same_output": {name: r["same_output"] for name, r in results.items()},
              "goals_us": {"with_decision": 1.0, "without_decision": 0.3}}
    out = Path(args.out or _common.default_out_dir())
    out.mkdir(parents=True, exist_ok=True)
    (out / "apply_overhead.json").write_text(json.dumps(report, indent=1))
    for name, r in results.items():
        fig = r["us_per_launch"]
        _common.log(f"{name:20s} off {fig['off']['host']:8.2f} us  on {fig['on']['host']:8.2f} us  "
                    f"added host {fig['added']['host']:+7.2f} us  event {fig['added']['event']:+7.2f} us  "
                    f"(applied {r['applied']})")
    _common.log(f"wrote {out / 'apply_overhead.json'}" + ("  (smoke: figures not meaningful)" if args.smoke else ""))
    return 0


# --------------------------------------------------------------------------------------- cases

class Case:
    """``launch()`` makes one launch as the program would; ``kernel`` names it in the stats;
    ``output()`` launches once on fixed inputs into a poisoned output and returns it (tritune on
    and off must give the same bits: each decision here launches the same binary)."""

    def __init__(self, kernel: str, launch, decided: bool, output=None):
        self.kernel, self.launch, self.decided, self.output = kernel, launch, decided, output


def make_cases(work: Path, device: str, smoke: bool) -> dict[str, Case]:
    import torch
    import triton

    path = work / "overhead_kernels.py"
    path.write_text(KERNELS.replace("BENCH", ", do_bench=cpu_bench" if smoke else ""))
    spec = importlib.util.spec_from_file_location("overhead_kernels", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules["overhead_kernels"] = module
    spec.loader.exec_module(module)
    x, out = torch.randn(N, device=device), torch.empty(N, device=device)
    grid = (triton.cdiv(N, BLOCK),)

    def fresh():
        made = torch.full((N,), float("nan"), device=device)
        module.copy_decided[grid](torch.randn(N, device=device), made, N, BLOCK=BLOCK)
        return made

    def into_out(launch):
        def output():
            out.fill_(float("nan"))
            launch()
            return out.clone()
        return output

    def seeded(launch):
        def output():
            torch.manual_seed(0)
            return launch()
        return output

    undecided = lambda: module.copy_undecided[grid](x, out, N, BLOCK=BLOCK)  # noqa: E731
    decided = lambda: module.copy_decided[grid](x, out, N, BLOCK=BLOCK)  # noqa: E731
    tuned = lambda: module.copy_tuned[lambda meta: (triton.cdiv(N, meta["BLOCK"]),)](x, out, N)  # noqa: E731

    cases = {
        "jit_no_decision": Case("copy_undecided", undecided, False, into_out(undecided)),
        "jit_decision": Case("copy_decided", decided, True, into_out(decided)),
        "jit_decision_fresh": Case("copy_decided", fresh, True, seeded(fresh)),
        "autotune_decision": Case("copy_tuned", tuned, True, into_out(tuned)),
    }
    cases["inductor_decision"] = inductor_case(work, device, smoke)
    return cases


def inductor_case(work: Path, device: str, smoke: bool) -> Case:
    import torch

    if not smoke:
        def tiny(a, b):
            return a * 2 + b

        compiled = torch.compile(tiny)
        a, b = torch.randn(N, device=device), torch.randn(N, device=device)
        compiled(a, b)  # compile now, outside any timing
        # the kernel's name is known once captured; each call returns a new tensor
        return Case(None, lambda: compiled(a, b), True, lambda: compiled(a, b))
    # the interpreter: Inductor's example module at a small size (as tests/conftest.py makes it)
    from tritune.capture.inductor_modules import autotuner_of
    from tritune.imports import import_file

    source = (_common.REPO / "examples" / "inductor" / "triton_poi_fused_add_gelu_mul_0.py").read_text()
    for old, new in (("1024000", "4096"), ("(1024, 1000), (1000, 1)", "(4, 1024), (1024, 1)"),
                     ("libdevice.erf(tmp4)", "tl.math.erf(tmp4)"), ("'x': 1048576", "'x': 4096")):
        source = source.replace(old, new)
    path = work / "triton_poi_fused_add_gelu_mul_0.py"
    path.write_text(source)
    module = import_file(path)
    module.rand_strided = lambda size, stride, dtype=None, device=None: torch.randn(
        sum((s - 1) * st for s, st in zip(size, stride)) + 1).as_strided(size, stride)
    tuner, inputs = autotuner_of(module), module.get_args()
    return Case(tuner.fn.__name__, lambda: tuner.run(*inputs, stream=0), True)


# ----------------------------------------------------------------------------------- the store

def decide(work: Path, cases: dict[str, Case]):
    """Capture one launch of each case and decide on each decided kernel's key, through the
    store API: a verified candidate whose variant launches the same binary, then the decision."""
    from tritune.capture.recorder import capture
    from tritune.capture.spec import read_launches
    from tritune.model.variant import Variant
    from tritune.store import DecisionStore, current_target, key_for

    with capture(work / "capture"):
        for case in cases.values():
            case.launch()
    specs = read_launches(work / "capture")
    decided = {case.kernel for case in cases.values() if case.decided}
    inductor = [s for s in specs if s.kind == "inductor"]
    if inductor:
        cases["inductor_decision"].kernel = inductor[0].kernel
        decided.add(inductor[0].kernel)
    store = DecisionStore(work / "decisions.db")
    target = current_target()
    run = store.start_run({"benchmark": "apply_overhead"})
    for spec in specs:
        if spec.kernel not in decided:
            continue
        same = {k: spec.options[k] for k in ("num_warps", "num_stages") if k in spec.options}
        variant = Variant(name="same binary", options=same or {"num_warps": 4})
        key = key_for(spec, target)
        candidate = store.add_candidate(run, key, variant)
        store.finish_candidate(candidate.id, "verified", verification={"ok": True, "mode": "benchmark"},
                               timings={"median_ms": 1.0})
        store.set_decision(key, variant, baseline_ms=1.0, best_ms=1.0)
    return store


# ---------------------------------------------------------------------------------------- timing

def measure(case: Case, store, launches: int, blocks: int, device: str) -> dict:
    import torch

    import tritune

    cuda = device == "cuda"
    samples = {"off": {"host": [], "event": []}, "on": {"host": [], "event": []}}
    applied = 0
    for block in range(blocks):
        for mode in (("off", "on") if block % 2 == 0 else ("on", "off")):
            applier = tritune.enable(store) if mode == "on" else None
            if mode == "off":
                tritune.disable()
            for _ in range(3):  # warm: first launches build entries, compile, settle Inductor
                case.launch()
            host, event = _time(case.launch, launches, cuda, torch)
            samples[mode]["host"].append(host)
            samples[mode]["event"].append(event)
            if applier is not None:
                applied += applier.stats().get(case.kernel, {}).get("applied", 0)  # each enable: its own stats
                tritune.disable()
    figures = {mode: {clock: statistics.median(values) for clock, values in by_clock.items()}
               for mode, by_clock in samples.items()}
    figures["added"] = {clock: figures["on"][clock] - figures["off"][clock] for clock in ("host", "event")}
    figures["samples"] = samples
    if case.decided and not applied:
        _common.log(f"warning: {case.kernel}: the decision was never applied")
    same = same_output(case, store, torch)
    if same is False:
        _common.log(f"WRONG: {case.kernel}: the output with tritune on differs from the output with it off")
    return {"us_per_launch": figures, "applied": applied, "same_output": same}


def same_output(case: Case, store, torch) -> bool | None:
    """The output of a launch on the path the timing measured (after the warm-up launches that
    set up the direct launch or Inductor's own launcher) against the output with tritune off:
    the same bits (NaN-poisoned outputs: an element left unwritten never compares equal). None
    where the case has no fixed output."""
    import tritune

    if case.output is None:
        return None
    tritune.disable()
    expected = case.output()
    tritune.enable(store)
    for _ in range(3):
        case.launch()
    got = case.output()
    tritune.disable()
    return bool(torch.equal(expected, got))


def _time(launch, count: int, cuda: bool, torch) -> tuple[float, float]:
    """Microseconds per launch over ``count`` launches: host clock and CUDA events."""
    if cuda:
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
    begin = time.perf_counter()
    for _ in range(count):
        launch()
    if cuda:
        end.record()
        torch.cuda.synchronize()
    host = (time.perf_counter() - begin) / count * 1e6
    event = start.elapsed_time(end) * 1e3 / count if cuda else host
    return host, event


if __name__ == "__main__":
    sys.exit(main())
