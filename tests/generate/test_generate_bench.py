"""``tritune generate``'s benchmark on the CPU: the bytes / roofline / speedup arithmetic with
made-up times, the refusal without a GPU (in-process and through a worker), the table of
``benchmarks/generate.py`` with its goals and seed 004's numbers from synthetic ``generate.json``
files, and that every spec of ``benchmarks/generate_specs`` loads and runs in small mode."""

from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")

from tritune.generate import bench  # noqa: E402
from tritune.imports import import_file  # noqa: E402
from tritune.worker import run_isolated  # noqa: E402

BENCH_DIR = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
SPEC_FILES = sorted(p for p in (BENCH_DIR / "generate_specs").glob("*.py") if not p.name.startswith("_"))
sys.path.insert(0, str(BENCH_DIR))

import generate as gen_bench  # noqa: E402  (benchmarks/generate.py: no GPU work at import)

SEED004_SHAPES = [(4, 128, 768), (8, 256, 1024), (16, 512, 2048)]


def stats(p50: float, mean: float | None = None, p95: float | None = None) -> dict:
    return {"mean": mean if mean is not None else p50, "p50": p50, "p95": p95 if p95 is not None else p50 * 1.1}


# --------------------------------------------------------------------------- bytes and roofline

def test_bytes_are_inputs_read_once_and_outputs_written_once():
    x = torch.empty(2, 3, 40, dtype=torch.float16)
    bias = torch.empty(40, dtype=torch.float16)
    out = torch.empty(2, 3, 40, dtype=torch.float16)
    assert bench.io_bytes((x, bias), out) == (240 + 40 + 240) * 2
    # a tensor passed twice is read once; scalars move nothing; a tuple of outputs counts each
    assert bench.io_bytes((x, x, 0.5), (out, bias.float())) == 240 * 2 + 240 * 2 + 40 * 4


def test_roofline_fraction_is_bandwidth_over_copy_bandwidth():
    nbytes = 3_000_000  # 3 MB in 1 us = 3000 GB/s
    times = {"generated": stats(0.001), "eager": stats(0.004), "compile": None}
    fractions = bench.roofline_fractions(nbytes, times, copy_gbps=3000.0)
    assert fractions["generated"] == pytest.approx(1.0)
    assert fractions["eager"] == pytest.approx(0.25)
    assert fractions["compile"] is None
    assert bench.roofline_fractions(nbytes, times, copy_gbps=None)["generated"] is None


def test_case_result_and_rows_from_made_up_times():
    x = torch.empty(8, 256, 1024, dtype=torch.float16)
    bias = torch.empty(1024, dtype=torch.float16)
    times = {"generated": stats(0.010), "eager": stats(0.030), "compile": stats(0.012),
             "max-autotune-no-cudagraphs": None}
    case = bench.case_result("spec 0", "f16[8,256,1024], f16[1024]", (x, bias), torch.empty_like(x), times,
                             copy_gbps=3000.0, errors={"max-autotune-no-cudagraphs": "RuntimeError: boom"})
    assert case["shape"] == [8, 256, 1024] and case["dtype"] == "float16"
    assert case["bytes"] == (2 * 8 * 256 * 1024 + 1024) * 2
    rows = {r["name"]: r for r in bench.rows({"cases": [case]})}
    assert list(rows) == ["generated", "eager", "compile", "max-autotune-no-cudagraphs"]
    assert rows["generated"]["vs_compile"] == pytest.approx(1.2)
    assert rows["generated"]["vs_eager"] == pytest.approx(3.0)
    assert rows["compile"]["vs_compile"] == pytest.approx(1.0)
    assert rows["eager"]["vs_compile"] == pytest.approx(0.4)
    assert rows["generated"]["vs_max_autotune"] is None
    assert rows["max-autotune-no-cudagraphs"]["error"] == "RuntimeError: boom"
    assert rows["generated"]["roofline"] == pytest.approx(case["bytes"] / 1e-5 / 1e9 / 3000.0)


def test_speedups_use_p50_not_the_mean():
    times = {"generated": stats(0.010, mean=0.050), "compile": stats(0.020, mean=0.020)}
    assert bench.speedup(times, "generated", "compile") == pytest.approx(2.0)
    assert bench.speedup(times, "generated", "eager") is None


def test_other_modules_are_listed_after_the_generated_one_and_before_the_modes():
    names = bench.ordered_names(dict.fromkeys(["eager", "llm", "compile", "generated", "inductor"]))
    assert names == ["generated", "inductor", "llm", "eager", "compile"]


# ------------------------------------------------------------------------------- no GPU: refuse

def test_refuses_on_the_cpu_in_one_line():
    with pytest.raises(bench.BenchError) as caught:
        bench.bench_job({"modules": {"generated": "/nowhere/kernel.py"}, "spec": "/nowhere/spec.py",
                         "device": "cpu"})
    message = str(caught.value)
    assert "\n" not in message
    assert "CUDA GPU" in message and "'cpu'" in message and "interpreter" in message


def test_unknown_mode_is_one_line():
    with pytest.raises(bench.BenchError, match="unknown benchmark mode"):
        bench.check_payload({"device": "cuda", "modes": ["eager", "reduce-overhead"]})


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only refusal")
def test_refuses_cuda_without_a_gpu_through_a_worker():
    outcome = run_isolated("tritune.generate.bench:bench_job",
                           {"modules": {}, "spec": "/nowhere/spec.py", "device": "cuda"}, timeout_s=120)
    assert not outcome.ok
    assert "CUDA GPU" in outcome.failure.message and "\n" not in outcome.failure.message


# ------------------------------------------------------- the GPU job's flow, with fakes for CUDA

class FakeSpecModule:
    """``tritune.generate.spec``'s interface (load_spec, shapes_text) over two CPU cases."""

    class Spec:
        name = "bias_relu"

        @staticmethod
        def reference(x, bias):
            return torch.relu(x + bias)

        @staticmethod
        def cases(device):
            g = torch.Generator().manual_seed(0)
            case = type("Case", (), {})
            out = []
            for label, shape in (("spec 0", (2, 3, 8)), ("spec 1", (4, 16))):
                c = case()
                c.label, c.tensors = label, (torch.randn(shape, generator=g), torch.randn(shape[-1], generator=g))
                out.append(c)
            return out

    @classmethod
    def load_spec(cls, path, *, device="cpu", check=True):
        return cls.Spec()

    @staticmethod
    def shapes_text(tensors):
        return ", ".join(f"f32{list(t.shape)}" for t in tensors)


def test_bench_job_times_every_name_per_case_together_and_compiles_fresh(tmp_path, monkeypatch):
    from tritune.bench import timing

    module = tmp_path / "kernel.py"
    module.write_text("def run(x, bias):\n    return (x + bias).clamp_min(0)\n")
    compiles, resets, timed = [], [], []

    def fake_compile(fn, mode=None, dynamic=None):
        compiles.append((mode, dynamic, len(resets)))
        if mode == bench.MAX_AUTOTUNE:
            def broken(*args):
                raise RuntimeError("planted compile failure")
            return broken
        return fn

    def fake_interleaved(fns, warmup=10, runs=200, **kw):
        timed.append((list(fns), warmup, runs))
        for fn in fns.values():
            fn()
        return {name: {"mean_ms": 0.02, "p50_ms": 0.01 * (i + 1), "p95_ms": 0.03} for i, name in enumerate(fns)}

    monkeypatch.setitem(sys.modules, "tritune.generate.spec", FakeSpecModule)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    monkeypatch.setattr(torch.cuda, "device", lambda d: __import__("contextlib").nullcontext())
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda *a: "Fake GPU")
    monkeypatch.setattr(torch, "compile", fake_compile)
    monkeypatch.setattr(torch._dynamo, "reset", lambda: resets.append(1))
    monkeypatch.setattr(timing, "interleaved_event_stats", fake_interleaved)
    monkeypatch.setattr(timing, "copy_bandwidth_gbps", lambda *a, **k: 3000.0)

    result = bench.bench_job({"modules": {"generated": str(module)}, "spec": "spec.py", "device": "cuda",
                              "warmup": 3, "runs": 7})
    assert result["gpu"] == "Fake GPU" and result["copy_gbps"] == 3000.0
    assert [c["label"] for c in result["cases"]] == ["spec 0", "spec 1"]
    first = result["cases"][0]
    assert list(first["times"]) == ["generated", "eager", "compile", "max-autotune-no-cudagraphs"]
    assert first["times"]["max-autotune-no-cudagraphs"] is None
    assert first["errors"] == {"max-autotune-no-cudagraphs": "RuntimeError: planted compile failure"}
    assert first["times"]["generated"] == {"mean": 0.02, "p50": 0.01, "p95": 0.03}
    assert first["times"]["compile"] == {"mean": 0.02, "p50": 0.03, "p95": 0.03}
    assert first["bytes"] == (48 + 8 + 48) * 4 and first["shapes"] == "f32[2, 3, 8], f32[8]"
    # each case: one reset before its compiles (none between its modes), static shapes; the names
    # that compiled are timed in one interleaved call, the failed one left out
    assert [(mode, dynamic) for mode, dynamic, _ in compiles] == [(None, False), (bench.MAX_AUTOTUNE, False)] * 2
    assert compiles[0][2] == compiles[1][2] and compiles[2][2] == compiles[3][2] > compiles[1][2]
    assert timed == [(["generated", "eager", "compile"], 3, 7)] * 2


def test_interleave_order_gives_every_name_its_runs_in_rotating_rounds():
    from tritune.bench.timing import interleave_order

    order = interleave_order(["a", "b", "c"], runs=5, rounds=2)
    assert order == ["a"] * 3 + ["b"] * 3 + ["c"] * 3 + ["b"] * 2 + ["c"] * 2 + ["a"] * 2
    big = interleave_order(["g", "e", "c", "m"], runs=200, rounds=10)
    assert {name: big.count(name) for name in "gecm"} == dict.fromkeys("gecm", 200)
    firsts = [big[i * 80] for i in range(10)]  # 20 runs x 4 names a round
    assert firsts == ["g", "e", "c", "m"] * 2 + ["g", "e"]
    assert interleave_order(["a"], runs=3, rounds=10) == ["a"] * 3  # fewer runs than rounds
    with pytest.raises(ValueError, match="at least 1"):
        interleave_order(["a"], runs=0)


def test_two_compiled_modes_of_one_function_each_run_their_own_code():
    """bench_job compiles a case's modes side by side without a Dynamo reset between them: each
    compiled callable must keep running the code its own backend made (Dynamo's backend guard)."""
    ran = []

    def backend(tag):
        def compile_graph(gm, example_inputs):
            def run(*args):
                ran.append(tag)
                return gm(*args)
            return run
        return compile_graph

    def reference(x, bias):
        return torch.relu(x + bias)

    x, bias = torch.randn(4, 8), torch.randn(8)
    torch._dynamo.reset()
    try:
        first = torch.compile(reference, backend=backend("first"), dynamic=False)
        first(x, bias)
        second = torch.compile(reference, backend=backend("second"), dynamic=False)
        second(x, bias)
        ran.clear()
        for _ in range(2):
            first(x, bias)
            second(x, bias)
        assert ran == ["first", "second"] * 2
    finally:
        torch._dynamo.reset()


# --------------------------------------------------------------------- benchmarks/generate.py

def bench_case(label: str, shape: list, dtype: str, gen: float, eager: float, comp: float, auto: float,
               roof: float) -> dict:
    return {"label": label, "shapes": f"{dtype}{shape}", "shape": shape, "dtype": dtype, "bytes": 1,
            "times": {"generated": stats(gen), "eager": stats(eager), "compile": stats(comp),
                      "max-autotune-no-cudagraphs": stats(auto)},
            "roofline_fraction": {"generated": roof}, "errors": {}}


def generate_json(cases: list[dict], ok: bool = True, failed_label: str | None = None) -> dict:
    check = {"ok": ok, "failure": None if ok else "wrong_result", "message": "", "launches": 1,
             "cases": [{"label": c["label"], "shapes": c["shapes"], "ok": c["label"] != failed_label,
                        "message": "", "outputs": []} for c in cases]}
    return {"spec": "x.py", "name": "x", "winner": "inductor", "check": check, "optimize": {"decided": 0},
            "bench": {"gpu": "H100", "copy_gbps": 3000.0, "cases": cases}, "fused": True, "kernels": ["k"]}


@pytest.fixture
def synthetic(tmp_path):
    """Four specs: two verified and benchmarked, one wrong on one case, one that failed to run
    (and the other spec files never run)."""
    work = tmp_path / "work"
    large = [16, 512, 2048]
    results = {
        "bias_relu": generate_json([
            bench_case("spec 0", [4, 128, 768], "float32", 0.010, 0.020, 0.011, 0.012, 0.50),  # faster
            bench_case("spec 1", [8, 256, 1024], "float16", 0.020, 0.040, 0.030, 0.020, 0.70),  # faster
            bench_case("spec 4", large, "float32", 0.100, 0.200, 0.100, 0.100, 0.95)]),  # tie: not faster
        "rmsnorm_bias_scale": generate_json([
            bench_case("spec 0", [4, 128, 768], "float32", 0.020, 0.050, 0.010, 0.010, 0.30),  # slower
            bench_case("spec 4", large, "float16", 0.080, 0.090, 0.070, 0.070, 0.80)]),  # below 90%
        "softmax": generate_json([bench_case("spec 0", [4, 128, 768], "float32", 0.010, 0.020, 0.011, 0.011, 0.5)],
                                 ok=False, failed_label="spec 0"),
    }
    for name, body in results.items():
        (work / name).mkdir(parents=True)
        (work / name / "generate.json").write_text(json.dumps(body))
    (work / "swiglu").mkdir()
    (work / "swiglu" / gen_bench.FAILED).write_text(json.dumps({"rc": 1, "stderr_tail": ["generate: no GPU"]}))
    return work


def test_table_rows_goals_and_seed_numbers(synthetic):
    names = ["bias_relu", "rmsnorm_bias_scale", "softmax", "swiglu", "add_layernorm"]
    summary = gen_bench.summarize(synthetic, names, {"gpu": "H100", "command": "python3 benchmarks/generate.py"})
    rows = summary["rows"]
    by = {(r["spec"], r["label"]): r for r in rows}
    assert by[("bias_relu", "spec 0")]["vs_compile"] == pytest.approx(1.1)
    assert by[("bias_relu", "spec 0")]["verified"] is True
    assert by[("softmax", "spec 0")]["verified"] is False
    assert by[("swiglu", None)]["status"] == "exit 1: generate: no GPU"
    assert by[("add_layernorm", None)]["status"] == "not run yet"
    assert by[("bias_relu", "spec 4")]["large"] and not by[("bias_relu", "spec 1")]["large"]

    goals = summary["goals"]
    assert goals["every_kernel_verified"]["met"] is False
    assert goals["every_kernel_verified"]["not_verified"] == ["add_layernorm", "softmax", "swiglu"]
    roof = goals["roofline_at_large_shapes"]
    assert (roof["met"], roof["cases"], roof["at_goal"]) == (False, 2, 1)
    assert roof["below"] == ["rmsnorm_bias_scale float16: 80%"]
    faster = goals["faster_than_compile_on_half"]
    assert (faster["faster"], faster["cases"]) == (3, 6)  # a tie is not faster
    assert faster["met"] is True

    seeds = {(s["spec"], tuple(s["shape"]), s["dtype"]): s for s in summary["seed_comparison"]}
    assert len(seeds) == 12  # Table I: 4 rows; Table II: 4 rows beside both bias + activation specs
    relu = seeds[("bias_relu", (4, 128, 768), "float32")]
    assert (relu["seed_speedup"], relu["our_speedup"]) == (0.83, pytest.approx(2.0))
    assert seeds[("bias_gelu_tanh", (4, 128, 768), "float32")]["our_speedup"] is None
    rms = seeds[("rmsnorm_bias_scale", (8, 256, 1024), "float32")]
    assert (rms["seed_fused_ms"], rms["seed_unfused_ms"], rms["seed_speedup"]) == (0.21, 0.38, 1.79)


def test_a_ratio_within_timing_noise_is_not_faster(tmp_path):
    (tmp_path / "swiglu").mkdir()
    body = generate_json([bench_case("spec 0", [4, 128, 768], "float16", 0.0100, 0.1, 0.0102, 0.01, 0.5),  # 1.02x
                          bench_case("spec 1", [4, 128, 768], "float32", 0.0100, 0.1, 0.0103, 0.01, 0.5),  # 1.03x
                          bench_case("spec 2", [4, 128, 768], "float32", 0.0103, 0.1, 0.0100, 0.01, 0.5)])  # slower
    (tmp_path / "swiglu" / "generate.json").write_text(json.dumps(body))
    faster = gen_bench.summarize(tmp_path, ["swiglu"], {})["goals"]["faster_than_compile_on_half"]
    assert (faster["faster"], faster["slower"], faster["cases"], faster["met"]) == (1, 1, 3, False)


def test_goals_met_when_every_case_is_verified_fast_and_at_the_roofline(tmp_path):
    (tmp_path / "swiglu").mkdir()
    body = generate_json([bench_case("spec 0", [16, 512, 2048], "float16", 0.05, 0.1, 0.06, 0.06, 0.93)])
    (tmp_path / "swiglu" / "generate.json").write_text(json.dumps(body))
    goals = gen_bench.summarize(tmp_path, ["swiglu"], {})["goals"]
    assert [goals[k]["met"] for k in goals] == [True, True, True]


def test_table_mode_writes_the_markdown_with_goals_and_seed_004(synthetic, tmp_path, capsys):
    out = tmp_path / "out"
    assert gen_bench.main(["--table", str(synthetic), "--out", str(out)]) == 0
    md = (out / "generate.md").read_text()
    assert ("| bias_relu | (4, 128, 768) | float32 | yes | 0.0100 | 0.0200 | 0.0110 | 0.0120 | 1.10x | 1.20x | 50% "
            "| inductor, untuned |") in md
    assert "every generated kernel verified: NOT met (2 of 6 specs; not: add_layernorm, bias_gelu_tanh, softmax, swiglu)" in md
    assert "at (16, 512, 2048): NOT met (1 of 2 cases; below: rmsnorm_bias_scale float16: 80%)" in md
    assert "faster than torch.compile on at least half of the cases: met (3 of 6 at >= 1.03x p50; 2 slower" in md
    assert "| rmsnorm_bias_scale | I | (8, 256, 1024) | float32 | 0.21 | 0.38 | 1.79x |" in md
    assert "Google Colab using T4 and A100 GPUs" in md
    saved = json.loads((out / "generate.json").read_text())
    assert saved["goals"]["faster_than_compile_on_half"]["faster"] == 3
    assert (out / "bias_relu" / "generate.json").exists() and (out / "swiglu" / gen_bench.FAILED).exists()


def test_a_spec_with_a_result_is_not_run_again(synthetic):
    spec = SPEC_FILES[0]
    assert gen_bench.run_spec(spec, synthetic / "bias_relu", 10) == "done"
    assert gen_bench.run_spec(spec, synthetic / "swiglu", 10) == "skipped"  # failed before, no --retry-failed


def test_run_spec_keeps_the_log_and_records_a_failure(tmp_path, monkeypatch):
    script = ("import json, pathlib, sys; out = pathlib.Path(sys.argv[1]); print('working'); "
              "out.name == 'bad' or (out / 'generate.json').write_text('{}'); "
              "sys.exit(0 if out.name == 'good' else 'generate: planted failure')")
    monkeypatch.setattr(gen_bench, "command", lambda spec, out_dir, budget: [sys.executable, "-c", script, str(out_dir)])
    assert gen_bench.run_spec(SPEC_FILES[0], tmp_path / "good", 5) == "ran"
    assert "working" in (tmp_path / "good" / "generate.log").read_text()
    # exit 2 with generate.json written (no kernel verified): the JSON says so, the run counts
    assert gen_bench.run_spec(SPEC_FILES[0], tmp_path / "unverified", 5) == "ran"
    assert "--- exit 1" in (tmp_path / "unverified" / "generate.log").read_text()
    assert gen_bench.run_spec(SPEC_FILES[0], tmp_path / "bad", 5) == "failed"
    failed = json.loads((tmp_path / "bad" / gen_bench.FAILED).read_text())
    assert failed["rc"] == 1 and failed["stderr_tail"] == ["generate: planted failure"]
    assert gen_bench.run_spec(SPEC_FILES[0], tmp_path / "bad", 5) == "skipped"
    assert gen_bench.run_spec(SPEC_FILES[0], tmp_path / "bad", 5, retry_failed=True) == "failed"
    assert gen_bench.load_results(tmp_path, ["good", "bad", "never"]) == {
        "good": {}, "bad": {"failed": "exit 1: generate: planted failure"}, "never": {"missing": True}}


def test_the_cli_command_for_a_spec(tmp_path):
    cmd = gen_bench.command(pathlib.Path("s.py"), tmp_path, 240)
    assert cmd[1:] == ["-m", "tritune", "generate", "s.py", "--out", str(tmp_path), "--budget-s", "240"]


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the CPU-only failure path")
def test_the_benchmark_stops_in_one_line_without_a_gpu(tmp_path):
    result = subprocess.run([sys.executable, str(BENCH_DIR / "generate.py"), "--out", str(tmp_path / "out"),
                             "--work", str(tmp_path / "work")], capture_output=True, text=True, timeout=300)
    assert result.returncode != 0
    assert "no CUDA GPU here" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "work").exists()


def test_unknown_spec_name_is_one_line():
    with pytest.raises(SystemExit, match="no spec 'nope'"):
        gen_bench.spec_files(["nope"])


# ------------------------------------------------------------------------------------- specs

def test_the_six_workloads_are_there():
    assert {p.stem for p in SPEC_FILES} == {"bias_relu", "bias_gelu_tanh", "rmsnorm_bias_scale", "softmax",
                                            "add_layernorm", "swiglu"}


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_spec_loads_in_small_mode_and_its_reference_runs_on_the_cpu(path, monkeypatch):
    monkeypatch.setenv("TRITUNE_SPEC_SMALL", "1")
    module = import_file(path, fresh=True)
    assert module.name == path.stem
    assert [tuple(s) for s in module.SHAPES] == SEED004_SHAPES
    cases = module.inputs("cpu")
    assert isinstance(cases, list) and cases
    assert {case[0].dtype for case in cases} == {torch.float32, torch.float16}
    for case in cases:
        assert isinstance(case, tuple)
        assert all(t.numel() <= 1000 for t in case), "small mode must give tiny shapes"
        outputs = module.reference(*case)
        outputs = outputs if isinstance(outputs, tuple) else (outputs,)
        for out in outputs:
            assert out.shape == case[0].shape and out.dtype == case[0].dtype
            assert torch.isfinite(out).all()


@pytest.mark.parametrize("path", SPEC_FILES, ids=lambda p: p.stem)
def test_spec_passes_the_spec_loader(path, monkeypatch):
    spec_module = pytest.importorskip("tritune.generate.spec")
    monkeypatch.setenv("TRITUNE_SPEC_SMALL", "1")
    spec = spec_module.load_spec(path, device="cpu")
    assert spec.name == path.stem
    assert len(spec.cases("cpu")) == 2


def test_interleaved_event_stats_ramps_warms_and_times_each_name_in_rounds(monkeypatch):
    """With fake CUDA events (each run's time: the name's cost): the clock ramp runs every name
    before any warm-up, each name gets its warm-ups and exactly ``runs`` timed runs, and its
    statistics are its own runs' times."""
    from tritune.bench import timing

    calls, cost, clock = [], {"fast": 1.0, "slow": 3.0}, [0.0]

    class FakeEvent:
        def __init__(self, enable_timing=False):
            self.at = None

        def record(self):
            self.at = clock[0]

        def elapsed_time(self, end):
            return end.at - self.at

    def fn(name):
        def run():
            calls.append(name)
            clock[0] += cost[name]
        return run

    moments = iter([0.0, 0.0, 0.1, 0.5])  # perf_counter: the ramp runs at 0 and 100 ms, stops at 500
    monkeypatch.setattr(__import__("time"), "perf_counter", lambda: next(moments))
    monkeypatch.setattr(torch.cuda, "Event", FakeEvent)
    monkeypatch.setattr(torch.cuda, "synchronize", lambda *a: None)
    stats = timing.interleaved_event_stats({"fast": fn("fast"), "slow": fn("slow")}, warmup=2, runs=6, flush=False,
                                           rounds=3, ramp_ms=200)
    assert calls[:4] == ["fast", "slow"] * 2  # the ramp: two passes over both names
    assert calls[4:8] == ["fast", "fast", "slow", "slow"]  # warm-ups
    assert calls[8:] == timing.interleave_order(["fast", "slow"], 6, 3)
    assert stats["fast"]["runs"] == stats["slow"]["runs"] == 6
    assert stats["fast"]["p50_ms"] == 1.0 and stats["slow"]["p50_ms"] == 3.0 and not stats["fast"]["l2_flushed"]
