"""Where do tritune's passes fire in real Inductor kernels, and what do they buy?

    PYTHONPATH=src python benchmarks/inductor_passes.py --out $OUT        # GPU, ~6-8 min on H100
    PYTHONPATH=src python benchmarks/inductor_passes.py --models bert --mode infer --out $OUT

For each model and mode: torch.compile in a fresh Inductor cache with
TORCHINDUCTOR_BENCHMARK_KERNEL=1 (every kernel module gets ``get_args()`` and ``call(args)``), run
one step, then for every generated kernel module (``triton_heuristics`` + ``def get_args``):
- take its CachingAutotuner as Inductor left it (autotuned during the step: ``launchers[0].config``),
- get the TTIR of the chosen config (Inductor's compile result, or the same config recompiled:
  a Triton cache hit) and run ``tritune.passes.preview`` exact and fast-math;
- where an exact pass fires: import the module a second time inside
  ``tritune.compiler.enabled(["exact"])`` with its configs cut to the chosen one, so Inductor's own
  code compiles (with the passes) and launches the candidate; check the hook saw a fresh
  compilation that changed something, compare every argument bitwise after a run on 3 fresh
  input sets (outputs poisoned), and time both with do_bench (median; baseline twice).
Models and kernels fail one at a time: the error is recorded and the run goes on.
"""

from __future__ import annotations

import argparse
import gc
import math
import os
import pathlib
import re
import shutil
import sys
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

DEFAULT_MODELS = ["bert", "coat_lite_mini", "botnet26t_256"]
ALL_MODELS = DEFAULT_MODELS + ["convit_base", "beit_base_patch16_224"]
# = tritune.capture.inductor_modules.KERNEL_DEF (kept here: this module imports no tritune at import)
KERNEL_DEF = re.compile(r"^def (triton_([a-z]+)_\w+)\(", re.MULTILINE)
EXACT_PASSES = ("merge-redundant-loads", "merge-redundant-reduces", "constant-division")


# ------------------------------------------------------ models and kernel modules (the library's)

def model_step(name: str, mode: str, batch: int):
    """torch.compile the model and run one step (train: forward + backward in fp32; infer: fp16)."""
    from tritune.inductor.harvest import model_step as step

    step(name, mode, batch)


def kernel_files(cache_dir: str) -> set[str]:
    from tritune.capture.inductor_modules import kernel_files as find

    return find(cache_dir)


def loaded_modules() -> dict:
    from tritune.capture.inductor_modules import loaded_modules as loaded

    return loaded()


def import_path(path: str, name: str):
    """A fresh module object for ``path`` on every call (``name`` is only a label here)."""
    from tritune.imports import import_file

    return import_file(path, fresh=True)


def autotuner_of(module):
    from tritune.capture.inductor_modules import autotuner_of as find

    return find(module)


def ensure_tuned(module, tuner) -> None:
    """Autotune to one config if Inductor did not launch this kernel in the step."""
    import torch

    if len(getattr(tuner, "launchers", [])) != 1:
        torch.manual_seed(0)
        module.call(module.get_args())
        torch.cuda.synchronize()


def config_record(cfg) -> dict:
    return {**cfg.kwargs, "num_warps": cfg.num_warps, "num_stages": cfg.num_stages}


def same_config(a, b) -> bool:
    return config_record(a) == config_record(b)


def chosen_ttir(tuner, cfg) -> tuple[str, str]:
    """TTIR of the binary Inductor runs for ``cfg``: from its compile result when that kept the
    asm, else the same config compiled again the way Inductor compiles it (a Triton cache hit)."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    for result in getattr(tuner, "compile_results", []):
        asm = getattr(getattr(result, "kernel", None), "asm", None)
        if getattr(result, "config", None) is not None and same_config(result.config, cfg) and asm and "ttir" in asm:
            return asm["ttir"], "compile_result"
    if hasattr(tuner, "_create_compile_meta") and hasattr(tuner, "_create_compile_options"):
        meta = tuner._create_compile_meta(cfg)
        options = tuner._create_compile_options(cfg, meta)
        target = GPUTarget(meta.get("device_type", "cuda"), meta["cc"], 32)
    else:  # older Inductor: rebuild what _precompile_config does
        import torch

        meta = {**tuner.triton_meta, "constants": {**tuner.triton_meta.get("constants", {}), **cfg.kwargs}}
        options = {"num_warps": cfg.num_warps, "num_stages": cfg.num_stages}
        major, minor = torch.cuda.get_device_capability()
        target = GPUTarget("cuda", major * 10 + minor, 32)
    source = ASTSource(tuner.fn, meta["signature"], meta["constants"], meta["configs"][0])
    return triton.compile(source, target=target, options=options).asm["ttir"], "recompiled"


def analyze(path: str, modules: dict, model: str, mode: str) -> tuple[dict, object | None]:
    from tritune.passes import preview

    text = pathlib.Path(path).read_text()
    name, kind = KERNEL_DEF.search(text).groups()
    rec = {"model": model, "mode": mode, "kernel": name, "kind": kind, "file": path}
    try:
        module = modules.get(os.path.realpath(path))
        rec["loaded_by_inductor"] = module is not None
        if module is None:
            module = import_path(path, f"tritune_base_{pathlib.Path(path).stem}")
        tuner = autotuner_of(module)
        ensure_tuned(module, tuner)
        cfg = tuner.launchers[0].config
        ttir, rec["ttir_from"] = chosen_ttir(tuner, cfg)
        rec["config"] = config_record(cfg)
        rec["kernel_num_gb"] = tuner.inductor_meta.get("kernel_num_gb")
        rec["ttir_ops"] = _common.ttir_op_counts(ttir, ("tt.load", "tt.reduce", "arith.divf", "tt.precise_divf"))
        rec["preview_exact"] = preview(ttir)
        rec["preview_fast"] = preview(ttir, fast_math=True)
        rec["exact_fires"] = any(rec["preview_exact"][p] for p in EXACT_PASSES)
        return rec, (module, tuner, cfg)
    except Exception as error:  # noqa: BLE001 - one kernel failing must not stop the others
        rec["error"] = f"{type(error).__name__}: {error}"
        return rec, None


# ------------------------------------------------------------------------------ verify and time

def clone_preserve_strides(t):
    import torch

    if not isinstance(t, torch.Tensor):
        return t
    needed = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride())) if t.numel() else 0
    buffer = torch.as_strided(t, (needed,), (1,)).clone()
    return torch.as_strided(buffer, t.size(), t.stride())


def run_on(module, pristine: list, out_positions: list[int]) -> list:
    import torch

    args = [clone_preserve_strides(a) for a in pristine]
    _common.poison([args[i] for i in out_positions])
    module.call(args)
    torch.cuda.synchronize()
    return [a for a in args if isinstance(a, torch.Tensor)]


def verify_and_time(rec: dict, base, cand) -> None:
    """Bitwise on 3 fresh input sets; do_bench median both ways (baseline twice)."""
    import torch

    (base_module, base_tuner), cand_module = base, cand
    names = [n for i, n in enumerate(base_tuner.fn.arg_names) if i not in base_tuner.fn.constexprs]
    out_positions = [i for i, n in enumerate(names) if n.startswith("out_ptr")]
    rec["checks"] = []
    for seed in (1, 2, 3):
        torch.manual_seed(seed)
        pristine = base_module.get_args()
        if len(pristine) != len(names):  # cannot tell outputs apart: compare without poisoning
            rec["note"], out_positions = f"get_args() gave {len(pristine)} args for {len(names)} params", []
        out_b = run_on(base_module, pristine, out_positions)
        out_c = run_on(cand_module, pristine, out_positions)
        check = {"seed": seed, "mismatched_elements": _common.mismatched(out_b, out_c),
                 "unwritten": sum(_common.unwritten(t) for t in out_b)}
        if seed == 1:  # atomics make a baseline differ from itself: then bitwise cannot decide
            check["baseline_repeatable"] = _common.mismatched(out_b, run_on(base_module, pristine, out_positions)) == 0
            rec["baseline_repeatable"] = check["baseline_repeatable"]
        rec["checks"].append(check)
    ok = all(c["mismatched_elements"] == 0 for c in rec["checks"])
    rec["check"] = "pass" if ok else ("FAIL" if rec["baseline_repeatable"] else "baseline not repeatable")
    if not ok:
        return
    torch.manual_seed(1)
    pristine = base_module.get_args()
    args_b = [clone_preserve_strides(a) for a in pristine]
    args_c = [clone_preserve_strides(a) for a in pristine]
    rec["base_ms"] = _common.do_bench_median(lambda: base_module.call(args_b))
    rec["cand_ms"] = _common.do_bench_median(lambda: cand_module.call(args_c))
    rec["base2_ms"] = _common.do_bench_median(lambda: base_module.call(args_b))
    rec["speedup"] = rec["base_ms"] / rec["cand_ms"]
    rec["noise"] = abs(rec["base_ms"] - rec["base2_ms"]) / rec["base_ms"]


def compile_candidates(chosen: list[tuple[dict, tuple]]) -> dict[str, object]:
    """Import each module again inside the exact scope, cut to the chosen config, and run it once:
    Inductor's own code compiles it, through tritune's hook. Returns kernel -> candidate module."""
    import torch

    import tritune.compiler

    candidates = {}
    with tritune.compiler.enabled(["exact"]) as hook:
        for rec, (_, _, cfg) in chosen:
            try:
                seen = len(hook.history)
                cand = import_path(rec["file"], f"tritune_cand_{pathlib.Path(rec['file']).stem}")
                cand_tuner = autotuner_of(cand)
                cand_tuner.configs = [cfg]  # no re-autotuning: time the config Inductor chose
                cand_tuner.inductor_meta = {**cand_tuner.inductor_meta, "dynamic_scale_rblock": False}
                torch.manual_seed(0)
                cand.call(cand.get_args())
                torch.cuda.synchronize()
                fresh = hook.history[seen:]
                counts = {p: sum(c.counts.get(p, 0) for c in fresh) for p in EXACT_PASSES}
                rec["pass_counts"] = counts
                if not fresh:
                    rec["fired"] = "did not fire (no fresh compilation seen by the hook)"
                elif not any(counts.values()):
                    rec["fired"] = "did not fire"
                elif not same_config(cand_tuner.launchers[0].config, cfg):
                    rec["fired"] = "config differs from baseline"
                else:
                    rec["fired"] = "fired"
                    candidates[rec["kernel"]] = cand
            except Exception as error:  # noqa: BLE001
                rec["fired"] = "error"
                rec["error"] = f"{type(error).__name__}: {error}"
    return candidates


def timing_order(rec: dict) -> tuple:
    p = rec["preview_exact"]
    return (-p["merge-redundant-loads"], -p["merge-redundant-reduces"], -(rec.get("kernel_num_gb") or 0))


# ---------------------------------------------------------------------------------------- main

COLUMNS = ["model", "mode", "kernel", "kind", "config", "kernel_num_gb", "ttir_ops", "preview_exact",
           "preview_fast", "fired", "check", "base_ms", "base2_ms", "cand_ms", "speedup", "noise",
           "frac_of_copy_bw", "error"]


def run_model(model: str, mode: str, args, cache_dir: str, bandwidth: float, deadline: float) -> list[dict]:
    import torch

    before = kernel_files(cache_dir)
    t0 = time.time()
    _common.log(f"== {model} {mode}: compiling and running one step")
    model_step(model, mode, args.batch)
    paths = sorted(kernel_files(cache_dir) - before)
    _common.log(f"   {len(paths)} new kernel modules in {time.time() - t0:.0f} s")
    modules = loaded_modules()
    records, handles = [], {}
    for path in paths:
        rec, handle = analyze(path, modules, model, mode)
        records.append(rec)
        if handle is not None and rec.get("exact_fires"):
            handles[rec["kernel"]] = handle
        if rec.get("error"):
            _common.log(f"   {rec['kernel']}: ERROR {rec['error']}")
    firing = sorted((r for r in records if r["kernel"] in handles), key=timing_order)
    _common.log(f"   exact passes fire in {len(firing)} kernels; timing up to {args.max_timed}")
    chosen = []
    for rec in firing:
        if len(chosen) >= args.max_timed or time.time() > deadline:
            rec["fired"] = "not timed (cap or time budget)"
            continue
        chosen.append((rec, handles[rec["kernel"]]))
    candidates = compile_candidates(chosen)
    for rec, (module, tuner, _) in chosen:
        if rec["kernel"] not in candidates:
            continue
        try:
            verify_and_time(rec, (module, tuner), candidates[rec["kernel"]])
            if rec.get("base_ms") and rec.get("kernel_num_gb"):  # achieved GB/s over copy GB/s
                rec["roofline_ms"] = rec["kernel_num_gb"] / bandwidth * 1e3
                rec["frac_of_copy_bw"] = rec["roofline_ms"] / rec["base_ms"]
        except Exception as error:  # noqa: BLE001
            rec["error"] = f"{type(error).__name__}: {error}"
        _common.log(f"   {rec['kernel']}: {rec.get('fired')}, check {rec.get('check')}, "
                    f"{rec.get('base_ms', float('nan')):.4f} / {rec.get('base2_ms', float('nan')):.4f} -> "
                    f"{rec.get('cand_ms', float('nan')):.4f} ms, speedup {rec.get('speedup', float('nan')):.3f}"
                    + (f" ERROR {rec['error']}" if rec.get("error") else ""))
    del candidates, handles, chosen
    torch._dynamo.reset()
    gc.collect()
    torch.cuda.empty_cache()
    return records


def _fires(recs: list[dict], key: str, name: str) -> int:
    return sum(bool(r.get(key, {}).get(name)) for r in recs)


def summarize(records: list[dict], runs: list[tuple[str, str]]) -> list[dict]:
    rows = []
    for model, mode in runs:
        recs = [r for r in records if r["model"] == model and r["mode"] == mode]
        timed = [r["speedup"] for r in recs if r.get("speedup")]
        kinds = {k: sum(r["kind"] == k for r in recs) for k in ("poi", "per", "red")}
        rows.append({
            "model": model, "mode": mode, "kernels": len(recs), "poi/per/red": "/".join(map(str, kinds.values())),
            "loads": _fires(recs, "preview_exact", "merge-redundant-loads"),
            "reduces": _fires(recs, "preview_exact", "merge-redundant-reduces"),
            "const(exact)": _fires(recs, "preview_exact", "constant-division"),
            "reassoc(fast)": _fires(recs, "preview_fast", "reassociate-division"),
            "const(fast)": _fires(recs, "preview_fast", "constant-division"),
            "timed": len(timed),
            "geomean": math.exp(sum(map(math.log, timed)) / len(timed)) if timed else None,
            "max": max(timed) if timed else None,
            "errors": sum(bool(r.get("error")) for r in recs),
        })
    return rows


def save(out_dir: str, env: dict, records: list[dict], failures: list[dict], runs: list, bandwidth: float,
         started: float) -> tuple[list[dict], list[str]]:
    """JSON + CSV, and up to 4 verified kernel modules where passes fire copied flat into out_dir."""
    examples = [r for r in records if r.get("check") == "pass"]
    examples.sort(key=lambda r: (-r["preview_exact"]["merge-redundant-loads"], -r.get("speedup", 0)))
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    copied = []
    for rec in examples[:4]:
        target = out / f"{rec['model']}_{rec['mode']}_{rec['kernel']}.py"
        shutil.copy(rec["file"], target)
        copied.append(target.name)
    summary = summarize(records, runs)
    json_path, csv_path = _common.write_results(
        out_dir, "inductor_passes", env, records, COLUMNS,
        {"copy_gbps": bandwidth, "model_failures": failures, "summary": summary, "examples": copied,
         "seconds": round(time.time() - started)})
    _common.log(f"wrote {json_path}, {csv_path}; examples {copied}; {time.time() - started:.0f} s")
    return summary, copied


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=_common.default_out_dir())
    parser.add_argument("--models", nargs="+", default=DEFAULT_MODELS, help=f"from {ALL_MODELS}")
    parser.add_argument("--mode", nargs="+", choices=["train", "infer"], default=None,
                        help="default: bert train+infer, timm models train")
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--max-timed", type=int, default=10, help="kernels timed per model and mode")
    parser.add_argument("--budget-s", type=float, default=420,
                        help="start no new model or timing after this many seconds (device calls stop at 600)")
    parser.add_argument("--emulate-division-rounding", action="store_true",
                        help="TORCHINDUCTOR_EMULATE_DIVISION_ROUNDING=1: div_rn instead of `/`")
    args = parser.parse_args()
    started = time.time()

    dirs = _common.bootstrap(inductor=True)
    os.environ["TORCHINDUCTOR_BENCHMARK_KERNEL"] = "1"
    os.environ["TORCHINDUCTOR_FORCE_DISABLE_CACHES"] = "1"  # torch.compiler.config.force_disable_caches
    if args.emulate_division_rounding:
        os.environ["TORCHINDUCTOR_EMULATE_DIVISION_ROUNDING"] = "1"
    _common.require_cuda("inductor_passes.py")  # imports torch: only after the environment is set
    import torch

    env = _common.environment()
    env.update(dirs)
    env["force_disable_caches"] = getattr(torch._inductor.config, "force_disable_caches", "missing")
    env["benchmark_kernel"] = getattr(torch._inductor.config, "benchmark_kernel", "missing")
    _common.log(f"{env['gpu']} (sm_{env['capability']}), torch {env['torch']}, triton {env['triton']}, "
                f"force_disable_caches={env['force_disable_caches']}")
    bandwidth = _common.copy_bandwidth_gbps()
    _common.log(f"device-to-device copy: {bandwidth:.0f} GB/s (read + write)")
    deadline = started + args.budget_s

    default_modes = {"bert": ["train", "infer"]}  # the timm models: train, as in seed 000
    runs = [(m, mode) for m in args.models for mode in (args.mode or default_modes.get(m, ["train"]))]
    records, failures = [], []
    for model, mode in runs:
        if time.time() > deadline:
            failures.append({"model": model, "mode": mode, "error": "skipped: time budget"})
            continue
        try:
            records += run_model(model, mode, args, dirs["TORCHINDUCTOR_CACHE_DIR"], bandwidth, deadline)
        except Exception as error:  # noqa: BLE001 - one model failing must not stop the others
            failures.append({"model": model, "mode": mode, "error": f"{type(error).__name__}: {error}"})
            _common.log(f"== {model} {mode}: ERROR {failures[-1]['error']}")
            torch._dynamo.reset()
            torch.cuda.empty_cache()
        save(args.out, env, records, failures, runs, bandwidth, started)  # partial results survive a kill

    summary, _ = save(args.out, env, records, failures, runs, bandwidth, started)
    for failure in failures:
        _common.log(f"model failure: {failure}")
    timed = [r for r in records if r.get("check")]
    if timed:
        _common.print_table(timed, ["model", "mode", "kernel", "fired", "check", "base_ms", "base2_ms",
                                    "cand_ms", "speedup"])
        _common.log("")
    _common.print_table(summary, list(summary[0]) if summary else ["model"])
    return 0


if __name__ == "__main__":
    sys.exit(main())
