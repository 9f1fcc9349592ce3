"""Issue 14's benchmark: ``tritune generate`` (model-free) on seed 004's workloads, on the GPU.

    PYTHONPATH=src python3 benchmarks/generate.py --out $OUT [--specs bias_relu softmax]
        [--budget-s 60] [--limit-s 540] [--spec-timeout-s 560] [--work gpu_state/generate] [--retry-failed]
    python3 benchmarks/generate.py --table DIR [--out DIR2]     # the table again from DIR/*/generate.json

For every spec in ``benchmarks/generate_specs/`` (seed 004's bias + ReLU, bias + GELU, RMSNorm +
bias + scale, softmax, and residual add + LayerNorm and SwiGLU from real models) it runs
``python3 -m tritune generate SPEC --out WORK/NAME --budget-s N``, which verifies the generated kernel
and benchmarks it against eager, torch.compile and max-autotune-no-cudagraphs (``generate.json``).
Resumable: a spec whose ``generate.json`` exists is not run again (nor one that failed, unless
``--retry-failed``); no spec is started after ``--limit-s`` seconds, so one device call of 600 s
can end cleanly and the next one continue (``WORK`` stays on the machine while it is warm).

Then it writes ``OUT/generate.json`` and ``OUT/generate.md``: per spec, shape and dtype whether
the kernel verified, generated / eager / compile / max-autotune p50, the speedups over compile and
max-autotune, the roofline fraction; the three goals checked (every kernel verified; >= 90% of copy
bandwidth at the large shapes; faster than torch.compile on at least half of the cases); seed
004's published numbers beside ours (``SEED004``); GPU, date and command. Each spec's report,
kernel and log are copied to ``OUT/NAME/``.
"""

from __future__ import annotations

import datetime
import json
import math
import pathlib
import shutil
import subprocess
import sys
import time
from typing import Any, Iterable, Mapping, Sequence

import _common

BENCH = pathlib.Path(__file__).resolve().parent
SPECS = BENCH / "generate_specs"
LARGE_SHAPE = [16, 512, 2048]  # seed 004's largest shape: where the roofline goal applies
ROOFLINE_GOAL = 0.90
FASTER_SHARE_GOAL = 0.5
FASTER_MARGIN = 1.03  # p50 ratio a case must reach to count as faster: below it, the same within timing noise
KEPT = ("generate.json", "generate.log", "report.md", "report.html", "kernel.py", "*.png")  # copied to OUT/NAME
FAILED = "failed.json"
SPEC_TIMEOUT_S = 560  # one spec's tritune generate, killed after this: a device command may run 600 s
NAMES = ("generated", "eager", "compile", "max-autotune-no-cudagraphs")

# Seed 004's published numbers (its Tables I and II). Its "speedup" is unfused over fused mean
# time ("calculating speedup as the ratio of unfused to fused mean execution time"); its fused
# kernels are LLM-written, its unfused baseline is eager PyTorch. GPU: "Google Colab using T4 and
# A100 GPUs" (the tables do not say which). Table II does not name the activation; its baseline
# names both ("torch.nn.functional.relu() and torch.nn.functional.gelu()"), so it stands beside
# both of our bias + activation specs.
SEED004 = {
    "source": ("seed 004, Shu, Gunaratnam, Rakasi, 'LLM-Driven Triton Kernel Generation with Iterative "
               "Compiler Feedback', Table I (RMS normalization + bias fusion) and Table II (bias + "
               "activation fusion): 'All measurements are averaged over 200 iterations after 10 warmup runs'; "
               "hardware: 'Google Colab using T4 and A100 GPUs'"),
    "rows": [
        {"table": "I", "specs": ["rmsnorm_bias_scale"], "shape": [4, 128, 768], "dtype": "float32",
         "fused_ms": 0.16, "unfused_ms": 0.11, "speedup": 0.64},
        {"table": "I", "specs": ["rmsnorm_bias_scale"], "shape": [4, 128, 768], "dtype": "float16",
         "fused_ms": 0.21, "unfused_ms": 0.12, "speedup": 0.55},
        {"table": "I", "specs": ["rmsnorm_bias_scale"], "shape": [8, 256, 1024], "dtype": "float32",
         "fused_ms": 0.21, "unfused_ms": 0.38, "speedup": 1.79},
        {"table": "I", "specs": ["rmsnorm_bias_scale"], "shape": [8, 256, 1024], "dtype": "float16",
         "fused_ms": 0.18, "unfused_ms": 0.25, "speedup": 1.40},
        {"table": "II", "specs": ["bias_relu", "bias_gelu_tanh"], "shape": [4, 128, 768], "dtype": "float32",
         "fused_ms": 0.05, "unfused_ms": 0.04, "speedup": 0.83},
        {"table": "II", "specs": ["bias_relu", "bias_gelu_tanh"], "shape": [4, 128, 768], "dtype": "float16",
         "fused_ms": 0.05, "unfused_ms": 0.03, "speedup": 0.66},
        {"table": "II", "specs": ["bias_relu", "bias_gelu_tanh"], "shape": [8, 256, 1024], "dtype": "float32",
         "fused_ms": 0.11, "unfused_ms": 0.16, "speedup": 1.47},
        {"table": "II", "specs": ["bias_relu", "bias_gelu_tanh"], "shape": [8, 256, 1024], "dtype": "float16",
         "fused_ms": 0.08, "unfused_ms": 0.11, "speedup": 1.46},
    ],
}


# ------------------------------------------------------------------------------------ the runs

def spec_files(names: Sequence[str] | None = None) -> list[pathlib.Path]:
    """The spec files (``_*.py`` are not specs), or those named; an unknown name is an error."""
    found = {p.stem: p for p in sorted(SPECS.glob("*.py")) if not p.name.startswith("_")}
    unknown = [n for n in names or () if n not in found]
    if unknown:
        raise SystemExit(f"generate.py: no spec {unknown[0]!r} in {SPECS.name}/ ({', '.join(found)})")
    return [found[n] for n in names] if names else list(found.values())


def command(spec: pathlib.Path, out_dir: pathlib.Path, budget_s: float | None) -> list[str]:
    cmd = [sys.executable, "-m", "tritune", "generate", str(spec), "--out", str(out_dir)]
    return cmd + (["--budget-s", f"{budget_s:g}"] if budget_s is not None else [])


def run_spec(spec: pathlib.Path, out_dir: pathlib.Path, budget_s: float | None, *, retry_failed: bool = False,
             env: Mapping[str, str] | None = None, timeout_s: float = SPEC_TIMEOUT_S) -> str:
    """Run ``tritune generate`` on one spec unless done: "done" (already), "ran" (it wrote
    ``generate.json``: also when it exits 2 because no kernel verified, which the JSON says), or
    "failed" (``FAILED`` then holds the exit status and stderr's last lines); "skipped" when an
    earlier call failed and ``retry_failed`` is off."""
    if (out_dir / "generate.json").exists():
        return "done"
    if (out_dir / FAILED).exists() and not retry_failed:
        return "skipped"
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / FAILED).unlink(missing_ok=True)
    cmd = command(spec, out_dir, budget_s)
    started = time.monotonic()
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout_s)
        rc, stdout, stderr = proc.returncode, proc.stdout, proc.stderr
    except subprocess.TimeoutExpired as exc:
        rc, stdout, stderr = "timeout", _text(exc.stdout), _text(exc.stderr) + f"\ntimed out after {exc.timeout:.0f} s"
    (out_dir / "generate.log").write_text(f"$ {' '.join(cmd)}\n{stdout}\n--- stderr ---\n{stderr}\n--- exit {rc}\n")
    if (out_dir / "generate.json").exists():
        return "ran"
    tail = [line for line in stderr.splitlines() if line.strip()][-5:]
    (out_dir / FAILED).write_text(json.dumps({"rc": rc, "seconds": round(time.monotonic() - started, 1),
                                              "stderr_tail": tail}, indent=1))
    return "failed"


def _text(value: bytes | str | None) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else value or ""


def load_results(work: pathlib.Path, names: Iterable[str]) -> dict[str, dict]:
    """NAME -> its generate.json, or ``{"failed": one line}`` / ``{"missing": True}``."""
    out = {}
    for name in names:
        done, failed = work / name / "generate.json", work / name / FAILED
        if done.exists():
            out[name] = json.loads(done.read_text())
        elif failed.exists():
            body = json.loads(failed.read_text())
            out[name] = {"failed": f"exit {body.get('rc')}: " + (body.get("stderr_tail") or ["no output"])[-1]}
        else:
            out[name] = {"missing": True}
    return out


# ----------------------------------------------------------------------------------- the table

def _p50(times: Mapping[str, Any], name: str) -> float | None:
    stats = times.get(name)
    return stats.get("p50") if stats else None


def _ratio(base: float | None, value: float | None) -> float | None:
    return base / value if base and value else None


def build_rows(results: Mapping[str, Mapping[str, Any]]) -> list[dict]:
    """One row per spec and benchmarked case (shape, dtype); one row per spec that was not
    benchmarked, saying why."""
    rows = []
    for spec, result in results.items():
        bench, check = result.get("bench"), result.get("check") or {}
        if not bench or not bench.get("cases"):
            why = result.get("failed") or ("not run yet" if result.get("missing") else
                                           result.get("bench_error") or "no benchmark in generate.json")
            rows.append({"spec": spec, "label": None, "shape": None, "dtype": None, "shapes": None,
                         "verified": bool(check.get("ok")) if check else None, "status": why})
            continue
        verdicts = {c.get("label"): c.get("ok") for c in check.get("cases") or []}
        decided = (result.get("optimize") or {}).get("decided")
        origin = str(result.get("winner") or "-") + (f" + {decided} decision(s)" if decided else
                                                     ", untuned" if decided == 0 else "")
        for case in bench["cases"]:
            times = case.get("times") or {}
            p50 = {name: _p50(times, name) for name in NAMES}
            generated = times.get("generated") or {}
            eager = times.get("eager") or {}
            rows.append({
                "spec": spec, "label": case.get("label"), "shape": case.get("shape"), "dtype": case.get("dtype"),
                "shapes": case.get("shapes"), "status": "ok", "origin": origin,
                "verified": bool(check.get("ok")) and verdicts.get(case.get("label")) is not False,
                "p50_ms": p50,
                "vs_compile": _ratio(p50["compile"], p50["generated"]),
                "vs_max_autotune": _ratio(p50["max-autotune-no-cudagraphs"], p50["generated"]),
                "vs_eager_mean": _ratio(eager.get("mean"), generated.get("mean")),
                "generated_mean_ms": generated.get("mean"), "eager_mean_ms": eager.get("mean"),
                "roofline": (case.get("roofline_fraction") or {}).get("generated"),
                "large": list(case.get("shape") or []) == LARGE_SHAPE,
            })
    return rows


def check_goals(results: Mapping[str, Mapping[str, Any]], rows: Sequence[Mapping[str, Any]]) -> dict:
    """Issue 14's three goals, each with its counts and ``met`` (None when nothing measured it)."""
    unverified = sorted(s for s, r in results.items() if not (r.get("check") or {}).get("ok"))
    large = [r for r in rows if r.get("large")]
    at_roof = [r for r in large if r.get("roofline") is not None and r["roofline"] >= ROOFLINE_GOAL]
    below = [f"{r['spec']} {r['dtype']}: " + (f"{r['roofline']:.0%}" if r.get("roofline") is not None else "-")
             for r in large if r not in at_roof]
    compared = [r for r in rows if r.get("vs_compile") is not None]
    faster = [r for r in compared if r["vs_compile"] >= FASTER_MARGIN]  # a tie, or a ratio in the noise, is not
    return {
        "every_kernel_verified": {"met": not unverified and bool(results), "specs": len(results),
                                  "not_verified": unverified},
        "roofline_at_large_shapes": {"met": len(at_roof) == len(large) if large else None, "goal": ROOFLINE_GOAL,
                                     "cases": len(large), "at_goal": len(at_roof), "below": below},
        "faster_than_compile_on_half": {"met": len(faster) >= FASTER_SHARE_GOAL * len(compared) if compared else None,
                                        "cases": len(compared), "faster": len(faster), "margin": FASTER_MARGIN,
                                        "slower": sum(1 for r in compared if r["vs_compile"] <= 1 / FASTER_MARGIN)},
    }


def seed_rows(rows: Sequence[Mapping[str, Any]]) -> list[dict]:
    """Seed 004's rows with ours for the same spec, shape and dtype (its speedup metric: eager
    over fused mean time), and how we compare with torch.compile there."""
    ours = {(r["spec"], tuple(r["shape"] or ()), r["dtype"]): r for r in rows if r.get("status") == "ok"}
    out = []
    for seed in SEED004["rows"]:
        for spec in seed["specs"]:
            mine = ours.get((spec, tuple(seed["shape"]), seed["dtype"])) or {}
            out.append({"spec": spec, "table": seed["table"], "shape": seed["shape"], "dtype": seed["dtype"],
                        "seed_fused_ms": seed["fused_ms"], "seed_unfused_ms": seed["unfused_ms"],
                        "seed_speedup": seed["speedup"], "our_mean_ms": mine.get("generated_mean_ms"),
                        "our_eager_mean_ms": mine.get("eager_mean_ms"), "our_speedup": mine.get("vs_eager_mean"),
                        "our_vs_compile": mine.get("vs_compile")})
    return out


def _ms(value: float | None) -> str:
    return "-" if value is None or not math.isfinite(value) else f"{value:.4f}"


def _x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _shape(shape: Sequence[int] | None) -> str:
    return "(" + ", ".join(map(str, shape)) + ")" if shape else "-"


def _met(goal: Mapping[str, Any]) -> str:
    return {True: "met", False: "NOT met", None: "not measured"}[goal["met"]]


def render_markdown(env: Mapping[str, Any], rows: Sequence[Mapping[str, Any]], goals: Mapping[str, Any],
                    seeds: Sequence[Mapping[str, Any]]) -> str:
    lines = ["# tritune generate on seed 004's workloads (model-free path)", "",
             f"GPU: {env.get('gpu')}; torch {env.get('torch')}, triton {env.get('triton')}; "
             f"date {env.get('utc')}", "", f"Command: `{env.get('command')}`", "",
             "Times: p50 of 200 CUDA-event-timed runs after 10 warm-ups, L2 cleared before each run (ms). "
             "Speedups are p50 ratios; roofline: bytes (inputs read once, outputs written once) over p50, "
             "as a fraction of the measured copy bandwidth. kernel.py: what the generated module is (Inductor's "
             "kernels, untuned or with tritune's decisions, or the LLM's module).", "",
             "| spec | shape | dtype | verified | generated | eager | compile | max-autotune | vs compile | "
             "vs max-autotune | roofline | kernel.py |", "|" + "---|" * 12]
    for r in rows:
        if r.get("status") != "ok":
            verified = {True: "yes", False: "NO", None: "-"}[r.get("verified")]
            lines.append(f"| {r['spec']} | - | - | {verified} | {r['status']} | | | | | | | |")
            continue
        p50 = r["p50_ms"]
        roof = f"{r['roofline']:.0%}" if r.get("roofline") is not None else "-"
        lines.append(f"| {r['spec']} | {_shape(r['shape'])} | {r['dtype']} | {'yes' if r['verified'] else 'NO'} | "
                     f"{_ms(p50['generated'])} | {_ms(p50['eager'])} | {_ms(p50['compile'])} | "
                     f"{_ms(p50['max-autotune-no-cudagraphs'])} | {_x(r['vs_compile'])} | "
                     f"{_x(r['vs_max_autotune'])} | {roof} | {r.get('origin') or '-'} |")
    verified, roof, faster = (goals["every_kernel_verified"], goals["roofline_at_large_shapes"],
                              goals["faster_than_compile_on_half"])
    lines += ["", "Goals:", "",
              f"- every generated kernel verified: {_met(verified)} ({verified['specs'] - len(verified['not_verified'])}"
              f" of {verified['specs']} specs" + (f"; not: {', '.join(verified['not_verified'])}"
                                                    if verified["not_verified"] else "") + ")",
              f"- >= {roof['goal']:.0%} of copy bandwidth at {_shape(LARGE_SHAPE)}: {_met(roof)} ({roof['at_goal']} of "
              f"{roof['cases']} cases" + (f"; below: {', '.join(roof['below'])}" if roof["below"] else "") + ")",
              f"- faster than torch.compile on at least half of the cases: {_met(faster)} ({faster['faster']} of "
              f"{faster['cases']} at >= {faster.get('margin', 1.0):.2f}x p50; {faster.get('slower', 0)} slower by as "
              f"much; the rest the same within timing noise)", "",
              "Seed 004's numbers beside ours (its speedup: unfused eager over fused, mean times; ours the same "
              "ratio on our GPU, and ours over torch.compile):", "",
              "| spec | seed table | shape | dtype | seed fused ms | seed unfused ms | seed speedup | our fused ms | "
              "our eager ms | our speedup | ours vs compile |", "|" + "---|" * 11]
    for s in seeds:
        lines.append(f"| {s['spec']} | {s['table']} | {_shape(s['shape'])} | {s['dtype']} | {s['seed_fused_ms']:.2f} | "
                     f"{s['seed_unfused_ms']:.2f} | {s['seed_speedup']:.2f}x | {_ms(s['our_mean_ms'])} | "
                     f"{_ms(s['our_eager_mean_ms'])} | {_x(s['our_speedup'])} | {_x(s['our_vs_compile'])} |")
    lines += ["", f"Source: {SEED004['source']}.", ""]
    return "\n".join(lines)


def summarize(work: pathlib.Path, names: Sequence[str], env: Mapping[str, Any]) -> dict:
    results = load_results(work, names)
    rows = build_rows(results)
    return {"environment": dict(env), "rows": rows, "goals": check_goals(results, rows), "seed004": SEED004,
            "seed_comparison": seed_rows(rows)}


def write_outputs(summary: Mapping[str, Any], work: pathlib.Path, out: pathlib.Path) -> pathlib.Path:
    """OUT/generate.json, OUT/generate.md, and each spec's kept files under OUT/NAME."""
    out.mkdir(parents=True, exist_ok=True)
    (out / "generate.json").write_text(json.dumps(summary, indent=1, default=str))
    md = out / "generate.md"
    md.write_text(render_markdown(summary["environment"], summary["rows"], summary["goals"],
                                  summary["seed_comparison"]))
    if work.resolve() != out.resolve():
        for spec_dir in sorted(p for p in work.iterdir() if p.is_dir()):
            for pattern in (*KEPT, FAILED):
                for path in spec_dir.glob(pattern):
                    (out / spec_dir.name).mkdir(exist_ok=True)
                    shutil.copy2(path, out / spec_dir.name / path.name)
    return md


# ---------------------------------------------------------------------------------------- main

def parse(argv: list[str] | None = None):
    parser = _common.OneLineParser(prog="generate.py", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=pathlib.Path, default=None, help="summary and copies (default $OUT)")
    parser.add_argument("--work", type=pathlib.Path, default=pathlib.Path("gpu_state/generate"),
                        help="per-spec tritune generate output, kept between calls")
    parser.add_argument("--specs", nargs="+", default=None, metavar="NAME")
    parser.add_argument("--budget-s", type=float, default=60, help="tritune generate --budget-s per spec")
    parser.add_argument("--spec-timeout-s", type=float, default=SPEC_TIMEOUT_S,
                        help="kill one spec's tritune generate after this (then recorded as failed)")
    parser.add_argument("--limit-s", type=float, default=540, help="start no spec after this many seconds")
    parser.add_argument("--retry-failed", action="store_true")
    parser.add_argument("--table", type=pathlib.Path, default=None, metavar="DIR",
                        help="only rebuild the table from DIR/NAME/generate.json (no GPU)")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    chosen = spec_files(args.specs)
    names = [p.stem for p in spec_files()]  # the table has every spec; those not run yet say so
    if args.table is not None:
        previous = args.table / "generate.json"
        env = json.loads(previous.read_text())["environment"] if previous.exists() else {}
        md = write_outputs(summarize(args.table, names, env), args.table, args.out or args.table)
        print(md.read_text())
        return 0
    _common.bootstrap(inductor=True)
    _common.require_cuda("generate.py")
    from tritune import config

    env_vars = config.environment({config.ENV_PYTHONPATH: config.python_path_first(str(_common.REPO / "src"))})
    work, out = args.work.absolute(), (args.out or pathlib.Path(_common.default_out_dir()) / "generate").absolute()
    started = time.monotonic()
    for spec in chosen:
        if time.monotonic() - started > args.limit_s:
            _common.log(f"{spec.stem}: not started (--limit-s {args.limit_s:g} reached); run again to continue")
            continue
        status = run_spec(spec, work / spec.stem, args.budget_s, retry_failed=args.retry_failed, env=env_vars,
                          timeout_s=args.spec_timeout_s)
        _common.log(f"{spec.stem}: {status} ({time.monotonic() - started:.0f} s)")
    env = {**_common.environment(), "date": datetime.date.today().isoformat()}
    md = write_outputs(summarize(work, names, env), work, out)
    print(md.read_text())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
