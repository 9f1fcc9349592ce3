"""profile_launch end to end on the CPU: static facts from an sm_90 compile, a fake ncu that checks
the command it gets and prints a real-looking raw CSV, every fallback with its one-line note, and
the target module launching a replay under the interpreter."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from conftest import kernel_hash

from tritune.analyze.occupancy import theoretical_occupancy
from tritune.analyze.targets import SPECS
from tritune.capture.spec import read_launches, write_launches
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.model.variant import Variant
from tritune.profile import NcuUnavailable, ncu as ncu_cli, profile_job, profile_launch, runner
from tritune.profile.static import static_facts
from tritune.replay import make_args

# a source a rule of tritune's made: the allowlist (``allowlist.sandbox``) refuses this planted code in any
# other source; marked so, it tests what this file tests, behind the allowlist
RULED = {"rule": "pipeline-loop", "exact": "tolerance", "params": {}}

KERNELS = Path(__file__).parents[1] / "programs" / "replay_kernels.py"  # add_kernel
DATA = Path(__file__).parents[1] / "data" / "ncu"
FALLBACK = "classified from timing + static analysis"
GPU_TIMING = {"meaningful": True, "time_ms": 0.0042, "graph_ms": 0.0031, "roofline": 0.05, "grid": [8, 1, 1]}

RED_KERNEL = '''
import triton
import triton.language as tl



@triton.jit
def triton_red_fused_sum_0(in_ptr0, out_ptr0, xnumel, r0_numel, XBLOCK: tl.constexpr, R0_BLOCK: tl.constexpr):
    xindex = tl.program_id(0) * XBLOCK + tl.arange(0, XBLOCK)[:, None]
    xmask = xindex < xnumel
    r0_base = tl.arange(0, R0_BLOCK)[None, :]
    acc = tl.full([XBLOCK, R0_BLOCK], 0, tl.float32)
    for r0_offset in range(0, r0_numel, R0_BLOCK):
        r0_index = r0_offset + r0_base
        acc = acc + tl.load(in_ptr0 + (r0_index + r0_numel * xindex), xmask & (r0_index < r0_numel), other=0.0)
    tl.store(out_ptr0 + xindex, tl.sum(acc, 1)[:, None], xmask)
'''


def tensor(name: str, n: int, written: bool = False) -> ArgSpec:
    return ArgSpec(name, "tensor", shape=[n], stride=[1], dtype="float32", device="cuda:0", written=written)


def add_spec(n: int = 1000, block: int = 128) -> LaunchSpec:
    return LaunchSpec(
        kernel="add_kernel", kind="jit", module="replay_kernels", source_file=str(KERNELS),
        source="sources/replay_kernels.py", source_hash=kernel_hash(KERNELS.read_text(), "add_kernel"),
        args=[tensor("x_ptr", n), tensor("y_ptr", n), tensor("out_ptr", n, True),
              ArgSpec("n", "scalar", value=n, type="int"), ArgSpec("BLOCK", "constexpr")],
        constexprs={"BLOCK": block}, options={"num_warps": 4}, grid=[-(-n // block)],
        grid_rule={"kind": "cdiv", "dims": [{"numel": "n", "block": "BLOCK"}]},
    )


def red_spec(rows: int = 64, r0_numel: int = 512, r0_block: int = 64) -> LaunchSpec:
    return LaunchSpec(
        kernel="triton_red_fused_sum_0", kind="inductor", module="red", source_file="red.py",
        source="sources/red.py", source_hash=kernel_hash(RED_KERNEL, "triton_red_fused_sum_0"),
        args=[ArgSpec("in_ptr0", "tensor", shape=[rows, r0_numel], stride=[r0_numel, 1], dtype="float32",
                      device="cuda:0"),
              tensor("out_ptr0", rows, True), ArgSpec("xnumel", "scalar", value=rows, type="int"),
              ArgSpec("r0_numel", "scalar", value=r0_numel, type="int"), ArgSpec("XBLOCK", "constexpr"),
              ArgSpec("R0_BLOCK", "constexpr")],
        constexprs={"XBLOCK": 1, "R0_BLOCK": r0_block}, options={"num_warps": 2, "num_stages": 1}, grid=[rows],
    )


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / "sources").mkdir()
    (tmp_path / "sources" / "replay_kernels.py").write_text(KERNELS.read_text())
    (tmp_path / "sources" / "red.py").write_text(RED_KERNEL)
    write_launches(tmp_path, [add_spec(), red_spec()])
    return tmp_path


@pytest.fixture
def spec(root: Path) -> LaunchSpec:
    return read_launches(root)[0]


# ------------------------------------------------------------------------------ static facts

def test_static_facts_of_a_small_kernel_compiled_for_sm90(root, spec):
    facts = static_facts(spec, root)
    assert facts["static_source"] == "sm_90 compile on the CPU" and facts["static_error"] is None
    assert 0 < facts["registers"] < 64 and facts["spill_bytes"] == 0 and facts["shared_bytes"] == 0
    expected = theoretical_occupancy(SPECS[90], registers=facts["registers"], num_warps=4, shared_bytes=0)
    assert facts["occupancy"] == expected.occupancy and facts["occupancy_limiter"] == expected.limiter
    assert facts["num_warps"] == 4 and facts["blocks_per_sm"] == 16  # 64 warp slots / 4 warps
    assert facts["grid"] == [8, 1, 1] and facts["programs"] == 8
    assert facts["sm_count"] == 132 and facts["sm_count_assumed"] is True
    assert facts["reduction"] is False and facts["r0_numel"] is None


def test_static_facts_follow_the_variant(root, spec):
    facts = static_facts(spec, root, Variant(options={"num_warps": 8}, constexprs={"BLOCK": 1024}))
    assert facts["num_warps"] == 8 and facts["blocks_per_sm"] == 8 and facts["grid"] == [1, 1, 1]


def test_reduction_facts_reach_the_classifier(root):
    red = read_launches(root)[1]
    facts = static_facts(red, root)
    assert facts["static_error"] is None and facts["num_warps"] == 2
    assert facts["reduction"] is True and facts["r0_numel"] == 512 and facts["r0_block"] == 64
    profile = profile_launch(red, root, timing={"meaningful": True, "time_ms": 0.005}, use_ncu="never")
    assert profile.bottleneck.kind == "launch-bound"
    assert "single_iteration_reduction" in [h.action for h in profile.bottleneck.hints]


def test_a_kernel_that_does_not_compile_keeps_the_facts_without_compiler(root, spec):
    broken = KERNELS.read_text().replace("mask = offs < n\n", "mask = offs < undefined_name\n", 1)
    facts = static_facts(spec, root, Variant(source=broken, rewrite=RULED))
    assert facts["static_error"] and "undefined_name" in facts["static_error"]
    assert facts["registers"] is None and facts["programs"] == 8
    note = profile_launch(spec, root, Variant(source=broken, rewrite=RULED), use_ncu="never").note
    assert "no static facts (" in note and "undefined_name" in note and "\n" not in note


# ----------------------------------------------------------------------------------- fake ncu

FAKE_NCU = """
import json, os, signal, sys, time
argv = sys.argv[1:]
with open(os.environ["FAKE_NCU_LOG"], "a") as log:
    log.write(json.dumps(argv) + "\\n")

def value(flag):
    return argv[argv.index(flag) + 1]

target = argv[argv.index("--metrics") + 2:]
payload = json.load(open(target[3]))
problems = [name for name, ok in [
    ("target-processes", value("--target-processes") == "all"),
    ("kernel filter", value("--kernel-name") == "regex:^" + payload["spec"]["kernel"] + "$"),
    ("skip = warm-up launches", int(value("--launch-skip")) == payload["warmup"] >= 1),
    ("one launch", value("--launch-count") == "1"),
    ("raw csv", "--csv" in argv and value("--page") == "raw"),
    ("metrics", "gpu__time_duration.sum" in value("--metrics").split(",")),
    ("target module", target[0] == sys.executable and target[1:3] == ["-m", "tritune.profile.target"]),
    ("tritune importable", os.environ.get("PYTHONPATH", "").split(os.pathsep)[0].endswith("src")),
] if not ok]
if problems:
    print("==ERROR== fake ncu: wrong command: " + ", ".join(problems), file=sys.stderr)
    sys.exit(3)
print("==PROF== Connected to process 4242 (" + sys.executable + ")", file=sys.stderr)
mode = os.environ.get("FAKE_NCU_MODE", "csv")
if mode == "csv":
    print(open(os.environ["FAKE_NCU_CSV"]).read(), end="")
elif mode == "permission":
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance "
          "Counters on the target device 0.", file=sys.stderr)
    sys.exit(1)
elif mode == "crash":
    os.kill(os.getpid(), signal.SIGSEGV)
elif mode == "hang":
    time.sleep(60)
elif mode == "no-kernel":
    print("==WARNING== No kernels were profiled.", file=sys.stderr)
"""


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """A fake ncu on TRITUNE_NCU; returns the list of argv it was called with (read lazily)."""
    path = tmp_path / "fake-bin" / "ncu"
    path.parent.mkdir()
    path.write_text(f"#!{sys.executable}\n" + textwrap.dedent(FAKE_NCU))
    path.chmod(0o755)
    log = tmp_path / "ncu-calls.log"
    monkeypatch.setenv("TRITUNE_NCU", str(path))
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    monkeypatch.setenv("FAKE_NCU_CSV", str(DATA / "add_kernel_raw.csv"))
    monkeypatch.delenv("TRITON_INTERPRET", raising=False)

    def calls() -> list[list[str]]:
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    calls.path = path
    return calls


def test_profile_with_ncu_merges_timing_static_and_ncu(root, spec, fake_ncu):
    profile = profile_launch(spec, root, timing=GPU_TIMING)
    assert profile.source == "ncu" and profile.ncu_status == "ok", profile.note
    assert profile.note.startswith("ncu profiled launch 2 of add_kernel")
    [argv] = fake_ncu()
    assert argv[argv.index("--launch-skip") + 1] == "1"
    assert argv[argv.index("--kernel-name") + 1] == "regex:^add_kernel$"
    f = profile.facts
    assert f["sol_memory_pct"] == pytest.approx(1.23) and f["sol_compute_pct"] == pytest.approx(0.41)
    assert f["achieved_occupancy_pct"] == pytest.approx(6.12) and f["registers"] == 16  # ncu's, over ptxas'
    assert f["l2_throughput_pct"] == pytest.approx(2.37) and f["dram_bytes"] == 13_056
    assert f["stalls"]["long_scoreboard"] == pytest.approx(18.74)
    assert f["duration_ms"] == 0.0042 and f["ncu_duration_ms"] == pytest.approx(2976e-6)  # do_bench wins
    assert f["graph_ms"] == 0.0031 and f["roofline"] == 0.05 and f["timing_meaningful"] is True
    assert f["occupancy"] is not None and f["programs"] == 8  # static facts kept
    assert profile.ncu["grid"] == (8, 1, 1) and profile.ncu["metrics"]["gpu__time_duration.sum"] == 2976.0
    assert profile.bottleneck.kind == "launch-bound" and "ncu" not in profile.bottleneck.missing
    assert json.loads(json.dumps(profile.to_json()))["source"] == "ncu"


def test_ncu_duration_is_used_when_no_gpu_timing_is_given(root, spec, fake_ncu):
    cpu_timing = {"meaningful": False, "time_ms": 5.0, "roofline": None}
    facts = profile_launch(spec, root, timing=cpu_timing).facts
    assert facts["duration_ms"] == pytest.approx(2976e-6) and facts["timing_meaningful"] is False


def test_ncu_is_found_on_path(root, spec, fake_ncu, monkeypatch):
    monkeypatch.delenv("TRITUNE_NCU")
    monkeypatch.setenv("PATH", f"{fake_ncu.path.parent}{os.pathsep}{os.environ['PATH']}")
    assert profile_launch(spec, root).source == "ncu" and len(fake_ncu()) == 1


@pytest.mark.parametrize("mode, status, words", [
    ("permission", "permission", "ERR_NVGPUCTRPERM"),
    ("crash", "failed", "ncu exited with code -11"),
    ("no-kernel", "no-kernel", "ncu profiled no launch of add_kernel"),
])
def test_ncu_failures_fall_back_with_a_note(root, spec, fake_ncu, monkeypatch, mode, status, words):
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    profile = profile_launch(spec, root, timing=GPU_TIMING)
    assert profile.source == "timing+static" and profile.ncu is None and profile.ncu_status == status
    assert words in profile.note and profile.note.endswith(FALLBACK) and "\n" not in profile.note
    assert profile.facts["sol_memory_pct"] is None and profile.facts["occupancy"] is not None
    assert "ncu" in profile.bottleneck.missing and len(fake_ncu()) == 1


def test_a_hanging_ncu_is_killed_at_the_timeout(root, spec, fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "hang")
    profile = profile_launch(spec, root, timeout_s=1)
    assert profile.ncu_status == "timeout" and "ran past its 1 s limit" in profile.note


def test_a_launch_with_another_grid_is_not_taken_for_this_one(root, spec, fake_ncu, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_CSV", str(DATA / "add_kernel_scaled_units.csv"))  # grid (65536, 1, 1)
    profile = profile_launch(spec, root)
    assert profile.ncu_status == "grid-mismatch" and "[65536, 1, 1]" in profile.note and "[8, 1, 1]" in profile.note


def test_no_ncu_falls_back_and_require_raises(root, spec, tmp_path, monkeypatch):
    monkeypatch.delenv("TRITUNE_NCU", raising=False)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    monkeypatch.setattr(ncu_cli, "DEFAULT_NCU", str(tmp_path / "no-cuda" / "ncu"))
    profile = profile_launch(spec, root, timing=GPU_TIMING)
    assert profile.source == "timing+static" and profile.ncu_status == "missing"
    assert profile.note.startswith("ncu not found (TRITUNE_NCU unset") and profile.note.endswith(FALLBACK)
    assert "no ncu: from timing + static analysis" in profile.bottleneck.reason
    with pytest.raises(NcuUnavailable, match="use_ncu='require' but ncu not found"):
        profile_launch(spec, root, use_ncu="require")


def test_never_does_not_run_ncu(root, spec, fake_ncu):
    profile = profile_launch(spec, root, use_ncu="never")
    assert profile.ncu_status == "not-used" and fake_ncu() == []
    with pytest.raises(ValueError, match="use_ncu must be one of auto, never, require"):
        profile_launch(spec, root, use_ncu="sometimes")


def test_profile_job_round_trips_through_json(root, spec, fake_ncu):
    payload = {"spec": spec.to_json(), "root": str(root), "variant": Variant(options={"num_warps": 8}).to_json(),
               "timing": GPU_TIMING, "use_ncu": "auto", "timeout_s": 60}
    result = json.loads(json.dumps(profile_job(payload)))
    assert result["source"] == "ncu" and result["bottleneck"]["kind"] == "launch-bound"
    assert result["facts"]["num_warps"] == 8
    [argv] = fake_ncu()
    assert not Path(argv[-1]).exists()  # the payload file is removed once ncu is done


# ------------------------------------------------------------------------- the target module

def test_target_launches_the_replay_under_the_interpreter(root, spec, tmp_path):
    payload = runner.target_payload(spec, root)
    payload["result"] = str(tmp_path / "result.json")
    path = tmp_path / "payload.json"
    path.write_text(json.dumps(payload))
    env = {**runner.target_env(), "TRITON_INTERPRET": "1"}
    done = subprocess.run(runner.target_command(path), env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == ""  # ncu's CSV owns stdout
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["launches"] == ncu_cli.WARMUP_LAUNCHES + 1 and result["grid"] == [8, 1, 1]
    args = make_args(spec, root, seed=0, device="cpu")
    expected = float((args["x_ptr"] + args["y_ptr"]).double().sum())
    assert result["sums"]["out_ptr"] == pytest.approx(expected, rel=1e-6)
    assert result["sums"]["out_ptr"] != pytest.approx(float(args["out_ptr"].double().sum()), rel=1e-3)
    assert "2 launches of add_kernel" in done.stderr


def test_on_a_gpu_the_loaded_binarys_resources_are_used(root, spec, monkeypatch):
    """The GPU branch, with the driver faked: n_regs / n_spills of the loaded kernel, its shared
    memory and the device's SM count become the facts (no sm_90 compile on the CPU)."""
    import contextlib
    import types

    from tritune.profile import static

    class Loaded:
        n_regs, n_spills = 40, 24
        metadata = types.SimpleNamespace(shared=8192, num_warps=4)
        loaded_with = None

        def __getitem__(self, grid):
            Loaded.loaded_with = grid
            return lambda *args: None

    monkeypatch.setattr(static, "_cuda_device", lambda device: "cuda:0")
    monkeypatch.setattr(static, "_from_cpu_compile", lambda *a: pytest.fail("compiled on the CPU"))
    monkeypatch.setattr("tritune.replay.Replay.compile", lambda self, args=None: Loaded())
    monkeypatch.setattr(torch.cuda, "device", lambda device: contextlib.nullcontext())
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda *a: (9, 0))
    device = types.SimpleNamespace(multi_processor_count=114)  # H100 PCIe
    monkeypatch.setattr(torch.cuda, "get_device_properties", lambda *a: device)
    facts = static_facts(spec, root)
    assert facts["registers"] == 40 and facts["spill_bytes"] == 24 and facts["shared_bytes"] == 8192
    assert facts["sm_count"] == 114 and facts["sm_count_assumed"] is False and facts["capability"] == 90
    expected = theoretical_occupancy(SPECS[90], registers=40, num_warps=4, shared_bytes=8192)
    assert facts["occupancy"] == expected.occupancy and facts["blocks_per_sm"] == expected.blocks_per_sm
    assert Loaded.loaded_with == (8, 1, 1) and facts["static_source"] == "compiled kernel on cuda:0"
