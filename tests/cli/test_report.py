"""tritune.report: the summary's figures on hand-made results with answers worked out here, the
Markdown/HTML (tables, escaping, the interpreter warning), plots with and without matplotlib,
records full of nulls, bad files, and ``tritune report`` through click."""

from __future__ import annotations

import copy
import json
import math
import re
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritune.commands.report import report
from tritune.report.document import KERNEL_HEADERS
from tritune.report import ReportError, load_results, summarize, write_report
from tritune.report.plots import MAX_BARS, SKIPPED_NO_MATPLOTLIB

SAMPLE = Path(__file__).parents[1] / "data" / "optimize_sample.json"
PLOTS = ("speedup", "roofline", "categories", "wall_time")


def cand(status: str, failure: str | None = None, message: str = "") -> dict:
    return {"variant": "v", "status": status, "failure": failure, "message": message, "time_ms": None, "speedup": None}


def kernel(id: str, **fields) -> dict:
    record = {"id": id, "kernel": id.split("-")[0], "kind": "jit", "category": "elementwise", "count": 1,
              "key_sha": "0" * 16, "baseline_ms": None, "best_ms": None, "speedup": 1.0, "accepted": False,
              "decision": None, "bytes": None, "floor_ms": None, "roofline_before": None, "roofline_after": None,
              "bottleneck": None, "profile_source": None, "rounds": 1, "finish": "exhausted", "finish_reason": "",
              "candidates": [], "wall_s": 0.0, "failure": None, "message": ""}
    record.update(fields)
    return record


def hand_results(**top) -> dict:
    """Five kernels (the answers in test_summary_known_answers follow from these numbers):

    k1  accepted 2.0x   baseline 4 ms, best 2 ms, count 3, floor 1 ms     elementwise jit
    k2  accepted 1.5x   baseline 3 ms, best 2 ms, count 1, no floor       reduction inductor
    k3  rejected        baseline 1 ms, best 0.9 ms (not applied), count 2, floor 0.5 ms  elementwise autotune
    k4  accepted 1.02x  below the 1.05x bar: not improved; baseline 2, best 1.96   reduction jit
    k5  baseline failed (compile_error)                                      matmul jit
    """
    kernels = [
        kernel("k1-aaaa", baseline_ms=4.0, best_ms=2.0, speedup=2.0, accepted=True, decision="BLOCK=1024",
               count=3, floor_ms=1.0, wall_s=10.0,
               candidates=[cand("accepted"), cand("rejected", "compile_error", "out of resource: shared memory"),
                           cand("rejected", "below_threshold", "1.01x is below the 1.05x bar")]),
        kernel("k2-bbbb", kind="inductor", category="reduction", baseline_ms=3.0, best_ms=2.0, speedup=1.5,
               accepted=True, decision="R0_BLOCK=2048", wall_s=20.0, candidates=[cand("accepted")]),
        kernel("k3-cccc", kind="autotune", baseline_ms=1.0, best_ms=0.9, speedup=1.0, count=2, floor_ms=0.5,
               wall_s=30.0,
               candidates=[cand("rejected", "wrong_result", "max rel err 1e-2"), cand("rejected", "timeout"),
                           cand("rejected", None, "slower than the original\nsecond line"), cand("verified"),
                           cand("rejected", "below_threshold"),
                           # how the loop leaves what the arbiter screened out, and a beaten winner
                           {**cand("verified"), "verdict": "inside_noise", "reason": "1.2% gain is inside the noise"},
                           {**cand("verified"), "verdict": "superseded"}]),
        kernel("k4-dddd", category="reduction", baseline_ms=2.0, best_ms=1.96, speedup=1.02, accepted=True,
               decision="num_warps=2", wall_s=40.0),
        kernel("k5-eeee", category="matmul", failure="compile_error", message="baseline did not compile",
               speedup=None, wall_s=5.0),
    ]
    results = {"tritune_optimize": 1, "command": "tritune optimize cap --out run", "started": "2026-11-20T10:00:00",
               "finished": "2026-11-20T11:00:00",
               "target": {"gpu": "NVIDIA H100 80GB HBM3", "capability": 90, "triton_version": "3.6.0"},
               "settings": {"threshold": 1.05}, "meaningful": True, "copy_gbps": 3000.0, "store": "run/d.sqlite",
               "kernels": kernels}
    results.update(top)
    return results


# ------------------------------------------------------------------------------------- summary

def test_summary_known_answers():
    s = summarize(hand_results())
    assert (s["kernels"], s["optimized"], s["improved"]) == (5, 4, 2)
    assert s["success_rate"] == pytest.approx(2 / 4)  # over the kernels that ran, not all five
    # geomean over every kernel that ran, 1.0 for k3 and k4 (k4's 1.02x is below the bar: not applied)
    assert s["geomean_speedup"] == pytest.approx((2.0 * 1.5 * 1.0 * 1.0) ** 0.25, rel=1e-12)
    assert s["mean_speedup_on_success"] == pytest.approx((2.0 + 1.5) / 2, rel=1e-12)
    # after = best where improved, baseline elsewhere (k3's faster rejected candidate does not run)
    assert s["sum_before_ms"] == pytest.approx(4 + 3 + 1 + 2)
    assert s["sum_after_ms"] == pytest.approx(2 + 2 + 1 + 2)
    assert s["weighted_before_ms"] == pytest.approx(4 * 3 + 3 + 1 * 2 + 2)
    assert s["weighted_after_ms"] == pytest.approx(2 * 3 + 2 + 1 * 2 + 2)
    assert s["program_speedup"] == pytest.approx(19 / 12)
    roof = s["roofline"]  # k1 and k3 have a floor
    assert (roof["kernels"], roof["excluded"]) == (2, 0)
    assert roof["floor_ms"] == pytest.approx(1.0 * 3 + 0.5 * 2)
    assert roof["before_ms"] == pytest.approx(4 * 3 + 1 * 2)
    assert roof["after_ms"] == pytest.approx(2 * 3 + 1 * 2)
    assert roof["before_x_floor"] == pytest.approx(14 / 4) and roof["after_x_floor"] == pytest.approx(8 / 4)
    assert s["wall_s"]["total"] == pytest.approx(105.0) and s["wall_s"]["median"] == pytest.approx(20.0)
    assert [row["id"] for row in s["wall_s"]["per_kernel"]] == ["k4-dddd", "k3-cccc", "k2-bbbb", "k1-aaaa", "k5-eeee"]
    assert s["improved_ids"] == ["k1-aaaa", "k2-bbbb"]
    assert s["meaningful"] is True and s["gpu"] == "NVIDIA H100 80GB HBM3"


def test_candidate_tallies_split_broken_from_rejected():
    s = summarize(hand_results())
    assert s["failures"] == {"compile_error": 1, "timeout": 1, "wrong_result": 1}
    assert s["rejected_reasons"] == {"below_threshold": 2, "inside_noise": 1, "slower than the original": 1}
    assert s["candidates"] == {"rejected": 6, "verified": 3, "accepted": 2}
    assert s["baseline_failures"] == {"compile_error": 1}


def test_threshold_comes_from_settings():
    strict = summarize(hand_results(settings={"threshold": 1.6}))
    assert strict["threshold"] == 1.6 and strict["improved"] == 1
    assert strict["geomean_speedup"] == pytest.approx(2.0 ** 0.25)
    assert strict["mean_speedup_on_success"] == pytest.approx(2.0)
    lenient = summarize(hand_results(settings={"arbiter": {"threshold": 1.01}}))
    assert lenient["improved"] == 3  # k4's 1.02x now counts
    assert summarize(hand_results(settings=None))["threshold"] == 1.05


def test_groups_follow_table_1():
    s = summarize(hand_results())
    by_category = {row["name"]: row for row in s["by_category"]}
    assert [row["name"] for row in s["by_category"]] == ["elementwise", "reduction", "matmul"]
    assert by_category["elementwise"] | {} == {
        "name": "elementwise", "kernels": 2, "optimized": 2, "improved": 1, "success_rate": 0.5,
        "geomean_speedup": pytest.approx(2.0 ** 0.5), "mean_speedup_on_success": 2.0}
    assert by_category["reduction"]["mean_speedup_on_success"] == 1.5
    assert by_category["reduction"]["geomean_speedup"] == pytest.approx(1.5 ** 0.5)
    assert by_category["matmul"]["optimized"] == 0 and by_category["matmul"]["success_rate"] is None
    by_kind = {row["name"]: row for row in s["by_kind"]}
    assert [row["name"] for row in s["by_kind"]] == ["jit", "autotune", "inductor"]
    assert (by_kind["jit"]["kernels"], by_kind["jit"]["optimized"], by_kind["jit"]["improved"]) == (3, 2, 1)


def test_floor_above_baseline_is_left_out():
    results = hand_results()
    results["kernels"][1]["floor_ms"] = 5.0  # k2 at 3 ms cannot beat a 5 ms floor: bytes over-estimated
    roof = summarize(results)["roofline"]
    assert (roof["kernels"], roof["excluded"]) == (2, 1)
    assert roof["floor_ms"] == pytest.approx(4.0)


def test_sample_fixture():
    """The realistic fixture: 8 kernels, one baseline failed, 4 accepted above 1.05x; the threshold
    under settings.arbiter as LoopSettings.to_json() writes it."""
    s = summarize(SAMPLE)
    assert s["threshold"] == 1.05
    assert s["rejected_reasons"] == {"below_threshold": 3, "confirmation_disagrees": 1, "inside_noise": 1,
                                     "unconfirmed": 1}
    assert s["failures"] == {"compile_error": 2, "runtime_fault": 1, "timeout": 1, "wrong_result": 1}
    data = json.loads(SAMPLE.read_text())
    accepted = [k for k in data["kernels"] if k["accepted"]]
    assert (s["kernels"], s["optimized"], s["improved"]) == (8, 7, len(accepted)) == (8, 7, 4)
    assert s["mean_speedup_on_success"] == pytest.approx(sum(k["speedup"] for k in accepted) / 4)
    assert s["geomean_speedup"] == pytest.approx(math.prod(k["speedup"] for k in accepted) ** (1 / 7))
    assert s["baseline_failures"] == {"runtime_fault": 1}
    assert s["roofline"]["kernels"] == 6  # the matmul has no floor, the attention kernel did not run


def test_null_heavy_records_do_not_crash(tmp_path):
    results = hand_results(target=None, settings="fast", started=None, finished=None, command=None,
                           copy_gbps="n/a", meaningful=None)
    results["kernels"] = [
        {},
        {"id": "nulls", "baseline_ms": None, "best_ms": None, "speedup": None, "count": None, "candidates": None,
         "bottleneck": None, "wall_s": None, "category": None, "kind": None, "accepted": None},
        {"id": "typos", "baseline_ms": "1.0", "best_ms": float("nan"), "speedup": True, "count": "3",
         "accepted": "yes", "candidates": ["oops", {"status": None, "failure": 7}], "bottleneck": "memory",
         "floor_ms": -1, "wall_s": float("inf"), "roofline_before": "x"},
        {"id": "ran-no-best", "baseline_ms": 2.0, "accepted": True, "speedup": None, "best_ms": None},
        {"id": "accepted-no-speedup", "baseline_ms": 2.0, "best_ms": 1.0, "accepted": True, "speedup": None},
    ]
    s = summarize(results)
    assert (s["kernels"], s["optimized"], s["improved"]) == (5, 2, 1)
    # the benchmark ratio stands in for a missing confirmed speedup of an accepted kernel
    assert s["mean_speedup_on_success"] == pytest.approx(2.0)
    assert s["wall_s"]["total"] is None and s["roofline"]["kernels"] == 0
    written = write_report(results, tmp_path / "out")
    text = written["markdown"].read_text()
    assert "typos" in text and "unknown GPU" in text and "not finished" in text
    assert "do not say whether the times are GPU times" in text


def test_no_kernels(tmp_path):
    s = summarize(hand_results(kernels=[]))
    assert s["success_rate"] is None and s["geomean_speedup"] is None and s["sum_before_ms"] is None
    written = write_report(hand_results(kernels=None), tmp_path)
    assert "success rate (>= 1.05x, of optimized): -" in written["markdown"].read_text().replace("&gt;", ">")
    assert set(written) == {"markdown", "html"}  # nothing to plot


# ------------------------------------------------------------------------------- md and html

EVIL = "<script>alert(1)</script>|x & y"


def test_markdown_and_html_tables_escape_user_text(tmp_path):
    results = hand_results()
    results["kernels"][0]["id"] = EVIL
    results["kernels"][4]["message"] = "<b>bold</b> & broken"
    written = write_report(results, tmp_path)
    md, page = written["markdown"].read_text(), written["html"].read_text()

    assert "<script>" not in md and "<b>" not in md
    row = next(line for line in md.splitlines() if "alert(1)" in line)
    assert row.startswith("| &lt;script>alert(1)&lt;/script>\\|x &amp; y | jit | elementwise | 3 |")
    assert len(re.split(r"(?<!\\)\|", row)) == len(KERNEL_HEADERS) + 2  # the escaped | did not add a cell
    assert "| category | kernels | optimized | improved | success rate | mean speedup on success |" in md
    assert "| elementwise | 2 | 2 | 1 | 50.0% | 2.00x | 1.41x |" in md
    assert "| overall | 5 | 4 | 2 | 50.0% | 1.75x | 1.32x |" in md
    assert "| compile_error | 1 |" in md and "| slower than the original | 1 |" in md

    assert "<script>" not in page and "<b>bold" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;|x &amp; y" in page
    assert "&lt;b&gt;bold&lt;/b&gt; &amp; broken" in page
    assert "<th>success rate</th>" in page and "<td>overall</td>" in page
    assert not re.search(r"(src|href)=\"(https?:)?//", page)  # self-contained: nothing fetched
    for needle in ("GPU: NVIDIA H100 80GB HBM3 (sm_90, Triton 3.6.0)", "command: tritune optimize cap --out run",
                   "geomean speedup over optimized kernels (1.0x when not improved): 1.32x"):
        assert needle in md and needle in page


def test_kernel_rows_costliest_first_and_decisions():
    results = hand_results()
    results["kernels"][3]["count"] = 2  # k4: 4 ms in all, ahead of k2's 3 ms
    results["kernels"].reverse()
    md = _markdown(results)
    rows = [line for line in md.splitlines() if re.match(r"\| k\d-", line)]
    assert [r.split(" | ")[0][2:] for r in rows] == ["k1-aaaa", "k4-dddd", "k2-bbbb", "k3-cccc", "k5-eeee"]
    assert "| 2.000 ms | 1.960 ms | 1.02x | kept original (below the bar): num_warps=2 |" in rows[1]
    assert "baseline failed: compile_error" in rows[4]
    assert "k5-eeee: compile_error: baseline did not compile" in md


def test_interpreter_runs_are_flagged():
    md = _markdown(hand_results(meaningful=False))
    warning = "> **Times are NOT meaningful: this run used the CPU interpreter"
    assert warning in md and md.index(warning) < md.index("## Summary")
    assert "times meaningful: NO (CPU interpreter)" in md and "4.000 ms*" in md
    inferred = _markdown(hand_results(meaningful=None, target={"gpu": "interpreter", "capability": 0}))
    assert warning in inferred
    assert "NOT meaningful" not in _markdown(hand_results())


def test_interrupted_run_is_flagged():
    md = _markdown(hand_results(stopped="deadline: 60 s spent, 3 kernels left", planned=8, finished=None))
    assert "> **The run stopped early: deadline: 60 s spent, 3 kernels left**" in md
    assert "kernels in these results: 5 of 8 planned" in md and "(not finished)" in md
    assert "planned" not in _markdown(hand_results(planned=5))


def _markdown(results: dict) -> str:
    import tempfile

    with tempfile.TemporaryDirectory() as out:
        return write_report(results, out)["markdown"].read_text()


# ------------------------------------------------------------------------------------- plots

def test_plots_written_and_embedded(tmp_path):
    pytest.importorskip("matplotlib")
    written = write_report(SAMPLE, tmp_path)
    for name in PLOTS:
        path = written[name]
        assert path == tmp_path / "plots" / f"{name}.png"
        assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size > 5000
    md, page = written["markdown"].read_text(), written["html"].read_text()
    assert "](plots/speedup.png)" in md and "](plots/wall_time.png)" in md
    assert page.count('src="data:image/png;base64,') == 4
    assert SKIPPED_NO_MATPLOTLIB not in md


def test_plots_cap_and_odd_names(tmp_path):
    pytest.importorskip("matplotlib")
    results = hand_results(kernels=[kernel(f"k{i}$_$-{'x' * 60}", baseline_ms=1.0 + i, best_ms=1.0,
                                           speedup=1.0 + i, accepted=True, floor_ms=0.5, wall_s=float(i))
                                    for i in range(MAX_BARS + 5)])
    written = write_report(results, tmp_path)  # '$' in a label must not trip matplotlib's math text
    assert all(written[name].stat().st_size > 0 for name in PLOTS)
    assert f"the {MAX_BARS} costliest of {MAX_BARS + 5} kernels" in written["markdown"].read_text()


def test_without_matplotlib(tmp_path, monkeypatch):
    for module in ("matplotlib", "matplotlib.figure"):
        monkeypatch.setitem(sys.modules, module, None)  # import now raises ImportError
    written = write_report(SAMPLE, tmp_path)
    assert set(written) == {"markdown", "html"}
    assert not (tmp_path / "plots").exists()
    md, page = written["markdown"].read_text(), written["html"].read_text()
    assert SKIPPED_NO_MATPLOTLIB in md and SKIPPED_NO_MATPLOTLIB in page
    assert "<img" not in page and "| triton_red_fused__softmax_0-3f2a9c1e7b |" in md
    result = CliRunner().invoke(report, [str(SAMPLE), "--out", str(tmp_path / "cli")])
    assert result.exit_code == 0 and SKIPPED_NO_MATPLOTLIB in result.stderr


# -------------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("content, message", [
    ("{not json", "is not JSON (line 1"),
    ("[1, 2]", "is not a tritune optimize results file (no 'tritune_optimize' key)"),
    ('{"kernels": []}', "no 'tritune_optimize' key"),
    ('{"tritune_optimize": 3, "kernels": []}', "has optimize format version 3; this tritune reads version(s) 1, 2"),
    ('{"tritune_optimize": 1, "kernels": {"a": 1}}', "'kernels' is a dict, not a list"),
    ('{"tritune_optimize": 1, "kernels": [{}, 3]}', "kernels[1] is a int, not an object"),
])
def test_bad_files(tmp_path, content, message):
    path = tmp_path / "optimize.json"
    path.write_text(content)
    with pytest.raises(ReportError, match=re.escape(message)):
        load_results(path)
    result = CliRunner().invoke(report, [str(path), "--out", str(tmp_path / "r")])
    assert result.exit_code == 2 and message in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("tritune report: ")


def test_missing_file_and_directory_argument(tmp_path):
    missing = CliRunner().invoke(report, [str(tmp_path / "nope.json")])
    assert missing.exit_code == 2 and f"no such file: {tmp_path / 'nope.json'}" in missing.stderr
    with pytest.raises(ReportError, match="no such file"):
        summarize(tmp_path)  # a folder without optimize.json
    (tmp_path / "optimize.json").write_text(json.dumps(hand_results()))
    assert summarize(tmp_path)["kernels"] == 5  # the folder holding optimize.json


def test_dict_input_is_checked_and_not_mutated():
    results = hand_results()
    before = copy.deepcopy(results)
    summarize(results)
    assert results == before
    with pytest.raises(ReportError, match="results has optimize format version '1'"):
        summarize({**results, "tritune_optimize": "1"})


# ------------------------------------------------------------------------------------- CLI

def test_cli_writes_the_report(tmp_path):
    results = tmp_path / "run" / "optimize.json"
    results.parent.mkdir()
    results.write_text(json.dumps(hand_results(meaningful=False)))
    result = CliRunner().invoke(report, [str(results)])  # --out defaults to run/report
    assert result.exit_code == 0, result.output
    out = tmp_path / "run" / "report"
    assert f"markdown: {out / 'report.md'}" in result.stdout and (out / "report.html").is_file()
    assert "2 of 4 optimized kernel(s) improved (50.0%), geomean 1.32x" in result.stdout
    assert "CPU interpreter: times NOT meaningful" in result.stdout


def test_cli_out_option(tmp_path):
    result = CliRunner().invoke(report, [str(SAMPLE), "--out", str(tmp_path / "deep" / "er")])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "deep" / "er" / "report.md").is_file()


def test_candidate_notes_are_listed_escaped_and_absent_when_there_are_none(tmp_path):
    note = "peak device memory 300 MiB against the baseline's 10 MiB (30.0x, +290 MiB): reported, not a rejection"
    results = hand_results()
    results["kernels"][0]["candidates"][0] = {**cand("accepted"), "variant": "<b>block</b>", "notes": [note]}
    assert summarize(results)["notes"] == [f"k1-aaaa: <b>block</b>: {note}"]
    written = write_report(results, tmp_path / "with")
    md, page = written["markdown"].read_text(), written["html"].read_text()
    for text in (md, page):
        assert "Notes on candidates (reported, not rejections)" in text and "(30.0x, +290 MiB)" in text
        assert "<b>block" not in text
    plain = write_report(hand_results(), tmp_path / "without")["markdown"].read_text()
    assert summarize(hand_results())["notes"] == [] and "Notes on candidates" not in plain


def test_where_the_time_went_per_run_and_per_key():
    results = hand_results(fixed={"start_s": 2.0, "baselines_s": 6.0, "total_s": 8.0, "build_s": 4.5,
                                  "rank_time_s": 1.5}, deadline_s=200.0,
                           wall_s=100.0, lanes=[{"name": "cuda:0"}],
                           timed=[{"key_sha": "1", "id": "k9-ffff", "kernel": "k9", "launches": 1, "baseline_ms": None,
                                   "failure": "untimed", "message": "every lane died"}])
    results["kernels"][0].update(split={"to_first_s": 1.5, "baseline_s": 0.5, "profile_s": 0.25, "build_s": 0.0,
                                        "verify_s": 5.0, "time_s": 2.0, "judge_s": 1.0, "idle_s": 1.25},
                                 timed_candidates=7, budget_s=12.0, profile_source="timing+static")
    results["kernels"][1].update(split={"to_first_s": 2.5}, wall_s=20.0)
    md = _markdown(results)
    assert "fixed costs before the first kernel: 8.0 s (4.0% of the 200 s deadline)" in md
    assert "baselines timed for the ranking 6.0 s (built 4.5 s, timed 1.5 s)" in md
    # (10 - 1.5) + (20 - 2.5) of 100 s on one lane
    assert "spent on candidates (after each kernel's first): 26.0% of 100.0 s" in md
    assert "time to a kernel's first candidate: median 2.0 s, max 2.5 s (2 kernel(s))" in md
    assert "| k1 | 12.0 s | 1.5 s | 0.5 s | 0.2 s | timing+static | 7 | 5.0 s | 2.0 s | 1.0 s | 1.2 s | 10.0 s |" in md
    assert "k9 (k9-ffff): untimed: every lane died" in md
    assert "Where the time went" not in _markdown(hand_results())  # a record older than the split: nothing
