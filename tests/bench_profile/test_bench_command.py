"""`tritune bench DIR` on a small capture built here, under the interpreter: JSON and table output,
a launch that crashes its worker (the run goes on), a kernel that does not compile, bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import kernel_hash

from tritune.bench import render
from tritune.capture.spec import write_launches
from tritune.commands.bench import bench
from tritune.model.launch import ArgSpec, LaunchSpec

KERNELS = '''
import triton
import triton.language as tl


@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + tl.load(y_ptr + offs, mask=mask), mask=mask)


@triton.jit
def wild_kernel(x_ptr, out_ptr, BLOCK: tl.constexpr):
    # 2**48 bytes past x: beyond any user-space mapping, so the interpreter's load segfaults.
    offs = tl.arange(0, BLOCK).to(tl.int64) + (1 << 46)
    tl.store(out_ptr + offs, tl.load(x_ptr + offs))
'''
BROKEN = "import triton\n\n@triton.jit\ndef broken_kernel(x_ptr:\n    pass\n"


@pytest.fixture(autouse=True)
def interpreter(monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")


def tensor(name: str, n: int, written: bool = False) -> ArgSpec:
    return ArgSpec(name, "tensor", shape=[n], stride=[1], dtype="float32", device="cuda:0", written=written)


def launch(kernel: str, args: list[ArgSpec], source: str = "sources/kernels.py", **changes) -> LaunchSpec:
    fields = dict(kernel=kernel, kind="jit", module="kernels", source_file="kernels.py", source=source,
                  source_hash=kernel_hash(KERNELS, kernel), args=args, constexprs={"BLOCK": 256},
                  options={"num_warps": 4}, grid=[4], count=1)
    fields.update(changes)
    return LaunchSpec(**fields)


def add_launch(n: int = 1000, count: int = 7) -> LaunchSpec:
    return launch("add_kernel", [tensor("x_ptr", n), tensor("y_ptr", n), tensor("out_ptr", n, True),
                                 ArgSpec("n", "scalar", value=n, type="int"), ArgSpec("BLOCK", "constexpr")],
                  count=count, grid=[-(-n // 256)])


def capture(tmp_path: Path, specs: list[LaunchSpec]) -> Path:
    (tmp_path / "sources").mkdir(exist_ok=True)
    (tmp_path / "sources" / "kernels.py").write_text(KERNELS)
    (tmp_path / "sources" / "broken.py").write_text(BROKEN)
    write_launches(tmp_path, specs)
    return tmp_path


def invoke(*args: str):
    return CliRunner().invoke(bench, [str(a) for a in args], catch_exceptions=False)


def test_json_lists_every_launch_marked_not_meaningful(tmp_path):
    root = capture(tmp_path, [add_launch(n=1000), add_launch(n=300, count=2)])
    result = invoke(root, "--json", "--no-isolate")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [(r["kernel"], r["count"], r["grid"]) for r in rows] == [("add_kernel", 7, [4, 1, 1]),
                                                                    ("add_kernel", 2, [2, 1, 1])]
    assert all(r["meaningful"] is False and r["failure"] is None and r["median_ms"] > 0 for r in rows)
    assert [r["bytes"] for r in rows] == [12_000, 3_600]


def test_table_says_times_are_not_meaningful(tmp_path):
    root = capture(tmp_path, [add_launch()])
    result = invoke(root, "--no-isolate")
    assert result.exit_code == 0, result.output
    assert "CPU interpreter: times NOT meaningful" in result.stdout
    assert add_launch().id in result.stdout and " ms*" in result.stdout
    assert "1 launch(es) timed, 0 failed" in result.stdout


def test_a_crash_and_a_compile_error_are_rows_and_the_run_goes_on(tmp_path):
    wild = launch("wild_kernel", [tensor("x_ptr", 256), tensor("out_ptr", 256, True), ArgSpec("BLOCK", "constexpr")])
    broken = launch("broken_kernel", [tensor("x_ptr", 256)], source="sources/broken.py", constexprs={})
    root = capture(tmp_path, [wild, broken, add_launch()])
    result = invoke(root, "--json", "--timeout", "120")  # isolated: the crash ends only its worker
    assert result.exit_code == 1
    rows = {r["kernel"]: r for r in json.loads(result.stdout)}
    assert rows["wild_kernel"]["failure"] == "crash" and "SIGSEGV" in rows["wild_kernel"]["message"]
    assert rows["broken_kernel"]["failure"] == "compile_error"
    assert rows["add_kernel"]["failure"] is None and rows["add_kernel"]["median_ms"] > 0
    assert rows["wild_kernel"]["median_ms"] is None  # a failed row claims no time


def test_a_truncated_capture_is_one_line_and_exit_2(tmp_path):
    root = capture(tmp_path, [add_launch()])
    path = root / "launches.jsonl"
    path.write_text(path.read_text()[:-40])
    result = invoke(root)
    assert result.exit_code == 2
    assert "truncated" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    missing = invoke(tmp_path / "nowhere")
    assert missing.exit_code == 2 and "no such file" in missing.stderr


def test_no_matching_kernel_and_unknown_method(tmp_path):
    root = capture(tmp_path, [add_launch()])
    none = invoke(root, "--kernel", "mul_kernel")
    assert none.exit_code == 1 and "no launch of kernel 'mul_kernel'" in none.stderr
    bad = invoke(root, "--methods", "median,nvtx")
    assert bad.exit_code == 2 and "unknown timing method" in bad.output


def test_gpu_table_shows_bandwidth_roofline_and_the_floor():
    # Synthetic GPU results: the rendering a person sees on the GPU machine.
    fast = {"id": "a-1", "count": 10, "grid": [64, 1, 1], "meaningful": True, "median_ms": 0.004, "p50_ms": 0.004,
            "p95_ms": 0.005, "graph_ms": 0.003, "graph_method": "graph", "noise": 0.02, "bytes": 6_000_000,
            "bytes_source": "inductor", "gbps": 1500.0, "roofline": 0.5, "total_ms": 0.04, "floor_ms": 0.002,
            "failure": None}
    slow = {**fast, "id": "b-2", "count": 1, "median_ms": 0.2, "total_ms": 0.2, "gbps": 30.0, "roofline": 0.01,
            "floor_ms": 0.002, "bytes_source": "estimate"}
    failed = {"id": "c-3", "count": 1, "grid": [1, 1, 1], "failure": "runtime_fault", "message": "illegal memory access"}
    from rich.console import Console

    console = Console(width=200, record=True)
    render.render_table([fast, failed, slow], console, copy_gbps=3000.0, gpu="NVIDIA H100")
    text = console.export_text()
    assert "tritune bench (NVIDIA H100, copy 3000 GB/s)" in text and "NOT meaningful" not in text
    lines = text.splitlines()
    order = [next(i for i, line in enumerate(lines) if line.startswith(f"│ {name}")) for name in ("b-2", "a-1", "c-3")]
    assert order == sorted(order)  # costliest total first, failures last
    assert "50%" in text and "1500" in text and "~6.0 MB" in text and "4.0 us" in text
    assert "runtime_fault c-3: illegal memory access" in text
    assert "roofline floor 22.0 us" in text and "10.91x above it" in text


def test_an_estimate_above_copy_bandwidth_is_flagged_and_left_out_of_the_floor():
    # A gather's tensors estimated whole: 263% "of roofline" (seen on an H100) is an upper bound.
    base = {"count": 1, "grid": [1, 1, 1], "meaningful": True, "median_ms": 0.03, "p50_ms": 0.03, "p95_ms": 0.03,
            "graph_ms": None, "noise": 0.01, "gbps": 100.0, "failure": None, "total_ms": 0.03}
    fine = {**base, "id": "fine-1", "bytes": 3_000_000, "bytes_source": "inductor", "roofline": 0.5, "floor_ms": 0.001}
    gather = {**base, "id": "gather-2", "bytes": 9_000_000, "bytes_source": "estimate", "roofline": 2.63,
              "floor_ms": 0.003}
    from rich.console import Console

    console = Console(width=200, record=True)
    render.render_table([fine, gather], console, copy_gbps=3000.0, gpu="NVIDIA H100")
    text = console.export_text()
    assert "263%+" in text and "50%+" not in text
    assert "roofline floor 1.0 us" in text and "left out of the floor" in text
