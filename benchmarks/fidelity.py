"""Replay fidelity (issue 24, section 3): of every launch a program made, how many tritune can replay.

For each capture directory (a corpus: the suite, a model, a library), per launch:

  captured   in ``launches.jsonl``; the launches capture saw and could not record are listed
             from ``skipped.jsonl`` with why (``tritune.capture.skipped``)
  replayed   built and run once to completion on fresh inputs in a tritune worker
             (``tritune.replay.once:replay_job``: the kernel file imports, constexprs decode,
             it compiles, runs, and on a GPU synchronizes)
  timed      then timed by ``tritune bench``'s job (one do_bench median) in the same worker
  failed     which stage (replay or time), the worker's failure kind (compile_error,
             runtime_fault, timeout, crash, error) and one line of message

Each corpus gets one jailed worker, reused from launch to launch (``tritune bench``'s; a fault,
timeout or crash restarts it). The goal is 100% replayed on the suite, the models and the
Liger/fla corpus, and every failure named.

    PYTHONPATH=$PWD/src python3 benchmarks/fidelity.py suite=CAP1 llama=CAP2 ... \
        --out $OUT/fidelity.json --md $OUT/fidelity.md [--limit-s 540] [--no-time]

A corpus is ``NAME=DIR`` or ``DIR`` (named by its folder). ``--limit-s``: launches not reached by
then are counted ``not_run`` (the table says so). Under ``TRITON_INTERPRET=1`` it runs on the CPU
(times not meaningful); ``--no-isolate`` runs the jobs in this process (tests).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import pathlib
import sys
import time
from typing import Any, Callable, Sequence

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import _common  # noqa: E402

REPLAY_JOB = "tritune.replay.once:replay_job"
BENCH_JOB = "tritune.bench.run:bench_job"
TIME_METHODS = ["median"]
DEFAULT_TIMEOUT_S = 300.0

# (target, payload) -> (ok, value or None, failure kind or None, message or None), as tritune bench
Call = Callable[[str, dict], tuple[bool, Any, "str | None", "str | None"]]


def corpus(name: str, directory: pathlib.Path, call: Call, *, time_it: bool = True,
           deadline: float | None = None) -> dict:
    """The fidelity of one capture directory: counts, skipped launches and a row per launch."""
    from tritune.capture import skipped
    from tritune.capture.spec import read_launches
    from tritune.model.launch import SpecError

    found: dict[str, Any] = {"name": name, "dir": str(directory), "error": None, "rows": [], "skipped": []}
    try:
        specs = read_launches(directory)
        records = skipped.read(directory)
    except SpecError as exc:
        found["error"] = str(exc)
        return _count(found)
    found["skipped"] = [r.to_json() for r in records]
    root = str(directory.resolve())
    for spec in specs:
        row = {"id": spec.id, "kernel": spec.kernel, "kind": spec.kind, "count": spec.count, "replayed": False,
               "timed": False, "time_ms": None, "meaningful": None, "stage": None, "failure": None, "message": None}
        found["rows"].append(row)
        if deadline is not None and time.monotonic() > deadline:
            row.update(stage="not_run", message="the time limit was reached before this launch")
            continue
        payload = {"spec": spec.to_json(), "root": root}
        ok, _, kind, message = call(REPLAY_JOB, payload)
        if not ok:
            row.update(stage="replay", failure=kind, message=_line(message))
            continue
        row["replayed"] = True
        if not time_it:
            continue
        ok, value, kind, message = call(BENCH_JOB, {**payload, "methods": TIME_METHODS})
        if not ok or value.get("time_ms") is None:
            row.update(stage="time", failure=kind or "error", message=_line(message or "no time measured"))
            continue
        row.update(timed=True, time_ms=value["time_ms"], meaningful=value.get("meaningful"))
    return _count(found)


def _count(found: dict) -> dict:
    rows = found["rows"]
    found.update(
        captured=len(rows), launches=sum(r["count"] for r in rows),
        skipped_records=len(found["skipped"]), skipped_launches=sum(r["count"] for r in found["skipped"]),
        replayed=sum(r["replayed"] for r in rows), timed=sum(r["timed"] for r in rows),
        failed=sum(r["failure"] is not None for r in rows), not_run=sum(r["stage"] == "not_run" for r in rows))
    seen = found["captured"] + found["skipped_records"]
    found["replayed_pct"] = 100.0 * found["replayed"] / seen if seen else None
    kinds: dict[str, int] = {}
    for row in rows:
        if row["failure"]:
            label = f"{row['stage']}: {row['failure']}"
            kinds[label] = kinds.get(label, 0) + 1
    found["failure_kinds"] = kinds
    return found


def total(corpora: Sequence[dict]) -> dict:
    """One row summing the corpora (the table's last line)."""
    return _count({"name": "**all**", "error": None, "rows": [r for c in corpora for r in c["rows"]],
                   "skipped": [s for c in corpora for s in c["skipped"]]})


def _line(message: str | None) -> str:
    text = " ".join((message or "").split())
    return text if len(text) <= 300 else text[:297] + "..."


def markdown(report: dict) -> str:
    """The table, then each corpus's failures and skipped launches, one line each."""
    env = report.get("environment") or {}
    lines = ["# Replay fidelity", "",
             f"GPU: {env.get('gpu') or 'none (interpreter)'}; {env.get('utc', '?')}; torch {env.get('torch', '?')}, "
             f"triton {env.get('triton', '?')}; command: `{report.get('command', '')}`", "",
             "| corpus | captured | skipped (launches) | replayed | timed | failed | not run | replayed % | failures |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---|"]
    rows = list(report["corpora"])
    if len(rows) > 1:
        rows.append(total(rows))
    for c in rows:
        pct = "-" if c["replayed_pct"] is None else f"{c['replayed_pct']:.1f}%"
        kinds = ", ".join(f"{kind} x{n}" for kind, n in sorted(c["failure_kinds"].items())) or "-"
        lines.append(f"| {c['name']} | {c['captured']} | {c['skipped_records']} ({c['skipped_launches']}) | "
                     f"{c['replayed']} | {c['timed']} | {c['failed']} | {c['not_run']} | {pct} | {kinds} |")
    lines.append("")
    lines.append("replayed % = replayed / (captured launches + skipped records): a launch capture could not "
                 "record counts against it.")
    for c in report["corpora"]:
        problems = [r for r in c["rows"] if r["stage"]]
        if not (problems or c["skipped"] or c["error"]):
            continue
        lines += ["", f"## {c['name']}", ""]
        if c["error"]:
            lines.append(f"- capture unusable: {c['error']}")
        for r in problems:
            what = r["stage"] if r["stage"] == "not_run" else f"{r['stage']} {r['failure']}"
            lines.append(f"- `{r['kernel']}` ({r['id']}): {what}: {r['message']}")
        for s in c["skipped"]:
            lines.append(f"- `{s['kernel']}`: not captured ({s['kind']}, {s['count']} launch(es)): {s['reason']}")
    return "\n".join(lines) + "\n"


def run(corpora: Sequence[tuple[str, pathlib.Path]], *, isolate: bool = True, time_it: bool = True,
        timeout_s: float = DEFAULT_TIMEOUT_S, limit_s: float | None = None) -> list[dict]:
    """Every corpus in turn, each with a worker of its own (``isolate``) or in this process."""
    from tritune.commands.bench import _in_process, _isolated  # tritune bench's calls: same jail, same restarts

    deadline = None if limit_s is None else time.monotonic() + limit_s
    results = []
    for name, directory in corpora:
        with contextlib.ExitStack() as stack:
            call = _isolated(timeout_s, stack, directory) if isolate else _in_process
            results.append(corpus(name, directory, call, time_it=time_it, deadline=deadline))
        _common.log(f"{name}: {results[-1]['replayed']}/{results[-1]['captured']} replayed, "
                    f"{results[-1]['timed']} timed, {results[-1]['failed']} failed, "
                    f"{results[-1]['skipped_records']} skipped record(s)")
    return results


GENERIC_NAMES = ("capture", "opt")  # folders tritune's runs name the same in every corpus


def parse_corpus(text: str) -> tuple[str, pathlib.Path]:
    """``NAME=DIR``, or ``DIR`` named by its folder (by the nearest one above that is not
    ``capture`` or ``opt``: ``gpu_state/corpus/*/capture`` names each by its file)."""
    name, sep, path = text.partition("=")
    if not sep:
        path = text
        folder = pathlib.Path(text).resolve()
        while folder.name in GENERIC_NAMES and folder.parent != folder:
            folder = folder.parent
        name = folder.name
    return name, pathlib.Path(path)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("corpora", nargs="+", metavar="[NAME=]CAPTURE_DIR")
    parser.add_argument("--out", required=True, type=pathlib.Path, help="JSON results file")
    parser.add_argument("--md", required=True, type=pathlib.Path, help="Markdown table file")
    parser.add_argument("--timeout-s", type=float, default=DEFAULT_TIMEOUT_S, help="per job")
    parser.add_argument("--limit-s", type=float, default=None, help="launches not reached by then: not run")
    parser.add_argument("--no-time", action="store_true", help="replay only")
    parser.add_argument("--no-isolate", action="store_true", help="jobs in this process (tests)")
    args = parser.parse_args(argv)
    corpora = [parse_corpus(text) for text in args.corpora]
    missing = [str(path) for _, path in corpora if not path.is_dir()]
    if missing:
        parser.error(f"not a directory: {', '.join(missing)}")
    results = run(corpora, isolate=not args.no_isolate, time_it=not args.no_time, timeout_s=args.timeout_s,
                  limit_s=args.limit_s)
    given = sys.argv[1:] if argv is None else list(argv)
    report = {"environment": _common.environment(), "command": _common.portable_command([__file__, *given]),
              "corpora": results}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=1) + "\n")
    args.md.parent.mkdir(parents=True, exist_ok=True)
    args.md.write_text(markdown(report))
    print(markdown(report))
    return 0 if all(c["replayed"] == c["captured"] and not c["error"] and not c["skipped"] for c in results) else 1


if __name__ == "__main__":
    sys.exit(main())
