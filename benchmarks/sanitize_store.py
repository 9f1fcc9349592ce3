"""compute-sanitizer memcheck on every accepted variant of a decision store, on the GPU.

tritune's guard regions (``tritune.replay.guard``) catch writes just outside a tensor during
verification; they replace nothing in compute-sanitizer, which sees every access of the variant
against the real allocation bounds. This script replays each usable decision's variant once, in a
child process under ``compute-sanitizer --tool memcheck``, on inputs without guard margins and with
PyTorch's caching allocator off (``PYTORCH_NO_CUDA_MEMORY_CACHING=1``), so every tensor is its own
allocation and an overrun of one byte is reported. The count comes from the tool's
``ERROR SUMMARY: N errors`` line.

    PYTHONPATH=src python3 benchmarks/sanitize_store.py --store DB --launches DIR --out FILE.json

A decision is matched to its launch in DIR by its key (``tritune.store.key_for`` on the decision's
own GPU, capability and Triton version), so the capture the store was optimized from is needed.
``FILE.json`` holds the environment (GPU, date, command) and one row per decision; a markdown
table goes next to it (``FILE.md``). Exit 0 when every variant ran clean, 1 otherwise, 2 on bad
arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "benchmarks"), str(REPO / "src")]

SANITIZER = "compute-sanitizer"
TIMEOUT_S = 900  # memcheck slows a kernel down 10-100x, and the child compiles it first
_SUMMARY = re.compile(r"ERROR SUMMARY: (\d+) errors?")
_MARK = "========= "  # compute-sanitizer's prefix; reports start right after it, details are indented


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line and exit 2 (argparse would print its usage first)
        print(f"sanitize_store.py: {message}", file=sys.stderr)
        raise SystemExit(2)


def error_count(output: str) -> int | None:
    """The last ``ERROR SUMMARY: N errors`` of compute-sanitizer's output; None without one (the
    tool or the child did not get that far)."""
    found = _SUMMARY.findall(output)
    return int(found[-1]) if found else None


def first_error(output: str) -> str:
    """The first report of compute-sanitizer (``========= Invalid __global__ write of size 4
    bytes``; its indented lines say where), or ''."""
    for line in output.splitlines():
        if not line.startswith(_MARK) or line[len(_MARK):][:1].isspace():
            continue
        text = line[len(_MARK):].strip()
        if text and not text.startswith(("COMPUTE-SANITIZER", "ERROR SUMMARY")):
            return text[:200]
    return ""


def plan(store_path: Path, launches: Path) -> list[dict]:
    """One row per usable decision: its key, variant and the launch spec it was made for (None when
    the capture does not hold it)."""
    from tritune.capture.spec import read_launches
    from tritune.model.target import Target
    from tritune.store import DecisionStore, key_for

    specs = read_launches(launches)
    with DecisionStore(store_path) as store:
        decisions = store.decisions(usable_only=True)
    rows = []
    for decision in decisions:
        key = decision.key
        target = Target(key.gpu_name, key.capability, key.triton_version)
        spec = next((s for s in specs if s.kernel == key.kernel and key_for(s, target).sha == key.sha), None)
        rows.append({"kernel": key.kernel, "key_sha": key.sha, "variant": decision.variant.to_json(),
                     "describe": decision.variant.describe(), "speedup": decision.speedup,
                     "spec": spec.to_json() if spec else None})
    return rows


def sanitize(row: dict, launches: Path, sanitizer: str, timeout_s: float) -> dict:
    """Replay one row's variant under memcheck; the row with ``errors``, ``status`` and ``first``."""
    if row["spec"] is None:
        return {**row, "status": "no_launch", "errors": None, "first": "no launch in the capture has this key"}
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as handle:
        json.dump({"spec": row["spec"], "variant": row["variant"], "root": str(launches)}, handle)
    env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    command = [sanitizer, "--tool", "memcheck", sys.executable, str(Path(__file__).resolve()), "--replay", handle.name]
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout_s, env=env)
        output, code = done.stdout + done.stderr, done.returncode
    except subprocess.TimeoutExpired as exc:
        output, code = f"{exc.stdout or ''}{exc.stderr or ''}", None
    finally:
        os.unlink(handle.name)
    errors = error_count(output)
    status = "clean" if errors == 0 and code == 0 else "errors" if errors else "failed"
    first = first_error(output) or (output.strip().splitlines() or [""])[-1][:200]
    return {**row, "status": status, "errors": errors, "exit_code": code, "first": "" if status == "clean" else first}


def replay_child(payload_path: str) -> int:
    """In the child, under the sanitizer: build the variant and launch it once on unguarded inputs."""
    import torch

    from tritune.model.launch import LaunchSpec
    from tritune.model.variant import Variant
    from tritune.replay import Replay, make_args

    payload = json.loads(Path(payload_path).read_text())
    spec, root = LaunchSpec.from_json(payload["spec"]), payload["root"]
    replay = Replay(spec, Variant.from_json(payload["variant"]), root=root)
    replay(make_args(spec, root, margins=False))
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return 0


def markdown(result: dict) -> str:
    env = result["environment"]
    lines = [f"# compute-sanitizer memcheck on {result['store']}", "",
             f"GPU {env.get('gpu')}, {env.get('utc')}, triton {env.get('triton')}, torch {env.get('torch')}", "",
             f"    {env.get('command')}", "", f"sanitizer: {result['sanitizer_version']}", "",
             "| kernel | variant | status | errors | first error |", "|---|---|---|---|---|"]
    for row in result["rows"]:
        lines.append(f"| {row['kernel']} | {row['describe']} | {row['status']} | "
                     f"{'-' if row['errors'] is None else row['errors']} | {row['first'].replace('|', '/')} |")
    totals = result["totals"]
    lines += ["", f"{totals['clean']} of {totals['decisions']} accepted variants clean."]
    return "\n".join(lines) + "\n"


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = _Parser(description=__doc__.splitlines()[0])
    parser.add_argument("--store", type=Path, help="the decision store (decisions.db)")
    parser.add_argument("--launches", type=Path, help="the capture directory the store was optimized from")
    parser.add_argument("--out", type=Path, help="the JSON result (a .md table goes next to it)")
    parser.add_argument("--sanitizer", default=SANITIZER, help=f"the compute-sanitizer binary (default {SANITIZER})")
    parser.add_argument("--timeout", type=float, default=TIMEOUT_S, help=f"seconds per variant (default {TIMEOUT_S})")
    parser.add_argument("--replay", help=argparse.SUPPRESS)  # the child's own mode
    args = parser.parse_args(argv)
    if args.replay:
        return args
    for name in ("store", "launches", "out"):
        if getattr(args, name) is None:
            parser.error(f"--{name} is required")
    if not args.store.is_file():
        parser.error(f"no decision store at {args.store}")
    if not (args.launches / "launches.jsonl").is_file():
        parser.error(f"{args.launches} is not a capture directory (no launches.jsonl)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if args.replay:
        return replay_child(args.replay)
    import _common
    from tritune.model.launch import SpecError
    from tritune.store import StoreError

    try:
        planned = plan(args.store, args.launches)
    except (SpecError, StoreError, sqlite3.DatabaseError) as exc:
        print(f"sanitize_store.py: {' '.join(str(exc).split())}", file=sys.stderr)
        return 2
    _common.require_cuda("sanitize_store.py")
    try:
        version = subprocess.run([args.sanitizer, "--version"], capture_output=True, text=True, timeout=60)
    except OSError as exc:
        print(f"sanitize_store.py: cannot run {args.sanitizer}: {exc.strerror}", file=sys.stderr)
        return 2
    rows = []
    for row in planned:
        rows.append(sanitize(row, args.launches, args.sanitizer, args.timeout))
        done = rows[-1]
        print(f"{done['kernel']:32.32s} {done['describe']:40.40s} {done['status']:9s} "
              f"{'' if done['errors'] is None else done['errors']}  {done['first']}", flush=True)
    clean = sum(r["status"] == "clean" for r in rows)
    result = {"environment": _common.environment(), "store": args.store.name, "launches": args.launches.name,
              "sanitizer_version": (version.stdout.strip().splitlines() or [""])[-1],
              "totals": {"decisions": len(rows), "clean": clean}, "rows": rows}
    for row in rows:  # the result names each variant; its source text and the spec stay in DB and DIR
        row.pop("spec", None)
        row["variant"].pop("source", None)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    args.out.with_suffix(".md").write_text(markdown(result))
    print(f"{clean} of {len(rows)} accepted variants clean; {args.out}")
    return 0 if clean == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
