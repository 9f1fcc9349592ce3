"""``tritune analyze``: exit status, --json, flags and bad input."""

import json
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritune.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"

KERNELS = '''
import triton
import triton.language as tl

@triton.jit
def scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) / 4.0, mask=mask)

@triton.jit
def mode_kernel(x_ptr, MODE: tl.constexpr):
    tl.store(x_ptr, MODE)

@triton.jit
def ptxas_fails_kernel(x_ptr, BLOCK: tl.constexpr = 256):
    # Triton prints the whole PTX to stdout when ptxas fails: --json output must stay clean
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, cache_modifier=".cg", eviction_policy="evict_first"))
'''


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    root = tmp_path_factory.mktemp("project")
    (root / "kernels.py").write_text(textwrap.dedent(KERNELS))
    (root / "broken.py").write_text("import does_not_exist_anywhere\n")
    (root / "empty").mkdir()
    (root / "empty" / "nothing.py").write_text("X = 1\n")
    return root


def run(*args):
    return CliRunner().invoke(main, ["analyze", *map(str, args)])


def test_json_keys_and_partial_success(project):
    result = run(project, "--json")
    assert result.exit_code == 0, result.output
    records = json.loads(result.stdout)  # nothing else on stdout
    by_kernel = {r["kernel"]: r for r in records}
    assert set(by_kernel) == {None, "scale_kernel", "mode_kernel", "ptxas_fails_kernel"}
    assert by_kernel["ptxas_fails_kernel"]["error"].startswith("PTXASError: ptxas: line ")
    assert by_kernel[None]["error"] == "ModuleNotFoundError: No module named 'does_not_exist_anywhere'"
    assert "--constexpr MODE=VALUE" in by_kernel["mode_kernel"]["error"]
    scale = by_kernel["scale_kernel"]
    for key in ("kernel", "file", "target", "ttir_ops", "rewrites", "registers", "spills",
                "shared_bytes", "occupancy", "num_warps", "constexprs", "inferred", "ptx",
                "occupancy_limiter", "error"):
        assert key in scale
    assert scale["target"] == "sm_90" and scale["error"] is None
    assert scale["constexprs"] == {"BLOCK": 128} and scale["inferred"] == ["BLOCK"]
    assert scale["ttir_ops"]["arith.divf"] == 1
    assert scale["rewrites"]["constant-division"] == 1  # / 4.0 -> * 0.25, exact


def test_flags_reach_the_analysis(project):
    result = run(project / "kernels.py", "--json", "--kernel", "scale_kernel", "--constexpr", "BLOCK=1024",
                 "--signature", "x_ptr=*fp16", "--signature", "out_ptr=*fp16", "--num-warps", "8",
                 "--target", "80")
    assert result.exit_code == 0, result.output
    [record] = json.loads(result.stdout)
    assert record["constexprs"] == {"BLOCK": 1024} and record["inferred"] == []
    assert record["num_warps"] == 8 and record["target"] == "sm_80"
    assert record["signature"] == {"x_ptr": "*fp16", "out_ptr": "*fp16", "n": "i32"}
    # 1024 fp16 / 256 threads = 4 per thread, masked by unaligned n: 4 scalar 16-bit loads
    assert record["ptx"]["global_loads"] == {"16": 4}  # JSON keys are strings


def test_given_constexpr_fixes_the_failing_kernel(project):
    result = run(project / "kernels.py", "--json", "--kernel", "mode_kernel", "--constexpr", "MODE=3")
    assert result.exit_code == 0
    assert json.loads(result.stdout)[0]["error"] is None


def test_exit_1_when_nothing_analysed(project):
    assert run(project / "broken.py").exit_code == 1
    result = run(project / "empty")
    assert result.exit_code == 1
    assert "no @triton.jit kernel found in" in result.stderr
    result = run(project / "kernels.py", "--kernel", "mode_kernel")
    assert result.exit_code == 1
    assert "cannot infer constexpr 'MODE'" in result.stderr and "MODE" not in result.stdout


def test_table_output(project):
    result = run(project)
    assert result.exit_code == 0
    assert "scale_kernel" in result.stdout
    assert "1 kernel(s) analysed, 3 error(s)" in result.stdout
    # the errors on stderr, one line each, as `tritune rewrites` says its own
    assert "does_not_exist_anywhere" not in result.stdout
    errors = result.stderr.splitlines()
    assert len(errors) == 3 and all(line.startswith("tritune analyze: ") for line in errors)
    assert f"tritune analyze: {project / 'broken.py'}: ModuleNotFoundError: No module named 'does_not_exist_anywhere'" \
        in errors


@pytest.mark.parametrize("args, message", [
    (["missing_dir_xyz"], "Path 'missing_dir_xyz' does not exist"),
    ([EXAMPLES, "--target", "sm_75"], "unknown target 'sm_75'"),
    ([EXAMPLES, "--constexpr", "BLOCK"], "expected NAME=VALUE, got 'BLOCK'"),
    ([EXAMPLES, "--constexpr", "BLOCK=big"], "'big' is not an int, a float or true/false"),
    ([EXAMPLES, "--signature", "x_ptr"], "expected NAME=VALUE, got 'x_ptr'"),
    ([EXAMPLES, "--signature", "x=*float99"], "'*float99' is not a Triton type (e.g. *fp16, *fp32, *i64, i32, fp32)"),
    ([EXAMPLES, "--signature", "x="], "expected NAME=VALUE, got 'x='"),
    ([EXAMPLES, "--num-warps", "0"], "--num-warps"),
])
def test_bad_input_is_a_usage_error(args, message):
    result = run(*args)
    assert result.exit_code == 2
    assert message in result.stderr


def test_main_group_lists_analyze():
    result = CliRunner().invoke(main, ["--help"])
    assert result.exit_code == 0 and "analyze" in result.stdout


@pytest.mark.parametrize("args, line", [
    (["analyze", "missing_dir_xyz"],
     "tritune analyze: Invalid value for 'PATH': Path 'missing_dir_xyz' does not exist (try 'tritune analyze --help')"),
    (["analyze", EXAMPLES, "--kernal", "k"],
     "tritune analyze: no such option: --kernal, did you mean --kernel? (try 'tritune analyze --help')"),
    (["bogus"], "tritune: No such command 'bogus' (try 'tritune --help')"),
    (["--bogus"], "tritune: no such option: --bogus (try 'tritune --help')"),
])
def test_usage_errors_are_one_line(args, line):
    result = CliRunner().invoke(main, [str(a) for a in args])
    assert result.exit_code == 2 and result.output.splitlines() == [line]


def test_no_arguments_still_show_the_help():
    result = CliRunner().invoke(main, [])
    assert "Commands:" in result.output and "analyze" in result.output
