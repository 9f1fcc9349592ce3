"""Issue 25's benchmark: ``tritune generate``'s kernel.py on sizes it was not generated for.

For each spec of ``benchmarks/generate_specs/`` named (default: all), in one process:

1. ``tritune generate SPEC`` (model-free; ``--budget-s`` for the search, default 0: Inductor's
   configurations; ``--bench-cases``: generate's own benchmark of the spec's cases against eager,
   torch.compile and max-autotune-no-cudagraphs) into ``WORK/NAME``, its kernel.py, generate.json,
   report and log copied to ``OUT/NAME/``;
2. an *unseen* spec beside it: the same ``reference``, and inputs at sizes none of the spec's cases
   has (``unseen_frames``: two per order of magnitude from 1e5 to 1e7 elements of the largest case's
   frame; one of each two keeps that case's last dim, as a model's hidden size stays while batch and
   sequence change, the other has an odd last dim no case has), each input resized as its frame is
   (``derive.resized``: a bias follows the last dim), in every dtype pattern of the spec's cases;
3. ``check_job`` of kernel.py on the unseen spec (the same verification as every generated module:
   guards, poison, tolerance table, a launch required) and ``bench_job`` on it: kernel.py
   ("generated"), the same module with its tuning off (``TUNED = False``: Inductor's configuration
   for the family's example and the general kernels, "general"), eager and ``torch.compile``
   (default mode, a static kernel per shape; ``--modes`` for more), p50 of interleaved CUDA-event
   timings, and each one's fraction of the measured copy bandwidth.

Writes ``OUT/generate_family.json`` and ``OUT/generate_family.md`` (GPU, date, command, per spec,
dtype and size: verified, the times, the ratios and the roofline fractions), after every spec; with
``--graph`` also ``OUT/generate_graph.md``: the GPU's own time per call of the same contenders at the
spec's cases and the unseen sizes, from CUDA graph replays (``graph_times``), and its fraction of the
copy bandwidth. Below about 1e7 elements, a p50 of ``bench_job`` measures Python's launch path as
much as the GPU (session 9); the graph's time does not.

    PYTHONPATH=src python3 benchmarks/generate_family.py --out $OUT [--specs bias_gelu_tanh softmax]
        [--budget-s 0] [--bench-cases] [--limit-s 420]
    TRITON_INTERPRET=1 TRITUNE_SPEC_SMALL=1 PYTHONPATH=src python3 benchmarks/generate_family.py \
        --out /tmp/gf --specs bias_relu --interpret                         # CPU smoke: verification only
"""

from __future__ import annotations

import argparse
import datetime
import json
import pathlib
import shutil
import sys
import time

BENCH = pathlib.Path(__file__).resolve().parent
SPECS = BENCH / "generate_specs"
ORDERS = (1e5, 3e5, 1e6, 3e6, 1e7, 3e7)  # elements of the unseen frames: two per order of magnitude
KEPT = ("generate.json", "generate.log", "report.md", "kernel.py")  # copied to OUT/NAME

UNSEEN_SPEC = '''
import importlib.util
import torch

from tritune.generate.derive import resized

_spec = importlib.util.spec_from_file_location("_original", {path!r})
_original = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_original)
name = _original.name + "_unseen"
reference = _original.reference
FRAMES = {frames!r}  # per dtype pattern: the largest case's frame, then the unseen frames


def inputs(device):
    g = torch.Generator().manual_seed(1)
    largest = {{}}
    for case in _original.inputs("cpu"):
        key = tuple(str(t.dtype) for t in case if isinstance(t, torch.Tensor))
        if key not in largest or sum(t.numel() for t in case) > sum(t.numel() for t in largest[key]):
            largest[key] = case
    made = []
    for case in largest.values():
        frame, targets = FRAMES[0], FRAMES[1:]
        for target in targets:
            made.append(tuple(torch.randn(resized(tuple(t.shape), tuple(frame), tuple(target)), generator=g)
                              .to(device, t.dtype) if isinstance(t, torch.Tensor) else t for t in case))
    return made
'''


def odd(size: int) -> int:
    return size if size % 2 else size + 1


def unseen_frames(frame: tuple[int, ...], orders: tuple[float, ...] = ORDERS) -> list[tuple[int, ...]]:
    """Per order of magnitude in ``ORDERS``, a frame of about that many elements of ``frame``'s rank:
    the even ones keep ``frame``'s last dim, the odd ones take an odd last dim (``frame``'s times
    1.37) no case has; the leading dims share the rest, odd."""
    frames = []
    for number, elements in enumerate(orders):
        last = frame[-1] if number % 2 == 0 else odd(round(frame[-1] * 1.37))
        if len(frame) == 1:
            frames.append((odd(int(elements)),))
            continue
        rows = max(1, round(elements / last))
        lead = len(frame) - 1
        first = max(2, round(rows ** (1 / lead) / 4)) if lead > 1 else rows  # a few batches of longer rows
        rest = [odd(max(1, round((rows / first) ** (1 / max(1, lead - 1)))))] * (lead - 1)
        frames.append(tuple([first] + rest + [last]) if lead > 1 else (rows, last))
    return frames


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--work", default="gpu_state/generate_family")
    parser.add_argument("--specs", nargs="*", default=None, help="default: every spec of generate_specs/")
    parser.add_argument("--budget-s", type=float, default=0.0)
    parser.add_argument("--bench-cases", action="store_true", help="generate's own benchmark of the spec's cases")
    parser.add_argument("--limit-s", type=float, default=420.0, help="start no spec after this many seconds")
    parser.add_argument("--modes", nargs="*", default=["eager", "compile"])
    parser.add_argument("--graph", action="store_true",
                        help="also the GPU's own time at the spec's cases and the unseen sizes: each callable replayed "
                             "from a CUDA graph (triton.testing.do_bench_cudagraph), no host launch path in it "
                             "(OUT/generate_graph.md)")
    parser.add_argument("--graph-only", action="store_true",
                        help="with --graph: no interleaved CUDA-event p50s and no host costs (the device time they take)")
    parser.add_argument("--interpret", action="store_true",
                        help="CPU smoke: Triton's interpreter (TRITON_INTERPRET=1, TRITUNE_SPEC_SMALL=1), no timings")
    args = parser.parse_args()
    sys.path.insert(0, str(BENCH.parent / "src"))
    import torch

    from tritune.bench.timing import copy_bandwidth_gbps
    from tritune.generate.bench import bench_job
    from tritune.generate.check import check_job
    from tritune.generate.run import GenerateSettings, generate
    from tritune.generate.spec import load_spec

    out, work = pathlib.Path(args.out), pathlib.Path(args.work)
    out.mkdir(parents=True, exist_ok=True)
    begin = time.monotonic()
    device = "cpu" if args.interpret else "cuda"
    names = args.specs or sorted(p.stem for p in SPECS.glob("*.py"))
    results = {"gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else "none (interpreter)",
               "torch": torch.__version__,
               "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
               "command": "python3 benchmarks/generate_family.py " + " ".join(sys.argv[1:]), "specs": {}}
    for name in names:
        if time.monotonic() - begin > args.limit_s:
            results["specs"][name] = {"skipped": f"--limit-s {args.limit_s:g} reached"}
            continue
        spec_path = SPECS / f"{name}.py"
        started = time.monotonic()
        settings = GenerateSettings(budget_s=args.budget_s, bench=args.bench_cases and not args.interpret,
                                    interpret=args.interpret)
        try:
            generated = generate(spec_path, work / name, settings, log=lambda line: print(line, flush=True))
        except Exception as exc:  # noqa: BLE001 - one spec's failure is its row; the others still run
            generated = {"error": f"{type(exc).__name__}: {exc}"[:400]}
        entry = {"generate_s": round(time.monotonic() - started, 1), "family": generated.get("family"),
                 "check": (generated.get("check") or {}).get("message"), "notes": generated.get("notes"),
                 "error": generated.get("error")}
        (out / name).mkdir(exist_ok=True)
        for kept in KEPT:
            if (work / name / kept).exists():
                shutil.copyfile(work / name / kept, out / name / kept)
        kernel = work / name / "kernel.py"
        spec = load_spec(spec_path, device=device, check=False)
        cases = spec.cases(device)
        largest = max(cases, key=lambda c: sum(t.numel() for t in c.tensors if isinstance(t, torch.Tensor)))
        frame = tuple(torch.broadcast_shapes(*[t.shape for t in largest.tensors if isinstance(t, torch.Tensor)]))
        # the interpreter's smoke: a hundredth of the elements
        frames = unseen_frames(frame, ORDERS if not args.interpret else tuple(n / 100 for n in ORDERS))
        unseen = work / name / "unseen_spec.py"
        unseen.write_text(UNSEEN_SPEC.format(path=str(spec_path), frames=[list(frame)] + [list(f) for f in frames]))
        if kernel.exists():
            check = check_job({"module": str(kernel), "spec": str(unseen), "device": device, "seed": 0,
                               "derived": False})
            entry["unseen_check"] = {"ok": check["ok"], "message": check["message"],
                                     "cases": [{k: c[k] for k in ("label", "shapes", "ok", "message")}
                                               for c in check["cases"]]}
            general = work / name / "kernel_general.py"  # the same module, its tuning off
            text = kernel.read_text()
            general.write_text(text.replace("\nTUNED = True\n", "\nTUNED = False\n"))
            if not args.interpret:
                modules = {"generated": str(kernel)}
                if "\nTUNED = True\n" in text:
                    modules["general"] = str(general)
                if not (args.graph and args.graph_only):
                    bench = bench_job({"modules": modules, "spec": str(unseen), "device": "cuda", "modes": args.modes})
                    results.setdefault("copy_gbps", bench["copy_gbps"])
                    entry["unseen_bench"] = bench["cases"]
                else:
                    results.setdefault("copy_gbps", copy_bandwidth_gbps("cuda"))
                if args.graph:
                    for field, path in (("graph_seed_ms", spec_path), ("graph_ms", unseen)):
                        try:
                            entry[field] = graph_times(modules, path)
                        except Exception as exc:  # noqa: BLE001 - a diagnostic, as host_costs
                            entry[field] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
                    own = [c for c in (generated.get("check") or {}).get("cases", []) if c["label"].startswith("spec ")]
                    entry["seed_verified"] = {c["shapes"]: c["ok"] for c in own}
                try:
                    if not (args.graph and args.graph_only):
                        entry["host_us"] = host_costs(modules, unseen)
                except Exception as exc:  # noqa: BLE001 - a diagnostic: its failure is a line, not the run's end
                    entry["host_us"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        results["specs"][name] = entry
        (out / "generate_family.json").write_text(json.dumps(results, indent=1, default=str))
        (out / "generate_family.md").write_text(table(results))
        if args.graph:
            (out / "generate_graph.md").write_text(graph_table(results))
    (out / "generate_family.md").write_text(table(results))
    print(table(results))
    return 0


def contenders(modules: dict[str, str], reference) -> dict:
    """What a diagnostic compares, by name: each module's ``run`` (a fresh import), eager, and
    torch.compile (default mode, static shapes, Dynamo reset first)."""
    import torch

    from tritune.imports import import_file

    runs = {name: import_file(path, fresh=True).run for name, path in modules.items()}
    runs["eager"] = reference
    torch._dynamo.reset()
    runs["compile"] = torch.compile(reference, dynamic=False)
    return runs


def host_costs(modules: dict[str, str], spec_path: pathlib.Path, calls: int = 300, device: str = "cuda") -> dict:
    """What one call costs the host, in microseconds, at the smallest unseen size of each dtype
    pattern (where the GPU's work is a few microseconds, so a call's time is its launch path):
    ``calls`` calls in a row without a synchronization, after warm-up, for each module, eager and
    torch.compile (default mode, compiled for the shape first). Python's launch path is what
    makes a small size's time, for kernel.py and torch.compile alike."""
    import torch

    from tritune.generate.spec import load_spec, shapes_text

    spec = load_spec(spec_path, device=device, check=False)
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    smallest: dict[tuple, object] = {}
    for case in spec.cases(device):
        key = tuple(str(t.dtype) for t in case.tensors if isinstance(t, torch.Tensor))
        smallest.setdefault(key, case)  # the spec's first frame of each pattern is its smallest
    costs = {}
    for case in smallest.values():
        runs = contenders(modules, spec.reference)
        row = {}
        for name, fn in runs.items():
            for _ in range(20):
                fn(*case.tensors)
            sync()
            began = time.perf_counter()
            for _ in range(calls):
                fn(*case.tensors)
            row[name] = round((time.perf_counter() - began) / calls * 1e6, 1)
            sync()
        costs[shapes_text(case.tensors)] = row
        torch._dynamo.reset()
    return costs


def graph_times(modules: dict[str, str], spec_path: pathlib.Path, least: float = 0) -> dict:
    """The GPU's own time (ms per call, median of ``do_bench_cudagraph``'s replays) of each module,
    eager and torch.compile at the spec's cases of ``least`` elements and more, with the bytes
    each call moves (``io_bytes``): each callable captured in a CUDA graph after warm-up, so no
    host launch path is timed. One replay calls it on enough copies of the inputs, in turn, that
    they and their outputs fill four times the GPU's L2 cache, so each call reads from DRAM as
    in a model (the time is the replay's over the copies)."""
    import math

    import torch
    import triton.testing

    from tritune.generate.bench import io_bytes
    from tritune.generate.spec import load_spec, shapes_text

    spec = load_spec(spec_path, device="cuda", check=False)
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    found = {}
    for case in spec.cases("cuda"):
        if max(math.prod(t.shape) for t in case.tensors if isinstance(t, torch.Tensor)) < least:
            continue
        nbytes = io_bytes(case.tensors, spec.reference(*case.tensors))
        copies = [case.tensors] + [tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in case.tensors)
                                   for _ in range(min(63, math.ceil(4 * l2 / max(1, nbytes)) - 1))]
        runs = contenders(modules, spec.reference)
        row: dict = {"bytes": nbytes, "copies": len(copies)}
        for name, fn in runs.items():
            for _ in range(3):
                fn(*case.tensors)  # compiles: Triton's specializations and timed configurations, torch.compile's graph
            torch.cuda.synchronize()
            ms = triton.testing.do_bench_cudagraph(lambda fn=fn: [fn(*args) for args in copies], rep=50,
                                                   return_mode="median")
            row[name] = round(ms / len(copies), 6)
        found[shapes_text(case.tensors)] = row
        torch._dynamo.reset()
    return found


def graph_table(results: dict) -> str:
    """Per spec and dtype, the spec's own cases and then the unseen sizes: the GPU's time per call
    (``graph_times``) of kernel.py, its general form, eager and torch.compile; the ratios; each
    one's fraction of the copy bandwidth; whether kernel.py was verified at that size."""
    copy = results.get("copy_gbps")
    lines = [f"# kernel.py's GPU time ({results['gpu']}, torch {results['torch']}, {results['date']})", "",
             f"`{results['command']}`", "",
             "ms per call from CUDA graph replays (no host launch path; inputs rotated over copies that fill 4x the "
             f"L2 cache). Copy bandwidth {copy and round(copy)} GB/s; fraction: bytes (inputs read once, outputs "
             "written once) per time over it. `seed` rows are the spec's own cases (verified by generate's check), "
             "`unseen` rows sizes no case has (verified by check_job on them).", "",
             "| spec | | inputs | verified | generated | general | eager | torch.compile | vs eager | vs compile | "
             "of copy BW | compile's |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["specs"].items():
        if "skipped" in entry:
            continue
        unseen = {c["shapes"]: c["ok"] for c in (entry.get("unseen_check") or {}).get("cases", [])}
        for kind, rows, verdicts in (("seed", entry.get("graph_seed_ms") or {}, entry.get("seed_verified") or {}),
                                     ("unseen", entry.get("graph_ms") or {}, unseen)):
            if "error" in rows:
                lines.append(f"| {name} | {kind} | {rows['error']} | | | | | | | | | |")
                continue
            for shapes, row in sorted(rows.items(), key=lambda item: (item[0].split("[")[0], item[1]["bytes"])):
                gen, general, eager, compiled = (row.get(k) for k in ("generated", "general", "eager", "compile"))
                lines.append(f"| {name} | {kind} | {shapes} | {_yes(verdicts.get(shapes))} | {_ms(gen)} | "
                             f"{_ms(general)} | {_ms(eager)} | {_ms(compiled)} | {_x(eager, gen)} | {_x(compiled, gen)} | "
                             f"{_share(row['bytes'], gen, copy)} | {_share(row['bytes'], compiled, copy)} |")
    return "\n".join(lines) + "\n"


def _yes(value: bool | None) -> str:
    return "?" if value is None else "yes" if value else "NO"


def _share(nbytes: int, ms: float | None, copy_gbps: float | None) -> str:
    fraction = share(nbytes, ms, copy_gbps)
    return "-" if fraction is None else f"{fraction:.0%}"


def share(nbytes: int, ms: float | None, copy_gbps: float | None) -> float | None:
    """``nbytes`` moved in ``ms`` as a fraction of the copy bandwidth (``bench.roofline``'s)."""
    from tritune.bench import roofline

    return roofline.roofline_fraction(roofline.achieved_gbps(nbytes, ms), copy_gbps)


def table(results: dict) -> str:
    lines = [f"# kernel.py on sizes it was not generated for ({results['gpu']}, torch {results['torch']}, "
             f"{results['date']})", "", f"`{results['command']}`", "",
             "| spec | inputs | verified | generated p50 ms | general | eager | torch.compile | vs general | vs eager | "
             "vs compile | roofline (generated) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, entry in results["specs"].items():
        if "skipped" in entry:
            lines.append(f"| {name} | {entry['skipped']} | | | | | | | | | |")
            continue
        checked = (entry.get("unseen_check") or {}).get("cases", [])
        verdicts = {c["shapes"]: c["ok"] for c in checked}
        for case in entry.get("unseen_bench") or [{"shapes": c["shapes"]} for c in checked]:
            times = case.get("times") or {}
            p50 = {k: (v or {}).get("p50") for k, v in times.items()}
            gen, general, eager, compiled = (p50.get(k) for k in ("generated", "general", "eager", "compile"))
            fraction = (case.get("roofline_fraction") or {}).get("generated")
            lines.append(f"| {name} | {case['shapes']} | {verdicts.get(case['shapes'])} | {_ms(gen)} | {_ms(general)} | "
                         f"{_ms(eager)} | {_ms(compiled)} | {_x(general, gen)} | {_x(eager, gen)} | "
                         f"{_x(compiled, gen)} | {'' if fraction is None else f'{fraction:.0%}'} |")
        lines.append(f"| {name} | family: {entry.get('family')}; generated in {entry.get('generate_s')} s"
                     f"{'; ' + entry['error'] if entry.get('error') else ''} | | | | | | | | | |")
        for shapes, row in (entry.get("graph_ms") or {}).items():
            lines.append(f"| {name} | GPU ms (CUDA graph) at {shapes}: "
                         + (", ".join(f"{k} {v}" for k, v in row.items()) if isinstance(row, dict) else str(row))
                         + " | | | | | | | | | |")
        for shapes, row in (entry.get("host_us") or {}).items():
            lines.append(f"| {name} | host µs per call at {shapes}: "
                         + (", ".join(f"{k} {v}" for k, v in row.items()) if isinstance(row, dict) else str(row))
                         + " | | | | | | | | | |")
    return "\n".join(lines) + "\n"


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def _x(base: float | None, new: float | None) -> str:
    return "-" if not base or not new else f"{base / new:.2f}x"


if __name__ == "__main__":
    sys.exit(main())
