"""ncu's raw CSV parsed exactly (units row, thousands separators, n/a, scaled units), the command
line, finding ncu, and every way a run can fail: checked on text and on small fake executables."""

from __future__ import annotations

import dataclasses
import os
import sys
import textwrap
import time
from pathlib import Path

import pytest

from tritune.profile import ncu, ncu_csv
from tritune.profile.bottleneck import STALL_GROUPS, Facts, classify, stall_reason

DATA = Path(__file__).parents[1] / "data" / "ncu"
RAW = (DATA / "add_kernel_raw.csv").read_text()  # --print-units base, add_kernel n=1000 BLOCK=128
SCALED = (DATA / "add_kernel_scaled_units.csv").read_text()  # ncu's default units: usecond, Gbyte


# ------------------------------------------------------------------------------------ parsing

def test_raw_page_parses_to_the_exact_values_of_the_launch_row():
    [row] = ncu_csv.parse_raw(RAW)
    assert row.kernel == "add_kernel" and row.grid == (8, 1, 1) and row.block == (128, 1, 1)
    facts = ncu_csv.facts(row)
    assert facts["duration_ms"] == pytest.approx(2976e-6)  # "2,976" nsecond
    assert facts["sol_memory_pct"] == pytest.approx(1.23)
    assert facts["sol_compute_pct"] == pytest.approx(0.41)
    assert facts["achieved_occupancy_pct"] == pytest.approx(6.12)
    assert facts["l2_throughput_pct"] == pytest.approx(2.37)
    assert facts["dram_throughput_pct"] == pytest.approx(0.88)
    assert facts["registers"] == 16 and isinstance(facts["registers"], int)
    assert facts["dram_bytes"] == 13_056 and isinstance(facts["dram_bytes"], int)


def test_stalls_keep_every_collected_reason_and_drop_n_a():
    stalls = ncu_csv.facts(ncu_csv.parse_raw(RAW)[0])["stalls"]
    assert stalls["long_scoreboard"] == pytest.approx(18.74) and stalls["wait"] == pytest.approx(1.47)
    assert "imc_miss" not in stalls  # "n/a" in the fixture
    assert stalls["barrier"] == 0.0 and len(stalls) == len(ncu_csv.STALL_REASONS) - 1
    assert "selected" not in stalls  # the issuing warp is not a stall


def test_scaled_units_are_converted_to_base_units():
    facts = ncu_csv.facts(ncu_csv.parse_raw(SCALED)[0])
    assert facts["duration_ms"] == pytest.approx(1.41235)  # "1,412.35" usecond
    assert facts["dram_bytes"] == 1_610_000_000  # "1.61" Gbyte (ncu's prefixes are decimal)
    assert facts["stalls"]["long_scoreboard"] == pytest.approx(1021.4)  # "1,021.40"


def test_parsed_facts_feed_the_classifier():
    facts = ncu_csv.facts(ncu_csv.parse_raw(SCALED)[0])
    names = {f.name for f in dataclasses.fields(Facts)}
    assert set(facts) - names == {"l2_throughput_pct", "dram_throughput_pct", "dram_bytes"}
    assert classify(Facts.from_mapping(facts)).kind == "memory-near-roofline"  # memory SOL 88%
    assert Facts.from_mapping(facts).stalls["lg_throttle"] == pytest.approx(12.75)


def test_stall_names_are_the_classifiers_reasons():
    for reason in ncu_csv.STALL_REASONS:
        assert stall_reason(reason) == reason
    grouped = set(ncu_csv.STALL_REASONS) - {"misc"}
    assert grouped <= set(STALL_GROUPS), grouped - set(STALL_GROUPS)


def test_numbers_with_separators_and_missing_values():
    assert ncu_csv.number("1,205.00") == 1205.0 and ncu_csv.number("3") == 3.0
    assert ncu_csv.number("n/a") is None and ncu_csv.number("") is None
    with pytest.raises(ncu_csv.CsvError, match="'nsecond' is not a number"):
        ncu_csv.number("nsecond")


def test_text_without_a_table_or_without_units_is_an_error():
    with pytest.raises(ncu_csv.CsvError, match="no ncu raw-page table"):
        ncu_csv.parse_raw("==PROF== Connected to process 1\n==WARNING== No kernels were profiled.\n")
    lines = [line for line in RAW.splitlines() if line.startswith('"')]
    without_units = "\n".join([lines[0], lines[2]])
    with pytest.raises(ncu_csv.CsvError, match="no units row"):
        ncu_csv.parse_raw(without_units)
    short = "\n".join([lines[0], lines[1], lines[2].rsplit(",", 1)[0]])
    with pytest.raises(ncu_csv.CsvError, match="row 3 has"):
        ncu_csv.parse_raw(short)


def test_program_output_around_the_table_is_ignored():
    noisy = "my program says hi\n" + RAW + "tritune.profile.target: 2 launches\n"
    assert ncu_csv.parse_raw(noisy)[0].value("gpu__time_duration.sum") == 2976.0


# -------------------------------------------------------------------------------- the command

def test_command_profiles_one_launch_of_the_kernel_after_the_warmup():
    argv = ncu.command("/opt/ncu", "triton_red_fused_sum_0", ["python", "-m", "x", "p.json"], skip=1)
    assert argv[0] == "/opt/ncu" and argv[-4:] == ["python", "-m", "x", "p.json"]

    def value(flag):
        return argv[argv.index(flag) + 1]

    assert value("--target-processes") == "all"
    assert value("--kernel-name") == "regex:^triton_red_fused_sum_0$"
    assert value("--kernel-name-base") == "function"
    assert value("--launch-skip") == "1" and value("--launch-count") == "1"
    assert value("--page") == "raw" and "--csv" in argv and value("--print-units") == "base"
    assert value("--metrics").split(",") == list(ncu_csv.METRICS)
    assert "gpu__time_duration.sum" in ncu_csv.METRICS and len(ncu_csv.STALL_METRICS) == 17


def test_kernel_filter_is_anchored_and_escaped():
    assert ncu.kernel_filter("add_kernel") == "regex:^add_kernel$"
    assert ncu.kernel_filter("a.b") == r"regex:^a\.b$"


# ------------------------------------------------------------------------------- finding ncu

def executable(path: Path, body: str) -> Path:
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(body))
    path.chmod(0o755)
    return path


def test_find_ncu_prefers_the_variable_then_path_then_the_cuda_default(tmp_path, monkeypatch):
    monkeypatch.setattr(ncu, "DEFAULT_NCU", str(tmp_path / "cuda" / "ncu"))
    given = executable(tmp_path / "mine", "")
    (tmp_path / "bin").mkdir()
    on_path = executable(tmp_path / "bin" / "ncu", "")
    assert ncu.find_ncu({"TRITUNE_NCU": str(given), "PATH": str(on_path.parent)}) == str(given)
    assert ncu.find_ncu({"PATH": str(on_path.parent)}) == str(on_path)
    with pytest.raises(ncu.NcuUnavailable, match="ncu not found") as missing:
        ncu.find_ncu({"PATH": str(tmp_path / "empty")})
    assert missing.value.kind == "missing"
    with pytest.raises(ncu.NcuUnavailable, match="TRITUNE_NCU=.*nope is not an executable file"):
        ncu.find_ncu({"TRITUNE_NCU": str(tmp_path / "nope"), "PATH": str(on_path.parent)})
    (tmp_path / "cuda").mkdir()
    default = executable(tmp_path / "cuda" / "ncu", "")
    assert ncu.find_ncu({"PATH": str(tmp_path / "empty")}) == str(default)


# ---------------------------------------------------------------------------- checking a run

def test_permission_error_is_recognised_whatever_the_exit_code():
    message = ("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU "
               "Performance Counters on the target device 0.")
    for code in (0, 1):
        with pytest.raises(ncu.NcuUnavailable, match="ERR_NVGPUCTRPERM") as err:
            ncu.check("==PROF== Connected to process 7\n", message, code, kernel="k", skip=1)
        assert err.value.kind == "permission"


def test_failures_name_the_last_error_line():
    with pytest.raises(ncu.NcuUnavailable, match=r"code 1: ==ERROR== The application returned an error") as err:
        ncu.check("", "==ERROR== first\nTraceback...\n==ERROR== The application returned an error code (1).\n",
                  1, kernel="k", skip=1)
    assert err.value.kind == "failed"
    with pytest.raises(ncu.NcuUnavailable, match=r"no launch of k \(filter regex:\^k\$, --launch-skip 1\)") as err:
        ncu.check("==PROF== Connected\n", "==WARNING== No kernels were profiled.\n", 0, kernel="k", skip=1)
    assert err.value.kind == "no-kernel"


def test_two_profiled_launches_are_refused():
    lines = RAW.splitlines()
    twice = "\n".join(lines + [next(line for line in lines if line.startswith('"0"'))])
    with pytest.raises(ncu.NcuUnavailable, match="2 launches, expected exactly one"):
        ncu.check(twice, "", 0, kernel="add_kernel", skip=1)
    assert ncu.check(RAW, "", 0, kernel="add_kernel", skip=1).kernel == "add_kernel"


def test_the_error_survives_pickling_with_its_kind():
    import pickle

    again = pickle.loads(pickle.dumps(ncu.NcuUnavailable("permission", "no counters")))
    assert again.kind == "permission" and str(again) == "no counters"


def test_unknown_metric_names_with_and_without_regex_dress():
    assert ncu.unknown_metric(r"==ERROR== Failed to find metric regex:^bad_metric_xyz\.(sum|min|max)$") == \
        "bad_metric_xyz"
    assert ncu.unknown_metric("==ERROR== Failed to find metric dram__bytes.sum") == "dram__bytes.sum"
    assert ncu.unknown_metric("==PROF== all good") is None


UNKNOWN_METRIC_NCU = """
import sys
metrics = sys.argv[sys.argv.index("--metrics") + 1].split(",")
with open(sys.argv[-1], "a") as log:
    log.write(",".join(metrics) + "\\n")
if "dram__bytes.sum" in metrics:
    print(r"==ERROR== Failed to find metric regex:^dram__bytes\\.(sum|avg)$", file=sys.stderr)
    sys.exit(1)
print(open({csv!r}).read(), end="")
"""


def test_an_unknown_metric_is_dropped_and_the_profile_run_again(tmp_path):
    fake = executable(tmp_path / "ncu", UNKNOWN_METRIC_NCU.format(csv=str(DATA / "add_kernel_raw.csv")))
    log = tmp_path / "calls.log"
    done = ncu.profile(str(fake), "add_kernel", [str(log)], skip=1, timeout_s=30)
    calls = log.read_text().splitlines()
    assert len(calls) == 2 and "dram__bytes.sum" in calls[0] and "dram__bytes.sum" not in calls[1]
    assert done.dropped == ("dram__bytes.sum",) and done.row.kernel == "add_kernel"
    assert len(calls[1].split(",")) == len(ncu_csv.METRICS) - 1


HANGING_NCU = """
import subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
open(sys.argv[-1], "w").write(str(child.pid))
time.sleep(60)
"""


def test_a_hanging_run_is_killed_with_its_children(tmp_path):
    fake = executable(tmp_path / "ncu", HANGING_NCU)
    pid_file = tmp_path / "child.pid"
    begin = time.monotonic()
    with pytest.raises(ncu.NcuUnavailable, match="ran past its 2 s limit") as err:
        ncu.profile(str(fake), "k", [str(pid_file)], skip=1, timeout_s=2)
    assert err.value.kind == "timeout" and time.monotonic() - begin < 15
    child = int(pid_file.read_text())
    assert _gone(child), "the profiled program outlived the timeout"


def _gone(pid: int, wait_s: float = 5.0) -> bool:
    """The process has exited (a zombie waiting for its reaper counts as gone)."""
    end = time.monotonic() + wait_s
    while time.monotonic() < end:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().split(") ", 1)[1].startswith("Z"):
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def test_an_executable_that_cannot_start_is_a_failure(tmp_path):
    broken = tmp_path / "ncu"
    broken.write_text("not a program")
    broken.chmod(0o755)
    with pytest.raises(ncu.NcuUnavailable, match="ncu could not start") as err:
        ncu.run([str(broken)], timeout_s=5)
    assert err.value.kind == "failed"
    assert os.access(broken, os.X_OK)


def test_importing_the_profile_package_loads_neither_torch_nor_triton():
    import subprocess

    code = "import sys, tritune.profile; print('torch' in sys.modules, 'triton' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(Path(ncu.__file__).parents[2])})
    assert done.stdout.split() == ["False", "False"], done.stderr


def test_an_extra_non_numeric_ncu_column_is_skipped_but_a_wanted_metric_must_be_a_number():
    from tritune.profile.ncu_csv import CsvError, facts, parse_raw

    head = '"ID","Kernel Name","Grid Size","Block Size","device__attribute_cc_mode","gpu__time_duration.sum"'
    units = '"","","","","","nsecond"'
    [row] = parse_raw("\n".join([head, units, '"0","k","(4, 1, 1)","(128, 1, 1)","No-CC","2,000"']))
    assert facts(row)["duration_ms"] == 0.002
    with pytest.raises(CsvError, match="No-CC"):
        parse_raw("\n".join([head, units, '"0","k","(4, 1, 1)","(128, 1, 1)","No-CC","No-CC"']))
