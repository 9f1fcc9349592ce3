"""tritune.analyze end to end on CPU: every example kernel compiled once for sm_90 (module fixture)."""

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner

from tritune.analyze import RECORD_KEYS, analyze_path
from tritune.analyze.render import console_for, render_table, to_json
from tritune.analyze.report import analysed
from tritune.cli import main

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def records():
    return analyze_path(EXAMPLES, target="sm_90")


@pytest.fixture(scope="module")
def by_name(records):
    return {r["kernel"]: r for r in records}


def test_every_example_kernel_is_analysed(records, by_name):
    assert [r["error"] for r in records] == [None] * len(records)
    assert len(records) == 19
    assert {r["kind"] for r in records} == {"jit", "autotune", "heuristics", "inductor"}
    for record in records:
        assert set(record) == set(RECORD_KEYS)
        assert record["target"] == "sm_90"
        assert record["registers"] > 0 and record["spills"] == 0
        assert 0 < record["occupancy"] <= 1


def test_seed000_table1_kernel(by_name):
    r = by_name["row_sum_twice_kernel"]
    assert r["ttir_ops"]["tt.load"] == 2
    assert r["ttir_ops"]["tt.reduce"] == 2
    assert r["rewrites"]["merge-redundant-loads"] >= 1
    assert r["rewrites"]["merge-redundant-reduces"] >= 1
    assert r["constexprs"] == {"BLOCK_N": 1024} and r["inferred"] == ["BLOCK_N"]


def test_seed000_division_kernels(by_name):
    chain = by_name["division_chain_kernel"]
    assert chain["ttir_ops"]["arith.divf"] == 2
    # 1024 elements / 128 threads = 8 per thread, 2 divisions each: 16 div.full.f32 (approximate /)
    assert chain["ptx"]["divisions"] == {"div.full.f32": 16}
    assert chain["rewrites"]["reassociate-division"] == 0  # fast-math only
    assert by_name["divide_by_power_of_two_kernel"]["rewrites"]["constant-division"] == 1
    assert by_name["divide_by_constant_kernel"]["rewrites"]["constant-division"] == 0  # exact mode


def test_fast_math_rewrites(tmp_path):
    records = analyze_path(EXAMPLES / "seed000_patterns.py", fast_math=True, kernel_filter="division_chain_kernel")
    assert [r["kernel"] for r in records] == ["division_chain_kernel"]
    assert records[0]["rewrites"]["reassociate-division"] == 1


def test_inductor_kernels(by_name):
    red = by_name["triton_red_fused_native_layer_norm_0"]
    assert red["constexprs"] == {"XBLOCK": 2, "R0_BLOCK": 2048}
    assert red["num_warps"] == 16
    assert red["signature"]["in_ptr0"] == "*fp16"
    assert red["ttir_ops"]["tt.load"] == 4  # in_ptr0 twice (evict_last, evict_first), weight, bias
    assert red["shared_bytes"] > 0
    poi = by_name["triton_poi_fused_add_gelu_mul_0"]
    # XBLOCK=1024 over 128 threads, 16-byte aligned: 2 inputs x 2 x 128-bit vector loads per thread
    assert poi["ptx"]["global_loads"] == {128: 4}
    assert poi["num_warps"] == 4


def test_plain_kernel_vector_widths_follow_alignment(by_name):
    # integers are not assumed divisible by 16, so masked loads stay scalar
    assert by_name["add_kernel"]["ptx"]["global_loads"] == {32: 2}
    assert by_name["add_kernel"]["constexprs"] == {"BLOCK_SIZE": 128}
    assert by_name["softmax_kernel"]["constexprs"] == {"BLOCK_N": 1024}  # first autotune config


def test_occupancy_is_consistent_with_registers(by_name):
    r = by_name["layernorm_kernel"]
    from tritune.analyze.occupancy import theoretical_occupancy
    from tritune.analyze.targets import SPECS

    expected = theoretical_occupancy(SPECS[90], registers=r["registers"], num_warps=r["num_warps"],
                                     shared_bytes=r["shared_bytes"])
    assert (r["occupancy"], r["occupancy_limiter"]) == (expected.occupancy, expected.limiter)


BROKEN = '''
import triton
import triton.language as tl

@triton.jit
def good_kernel(x_ptr, BLOCK: tl.constexpr = 64):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs) + 1.0)

@triton.jit
def bad_kernel(x_ptr, BLOCK: tl.constexpr = 64):
    tl.store(x_ptr + tl.arange(0, BLOCK), undefined_name)

@triton.jit
def odd_block_kernel(x_ptr, BLOCK: tl.constexpr = 100):
    tl.store(x_ptr + tl.arange(0, BLOCK), 1.0)

@triton.jit
def mode_kernel(x_ptr, MODE: tl.constexpr):
    tl.store(x_ptr, MODE)

@triton.jit
def cg_evict_first_kernel(x_ptr, BLOCK: tl.constexpr = 256):
    offs = tl.arange(0, BLOCK)
    tl.store(x_ptr + offs, tl.load(x_ptr + offs, cache_modifier=".cg", eviction_policy="evict_first"))
'''


@pytest.fixture(scope="module")
def broken_records(tmp_path_factory):
    root = tmp_path_factory.mktemp("broken")
    (root / "kernels.py").write_text(textwrap.dedent(BROKEN))
    (root / "unimportable.py").write_text("import triton\nraise ImportError('needs a GPU library')\n")
    return {(Path(r["file"]).name, r["kernel"]): r for r in analyze_path(root)}


def test_errors_are_one_line_and_the_rest_is_analysed(broken_records):
    assert broken_records[("unimportable.py", None)]["error"] == "ImportError: needs a GPU library"
    bad = broken_records[("kernels.py", "bad_kernel")]["error"]
    assert bad == "CompilationError: at 2:42: NameError('undefined_name is not defined')"
    odd = broken_records[("kernels.py", "odd_block_kernel")]["error"]
    assert odd.startswith("CompilationError") and "power of 2" in odd
    mode = broken_records[("kernels.py", "mode_kernel")]["error"]
    assert mode == "LaunchError: cannot infer constexpr 'MODE' of mode_kernel: pass --constexpr MODE=VALUE"
    ptxas = broken_records[("kernels.py", "cg_evict_first_kernel")]["error"]
    assert ptxas.startswith("PTXASError: ptxas: line ")
    assert ptxas.endswith("Modifier '.evict_first' cannot be combined with modifier '.cg'")
    for record in broken_records.values():
        assert record["error"] is None or "\n" not in record["error"]
    good = broken_records[("kernels.py", "good_kernel")]
    assert good["error"] is None and good["ttir_ops"]["tt.load"] == 1
    assert [r["kernel"] for r in analysed(broken_records.values())] == ["good_kernel"]


def test_json_round_trip_and_table(records, capsys):
    data = json.loads(to_json(records))
    assert len(data) == 19
    for key in ("kernel", "file", "target", "ttir_ops", "rewrites", "registers", "spills",
                "shared_bytes", "occupancy"):
        assert all(key in item for item in data)
    import sys

    render_table(records, console_for(sys.stdout))
    out = capsys.readouterr().out
    assert "row_sum_twice_kernel" in out and "merge-redundant-loads 1" in out
    assert "19 kernel(s) analysed, 0 error(s)" in out


def test_the_table_fits_the_terminal_and_wide_shows_every_column(records):
    """At 100 columns: the default columns whole, kernel names wrapped 30+ wide (were 6 wide, in
    230 lines, the last columns cut); --wide: every column, at the width they need."""
    import io

    from rich.console import Console

    out = io.StringIO()
    render_table(records, Console(file=out, width=100))
    lines = out.getvalue().splitlines()
    assert lines[1].split() == ["kernel", "warps", "rewrites", "regs", "spill", "B", "smem", "B", "occ"]
    assert max(map(len, lines)) <= 100 and "\u2026" not in out.getvalue()  # nothing cut with an ellipsis
    assert all(r["kernel"][:30] in out.getvalue() for r in records)
    assert "75%" in out.getvalue() and "merge-redundant-reduces 1" in out.getvalue()
    assert len(lines) < 2 * len(records) + 20
    wide = io.StringIO()
    render_table(records, Console(file=wide, width=100), wide=True)
    header = wide.getvalue().splitlines()[1]
    for column in ("kernel", "constexprs", "warps", "ld/st/red/divf", "rewrites", "ld bits x n", "div / rcp",
                   "regs", "spill B", "smem B", "occ", "occ limited by"):
        assert column in header
    assert "registers" in wide.getvalue() and "BLOCK_N=1024*" in wide.getvalue()  # the limiter, constexprs


def test_other_target(tmp_path):
    [record] = analyze_path(EXAMPLES / "vector_add.py", target="80")
    assert record["target"] == "sm_80" and record["error"] is None
    assert ".target sm_80" not in json.dumps(record)  # the record holds stats, not the PTX


def test_harvested_inductor_kernel_has_seed000_redundant_load():
    # A real coat_lite_mini kernel from the H100 harvest (examples/inductor_harvested/README.md).
    [record] = analyze_path(EXAMPLES / "inductor_harvested" /
                            "coat_lite_mini_train_triton_red_fused_native_layer_norm_backward_select_backward_2.py")
    assert record["error"] is None and record["kind"] == "inductor"
    assert record["constexprs"]["R0_BLOCK"] == 512
    assert record["rewrites"]["merge-redundant-loads"] == 1


HELPER_CALL = '''
import triton
import triton.language as tl

@triton.jit
def _twice(x):
    return x * 2

@triton.jit
def twice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, _twice(x) + tl.sum(x, axis=0), mask=mask)
'''


def test_cli_analyses_with_the_interpreter_exported(tmp_path):
    """A CPU user following the README has TRITON_INTERPRET=1 exported: analyze compiles anyway,
    a kernel calling a jit helper and Triton's library (tl.sum) included. A fresh process, as the
    user's: Triton is first imported there, and decorates its library then."""
    (tmp_path / "twice.py").write_text(textwrap.dedent(HELPER_CALL))
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    done = subprocess.run([sys.executable, "-m", "tritune", "analyze", str(tmp_path / "twice.py"), "--json",
                           "--kernel", "twice_kernel"], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr + done.stdout
    [record] = json.loads(done.stdout)
    assert record["error"] is None and record["ttir_ops"]["tt.load"] == 1 and record["ttir_ops"]["tt.reduce"] == 1
    # ...and says so where Triton was imported under the interpreter before (a library user)
    code = ("import triton, sys\nfrom tritune.analyze import analyze_path\n"
            f"analyze_path({str(tmp_path / 'twice.py')!r})\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 1 and done.stderr.strip().splitlines()[-1] == (
        "tritune.imports.InterpreterImported: Triton was imported with TRITON_INTERPRET=1 in this process, "
        "so its library cannot compile for a GPU: analyse in a process started without it")


def test_cli_skips_a_file_whose_import_blocks(tmp_path, monkeypatch):
    (tmp_path / "hangs.py").write_text("import time\ntime.sleep(1000)\n")
    (tmp_path / "twice.py").write_text(textwrap.dedent(HELPER_CALL))
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(main, ["analyze", ".", "--kernel", "twice_kernel", "--timeout", "1"])
    assert result.exit_code == 0, result.output  # the other file is analysed
    assert "tritune analyze: hangs.py: import did not finish in 1 s: skipped\n" in result.stderr
    assert "twice_kernel" in result.stdout
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "hangs.py"), "--timeout", "0"])
    assert result.exit_code == 2 and "--timeout" in result.stderr


INDUCTOR_IN_OUT = '''
import triton
import triton.language as tl


@triton.jit
def triton_red_fused_div_mul_sum_0(in_out_ptr0, in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr,
                                   R0_BLOCK: tl.constexpr):
    xnumel = 64
    r0_numel = 128
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    x0 = xindex
    _tmp2 = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_1 = r0_offset + r0_base
        r0_mask = r0_1 < r0_numel
        tmp0 = tl.load(in_out_ptr0 + (r0_1 + 128*x0), r0_mask & xmask, eviction_policy='evict_last', other=0.0)
        _tmp2 = tl.where(r0_mask & xmask, _tmp2 + tmp0 * tmp0, _tmp2)
    tmp2 = tl.sum(_tmp2, 1)[:, None]
    tl.store(out_ptr0 + (x0), tmp2, xmask)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_1 = r0_offset + r0_base
        r0_mask = r0_1 < r0_numel
        tmp3 = tl.load(in_out_ptr0 + (r0_1 + 128*x0), r0_mask & xmask, eviction_policy='evict_first', other=0.0)
        tmp4 = tl.load(in_ptr0 + (r0_1), r0_mask, eviction_policy='evict_last', other=0.0)
        tl.store(in_out_ptr0 + (r0_1 + 128*x0), tmp3 * tmp4 / (tmp2 + 1e-6), r0_mask & xmask)
'''


def test_what_no_alias_makes_possible_is_counted_apart(tmp_path, capsys):
    """Inductor's reduction over a row of 128 with R0_BLOCK 128: each loop runs once, and a store
    through out_ptr0 sits between the two loads of in_out_ptr0. Merged only under no-alias."""
    path = tmp_path / "triton_red_fused_div_mul_sum_0.py"  # named after its kernel: no caption row
    path.write_text(INDUCTOR_IN_OUT)
    [record] = analyze_path(path, constexprs={"XBLOCK": 4, "R0_BLOCK": 128})
    assert record["error"] is None
    assert record["rewrites"]["merge-redundant-loads"] == 0
    assert record["rewrites"]["merge-redundant-loads[noalias]"] == 1
    assert record["rewrites"]["merge-redundant-reduces[noalias]"] == 0
    [looped] = analyze_path(path, constexprs={"XBLOCK": 4, "R0_BLOCK": 32})  # four iterations: apart
    assert looped["rewrites"]["merge-redundant-loads[noalias]"] == 0
    render_table([record], console_for(sys.stdout))
    assert "merge-redundant-loads[noalias] 1" in capsys.readouterr().out  # not taken for rich markup
