"""benchmarks/corpus without a GPU: the driver list, the on/off output check (an output left
unwritten, i.e. still poisoned, or out of tolerance is wrong), which kernels count as improved,
the table from a canned results file, and run.py's resume and limit rules on stand-in stages."""

from __future__ import annotations

import itertools
import json
import math
import pathlib
import sys

import pytest

torch = pytest.importorskip("torch")

REPO = pathlib.Path(__file__).resolve().parents[2]
sys.path[:0] = [str(REPO), str(REPO / "benchmarks")]

from benchmarks.corpus import drivers, measure, run, summary  # noqa: E402


def test_every_driver_is_a_program_and_a_module_of_both_libraries():
    libraries = set()
    for name in drivers.FILES:
        module = drivers.load(name)
        assert callable(module.make) and callable(module.step), name
        state = module.make("cpu", small=True)  # the library is imported by step only: no GPU needed here
        assert state and all(isinstance(t, torch.Tensor) for t in state.values()), name
        assert drivers.path(name).read_text().rstrip().endswith("sys.exit(_base.main(sys.modules[__name__]))")
        libraries.add(module.LIBRARY)
    assert libraries == {"liger", "fla"}
    assert 8 <= len(drivers.FILES) <= 12
    with pytest.raises(KeyError, match="no corpus file 'nope'"):
        drivers.path("nope")


def _outputs(**values):
    return {name: torch.tensor(v, dtype=torch.float32) for name, v in values.items()}


def test_an_output_left_unwritten_or_off_tolerance_is_wrong():
    base = _outputs(y=[1.0, 2.0, 3.0, 4.0])
    same = _outputs(y=[1.0, 2.0, 3.0, 4.0 + 1e-6])
    unwritten = _outputs(y=[1.0, 2.0, math.nan, math.nan])  # poisoned memory the variant never wrote
    off = _outputs(y=[1.0, 2.0, 3.0, 4.1])
    assert [r["ok"] for r in measure.compare_outputs(base, same, {})] == [True]
    bad = measure.compare_outputs(base, unwritten, {})[0]
    assert not bad["ok"] and bad["nan_mismatch"] == 2
    assert not measure.compare_outputs(base, off, {})[0]["ok"]
    # A nondeterministic baseline (its two disabled runs differ by 0.05) widens the absolute part.
    spreads = measure.spread(base, _outputs(y=[1.0, 2.0, 3.0, 4.05]))
    assert spreads["y"] == pytest.approx(0.05, rel=1e-5)
    assert measure.compare_outputs(base, off, spreads)[0]["ok"]
    missing = measure.compare_outputs(base, {}, {})[0]
    assert not missing["ok"] and "missing" in missing["message"]


def test_improved_needs_a_decision_applied_and_the_threshold():
    off = [{"a": 2.0, "b": 2.0, "c": 2.0}, {"a": 2.2, "b": 2.0, "c": 2.0}]
    on = [{"a": 1.0, "b": 1.0, "c": 1.95}, {"a": 1.0, "b": 1.0, "c": 1.95}]
    stats = {"a": {"launches": 6, "applied": 6, "decisions": 1}, "b": {"launches": 6, "applied": 0},
             "c": {"launches": 6, "applied": 6, "decisions": 1}}
    rows = {r["kernel"]: r for r in measure.kernel_rows(off, on, stats, {"a", "b", "c"})}
    assert rows["a"]["improved"] and rows["a"]["speedup"] == pytest.approx(2.1)
    assert not rows["b"]["improved"]  # faster, but not through a decision
    assert not rows["c"]["improved"]  # applied, 1.026x: below 1.05x


def _canned() -> dict:
    def record(name, keys, replayed, decided, kernels, wrong, step, rc=0, missing=()):
        return {"file": name, "done": True, "optimize_s": 41.5,
                "stages": {"capture": {"rc": 0}, "optimize": {"rc": rc}, "measure": {"rc": 0 if not wrong else 1}},
                "optimize": {"keys": keys, "replayed": replayed,
                             "decided": [{"kernel": "k_fwd", "speedup": 1.3}] * decided,
                             "per_key": [{"split": {"to_first_s": s}, "timed_candidates": 8} for s in (1.0, 3.0)],
                             "fixed": {"total_s": 2.5}, "stopped": "stopped at the deadline" if rc else None,
                             "not_replayed": [{"id": "k9", "kernel": m, "failure": "compile_error",
                                               "message": "'str' object has no attribute 'scalar'"} for m in missing]},
                "measure": {"kernels": kernels, "wrong": wrong,
                            "step": {"paired": {"speedup": step, "verdict": "faster"}}}}

    rms = [{"kernel": "k_fwd", "improved": True, "speedup": 1.25, "off_ms": 0.5, "on_ms": 0.4, "applied": 3,
            "launches": 3, "decisions": 1}, {"kernel": "k_bwd", "improved": False}]
    gla = [{"kernel": "chunk_fwd", "improved": True, "speedup": 1.5}]
    return {"environment": {"gpu": "NVIDIA H200", "utc": "2026-11-28T20:00:00+00:00", "torch": "2.11",
                            "triton": "3.6.0"},
            "command": "python3 benchmarks/corpus/run.py --out $OUT", "deadline_s": 30.0,
            "files": [record("liger_rms_norm", 2, 2, 1, rms, 0, 1.1),
                      record("fla_gla", 9, 8, 0, gla, 0, 1.02, rc=1, missing=["chunk_gla_fwd_kernel_o"])]}


def test_table_from_canned_results():
    text = summary.render(_canned())
    assert "GPU: NVIDIA H200; 2026-11-28T20:00:00+00:00" in text
    assert "`python3 benchmarks/corpus/run.py --out $OUT`" in text
    assert "| liger_rms_norm | 2 | 2 | 1 | 1 | 1.250x | 1.250x | 0 | 1.100x | 42 |" in text
    # overall: keys and replayed summed, mean and geomean over every improved kernel of every file
    geo = math.sqrt(1.25 * 1.5)
    assert f"| **all** | 11 | 10 | 1 | 2 | 1.375x | {geo:.3f}x | 0 | | 83 |" in text
    assert "`chunk_gla_fwd_kernel_o` (k9) not replayed: compile_error" in text
    assert "fla_gla: optimize: no key ran (exit 1): stopped at the deadline" in text
    # per kernel: the stored speedup beside the measured one; a kernel without a decision is left out
    assert "| liger_rms_norm | `k_fwd` | 1.30x | 3 of 3 | 0.5000 / 0.4000 | 1.250x | yes |" in text
    assert "`k_bwd`" not in text
    # the optimizer's time: keys, candidates timed, median seconds to the first candidate, fixed, wall
    assert "| liger_rms_norm | 2 | 16 | 2.0 | 2.5 | 42 |" in text


def _stand_in(folder: pathlib.Path, store: bool = True) -> dict[str, list[str]]:
    """Stages that only write what the real ones leave behind (path, text pairs)."""
    py = sys.executable
    write = ("import pathlib, sys\nfor path, text in zip(sys.argv[1::2], sys.argv[2::2]):\n"
             "    p = pathlib.Path(path); p.parent.mkdir(parents=True, exist_ok=True); p.write_text(text)")
    opt = [str(folder / "opt" / "optimize.json"), json.dumps({"finished": "now"})]
    return {"capture": [py, "-c", write, str(folder / "capture" / "launches.jsonl"), ""],
            "optimize": [py, "-c", write, *opt, *([str(folder / "opt" / "decisions.db"), ""] if store else [])],
            "measure": [py, "-c", write, str(folder / "measure.json"), "{}"]}


def test_a_file_done_is_not_redone_and_the_limit_stops_before_a_stage(tmp_path, monkeypatch):
    ran = []
    real = run.run_stage

    def counting(cmd, log, timeout, env):
        ran.append(log.stem)
        return real(cmd, log, timeout, env)

    monkeypatch.setattr(run, "commands", lambda name, folder, deadline, small=False: _stand_in(folder))
    monkeypatch.setattr(run, "run_stage", counting)
    said = []
    # Room for the capture only: the optimize stage waits for the next call.
    left = itertools.chain([run.CAPTURE_S + 1], itertools.repeat(29.0))
    assert not run.process_file("liger_rms_norm", tmp_path, 30.0, lambda: next(left), said.append)
    assert ran == ["capture"] and "optimize left for the next call" in said[-1]
    assert not run.file_record(tmp_path, "liger_rms_norm").get("done")
    # The next call goes on from the optimize stage; then the file is done and never rerun.
    assert run.process_file("liger_rms_norm", tmp_path, 30.0, lambda: 1e4, said.append)
    assert ran == ["capture", "optimize", "measure"]
    assert run.process_file("liger_rms_norm", tmp_path, 30.0, lambda: 1e4, said.append)
    assert ran == ["capture", "optimize", "measure"]
    record = run.file_record(tmp_path, "liger_rms_norm")
    assert record["done"] and record["optimize_s"] > 0


def test_no_store_no_measure(tmp_path, monkeypatch):
    stages = _stand_in(tmp_path / "liger_jsd", store=False)
    monkeypatch.setattr(run, "commands", lambda name, folder, deadline, small=False: stages)
    said = []
    assert run.process_file("liger_jsd", tmp_path, 30.0, lambda: 1e4, said.append)
    record = run.file_record(tmp_path, "liger_jsd")
    assert record["stages"]["measure"]["skipped"].startswith("no decision store")
    assert not (tmp_path / "liger_jsd" / "measure.json").exists()
    assert "measure: skipped: no decision store" in summary.render({"files": [record], "deadline_s": 30.0})


def test_a_stage_past_the_limit_is_stopped(tmp_path):
    rc, seconds, cut = run.run_stage([sys.executable, "-c", "import time; time.sleep(30)"], tmp_path / "x.log", 0.5,
                                     None)
    assert cut and rc is None and seconds < 25


def test_a_resumed_optimize_gets_what_is_left_of_the_deadline(tmp_path, monkeypatch):
    deadlines = []

    def stand_in(name, folder, deadline, small=False):
        deadlines.append(deadline)
        return _stand_in(folder)

    monkeypatch.setattr(run, "commands", stand_in)
    (tmp_path / "fla_gla").mkdir()
    run.save_record(tmp_path, {"file": "fla_gla", "optimize_s": 12.0,
                               "stages": {"capture": {"done": True}, "optimize": {"done": False, "cut": True}}})
    assert run.process_file("fla_gla", tmp_path, 30.0, lambda: 1e4, [].append)
    assert deadlines == [18.0]
    run.save_record(tmp_path, {"file": "fla_gla", "optimize_s": 29.0, "stages": {"capture": {"done": True}}})
    assert run.process_file("fla_gla", tmp_path, 30.0, lambda: 1e4, [].append)
    assert deadlines[-1] == 10.0  # never below tritune's least share of a key


def test_a_driver_that_autotunes_much_asks_for_a_longer_capture():
    assert run.expected_s("capture", 30.0, "fla_gla") == drivers.load("fla_gla").CAPTURE_S > run.CAPTURE_S
    assert run.expected_s("capture", 30.0, "liger_rms_norm") == run.CAPTURE_S
    assert run.expected_s("optimize", 30.0, "fla_gla") == 30.0 + run.OPTIMIZE_FIXED_S
