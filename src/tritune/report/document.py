"""The report as a list of blocks (headings, lists, tables, images), rendered to Markdown and HTML.

Both renderers walk the same blocks, so the two files always hold the same content; each one
escapes the text for its own format (kernel names and messages come from user code and may hold
``|``, ``<`` or ``&``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping, Sequence

from tritune.bench.render import fmt_ms
from tritune.model.results import RunResults
from tritune.report.blocks import Block, Heading, Image, Items, Para, Table
from tritune.report.llm import llm_blocks
from tritune.report.load import KernelFacts
from tritune.report.plots import MAX_BARS

NOT_MEANINGFUL = ("Times are NOT meaningful: this run used the CPU interpreter (TRITON_INTERPRET=1), "
                  "which times numpy, not the kernel. Speedups, sums and roofline figures below say "
                  "nothing about a GPU; they only show that the loop ran.")
UNKNOWN_MEANING = ("The results do not say whether the times are GPU times: check the command before "
                   "trusting any speedup.")


def build(results: RunResults, summary: Mapping[str, Any], facts: list[KernelFacts],
          plots: Mapping[str, Path], notes: Sequence[str], out_dir: Path) -> list[Block]:
    mark = "" if summary["meaningful"] else "*"

    def image(name: str, caption: str) -> list[Block]:
        path = plots.get(name)
        return [Image(path, path.relative_to(out_dir).as_posix(), caption)] if path else []

    blocks: list[Block] = [Heading(1, "tritune optimize report"), Items(header_items(results, summary))]
    if results.stopped:
        blocks.append(Para(f"The run stopped early: {results.stopped}", warning=True))
    if summary["meaningful"] is False:
        blocks.append(Para(NOT_MEANINGFUL, warning=True))
    elif summary["meaningful"] is None:
        blocks.append(Para(UNKNOWN_MEANING, warning=True))
    blocks += [Heading(2, "Summary"), Items(summary_items(summary, mark))]
    blocks += [Para(note) for note in notes]
    blocks += image("amdahl", "Cumulative share of the program's kernel time, costliest kernel first, before "
                    "and after the decisions")
    blocks += image("speedup", "Per-kernel time before and after, normalized to the baseline, by speedup"
                    + speedup_cut(facts))
    blocks += image("roofline", "Time per launch against the roofline floor (copy bandwidth)")
    blocks += [Heading(2, "Kernels"), kernel_table(facts, mark)]
    if mark:
        blocks.append(Para("* CPU interpreter time, not a GPU time."))
    failed = [k for k in facts if not k.ran]
    if failed:
        blocks += [Heading(3, "Kernels whose baseline could not run"),
                   Items([f"{k.label}: {k.failure}" + (f": {k.message}" if k.message else "") for k in failed])]
    blocks += [Heading(2, "By category"), group_table(summary["by_category"], summary, "category")]
    blocks += image("categories", "Success rate and mean speedup on success, by category")
    blocks += [Heading(2, "By kind"), group_table(summary["by_kind"], summary, "kind")]
    blocks += [Heading(2, "Candidates")]
    blocks += tally_blocks("Candidates by status", summary["candidates"], "status")
    blocks += tally_blocks("Candidates that failed to build, run or verify, by kind", summary["failures"], "failure")
    blocks += tally_blocks("Candidates that ran but the arbiter turned down, by reason", summary["rejected_reasons"], "reason")
    blocks += tally_blocks("Baselines that could not run, by kind", summary["baseline_failures"], "failure")
    if summary.get("notes"):
        blocks += [Heading(3, "Notes on candidates (reported, not rejections)"), Items(summary["notes"])]
    blocks += llm_blocks(results)
    wall = summary["wall_s"]
    blocks += [Heading(2, "Optimizer wall time"),
               Items([f"total: {fmt_s(wall['total'])}", f"median per kernel: {fmt_s(wall['median'])}"])]
    blocks += image("wall_time", "Optimizer wall time per kernel")
    blocks += time_blocks(results)
    blocks += lane_blocks(summary["lanes"])
    return blocks


SPLIT_HEADERS = ("kernel", "budget", "to first candidate", "baseline", "profile", "profile source",
                 "candidates timed", "verify", "time", "judge", "idle", "wall time")


def time_blocks(results: RunResults) -> list[Block]:
    """Where the run's time went: its fixed costs (as a share of the deadline), the share spent on
    candidates, each key's split (``KernelResult.split``), and the keys the ranking could not time."""
    fixed = results.fixed
    items = []
    if fixed:
        share = f" ({fmt_pct(results.fixed_share)} of the {results.deadline_s:.0f} s deadline)" \
            if results.fixed_share is not None else ""
        items.append(f"fixed costs before the first kernel: {fmt_s(fixed.get('total_s'))}{share}: lanes and workers "
                     f"starting {fmt_s(fixed.get('start_s'))}, baselines timed for the ranking "
                     f"{fmt_s(fixed.get('baselines_s'))}"
                     + (f" (built {fmt_s(fixed['build_s'])}, timed {fmt_s(fixed.get('rank_time_s'))})"
                        if "build_s" in fixed else ""))
    if results.candidate_share is not None:
        items.append(f"share of the run's time spent on candidates (after each kernel's first): "
                     f"{fmt_pct(results.candidate_share)} of {fmt_s(results.wall_s)}")
    firsts = sorted(k.split["to_first_s"] for k in results.kernels if "to_first_s" in k.split)
    if firsts:
        items.append(f"time to a kernel's first candidate: median {fmt_s(_median(firsts))}, "
                     f"max {fmt_s(firsts[-1])} ({len(firsts)} kernel(s))")
    rows = [[k.kernel, fmt_s(k.budget_s), fmt_s(k.split.get("to_first_s")), fmt_s(k.split.get("baseline_s")),
             fmt_s(k.split.get("profile_s")), k.profile_source or "-", str(k.timed_candidates),
             fmt_s(k.split.get("verify_s")), fmt_s(k.split.get("time_s")), fmt_s(k.split.get("judge_s")),
             fmt_s(k.split.get("idle_s")), fmt_s(k.wall_s)] for k in results.kernels if k.split]
    blocks: list[Block] = []
    if items or rows:
        blocks.append(Heading(2, "Where the time went"))
    if items:
        blocks.append(Items(items))
    if rows:
        blocks += [Table(SPLIT_HEADERS, rows),
                   Para("verify includes each candidate's build (the worker does not report it apart); with "
                        "several jobs the candidates' parts overlap, and idle is what the parts leave of the wall "
                        "time.")]
    untimed = [t for t in results.timed if t.baseline_ms is None]
    if untimed:
        blocks += [Heading(3, "Kernels the ranking could not time"),
                   Items([f"{t.kernel} ({t.id}): {t.failure or 'untimed'}" + (f": {t.message}" if t.message else "")
                          for t in untimed])]
    return blocks


def _median(values: Sequence[float]) -> float:
    middle = len(values) // 2
    return values[middle] if len(values) % 2 else (values[middle - 1] + values[middle]) / 2


def lane_blocks(lanes: Sequence[Mapping[str, Any]]) -> list[Block]:
    """A line per lane (``optimize --workers``), when there was more than one."""
    if len(lanes) < 2:
        return []
    rows = [[lane["name"], lane["gpu"] or "-", str(lane["kernels"]), fmt_s(lane["busy_s"]), fmt_s(lane["idle_s"]),
             lane["died"] or "-"] for lane in lanes]
    return [Heading(2, "Lanes"), Table(("lane", "GPU", "kernels", "busy", "idle", "died"), rows)]


def speedup_cut(facts: list[KernelFacts]) -> str:
    ran = sum(k.ran for k in facts)
    if ran <= MAX_BARS:
        return ""
    return f" (the {MAX_BARS} costliest of {ran} kernels by baseline x count; the table has them all)"


def header_items(results: RunResults, summary: Mapping[str, Any]) -> list[str]:
    target = results.target
    gpu = str(target.get("gpu") or "") or "unknown GPU"
    details = [f"sm_{target['capability']}" if target.get("capability") else "",
               f"Triton {target['triton_version']}" if target.get("triton_version") else ""]
    details = ", ".join(d for d in details if d)
    finished = results.finished
    date = (results.started or "unknown") + (f" to {finished}" if finished else " (not finished)")
    meaningful = {True: "yes (GPU times)", False: "NO (CPU interpreter)", None: "unknown"}[summary["meaningful"]]
    kernels = len(results.kernels)
    if len(results.targets) > 1:  # a mixed host: every key optimized once per kind
        gpu = ", ".join(str(t.get("gpu") or "unknown GPU") for t in results.targets) + " (each key on each)"
    items = [f"GPU: {gpu}" + (f" ({details})" if details else ""), f"date: {date}",
             f"command: {results.command or 'unknown'}", f"times meaningful: {meaningful}",
             f"success bar: {summary['threshold']:.2f}x confirmed speedup"]
    if results.planned is not None and results.planned != kernels:
        items.append(f"kernels in these results: {kernels} of {results.planned} planned")
    if results.copy_gbps is not None:
        items.append(f"copy bandwidth (roofline): {results.copy_gbps:.0f} GB/s")
    if results.store:
        items.append(f"decision store: {results.store}")
    return items


def summary_items(s: Mapping[str, Any], mark: str) -> list[str]:
    roof = s["roofline"]
    program = s.get("program") or {}
    items = []
    if program.get("coverage") is not None:
        items.append(f"program kernel time (every key's launches x baseline): {fmt_ms(program['kernel_ms'], mark)}; "
                     f"covered by the kernels optimized: {fmt_pct(program['coverage'])}"
                     + (f" (--cover {fmt_pct(program['cover'], 0)})" if program.get("cover") else "")
                     + f"; expected saving from the decisions: {fmt_pct(program['expected_gain'])} of kernel time")
    items += [
        f"kernels: {s['kernels']}; optimized (baseline ran): {s['optimized']}; improved: {s['improved']}",
        f"success rate (>= {s['threshold']:.2f}x, of optimized): {fmt_pct(s['success_rate'])}",
        f"geomean speedup over optimized kernels (1.0x when not improved): {fmt_x(s['geomean_speedup'])}",
        f"mean speedup on success: {fmt_x(s['mean_speedup_on_success'])}",
        f"sum of per-launch times: {fmt_ms(s['sum_before_ms'], mark)} before, {fmt_ms(s['sum_after_ms'], mark)} after",
        f"weighted by launch count: {fmt_ms(s['weighted_before_ms'], mark)} before, "
        f"{fmt_ms(s['weighted_after_ms'], mark)} after ({fmt_x(s['program_speedup'])} overall)",
    ]
    if roof["kernels"]:
        items.append(f"roofline floor ({roof['kernels']} kernel(s) with one, weighted): "
                     f"{fmt_ms(roof['floor_ms'], mark)}; "
                     f"before {fmt_ms(roof['before_ms'], mark)} ({fmt_x(roof['before_x_floor'])} the floor), "
                     f"after {fmt_ms(roof['after_ms'], mark)} ({fmt_x(roof['after_x_floor'])} the floor)")
    else:
        items.append("roofline floor: no kernel has one")
    held = s.get("held_elsewhere") or {}
    if held.get("waited"):
        items.append(f"candidates another optimize run on the same store was evaluating: {held['waited']} "
                     f"waited for, {held.get('busy', 0)} of them still held when the budget ran out (not evaluated)")
    if roof["excluded"]:
        items.append(f"{roof['excluded']} kernel(s) left out of the floor: their baseline beats it, so the "
                     "byte count over-estimates what they move")
    return items


KERNEL_HEADERS = ("kernel", "kind", "category", "launches", "time share", "baseline", "best", "speedup", "decision",
                  "won by", "bottleneck", "finish", "roofline before", "roofline after", "wall time")


def kernel_table(facts: list[KernelFacts], mark: str) -> Table:
    """Costliest first (baseline x launches), kernels that did not run last."""
    ordered = sorted((k for k in facts if k.ran), key=lambda k: -k.total_before_ms) + [k for k in facts if not k.ran]
    return Table(KERNEL_HEADERS, [kernel_row(k, mark) for k in ordered])


def kernel_row(k: KernelFacts, mark: str) -> list[str]:
    if not k.ran:
        decision = f"baseline failed: {k.failure}"
    elif k.improved:
        decision = k.decision or "accepted"
    elif k.accepted:
        decision = f"kept original (below the bar): {k.decision}" if k.decision else "kept original (below the bar)"
    else:
        decision = "kept original"
    finish = ": ".join(part for part in (k.finish, k.finish_reason) if part) or "-"
    return [k.label, k.kind, k.category, str(k.count), fmt_pct(k.time_share), fmt_ms(k.baseline_ms, mark),
            fmt_ms(k.best_ms, mark), fmt_x(k.speedup), decision, ", ".join(k.won_by) if k.improved and k.won_by else "-",
            k.bottleneck or "-", finish, fmt_pct(k.roofline_before, 0),
            fmt_pct(k.roofline_after, 0), fmt_s(k.wall_s)]


def group_table(rows: list[dict[str, Any]], overall: Mapping[str, Any], what: str) -> Table:
    """TritonForge Table 1: # kernels, success rate, average speedup on success; plus geomean."""
    def cells(name: str, r: Mapping[str, Any]) -> list[str]:
        return [name, str(r["kernels"]), str(r["optimized"]), str(r["improved"]), fmt_pct(r["success_rate"]),
                fmt_x(r["mean_speedup_on_success"]), fmt_x(r["geomean_speedup"])]

    body = [cells(r["name"], r) for r in rows] + [cells("overall", overall)]
    return Table((what, "kernels", "optimized", "improved", "success rate", "mean speedup on success",
                  "geomean (all optimized)"), body)


def tally_blocks(title: str, counts: Mapping[str, int], what: str) -> list[Block]:
    if not counts:
        return [Heading(3, title), Para("none")]
    return [Heading(3, title), Table((what, "count"), [[name, str(n)] for name, n in counts.items()])]


def fmt_x(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def fmt_pct(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{100 * value:.{digits}f}%"


def fmt_s(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f} s"

