"""The committed benchmark results read honestly: every file under benchmarks/results/ names the GPU,
the date, the command and the commit it ran at, and the figures benchmarks/README.md quotes are the
ones their data files hold (rounded, not picked from an older file).

Where a result's provenance lives: each results folder's ``provenance.json`` lists every file under
it (down to the next folder that has its own) by the run that made it, and each run's GPU, date,
command and commit, with how they were recovered. A manifest rather than a field in each file: the
files stay as the device wrote them (lists, logs, tables, plots and emitted kernels cannot all hold
a field), the commit can only be named where the run is committed (the device copy's ``.git`` is
stale or missing), and a regenerated table keeps its entry. Every file counts, JSON or not: a plot
or a kernel.py is as much a result as the numbers it came from. The folders' README.md files are
people's notes on the runs, not results.
"""

from __future__ import annotations

import json
import pathlib
import re
import subprocess
import sys

import pytest

BENCH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
RESULTS = BENCH / "results"
README = (BENCH / "README.md").read_text()
MANIFEST = "provenance.json"
NOTES = {"README.md"}  # people's notes on the runs, not results
FIELDS = ("gpu", "date", "command", "commit")
BASES = {"stated", "inferred", "unknown"}  # where the commit comes from
COMMIT = re.compile(r"\b[0-9a-f]{7,40}\b")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}\b")


def provenance_problems(results: pathlib.Path) -> list[str]:
    """What keeps a file under ``results`` from naming its GPU, date, command and commit, one line each."""
    manifests, problems = {}, []
    for path in sorted(results.rglob(MANIFEST)):
        try:
            manifests[path.parent] = json.loads(path.read_text())
        except ValueError as exc:
            problems.append(f"{path}: not JSON ({exc})")
    for folder, manifest in manifests.items():
        for name, run in manifest.get("runs", {}).items():
            problems += [f"{folder / MANIFEST}: run {name}: {p}" for p in _run_problems(run)]
        for rel, name in manifest.get("files", {}).items():
            if name not in manifest.get("runs", {}):
                problems.append(f"{folder / MANIFEST}: {rel}: no run {name!r}")
            if not (folder / rel).is_file():
                problems.append(f"{folder / MANIFEST}: {rel}: no such file")
    for path in sorted(p for p in results.rglob("*") if p.is_file() and p.name not in NOTES | {MANIFEST}):
        owner = next((folder for folder in path.parents if folder in manifests), None)
        if owner is None or results not in (owner, *owner.parents):
            problems.append(f"{path}: no {MANIFEST} in its folder or above")
        elif path.relative_to(owner).as_posix() not in manifests[owner].get("files", {}):
            problems.append(f"{path}: not listed in {owner / MANIFEST}")
    return problems


def _run_problems(run: dict) -> list[str]:
    problems = [f"no {field}" for field in (*FIELDS, "commit_basis", "how")
                if not isinstance(run.get(field), str) or not run[field].strip()]
    if problems:
        return problems
    unknown = [field for field in FIELDS if run[field] == "unknown"]
    if unknown and not str(run.get("why", "")).strip():
        problems.append(f"{', '.join(unknown)} unknown without a why")
    if run["commit_basis"] not in BASES:
        problems.append(f"commit_basis {run['commit_basis']!r} is none of {sorted(BASES)}")
    elif (run["commit_basis"] == "unknown") != (run["commit"] == "unknown"):
        problems.append("commit and commit_basis disagree on whether it is unknown")
    if run["commit"] != "unknown" and not COMMIT.search(run["commit"]):
        problems.append(f"commit {run['commit']!r} names no commit")
    if run["date"] != "unknown" and not DATE.match(run["date"]):
        problems.append(f"date {run['date']!r} is not YYYY-MM-DD")
    return problems


def test_every_committed_result_names_gpu_date_command_and_commit():
    assert provenance_problems(RESULTS) == []


RUN = {"gpu": "NVIDIA H200", "date": "2026-11-29", "command": "python3 benchmarks/x.py --out $OUT",
       "commit": "254bd73", "commit_basis": "stated", "how": "the README's session 10"}


def _tree(tmp_path: pathlib.Path, run: dict, files: dict) -> pathlib.Path:
    results = tmp_path / "results"
    (results / "sub").mkdir(parents=True)
    for rel in ("a.json", "b.log", "README.md", "sub/c.md"):
        (results / rel).write_text("{}")
    (results / MANIFEST).write_text(json.dumps({"runs": {"r": run}, "files": files}))
    return results


def test_the_provenance_check_passes_a_complete_tree(tmp_path):
    results = _tree(tmp_path, RUN, {"a.json": "r", "b.log": "r", "sub/c.md": "r"})
    assert provenance_problems(results) == []
    unknown = {**RUN, "commit": "unknown", "commit_basis": "unknown", "why": "the log names none"}
    assert provenance_problems(_tree(tmp_path / "u", unknown, {"a.json": "r", "b.log": "r", "sub/c.md": "r"})) == []


@pytest.mark.parametrize("run, files, problem", [
    (RUN, {"a.json": "r", "sub/c.md": "r"}, "b.log: not listed in"),  # a log without provenance
    (RUN, {"a.json": "r", "b.log": "r"}, "c.md: not listed in"),  # a table in a folder below
    ({**RUN, "commit": ""}, {"a.json": "r", "b.log": "r", "sub/c.md": "r"}, "run r: no commit"),
    ({k: v for k, v in RUN.items() if k != "gpu"}, {"a.json": "r", "b.log": "r", "sub/c.md": "r"}, "run r: no gpu"),
    ({**RUN, "date": "last week"}, {"a.json": "r", "b.log": "r", "sub/c.md": "r"}, "is not YYYY-MM-DD"),
    ({**RUN, "commit": "main"}, {"a.json": "r", "b.log": "r", "sub/c.md": "r"}, "names no commit"),
    ({**RUN, "command": "unknown"}, {"a.json": "r", "b.log": "r", "sub/c.md": "r"}, "unknown without a why"),
    ({**RUN, "commit": "unknown"}, {"a.json": "r", "b.log": "r", "sub/c.md": "r"}, "disagree"),
    (RUN, {"a.json": "r", "b.log": "r", "sub/c.md": "r", "gone.json": "r"}, "gone.json: no such file"),
    (RUN, {"a.json": "r", "b.log": "other", "sub/c.md": "r"}, "b.log: no run 'other'"),
], ids=["unlisted-log", "unlisted-below", "empty-commit", "no-gpu", "bad-date", "not-a-commit", "unknown-no-why",
        "basis-disagrees", "stale-entry", "no-such-run"])
def test_the_provenance_check_fails_on_a_result_without_them(tmp_path, run, files, problem):
    problems = provenance_problems(_tree(tmp_path, run, files))
    assert any(problem in p for p in problems), problems


def test_the_e2e_table_reads_past_its_folders_manifest():
    """e2e_table.py reads every JSON of results/e2e/: the manifest there is not a model's result."""
    done = subprocess.run([sys.executable, str(BENCH / "e2e_table.py")], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr[-2000:]
    assert [line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("**")] == [
        "**bert**", "**gpt2**", "**resnet50**"]


def test_a_results_folder_without_any_manifest_is_named(tmp_path):
    (tmp_path / "results").mkdir()
    (tmp_path / "results" / "x.csv").write_text("a,b\n")
    assert provenance_problems(tmp_path / "results") == [f"{tmp_path / 'results' / 'x.csv'}: no {MANIFEST} in its "
                                                           "folder or above"]


def _load(name: str):
    return json.loads((RESULTS / name).read_text())


def _quoted(text: str) -> None:
    """``text`` in benchmarks/README.md, its line breaks and indentation taken as one space."""
    flat = re.sub(r"\s+", " ", README)
    assert text in flat, f"benchmarks/README.md does not say: {text}"


def test_the_e2e_abab_spread_is_the_pairs_of_every_model_and_mode():
    ratios = [r for model in ("bert", "gpt2", "resnet50") for mode in _load(f"e2e/{model}.json")["modes"].values()
              for r in (mode.get("speedup") or {}).get("ratios", [])]
    assert len(ratios) == 3 * 2 * 8  # two tritune modes a model, 8 ABAB pairs each
    _quoted(f"spread from {min(ratios):.2f}x (bert's `tritune` row) to {max(ratios):.2f}x")


def test_resnet50s_decided_keys_range_is_its_optimize_json():
    decided = [k["speedup"] for k in _load("e2e/optimize/resnet50.json")["kernels"] if k["accepted"]]
    _quoted(f"15 decided, {min(decided):.2f}x-{max(decided):.2f}x each in `results/e2e/optimize/resnet50.json`")
    assert len(decided) == 15


def test_the_suites_matmul_is_its_suite_json():
    (matmul,) = [k for k in _load("optimize/suite.json")["kernels"] if k["kernel"] == "matmul_kernel"]
    _quoted(f"`matmul` {matmul['speedup']:.2f}x (`BLOCK_M` 64 -> 256; {matmul['speedup']:.4f} in `suite.json`)")


def test_the_coverage_table_gives_each_stopped_runs_own_deadline():
    for name, row in (("gpt2-resumed", "gpt2 train, second run (`gpt2-resumed.json`, new capture) | 55 |"),
                      ("gpt2-first", "gpt2 train, first run (`c80b001`, `gpt2-first.json`) | 55 |")):
        seconds = re.match(r"deadline: (\d+) s spent", _load(f"e2e/optimize/{name}.json")["stopped"]).group(1)
        _quoted(f"{row} deadline {seconds} s |")


def test_the_apply_overhead_block_spread_is_the_file_the_table_reads():
    blocks = _load("apply_overhead.json")["us_per_launch"]["jit_no_decision"]["samples"]["off"]["host"]
    assert len(blocks) == 10
    _quoted(f"{min(blocks):.1f}-{max(blocks):.1f} us over its 10 blocks in `apply_overhead.json`")
