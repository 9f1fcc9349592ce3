"""The report of ``tritune generate``: ``DIR/report.md``, ``DIR/report.html`` (self-contained) and
one bar plot per benchmarked case (``DIR/bench_<n>_<case>.png``), from generate's summary dict.

It says which path won (Inductor, model-free, or the LLM) and why; whether Inductor fused the spec
into one kernel; the verification of every case (shapes, verdict, worst element); the benchmark
(mean / p50 / p95 per name, speedups over eager, torch.compile and max-autotune, roofline
fraction), or, without a GPU, that no time was measured; the optimization decisions; the LLM's
attempts and cost; and the run's notes.

``result`` keys read (all optional; ``tritune.generate.run`` writes them): ``spec``, ``name``,
``device``, ``winner`` ("inductor" | "llm"), ``paths`` (name -> module path; ``kernel`` is the
emitted one; a dict with ``module``/``ok``/``message`` is read too), ``check`` (``check_job``'s
result for the winner), ``bench`` (``bench_job``'s result, the winner's times also under
``generated``, or None), ``optimize`` (a dict: its scalars listed, a dict as a list, a list of
dicts as a table), ``llm`` (``generate_with_llm``'s result), ``fused``, ``kernels``, ``notes``;
and, where the caller has them, ``why`` (one line: why the winner won) and ``bench_error`` (why
a GPU benchmark did not run).

The blocks, their Markdown/HTML rendering (with escaping of user text), the two files written with
every secret scrubbed (``report.write.write_pages``) and the plots' matplotlib loading are
``tritune.report``'s; the worst element's wording is verification's (``verify.compare.Worst``), the
cost line the LLM family's (``llm.family.Cost``). What is generation's own: what is said, from
``generate.json``'s summary (which path won and why, fusion, the cases, the benchmark against eager
and torch.compile, the LLM's attempts) and the per-case bar plot.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from tritune.bench.render import fmt_ms
from tritune.generate import bench as gbench
from tritune.generate.bench import GENERATED
from tritune.llm.family import Cost
from tritune.report import plots
from tritune.report.blocks import Block, Heading, Image, Items, Para, Table
from tritune.report.document import fmt_pct, fmt_x
from tritune.report.write import write_pages
from tritune.verify.compare import Worst

NO_BENCH = "timings not measured: no GPU (verified under Triton's interpreter)"
PATH_NAMES = {"inductor": "Inductor (model-free)", "llm": "the LLM"}
COLORS = {gbench.EAGER: plots.BEFORE, gbench.COMPILE: "#ff7f0e", gbench.MAX_AUTOTUNE: "#2ca02c"}
MODULE_COLOR = plots.AFTER
BENCH_HEADERS = ("case", "shapes", "name", "mean", "p50", "p95", "vs eager", "vs compile", "vs max-autotune",
                 "roofline")


def write_report(out_dir: Path, result: Mapping[str, Any]) -> list[Path]:
    """Write report.md, report.html and the plots into ``out_dir`` (created); returns their paths
    (the two reports first). Without matplotlib the reports say the plots were skipped."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    images, note = draw_plots(out_dir, result)
    md, page = write_pages(build(result, images, note), out_dir, title=f"tritune generate report: {result.get('name')}")
    return [md, page, *(image.path for image in images)]


# ------------------------------------------------------------------------------------- blocks

def build(result: Mapping[str, Any], images: Sequence[Image] = (), plot_note: str | None = None) -> list[Block]:
    blocks: list[Block] = [Heading(1, f"tritune generate: {result.get('name')}"), Items(header_items(result))]
    blocks += [Heading(2, "Which path won"), Para(winner_text(result)), Para(fusion_text(result))]
    blocks += verification_blocks(result.get("check"))
    blocks += bench_blocks(result, images, plot_note)
    blocks += optimize_blocks(result.get("optimize"))
    blocks += llm_blocks(result.get("llm"))
    if result.get("notes"):
        blocks += [Heading(2, "Notes"), Items([str(n) for n in result["notes"]])]
    return blocks


def header_items(result: Mapping[str, Any]) -> list[str]:
    items = [f"spec: {result.get('spec') or '-'}", f"winner: {path_name(result.get('winner'))}"]
    if result.get("kernels"):
        items.append(f"Inductor's kernels: {', '.join(map(str, result['kernels']))}")
    for name, entry in (result.get("paths") or {}).items():
        module = entry.get("module") if isinstance(entry, Mapping) else entry
        if module:
            items.append(f"{'emitted module' if name == 'kernel' else path_name(name) + ' module'}: {module}")
    return items


def path_name(name: str | None) -> str:
    return PATH_NAMES.get(name or "", name or "none")


def winner_text(result: Mapping[str, Any]) -> str:
    """Which path won and why: the caller's ``why``; else both paths' times when both were
    benchmarked (p50 summed over the cases, as ``run`` picks); else what became of the other path."""
    winner = result.get("winner")
    if not winner:
        return "No path produced a verified kernel."
    text = f"{path_name(winner)} won"
    if result.get("why"):
        return f"{text}: {result['why']}"
    other = "llm" if winner == "inductor" else "inductor"
    timed = _p50_sums(result.get("bench"), (winner, other))
    if timed is not None:
        return (f"{text}: both verified; p50 summed over the cases: {path_name(winner)} {timed[0]:.4f} ms, "
                f"{path_name(other)} {timed[1]:.4f} ms.")
    entry = (result.get("paths") or {}).get(other)
    if isinstance(entry, Mapping) and entry.get("ok") is False:
        return f"{text}: {path_name(other)} produced no verified kernel ({entry.get('message') or 'no reason given'})."
    if other == "llm":
        llm = result.get("llm")
        if llm is None:
            return f"{text}: it was the only path run (no --llm)."
        if not llm.get("best"):
            return f"{text}: the LLM produced no verified kernel in {len(llm.get('attempts') or [])} attempt(s)."
        return f"{text}: both verified; without timings (no GPU) the model-free module is preferred."
    if entry is None:
        return f"{text}: the model-free path did not run (it needs a GPU)."
    return f"{text}: the model-free module did not verify (see the notes)."


def _p50_sums(bench: Mapping[str, Any] | None, names: Sequence[str]) -> list[float] | None:
    """Each name's p50 summed over the cases where every one of ``names`` has a time; None when
    no case has them all."""
    cases = [case.get("times") or {} for case in (bench or {}).get("cases") or []]
    cases = [times for times in cases if all(times.get(name) for name in names)]
    if not cases:
        return None
    return [sum(times[name]["p50"] for times in cases) for name in names]


def fusion_text(result: Mapping[str, Any]) -> str:
    kernels = [str(k) for k in result.get("kernels") or []]
    fused = result.get("fused")
    if fused is None:
        return "Inductor's kernels were not examined (the model-free path did not run)."
    if fused:
        return f"Inductor fused the spec into one kernel{': ' + kernels[0] if len(kernels) == 1 else ''}."
    listed = f" ({len(kernels)}: {', '.join(kernels)})" if kernels else ""
    return f"Inductor did NOT fuse the spec into one kernel{listed}; the emitted module launches what it produced."


def verification_blocks(check: Mapping[str, Any] | None) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Verification")]
    if not check:
        return blocks + [Para("No verification result.", warning=True)]
    verdict = "every case verified" if check.get("ok") else \
        f"FAILED: {check.get('failure') or 'failure'}: {check.get('message') or ''}".rstrip(": ")
    blocks.append(Para(f"{verdict}; Triton kernel launches seen while run() ran: {check.get('launches', '-')}.",
                       warning=not check.get("ok")))
    rows = [[str(c.get("label")), str(c.get("shapes")),
             "yes" if c.get("ok") else "not served" if c.get("ok") is None else "NO", worst_text(c)]
            for c in check.get("cases") or []]
    if rows:
        blocks.append(Table(("case", "shapes", "verified", "worst element"), rows))
    return blocks


def worst_text(case: Mapping[str, Any]) -> str:
    """A failed case's message; for a verified one, its element closest to failing."""
    if not case.get("ok") and case.get("message"):
        return str(case["message"])
    outputs = [o for o in case.get("outputs") or [] if o.get("worst")]
    if not outputs:
        return str(case.get("message") or "-")
    worst, name = max(((Worst.from_json(o["worst"]), o.get("name", "out")) for o in outputs),
                      key=lambda pair: pair[0].score)
    return worst.describe(str(name))


def bench_blocks(result: Mapping[str, Any], images: Sequence[Image], plot_note: str | None) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Benchmark")]
    bench = result.get("bench")
    if not bench:
        return blocks + [Para(no_bench_text(result), warning=True)]
    bench = shown_bench(bench, result.get("winner"))
    blocks.append(Items([
        f"GPU: {bench.get('gpu')}; torch {bench.get('torch')}, triton {bench.get('triton')}",
        f"copy bandwidth (roofline): {bench['copy_gbps']:.0f} GB/s" if bench.get("copy_gbps") else "copy bandwidth: -",
        f"CUDA events, {bench.get('warmup', gbench.WARMUP)} warm-ups + {bench.get('runs', gbench.RUNS)} timed runs, "
        "L2 cleared before each run; speedups and roofline from p50; bytes: each input read once, each output "
        "written once",
    ]))
    blocks.append(Table(BENCH_HEADERS, [bench_row(r, result.get("winner")) for r in gbench.rows(bench)]))
    errors = [f"{case.get('label')} {name}: {line}" for case in bench.get("cases") or []
              for name, line in (case.get("errors") or {}).items()]
    if errors:
        blocks += [Para("Not timed:", warning=True), Items(errors)]
    if plot_note:
        blocks.append(Para(plot_note))
    return blocks + list(images)


def no_bench_text(result: Mapping[str, Any]) -> str:
    if result.get("bench_error"):
        return f"timings not measured: {result['bench_error']}"
    if str(result.get("device") or "").startswith("cuda"):
        return "timings not measured: the benchmark did not run (--no-bench, or it failed: see the log)"
    return NO_BENCH


def shown_bench(bench: Mapping[str, Any], winner: str | None) -> dict:
    """``bench`` with the winner's own entry left out where ``generated`` holds the same times
    (``run`` copies the winner's times there), so that the same module is not shown twice."""
    cases = []
    for case in bench.get("cases") or []:
        times = dict(case.get("times") or {})
        if winner and winner != GENERATED and GENERATED in times and times.get(winner) == times[GENERATED]:
            del times[winner]
        cases.append({**case, "times": times})
    return {**bench, "cases": cases}


def bench_row(row: Mapping[str, Any], winner: str | None = None) -> list[str]:
    name = f"{GENERATED} ({winner})" if row["name"] == GENERATED and winner and winner != GENERATED else row["name"]
    return [str(row["label"]), str(row["shapes"]), name, fmt_ms(row["mean"]), fmt_ms(row["p50"]),
            fmt_ms(row["p95"]), fmt_x(row["vs_eager"]), fmt_x(row["vs_compile"]), fmt_x(row["vs_max_autotune"]),
            fmt_pct(row["roofline"], 0)]


def optimize_blocks(optimize: Mapping[str, Any] | None) -> list[Block]:
    if not optimize:
        return []
    blocks: list[Block] = [Heading(2, "Optimization decisions")]
    scalars = [f"{key}: {value}" for key, value in optimize.items()
               if value is not None and not isinstance(value, (list, dict))]
    if scalars:
        blocks.append(Items(scalars))
    for key, value in optimize.items():
        if isinstance(value, dict) and value:
            blocks += [Heading(3, str(key)), Items([f"{k}: {v}" for k, v in value.items()])]
        elif isinstance(value, list) and value:
            blocks += [Heading(3, str(key)), _table_of(value)]
    return blocks


def _table_of(items: list) -> Block:
    if not all(isinstance(item, dict) for item in items):
        return Items([str(item) for item in items])
    headers = list(dict.fromkeys(k for item in items for k in item))
    return Table(headers, [[_cell(item.get(h)) for h in headers] for item in items])


def _cell(value: Any) -> str:
    return "-" if value is None else str(value)


def llm_blocks(llm: Mapping[str, Any] | None) -> list[Block]:
    if not llm:
        return []
    blocks: list[Block] = [Heading(2, "LLM")]
    cost = llm.get("cost") or {}
    known = {f.name for f in dataclasses.fields(Cost)}
    line = Cost(**{k: v for k, v in cost.items() if k in known}).line()
    if cost.get("dollars") is not None:
        line += f", ${cost['dollars']:.2f}"
    blocks.append(Items([f"best verified module: {llm.get('best') or 'none'}",
                         f"requests: {llm.get('requests', cost.get('requests', 0))}; cost: {line}"]))
    rows = [[_cell(a.get("iteration")), a.get("failure") or "verified", _cell(a.get("module")),
             (a.get("message") or "")[:300]] for a in llm.get("attempts") or []]
    if rows:
        blocks.append(Table(("iteration", "outcome", "module", "message"), rows))
    return blocks


# -------------------------------------------------------------------------------------- plots

def draw_plots(out_dir: Path, result: Mapping[str, Any]) -> tuple[list[Image], str | None]:
    """One PNG per benchmarked case: p50 bars per name, whiskers up to p95, the mean as a dot."""
    bench = result.get("bench")
    if not bench or not bench.get("cases"):
        return [], None
    figure_class = plots.load()
    if figure_class is None:
        return [], plots.SKIPPED_NO_MATPLOTLIB
    images = []
    for n, case in enumerate(shown_bench(bench, result.get("winner"))["cases"]):
        figure = figure_class(dpi=plots.DPI)
        if not case_plot(figure, case, title=f"{result.get('name')}: {case.get('label')} {case.get('shapes')}"
                                               f"\n{bench.get('gpu') or ''}"):
            continue
        slug = re.sub(r"[^A-Za-z0-9]+", "_", f"{case.get('label')}_{case.get('shapes')}").strip("_")[:60]
        path = out_dir / f"bench_{n}_{slug}.png"
        figure.savefig(path, format="png", bbox_inches="tight")
        images.append(Image(path, path.name, f"{case.get('label')} {case.get('shapes')}: p50 (bar), p95 "
                            "(whisker) and mean (dot)"))
    return images, None


def case_plot(figure, case: Mapping[str, Any], title: str) -> bool:
    """Draw one case; False when no name has a time."""
    times = case.get("times") or {}
    names = [n for n in gbench.ordered_names(times) if times.get(n)]
    if not names:
        return False
    scale, unit = (1e3, "us") if max(times[n]["p95"] for n in names) < 1.0 else (1.0, "ms")
    p50 = [times[n]["p50"] * scale for n in names]
    p95 = [times[n]["p95"] * scale for n in names]
    figure.set_size_inches(max(5.0, 1.1 * len(names) + 2.0), 4.2)
    ax = figure.add_subplot()
    xs = list(range(len(names)))
    bars = ax.bar(xs, p50, color=[COLORS.get(n, MODULE_COLOR) for n in names],
                  yerr=[[0.0] * len(names), [max(0.0, hi - lo) for lo, hi in zip(p50, p95)]], capsize=4)
    ax.scatter(xs, [times[n]["mean"] * scale for n in names], color="black", s=12, zorder=3, label="mean")
    labels = []
    for name in names:
        vs = gbench.speedup(times, name, gbench.COMPILE)
        labels.append(fmt_ms(times[name]["p50"]) + (f"\n{vs:.2f}x vs compile" if vs and name != gbench.COMPILE else ""))
    ax.bar_label(bars, labels=labels, fontsize=7, padding=2)
    ax.set_xticks(xs, [n.replace("$", r"\$") for n in names], rotation=15, fontsize=8)
    ax.set_ylabel(f"time ({unit}): p50, whisker to p95")
    ax.set_ylim(0, max(p95 + p50) * 1.3)
    ax.legend(fontsize=8, loc="upper left")
    ax.set_title(title.replace("$", r"\$"), fontsize=9)
    return True
