"""The report of ``tritune generate``: ``DIR/report.md``, ``DIR/report.html`` (self-contained) and
one bar plot per benchmarked case (``DIR/bench_<n>_<case>.png``), from generate's summary dict.

It says which path won (Inductor, model-free, or the LLM) and why; whether Inductor fused the spec
into one kernel; the verification of every case (shapes, verdict, worst element); the benchmark
(mean / p50 / p95 per name, speedups over eager, torch.compile and max-autotune, roofline
fraction), or, without a GPU, that no time was measured; the optimization decisions; the LLM's
attempts and cost; and the run's notes.

``result`` keys read (all but ``name`` optional; see ``tritune.generate.run``): ``spec``,
``name``, ``winner`` ("inductor" | "llm"), ``why`` (one line, when the caller knows it better),
``paths`` (per path: a dict with ``module``, ``ok``, ``message``, or just the module's path),
``check`` (``check_job``'s result), ``bench`` (``bench_job``'s result or None), ``bench_error``
(why a GPU benchmark did not run), ``optimize`` (a dict: its scalars listed, a list of dicts as a
table), ``llm`` (``generate_with_llm``'s result), ``fused``, ``kernels``, ``notes``.

The blocks, their Markdown/HTML rendering (with escaping of user text) and the plots' matplotlib
loading are ``tritune.report``'s; this module only decides what is said.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Mapping, Sequence

from tritune.bench.render import fmt_ms
from tritune.generate import bench as gbench
from tritune.llm.family import Cost
from tritune.report import html, markdown, plots
from tritune.report.document import Block, Heading, Image, Items, Para, Table, fmt_pct, fmt_x
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
    blocks = build(result, images, note)
    md, page = out_dir / "report.md", out_dir / "report.html"
    md.write_text(markdown.render(blocks), encoding="utf-8")
    page.write_text(html.render(blocks, title=f"tritune generate report: {result.get('name')}"), encoding="utf-8")
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
        items.append(f"kernels in the emitted module: {', '.join(map(str, result['kernels']))}")
    for name, entry in (result.get("paths") or {}).items():
        module = entry.get("module") if isinstance(entry, Mapping) else entry
        if module:
            items.append(f"{path_name(name)}: {module}")
    return items


def path_name(name: str | None) -> str:
    return PATH_NAMES.get(name or "", name or "none")


def winner_text(result: Mapping[str, Any]) -> str:
    """Which path won and why: the caller's ``why``, else the times of both paths' modules, else
    the other path's failure, else that only one path ran."""
    winner = result.get("winner")
    if not winner:
        return "No path produced a verified kernel."
    text = f"{path_name(winner)} won"
    if result.get("why"):
        return f"{text}: {result['why']}"
    paths = result.get("paths") or {}
    others = [name for name in paths if name != winner]
    if not others:
        return f"{text}: it was the only path run."
    other = others[0]
    entry = paths[other]
    if isinstance(entry, Mapping) and entry.get("ok") is False:
        return f"{text}: {path_name(other)} produced no verified kernel ({entry.get('message') or 'no reason given'})."
    faster = _faster_cases(result.get("bench"), winner, other)
    if faster is not None:
        return (f"{text}: both verified; it was faster (p50) in {faster[0]} of {faster[1]} benchmarked case(s) "
                f"than {path_name(other)}.")
    return f"{text}: both verified; {path_name(other)} was not faster."


def _faster_cases(bench: Mapping[str, Any] | None, winner: str, other: str) -> tuple[int, int] | None:
    if not bench:
        return None
    ratios = [gbench.speedup(case.get("times") or {}, winner, other) for case in bench.get("cases") or []]
    ratios = [r for r in ratios if r is not None]
    return (sum(r > 1.0 for r in ratios), len(ratios)) if ratios else None


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
    rows = [[str(c.get("label")), str(c.get("shapes")), "yes" if c.get("ok") else "NO", worst_text(c)]
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
    output = max(outputs, key=lambda o: _number(o["worst"].get("score")))
    return _worst(output["worst"]).describe(str(output.get("name", "out")))


def _worst(body: Mapping[str, Any]) -> Worst:
    """``Worst`` back from its JSON (NaN/Inf came as strings; ``index`` as a list)."""
    names = {f.name for f in dataclasses.fields(Worst)}
    fields = {k: v for k, v in body.items() if k in names}
    fields["index"] = tuple(fields.get("index") or ())
    for key in ("abs_err", "rel_err", "score"):
        fields[key] = _number(fields.get(key))
    return Worst(**fields)


def _number(value: Any) -> float:
    try:
        return float(value)
    except (TypeError, ValueError):
        return float("nan")


def bench_blocks(result: Mapping[str, Any], images: Sequence[Image], plot_note: str | None) -> list[Block]:
    blocks: list[Block] = [Heading(2, "Benchmark")]
    bench = result.get("bench")
    if not bench:
        error = result.get("bench_error")
        return blocks + [Para(f"timings not measured: {error}" if error else NO_BENCH, warning=True)]
    blocks.append(Items([
        f"GPU: {bench.get('gpu')}; torch {bench.get('torch')}, triton {bench.get('triton')}",
        f"copy bandwidth (roofline): {bench['copy_gbps']:.0f} GB/s" if bench.get("copy_gbps") else "copy bandwidth: -",
        f"CUDA events, {bench.get('warmup', gbench.WARMUP)} warm-ups + {bench.get('runs', gbench.RUNS)} timed runs, "
        "L2 cleared before each run; speedups and roofline from p50; bytes: each input read once, each output "
        "written once",
    ]))
    blocks.append(Table(BENCH_HEADERS, [bench_row(r) for r in gbench.rows(bench)]))
    errors = [f"{case.get('label')} {name}: {line}" for case in bench.get("cases") or []
              for name, line in (case.get("errors") or {}).items()]
    if errors:
        blocks += [Para("Not timed:", warning=True), Items(errors)]
    if plot_note:
        blocks.append(Para(plot_note))
    return blocks + list(images)


def bench_row(row: Mapping[str, Any]) -> list[str]:
    return [str(row["label"]), str(row["shapes"]), row["name"], fmt_ms(row["mean"]), fmt_ms(row["p50"]),
            fmt_ms(row["p95"]), fmt_x(row["vs_eager"]), fmt_x(row["vs_compile"]), fmt_x(row["vs_max_autotune"]),
            fmt_pct(row["roofline"], 0)]


def optimize_blocks(optimize: Mapping[str, Any] | None) -> list[Block]:
    if not optimize:
        return []
    blocks: list[Block] = [Heading(2, "Optimization decisions")]
    scalars = [f"{key}: {value}" for key, value in optimize.items() if not isinstance(value, (list, dict))]
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
    for n, case in enumerate(bench["cases"]):
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
