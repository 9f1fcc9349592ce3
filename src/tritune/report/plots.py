"""The report's four plots as PNG files, drawn with matplotlib when it is installed.

matplotlib is optional: ``load()`` returns None without it, and the report keeps its tables and
says the plots were skipped. Figures are built with the object API (``Figure`` + the Agg canvas),
never ``pyplot``: no global backend switch and no figure registry in a caller's process.

- ``speedup``     seed 000 Fig. 4 style: per kernel, time before and after (normalized to the
                  baseline, so a 3 us and a 3 ms kernel share an axis), sorted by speedup, with the
                  speedup written over each improved kernel. At most ``MAX_BARS`` kernels, the
                  costliest by baseline x count, with the cut named in the title.
- ``roofline``    log-log: per kernel, time before and after against its roofline floor, with the
                  y = x line (a kernel on it moves its bytes at copy bandwidth).
- ``categories``  TritonForge Table 1 as bars: success rate and mean speedup on success per category.
- ``wall_time``   optimizer wall time per kernel, longest first (at most ``MAX_BARS``).
- ``amdahl``      the program's view: cumulative share of kernel time against the number of
                  kernels (costliest first), before and after the decisions, with the point where
                  the run stopped covering; the gap at the end is the expected gain.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping

from tritune.report.load import KernelFacts

MAX_BARS = 40  # beyond ~40 bars the kernel names on the axis stop being readable
LABEL_CHARS = 36  # Inductor names run to 80+ characters; the table has them whole
DPI = 110
SKIPPED_NO_MATPLOTLIB = "plots skipped: matplotlib not installed"
BEFORE, AFTER, FLAT = "#9e9e9e", "#1f77b4", "#c7d9ea"


def load() -> Any | None:
    """matplotlib's ``Figure`` class, or None when matplotlib cannot be imported."""
    try:
        import matplotlib  # noqa: F401  (imported first so a blocked package fails here)
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


def draw_all(facts: list[KernelFacts], summary: Mapping[str, Any], plot_dir: Path) -> tuple[dict[str, Path], list[str]]:
    """Write every plot that has data; returns name -> PNG path and one note per plot not drawn."""
    figure_class = load()
    if figure_class is None:
        return {}, [SKIPPED_NO_MATPLOTLIB]
    drawers: dict[str, Callable[..., str | None]] = {
        "speedup": speedup_plot, "roofline": roofline_plot, "categories": category_plot, "wall_time": wall_plot,
        "amdahl": amdahl_plot,
    }
    paths, notes = {}, []
    for name, draw in drawers.items():
        figure = figure_class(dpi=DPI)
        skipped = draw(figure, facts, summary)
        if skipped:
            notes.append(f"{name} plot skipped: {skipped}")
            continue
        plot_dir.mkdir(parents=True, exist_ok=True)
        path = plot_dir / f"{name}.png"
        figure.savefig(path, format="png", bbox_inches="tight")
        paths[name] = path
    return paths, notes


def speedup_plot(figure, facts: list[KernelFacts], summary: Mapping[str, Any]) -> str | None:
    ran = [k for k in facts if k.ran]
    if not ran:
        return "no kernel ran"
    shown = sorted(ran, key=lambda k: -k.total_before_ms)[:MAX_BARS]
    shown.sort(key=lambda k: -k.applied_speedup)
    n = len(shown)
    figure.set_size_inches(max(6.0, 0.42 * n + 2.0), 4.8)
    ax = figure.add_subplot()
    xs = range(n)
    ax.bar([x - 0.2 for x in xs], [1.0] * n, width=0.4, color=BEFORE, label="before (baseline)")
    after = [1.0 / k.applied_speedup for k in shown]
    ax.bar([x + 0.2 for x in xs], after, width=0.4, color=[AFTER if k.improved else FLAT for k in shown],
           label="after (kept original: light)")
    for x, k, height in zip(xs, shown, after):
        if k.improved:
            ax.text(x + 0.2, height + 0.02, f"{k.applied_speedup:.2f}x", ha="center", va="bottom",
                    fontsize=7, rotation=90)
    _kernel_axis(ax, shown)
    ax.set_ylabel("time / baseline time")
    ax.set_ylim(0, 1.25)
    title = "Per-kernel time before and after, by speedup"
    if len(ran) > n:
        title += f"\n(the {n} costliest of {len(ran)} kernels by baseline x count)"
    ax.set_title(title + _interpreter(summary), fontsize=10)
    ax.legend(fontsize=8, loc="upper right")
    return None


def roofline_plot(figure, facts: list[KernelFacts], summary: Mapping[str, Any]) -> str | None:
    points = [k for k in facts if k.ran and k.floor_ms is not None]
    if not points:
        return "no kernel has a roofline floor"
    figure.set_size_inches(6.0, 5.0)
    ax = figure.add_subplot()
    for k in points:
        ax.plot([k.floor_ms, k.floor_ms], [k.baseline_ms, k.after_ms], color="#bbbbbb", linewidth=0.8, zorder=1)
    ax.scatter([k.floor_ms for k in points], [k.baseline_ms for k in points], color=BEFORE, s=18,
               label="before", zorder=2)
    ax.scatter([k.floor_ms for k in points], [k.after_ms for k in points], color=AFTER, marker="^", s=22,
               label="after", zorder=3)
    values = [v for k in points for v in (k.floor_ms, k.baseline_ms, k.after_ms)]
    low, high = min(values) / 1.5, max(values) * 1.5
    ax.plot([low, high], [low, high], linestyle="--", color="#d62728", linewidth=1, label="y = x (at the floor)")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(low, high)
    ax.set_ylim(low, high)
    ax.set_xlabel("roofline floor per launch (ms): bytes / copy bandwidth")
    ax.set_ylabel("time per launch (ms)")
    ax.set_title("Time against the roofline floor" + _interpreter(summary), fontsize=10)
    ax.legend(fontsize=8)
    return None


def category_plot(figure, facts: list[KernelFacts], summary: Mapping[str, Any]) -> str | None:
    rows = [r for r in summary["by_category"] if r["optimized"]]
    if not rows:
        return "no kernel ran"
    figure.set_size_inches(max(7.0, 1.3 * len(rows) + 3.0), 3.8)
    rate_ax, speed_ax = figure.subplots(1, 2)
    names = [f"{r['name']}\n(n={r['optimized']})" for r in rows]
    rates = rate_ax.bar(names, [100 * (r["success_rate"] or 0.0) for r in rows], color=AFTER)
    rate_ax.bar_label(rates, labels=[f"{100 * (r['success_rate'] or 0.0):.0f}%" for r in rows], fontsize=8)
    rate_ax.set_ylabel(f"success rate (%), >= {summary['threshold']:.2f}x")
    rate_ax.set_ylim(0, 112)
    means = speed_ax.bar(names, [r["mean_speedup_on_success"] or 0.0 for r in rows], color=AFTER)
    speed_ax.bar_label(means, labels=[f"{r['mean_speedup_on_success']:.2f}x" if r["mean_speedup_on_success"]
                                      else "none" for r in rows], fontsize=8)
    speed_ax.margins(y=0.12)
    speed_ax.axhline(1.0, color=BEFORE, linewidth=1)
    speed_ax.set_ylabel("mean speedup on success (x)")
    for ax in (rate_ax, speed_ax):
        ax.tick_params(axis="x", labelsize=8)
    figure.suptitle("By category (TritonForge Table 1)" + _interpreter(summary), fontsize=10)
    return None


def wall_plot(figure, facts: list[KernelFacts], summary: Mapping[str, Any]) -> str | None:
    timed = sorted((k for k in facts if k.wall_s is not None), key=lambda k: -k.wall_s)
    if not timed:
        return "no kernel has a wall time"
    shown = timed[:MAX_BARS]
    figure.set_size_inches(7.0, max(2.5, 0.26 * len(shown) + 1.2))
    ax = figure.add_subplot()
    ys = range(len(shown))
    ax.barh(ys, [k.wall_s for k in shown], color=[AFTER if k.ran else "#d62728" for k in shown])
    ax.set_yticks(list(ys), [_label(k) for k in shown], fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("optimizer wall time (s); red: baseline failed")
    title = "Optimizer wall time per kernel"
    if len(timed) > len(shown):
        title += f" (the {len(shown)} longest of {len(timed)})"
    ax.set_title(title, fontsize=10)
    return None


def amdahl_plot(figure, facts: list[KernelFacts], summary: Mapping[str, Any]) -> str | None:
    program = summary.get("program") or {}
    keys = [k for k in program.get("keys") or () if k.get("share") is not None]
    if not keys:
        return "the run did not time the program's kernels (no shares)"
    xs = list(range(len(keys) + 1))
    before, after = [0.0], [0.0]
    for k in keys:
        before.append(before[-1] + k["share"])
        after.append(after[-1] + k["after"])
    figure.set_size_inches(6.5, 4.2)
    ax = figure.add_subplot()
    ax.step(xs, before, where="post", color=BEFORE, label="before: cumulative share of kernel time")
    ax.step(xs, after, where="post", color=AFTER, label="after the decisions (same scale)")
    optimized = sum(1 for k in keys if k["optimized"])
    if program.get("coverage") is not None:
        ax.axvline(optimized, color="#d62728", linestyle="--", linewidth=1,
                   label=f"optimized: {optimized} kernels, {100 * program['coverage']:.0f}% of the time")
    gain = program.get("expected_gain")
    ax.set_xlabel("kernels, costliest first")
    ax.set_ylabel("share of the program's kernel time")
    ax.set_ylim(0, 1.05)
    title = "Where the kernel time is (Amdahl)"
    if gain is not None:
        title += f": expected saving {100 * gain:.1f}% of kernel time ({1 / max(1e-9, 1 - gain):.3f}x)"
    ax.set_title(title + _interpreter(summary), fontsize=10)
    ax.legend(fontsize=8, loc="lower right")
    return None


def _kernel_axis(ax, shown: list[KernelFacts]) -> None:
    ax.set_xticks(list(range(len(shown))), [_label(k) for k in shown], rotation=60, ha="right", fontsize=7)


def _label(k: KernelFacts) -> str:
    """The kernel's id cut to LABEL_CHARS in the middle (the name's start and the id's hash stay);
    '$' escaped (matplotlib reads $...$ as math text, and a lone '$' fails to draw)."""
    label = k.label
    if len(label) > LABEL_CHARS:
        label = label[:LABEL_CHARS - 14] + "..." + label[-11:]
    return label.replace("$", r"\$")


def _interpreter(summary: Mapping[str, Any]) -> str:
    return "\nCPU INTERPRETER: times NOT meaningful" if summary["meaningful"] is False else ""
