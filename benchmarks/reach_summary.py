"""Issue 24's per-key breakdown of optimize runs: where each key's seconds went, how many candidates
the budget bought, and the run's fixed costs. No GPU: it reads the runs' ``optimize.json``.

    python3 benchmarks/reach_summary.py [NAME=]RUN/optimize.json ... [--json OUT] [--markdown OUT]

Per run (``NAME`` labels an arm, e.g. before=... after=...; default the file's folder name):

- **time to first candidate**: the median of ``split.to_first_s`` over the keys that reached a
  candidate; keys that ran and got no timed candidate are counted apart
  (``keys_without_timed_candidates``);
- **candidates per key**: records per key and ``timed_candidates`` (verified and timed; from the
  records when the file predates that field: a record with a time and no failure);
- **top 90%**: the keys that hold the first 90% of the program's kernel time (``timed``, costliest
  first, the key that crosses 90% included), and how many of them got >= 8 timed candidates
  (the issue's target: all of them);
- **coverage** and **decisions** (accepted at or above the run's threshold, with the speedup, and
  their mean: issue 12's "mean on success");
- **fixed costs**: ``fixed.total_s`` (seconds before any key started) over ``deadline_s``;
- **time on candidates**: the share of the run's wall seconds (fixed costs plus the keys' wall
  seconds, per lane) that is neither fixed, nor a key's time before its first candidate, nor idle.

A file older than the split (no ``split``, ``fixed``, ``deadline_s``) still gives what its records
hold: candidates per key from ``candidates``, the deadline from the command's ``--deadline-s``, and
the time on candidates estimated from each record's ``verify_s`` + ``time_s`` (capped at the key's
``wall_s``); what cannot be computed is None, never guessed, and ``estimated`` says which.
"""

from __future__ import annotations

import json
import pathlib
import re
import statistics
import sys

import _common

TOP_SHARE = 0.9
MIN_TIMED = 8
CANDIDATE_PARTS = ("build_s", "verify_s", "time_s", "judge_s")
DEADLINE_FLAG = re.compile(r"--deadline-s[ =]([0-9.]+)")


def _num(value) -> float | None:
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def timed_count(kernel: dict) -> int:
    """Candidates verified and timed: the field when the file has it, else counted from the records."""
    given = kernel.get("timed_candidates")
    if isinstance(given, int) and not isinstance(given, bool):
        return given
    return sum(1 for c in kernel.get("candidates") or [] if _num(c.get("time_ms")) is not None and not c.get("failure"))


def key_row(kernel: dict, threshold: float) -> dict:
    """One key's line: its share, where its seconds went, its candidates and its decision."""
    split = kernel.get("split") if isinstance(kernel.get("split"), dict) else {}
    records = kernel.get("candidates") or []
    speedup = _num(kernel.get("speedup"))
    decided = bool(kernel.get("accepted")) and speedup is not None and speedup >= threshold
    return {"id": kernel.get("id"), "kernel": kernel.get("kernel"), "time_share": _num(kernel.get("time_share")),
            "ran": not kernel.get("failure") and _num(kernel.get("baseline_ms")) is not None,
            "budget_s": _num(kernel.get("budget_s")), "wall_s": _num(kernel.get("wall_s")),
            "to_first_s": _num(split.get("to_first_s")), "profile_s": _num(split.get("profile_s")),
            "idle_s": _num(split.get("idle_s")), "candidate_s": _candidate_seconds(kernel, split),
            "profile_source": kernel.get("profile_source"), "candidates": len(records),
            "timed_candidates": timed_count(kernel), "decision": kernel.get("decision") if decided else None,
            "speedup": speedup if decided else None, "roofline_before": _num(kernel.get("roofline_before")),
            "roofline_after": _num(kernel.get("roofline_after")), "finish": kernel.get("finish"),
            "from_split": bool(split)}


def _candidate_seconds(kernel: dict, split: dict) -> float | None:
    """A key's wall seconds on candidates: wall minus the time before the first one and idle (split),
    else the records' verify + time seconds capped at the wall (an estimate)."""
    wall = _num(kernel.get("wall_s"))
    if wall is None:
        return None
    if split:
        first = _num(split.get("to_first_s"))
        if first is None:  # no candidate reached
            return 0.0
        return max(0.0, wall - first - (_num(split.get("idle_s")) or 0.0))
    worked = sum((_num(c.get("verify_s")) or 0.0) + (_num(c.get("time_s")) or 0.0)
                 for c in kernel.get("candidates") or [] if not c.get("reused"))
    return min(wall, worked)


def top_keys(timed: list[dict], share: float = TOP_SHARE) -> list[str]:
    """The ids of the costliest keys that together first reach ``share`` of the kernel time."""
    ranked = sorted((t for t in timed if _num(t.get("time_share")) is not None), key=lambda t: -t["time_share"])
    chosen, held = [], 0.0
    for t in ranked:
        if held >= share:
            break
        chosen.append(t.get("id"))
        held += t["time_share"]
    return chosen


def deadline_of(results: dict) -> float | None:
    given = _num(results.get("deadline_s"))
    if given is not None:
        return given
    match = DEADLINE_FLAG.search(results.get("command") or "")
    return float(match.group(1)) if match else None


def summarize_run(results: dict) -> dict:
    """The run's figures and its per-key rows (module docstring)."""
    from tritune.model.results import RunResults

    threshold = RunResults.from_json(results).threshold  # also: is this an optimize.json at all
    rows = [key_row(k, threshold) for k in results.get("kernels") or [] if isinstance(k, dict)]
    ran = [r for r in rows if r["ran"]]
    timed = [t for t in results.get("timed") or [] if isinstance(t, dict)]
    firsts = [r["to_first_s"] for r in ran if r["to_first_s"] is not None]
    decisions = [{"kernel": r["kernel"], "decision": r["decision"], "speedup": r["speedup"]}
                 for r in rows if r["decision"]]
    return {
        "keys": results.get("keys"),
        "keys_timed": sum(1 for t in timed if _num(t.get("baseline_ms")) is not None),
        "keys_untimed": [{"id": t.get("id"), "failure": t.get("failure"), "message": t.get("message")}
                         for t in timed if _num(t.get("baseline_ms")) is None],
        "keys_ran": len(ran),
        "keys_without_timed_candidates": sum(1 for r in ran if r["timed_candidates"] == 0),
        "median_to_first_s": statistics.median(firsts) if firsts else None,
        "candidates_per_key": _stats([r["candidates"] for r in ran]),
        "timed_per_key": _stats([r["timed_candidates"] for r in ran]),
        **_top_figures(timed, rows),
        "coverage": _num(results.get("coverage")), "decisions": decisions, "improved": len(decisions),
        "mean_speedup_on_success": statistics.mean(d["speedup"] for d in decisions) if decisions else None,
        "threshold": threshold,
        **_time_figures(results, ran),
        "profile_sources": _tally(r["profile_source"] for r in ran),
        "per_key": rows,
    }


def _top_figures(timed: list[dict], rows: list[dict]) -> dict:
    """How many of the top-90% keys got at least MIN_TIMED timed candidates."""
    by_id = {r["id"]: r for r in rows}
    top = top_keys(timed)
    enough = [key for key in top if key in by_id and by_id[key]["timed_candidates"] >= MIN_TIMED]
    return {"top90_keys": len(top), "top90_with_min_timed": len(enough), "min_timed": MIN_TIMED}


def _time_figures(results: dict, ran: list[dict]) -> dict:
    """Fixed costs over the deadline, and the share of the run's wall seconds on candidates (the
    keys run side by side on lanes: their seconds count once per lane)."""
    fixed = results.get("fixed") if isinstance(results.get("fixed"), dict) else {}
    fixed_s, deadline = _num(fixed.get("total_s")), deadline_of(results)
    lanes = max(1, len(results.get("lanes") or []))
    walls = [r["wall_s"] for r in ran if r["wall_s"] is not None]
    worked = [r["candidate_s"] for r in ran if r["candidate_s"] is not None]
    run_s = (fixed_s or 0.0) + sum(walls) / lanes if walls else None
    candidate_s = sum(worked) / lanes if worked else None
    split_known = bool(ran) and all(r["from_split"] for r in ran)
    unknown = [what for what, known in (
        ("no split: to_first_s unknown, candidate_share from the records", split_known),
        ("no fixed: fixed costs unknown", bool(fixed))) if not known]
    return {"deadline_s": deadline, "fixed": fixed or None,
            "fixed_share_of_deadline": fixed_s / deadline if fixed_s is not None and deadline else None,
            "run_s": run_s, "candidate_s": candidate_s,
            "candidate_share": candidate_s / run_s if candidate_s is not None and run_s else None,
            "estimated": unknown}


def _stats(values: list[float]) -> dict | None:
    return {"median": statistics.median(values), "mean": statistics.mean(values), "min": min(values),
            "max": max(values)} if values else None


def _tally(values) -> dict[str, int]:
    tally: dict[str, int] = {}
    for value in values:
        tally[str(value)] = tally.get(str(value), 0) + 1
    return tally


# ---------------------------------------------------------------------------------------- tables

def _f(value, spec: str = ".1f", suffix: str = "") -> str:
    return "-" if value is None else f"{value:{spec}}{suffix}"


def markdown(runs: dict[str, dict]) -> str:
    lines = ["| run | keys timed | ran | none timed | median to first | timed / key (median) | "
             "top 90%: >= 8 timed | coverage | improved (mean) | fixed / deadline | on candidates |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, s in runs.items():
        timed = s["timed_per_key"]["median"] if s["timed_per_key"] else None
        lines.append(f"| {name} | {s['keys_timed']} of {_f(s['keys'], 'd') if s['keys'] is not None else '-'} | "
                     f"{s['keys_ran']} | {s['keys_without_timed_candidates']} | "
                     f"{_f(s['median_to_first_s'], '.2f', ' s')} | "
                     f"{_f(timed, '.0f')} | {s['top90_with_min_timed']} of {s['top90_keys']} | "
                     f"{_f(s['coverage'], '.0%')} | {s['improved']} ({_f(s['mean_speedup_on_success'], '.2f', 'x')}) | "
                     f"{_f(s['fixed_share_of_deadline'], '.0%')} | "
                     f"{_f(s['candidate_share'], '.0%')} |")
    for name, s in runs.items():
        lines += ["", f"### {name}: per key" + (f" ({'; '.join(s['estimated'])})"
                                               if s["estimated"] else ""), "",
                  "| key | share | wall | to first | profile (source) | candidates (timed) | decision | roofline |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in s["per_key"]:
            decision = (f"{r['decision']} ({r['speedup']:.3f}x)" if r["decision"]
                        else f"- ({r['finish'] or 'no finish'})")
            roof = f"{_f(r['roofline_before'], '.0%')} -> {_f(r['roofline_after'], '.0%')}"
            lines.append(f"| {_short(r['kernel'])} | {_f(r['time_share'], '.1%')} | {_f(r['wall_s'], '.1f', ' s')} | "
                         f"{_f(r['to_first_s'], '.2f', ' s')} | {_f(r['profile_s'], '.1f', ' s')} "
                         f"({r['profile_source'] or '-'}) | {r['candidates']} ({r['timed_candidates']}) | "
                         f"{decision} | {roof} |")
    return "\n".join(lines)


def _short(name, width: int = 60) -> str:
    name = str(name)
    return name if len(name) <= width else name[:width - 3] + "..."


def main(argv: list[str] | None = None) -> int:
    parser = _common.OneLineParser(prog="reach_summary.py", description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", metavar="[NAME=]PATH", help="an optimize.json (or its folder)")
    parser.add_argument("--json", type=pathlib.Path, default=None, help="write the figures here")
    parser.add_argument("--markdown", type=pathlib.Path, default=None, help="write the tables here too")
    args = parser.parse_args(argv)
    runs = {}
    for given in args.runs:
        name, sep, path_text = given.partition("=")
        path = pathlib.Path(path_text if sep else given)
        path = path / "optimize.json" if path.is_dir() else path
        label = name if sep else (path.parent.name or path.stem)
        try:
            runs[label] = summarize_run(json.loads(path.read_text()))
        except (OSError, ValueError) as exc:
            parser.error(f"{path}: not a readable optimize.json ({exc.__class__.__name__}: {exc})")
    table = markdown(runs)
    print(table)
    if args.markdown:
        args.markdown.write_text(table + "\n")
    if args.json:
        args.json.write_text(json.dumps({"runs": runs, "command": _common.portable_command(sys.argv)}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
