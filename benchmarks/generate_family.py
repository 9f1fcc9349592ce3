"""Issue 25's first GPU check: ``tritune generate``'s kernel.py on sizes it was not generated for.

For each spec of ``benchmarks/generate_specs/`` named (default: bias_gelu_tanh), in one process:

1. ``tritune generate SPEC`` (model-free, ``--budget-s`` default 0: Inductor's configurations, no
   search; no benchmark of the spec's own cases) into ``WORK/NAME``;
2. an *unseen* spec beside it: the same ``reference``, and inputs at sizes none of the spec's cases
   has (``UNSEEN``: each dim of the spec's largest frame scaled, ``--base first`` its first; odd
   sizes, one with a single row, the bias following the last dim), in every dtype of the spec's cases;
3. ``check_job`` of kernel.py on the unseen spec (the same verification as every generated module:
   guards, poison, tolerance table, a launch required) and ``bench_job`` on it: kernel.py against
   eager and ``torch.compile`` (default mode; ``--modes`` for more), p50 of interleaved CUDA-event
   timings, and each one's fraction of the measured copy bandwidth.

Writes ``OUT/generate_family.json`` and ``OUT/generate_family.md`` (GPU, date, command, per spec,
dtype and size: served, verified, the three times and the roofline fractions).

    PYTHONPATH=src python3 benchmarks/generate_family.py --out $OUT [--specs bias_gelu_tanh softmax]
        [--budget-s 0] [--limit-s 420]
    TRITON_INTERPRET=1 TRITUNE_SPEC_SMALL=1 PYTHONPATH=src python3 benchmarks/generate_family.py \
        --out /tmp/gf --specs bias_relu --interpret                         # CPU smoke: verification only
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent
SPECS = BENCH / "generate_specs"
# factors of the spec's first frame, per dim (the last one scales the hidden size): odd sizes, a
# single row, shrinking and growing, none a size any case of the specs has
UNSEEN = [(0.25, 0.5, 1.0), (0.75, 0.37, 0.5), (1.0, 1.0 / 128, 1.0), (1.5, 1.3, 0.75), (2.0, 2.0, 1.25),
          (3.0, 1.7, 2.0)]

UNSEEN_SPEC = '''
import importlib.util
import torch

_spec = importlib.util.spec_from_file_location("_original", {path!r})
_original = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_original)
name = _original.name + "_unseen"
reference = _original.reference
SHAPES = {shapes!r}


def inputs(device):
    g = torch.Generator().manual_seed(1)
    made = []
    for dtype in {dtypes!r}:
        for frame in SHAPES:
            made.append((torch.randn(frame, generator=g).to(device, getattr(torch, dtype)),
                         torch.randn(frame[-1], generator=g).to(device, getattr(torch, dtype))))
    return made
'''


def odd(size: int) -> int:
    return size if size % 2 else size + 1


def unseen_frames(frame: tuple[int, ...]) -> list[tuple[int, ...]]:
    frames = []
    for factors in UNSEEN:
        frames.append(tuple(max(1, odd(round(d * f))) if f != 1.0 / 128 else 1 for d, f in zip(frame, factors)))
    return frames


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="gpu_state/generate_family")
    parser.add_argument("--specs", nargs="*", default=["bias_gelu_tanh"])
    parser.add_argument("--budget-s", type=float, default=0.0)
    parser.add_argument("--limit-s", type=float, default=420.0)
    parser.add_argument("--modes", nargs="*", default=["eager", "compile"])
    parser.add_argument("--base", choices=("largest", "first"), default="largest",
                        help="the case whose frame the unseen sizes scale")
    parser.add_argument("--interpret", action="store_true",
                        help="CPU smoke: Triton's interpreter (TRITON_INTERPRET=1, TRITUNE_SPEC_SMALL=1), no timings")
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH.parent / "src"))
    import torch

    from tritune.generate.bench import bench_job
    from tritune.generate.check import check_job
    from tritune.generate.run import GenerateSettings, generate
    from tritune.generate.spec import load_spec

    out, work = pathlib.Path(args.out), pathlib.Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    device = "cpu" if args.interpret else "cuda"
    results = {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (interpreter)",
               "torch": torch.__version__,
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "command": "python3 benchmarks/generate_family.py " + " ".join(sys.argv[1:]), "specs": {}}
    for name in args.specs:
        if time.monotonic() - begin > args.limit_s:
            results["specs"][name] = {"skipped": f"--limit-s {args.limit_s:g} reached"}
            continue
        spec_path = SPECS / f"{name}.py"
        started = time.monotonic()
        settings = GenerateSettings(budget_s=args.budget_s, bench=False, interpret=args.interpret)
        generated = generate(spec_path, work / name, settings,
                             log=lambda line: print(line, flush=True))
        entry = {"generate_s": round(time.monotonic() - started, 1), "family": generated.get("family"),
                 "check": (generated.get("check") or {}).get("message"), "notes": generated.get("notes")}
        kernel = work / name / "kernel.py"
        spec = load_spec(spec_path, device=device, check=False)
        cases = spec.cases(device)
        # the sizes scale the spec's largest frame (``--base smallest``: its first), so most are large
        frames = [tuple(c.tensors[0].shape) for c in cases]
        frame = frames[0] if args.base == "first" else max(frames, key=lambda f: (len(f), __import__("math").prod(f)))
        dtypes = list(dict.fromkeys(str(c.tensors[0].dtype).removeprefix("torch.") for c in cases))
        unseen = work / name / "unseen_spec.py"
        unseen.write_text(UNSEEN_SPEC.format(path=str(spec_path), shapes=unseen_frames(frame), dtypes=dtypes))
        if kernel.exists():
            check = check_job({"module": str(kernel), "spec": str(unseen), "device": device, "seed": 0,
                               "derived": False})
            entry["unseen_check"] = {"ok": check["ok"], "message": check["message"],
                                     "cases": [{k: c[k] for k in ("label", "shapes", "ok", "message")}
                                               for c in check["cases"]]}
            if not args.interpret:
                bench = bench_job({"modules": {"generated": str(kernel)}, "spec": str(unseen), "device": "cuda",
                                   "modes": args.modes})
                results.setdefault("copy_gbps", bench["copy_gbps"])
                entry["unseen_bench"] = bench["cases"]
        results["specs"][name] = entry
        (out / "generate_family.json").write_text(json.dumps(results, indent=1, default=str))
    (out / "generate_family.md").write_text(table(results))
    print(table(results))
    return 0


def table(results: dict) -> str:
    lines = [f"# kernel.py on sizes it was not generated for ({results['gpu']}, torch {results['torch']}, "
             f"{results['date']})", "", f"`{results['command']}`", "",
             "| spec | inputs | verified | generated p50 ms | eager | torch.compile | vs eager | vs compile | "
             "roofline (generated) |", "|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["specs"].items():
        if "skipped" in entry:
            lines.append(f"| {name} | {entry['skipped']} | | | | | | | |")
            continue
        checked = (entry.get("unseen_check") or {}).get("cases", [])
        verdicts = {c["shapes"]: c["ok"] for c in checked}
        for case in entry.get("unseen_bench") or [{"shapes": c["shapes"]} for c in checked]:
            times = case.get("times") or {}
            p50 = {k: (v or {}).get("p50") for k, v in times.items()}
            gen, eager, compiled = p50.get("generated"), p50.get("eager"), p50.get("compile")
            fraction = (case.get("roofline_fraction") or {}).get("generated")
            lines.append(f"| {name} | {case['shapes']} | {verdicts.get(case['shapes'])} | {_ms(gen)} | {_ms(eager)} | "
                         f"{_ms(compiled)} | {_x(eager, gen)} | {_x(compiled, gen)} | "
                         f"{'' if fraction is None else f'{fraction:.0%}'} |")
        lines.append(f"| {name} | family: {entry.get('family')}; generated in {entry.get('generate_s')} s | | | | | | | |")
    return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _x(base: float | None, new: float | None) -> str:
    return "-" if not base or not new else f"{base / new:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
