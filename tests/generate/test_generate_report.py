"""``tritune generate``'s report: the files written and the facts they hold, for a synthetic
summary with a GPU benchmark and the LLM path, and one verified under the interpreter alone."""

from __future__ import annotations

import copy
import html

import pytest

torch = pytest.importorskip("torch")

from tritune.generate import bench  # noqa: E402
from tritune.generate.report import NO_BENCH, winner_text, write_report  # noqa: E402
from tritune.verify import compare  # noqa: E402  (the function)


def stats(p50: float) -> dict:
    return {"mean": p50 * 1.05, "p50": p50, "p95": p50 * 1.3}


def check_case(label: str, shapes: str, ok: bool = True, message: str = "") -> dict:
    base = torch.linspace(-1.0, 1.0, 64).reshape(4, 16)
    cand = base.clone()
    cand[2, 5] += 2e-4  # the element closest to failing: the report names it
    return {"label": label, "shapes": shapes, "ok": ok, "message": message,
            "outputs": [compare("out0", base, cand).to_json()]}


def bench_case(label: str, shape: tuple, gen: float, eager: float, comp: float, auto: float | None) -> dict:
    """A case as run.py leaves it: bench_job timed the verified module under its path's name
    ("inductor"), and run.py copied its times to "generated" (the module kernel.py holds)."""
    x = torch.empty(shape, dtype=torch.float16)
    bias = torch.empty(shape[-1], dtype=torch.float16)
    times = {"inductor": stats(gen), "eager": stats(eager), "compile": stats(comp),
             "max-autotune-no-cudagraphs": stats(auto) if auto else None}
    errors = {} if auto else {"max-autotune-no-cudagraphs": "BackendCompilerFailed: planted"}
    shapes = f"f16[{','.join(map(str, shape))}], f16[{shape[-1]}]"
    case = bench.case_result(label, shapes, (x, bias), x, times, 3000.0, errors)
    for field in ("times", "roofline_fraction"):
        case[field]["generated"] = case[field]["inductor"]
    return case


GPU_RESULT = {
    "spec": "/specs/bias_gelu_tanh.py", "name": "bias_gelu_tanh", "device": "cuda", "winner": "inductor",
    "paths": {"inductor": "/out/inductor/kernel.py", "kernel": "/out/kernel.py"},
    "check": {"ok": True, "failure": None, "message": "", "launches": 1,
              "cases": [check_case("spec 0", "f16[4,128,768], f16[768]"),
                        check_case("odd", "f16[3,7,45], f16[45]")]},
    "bench": {"gpu": "NVIDIA H100 80GB HBM3", "torch": "2.11.0", "triton": "3.6.0", "copy_gbps": 3000.0,
              "warmup": 10, "runs": 200,
              "cases": [bench_case("spec 0", (4, 128, 768), 0.0050, 0.0120, 0.0060, 0.0055),
                        bench_case("spec 1", (16, 512, 2048), 0.0300, 0.0800, 0.0290, None)]},
    "optimize": {"kernels": 1, "decided": 1, "stopped": None,
                 "decisions": {"triton_poi_fused_add_gelu_0-3f2a": "config XBLOCK=1024, num_warps=8"},
                 "trials": [{"kernel": "triton_poi_fused_add_gelu_0", "config": "XBLOCK=1024", "speedup": "1.08x"}]},
    "llm": {"best": None, "requests": 2,
            "attempts": [{"iteration": 1, "failure": "syntax", "message": "SyntaxError: invalid syntax (line 3)",
                          "module": "/out/llm/attempt_1.py"},
                         {"iteration": 2, "failure": "wrong_result", "message": "spec 0 out0[0, 1]: | <b>bad</b>",
                          "module": "/out/llm/attempt_2.py"}],
            "cost": {"requests": 2, "reused": 0, "prompt_tokens": 3100, "completion_tokens": 900, "seconds": 12.0,
                     "dollars": 0.0123}},
    "fused": True, "kernels": ["triton_poi_fused_add_gelu_0"], "notes": ["emitted /out/kernel.py"],
}

CPU_RESULT = {
    "spec": "/specs/swiglu.py", "name": "swiglu", "device": "cpu", "winner": "llm",
    "paths": {"llm": "/out/llm/kernel.py", "kernel": "/out/kernel.py"},
    "check": {"ok": True, "failure": None, "message": "", "launches": 1,
              "cases": [check_case("spec 0", "f32[2,3,40], f32[2,3,40]")]},
    "bench": None, "optimize": None, "fused": None, "kernels": [], "notes": [],
    "llm": {"best": "/out/llm/kernel.py", "requests": 1, "attempts": [{"iteration": 1, "failure": None, "message": "",
                                                                       "module": "/out/llm/attempt_1.py"}],
            "cost": {"requests": 1, "reused": 0, "prompt_tokens": 900, "completion_tokens": 400, "seconds": 4.0,
                     "dollars": None}},
}


def test_gpu_report_has_every_fact(tmp_path):
    written = write_report(tmp_path, GPU_RESULT)
    md_path, html_path, *pngs = written
    assert md_path == tmp_path / "report.md" and html_path == tmp_path / "report.html"
    assert len(pngs) == 2 and all(p.read_bytes().startswith(b"\x89PNG") for p in pngs)
    md = md_path.read_text()
    # which path won and why
    assert "Inductor (model-free) won: the LLM produced no verified kernel in 2 attempt(s)." in md
    assert "- emitted module: /out/kernel.py" in md and "- Inductor (model-free) module: /out/inductor/kernel.py" in md
    assert "Inductor fused the spec into one kernel: triton_poi_fused_add_gelu_0." in md
    # verification per case: shapes, verdict, worst element
    assert "| odd | f16[3,7,45], f16[45] | yes | out0[2, 5]: baseline" in md
    # the benchmark: mean/p50/p95, speedups vs eager / compile / max-autotune, roofline
    assert "NVIDIA H100 80GB HBM3; torch 2.11.0, triton 3.6.0" in md
    expected_roof = round(100 * (2 * 4 * 128 * 768 + 768) * 2 / 5e-6 / 1e9 / 3000)
    assert (f"| spec 0 | f16[4,128,768], f16[768] | generated (inductor) | 5.2 us | 5.0 us | 6.5 us | 2.40x | 1.20x | "
            f"1.10x | {expected_roof}% |") in md
    assert ("| spec 1 | f16[16,512,2048], f16[2048] | generated (inductor) | 31.5 us | 30.0 us | 39.0 us | 2.67x | "
            "0.97x | - |") in md
    assert "| inductor |" not in md  # the same module, not shown twice
    assert "| spec 0 | f16[4,128,768], f16[768] | eager | 12.6 us | 12.0 us | 15.6 us | 1.00x | 0.50x | 0.46x |" in md
    assert "spec 1 max-autotune-no-cudagraphs: BackendCompilerFailed: planted" in md
    assert NO_BENCH not in md
    # decisions, LLM attempts and cost, notes
    assert "- kernels: 1" in md and "stopped" not in md
    assert "- triton_poi_fused_add_gelu_0-3f2a: config XBLOCK=1024, num_warps=8" in md
    assert "| triton_poi_fused_add_gelu_0 | XBLOCK=1024 | 1.08x |" in md
    assert "2 request(s), 3,100 tokens in / 900 out, 12 s, $0.01" in md
    assert "| 1 | syntax | /out/llm/attempt_1.py | SyntaxError: invalid syntax (line 3) |" in md
    assert "\\| &lt;b>bad&lt;/b>" in md  # a message's '|' and HTML stay text
    assert "- emitted /out/kernel.py" in md
    page = html_path.read_text()
    assert "<b>bad</b>" not in page and "&lt;b&gt;bad&lt;/b&gt;" in page
    assert page.count("data:image/png;base64,") == 2
    assert "Inductor (model-free) won" in page


def test_cpu_report_says_timings_were_not_measured(tmp_path):
    written = write_report(tmp_path, CPU_RESULT)
    assert [p.name for p in written] == ["report.md", "report.html"]
    md = written[0].read_text()
    assert NO_BENCH == "timings not measured: no GPU (verified under Triton's interpreter)"
    assert NO_BENCH in md and html.escape(NO_BENCH) in written[1].read_text()
    assert "the LLM won: the model-free path did not run (it needs a GPU)." in md
    assert "Inductor's kernels were not examined (the model-free path did not run)." in md
    assert "## Optimization decisions" not in md
    assert "| 1 | verified | /out/llm/attempt_1.py |  |" in md
    assert "| spec 0 | f32[2,3,40], f32[2,3,40] | yes |" in md


def test_a_failed_case_and_an_unfused_spec_are_said(tmp_path):
    result = copy.deepcopy(CPU_RESULT)
    result.update(winner="inductor", fused=False, kernels=["triton_red_fused_0", "triton_poi_fused_1"], llm=None)
    result["check"] = {"ok": False, "failure": "wrong_result", "message": "odd out0[1]: 3 vs 4", "launches": 2,
                       "cases": [check_case("spec 0", "f32[2,40]"),
                                 check_case("odd", "f32[3,45]", ok=False, message="out0[1]: baseline 3, candidate 4")]}
    md = write_report(tmp_path, result)[0].read_text()
    assert "Inductor (model-free) won: it was the only path run (no --llm)." in md
    assert "## LLM" not in md
    assert "Inductor did NOT fuse the spec into one kernel (2: triton_red_fused_0, triton_poi_fused_1)" in md
    assert "**FAILED: wrong_result: odd out0[1]: 3 vs 4" in md
    assert "| odd | f32[3,45] | NO | out0[1]: baseline 3, candidate 4 |" in md


def test_a_gpu_run_without_a_benchmark_does_not_blame_the_gpu(tmp_path):
    result = {**CPU_RESULT, "device": "cuda", "bench_error": "the worker crashed (killed by SIGSEGV)"}
    md = write_report(tmp_path, result)[0].read_text()
    assert "timings not measured: the worker crashed (killed by SIGSEGV)" in md
    assert NO_BENCH not in md
    result.pop("bench_error")
    md = write_report(tmp_path, result)[0].read_text()
    assert "timings not measured: the benchmark did not run (--no-bench, or it failed: see the log)" in md


def test_winner_when_both_paths_verified_is_the_faster_one():
    cases = [{"times": {"inductor": stats(0.010), "llm": stats(0.012)}},
             {"times": {"inductor": stats(0.020), "llm": stats(0.019)}}]
    result = {"winner": "inductor", "paths": {"inductor": "/o/inductor/kernel.py", "llm": "/o/llm/kernel.py"},
              "bench": {"cases": cases}}
    assert winner_text(result) == ("Inductor (model-free) won: both verified; p50 summed over the cases: "
                                   "Inductor (model-free) 0.0300 ms, the LLM 0.0310 ms.")
    unverified = {"winner": "llm", "paths": {"inductor": "/o/inductor/kernel.py", "llm": "/o/llm/kernel.py"}}
    assert winner_text(unverified) == "the LLM won: the model-free module did not verify (see the notes)."
    failed = {"winner": "llm", "paths": {"inductor": {"ok": False, "message": "wrong result"}}}
    assert winner_text(failed) == "the LLM won: Inductor (model-free) produced no verified kernel (wrong result)."
    assert winner_text({**result, "why": "faster at every shape"}) == "Inductor (model-free) won: faster at every shape"
    assert winner_text({"winner": None}) == "No path produced a verified kernel."


def test_no_secret_reaches_the_report_or_generate_json(tmp_path, monkeypatch):
    """A message holding the LLM key (a model's reply echoed it, a candidate printed it) is
    scrubbed from report.md, report.html and generate.json, as from optimize's report and JSON."""
    from tritune import config
    from tritune.generate import run as flow

    key = "sk-test-DO-NOT-LEAK-generate-4e1d"
    monkeypatch.setenv(config.ENV_LLM_KEY, key)
    result = copy.deepcopy(CPU_RESULT)
    result["notes"] = [f"the model-free path failed: {key}"]
    result["llm"]["attempts"][0]["message"] = f"RuntimeError: {key}"
    flow._write(tmp_path, result)
    for name in ("report.md", "report.html", "generate.json"):
        text = (tmp_path / name).read_text()
        assert key not in text and "[secret]" in text, name
