"""``tritune generate --llm``: seed 004's loop on the CPU, against a real HTTP server on 127.0.0.1
that speaks the chat-completions protocol with scripted replies (``llm_server``). Checking is real:
each module runs under Triton's interpreter in a worker and is compared with the spec's reference.
Only the times are scripted (``time_module``), where a test is about ``slower``."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import torch
from conftest import import_interpreted
from llm_server import ScriptedServer
from test_llm_loop import key  # noqa: F401 - the LLM key in the environment, shared
from test_loop import worker  # noqa: F401 - the module-scoped interpreter worker, shared

from tritune.generate.assemble import assemble
from tritune.generate.launcher import TENSOR
from tritune.generate.llm import generate_with_llm, tolerance_text
from tritune.generate.spec import load_spec
from tritune.model.settings import LLMSettings

SPEC = '''"""relu(x + bias): seed 004's bias + activation, small enough for the interpreter."""
import torch

name = "bias_relu"


def reference(x, bias):
    return torch.relu(x + bias)


def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(4, 40, generator=g).to(device), torch.randn(40, generator=g).to(device))]
'''
MODULE = '''import torch
import triton
import triton.language as tl


@triton.jit
def bias_relu_kernel(x_ptr, bias_ptr, out_ptr, n, cols, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    x = tl.load(x_ptr + offsets, mask=mask)
    b = tl.load(bias_ptr + offsets % cols, mask=mask)
    tl.store(out_ptr + offsets, {result}, mask=mask)  # {marker}


def run(x, bias){colon}
    x = x.contiguous()
    out = torch.empty_like(x)
    n = x.numel()
    bias_relu_kernel[(triton.cdiv(n, 64),)](x, bias, out, n, bias.numel(), BLOCK=64)
    return out
{extra}'''


def reply(result: str = "tl.maximum(x + b, 0.0)", marker: str = "fused", colon: str = ":", extra: str = "") -> str:
    code = MODULE.format(result=result, marker=marker, colon=colon, extra=extra)
    return f"Here is the fused kernel.\n\n```python\n{code}```\n"


CORRECT = reply()
WRONG = reply("x + b", "no relu")  # negative sums come out negative: a mismatch
SYNTAX = reply(colon="", marker="no colon")  # `def run(x, bias)` without its colon


def unsafe(sentinel: Path) -> str:
    """A correct module with a module-level call that would write ``sentinel`` on import."""
    return reply(marker="unsafe", extra=f"\n\ndef leak():\n    open({str(sentinel)!r}, 'w').write('ran')\n\n\n"
                                        "LEAKED = leak()\n")


@pytest.fixture
def spec(tmp_path):
    path = tmp_path / "bias_relu.py"
    path.write_text(SPEC)
    return load_spec(path)


def generate(spec, out, worker, url, *, max_iterations=15, time_module=None, reference_ms=None, **llm):
    lines: list[str] = []
    result = generate_with_llm(spec, out, LLMSettings(url=url, model="scripted", **llm), device="cpu",
                               worker=worker, max_iterations=max_iterations, time_module=time_module,
                               reference_ms=reference_ms, log=lines.append)
    return result, lines


def feedback(request: dict) -> str:
    return request["json"]["messages"][-1]["content"]


def test_a_wrong_kernel_then_a_syntax_error_then_a_correct_one(spec, tmp_path, worker, key):
    """Issue 14, section 4: three requests, the second and third carrying the feedback."""
    with ScriptedServer([WRONG, SYNTAX, CORRECT, CORRECT]) as server:
        result, lines = generate(spec, tmp_path / "out", worker, server.url)
        requests = server.requests
    assert len(requests) == 3 and result["requests"] == 3 and result["cost"]["requests"] == 3
    assert [a["failure"] for a in result["attempts"]] == ["wrong_result", "syntax", None]

    first = requests[0]["json"]["messages"]
    [prompt] = first  # the task alone: the spec, its shapes, where it runs, the tolerance, the rules
    assert prompt["role"] == "user" and "return torch.relu(x + bias)" in prompt["content"]
    assert "spec 0: f32[4,40], f32[40]" in prompt["content"] and "interpreter" in prompt["content"]
    assert "1e-05 + 0.0001 * |expected|" in prompt["content"] and "one `run(...)` launcher" in prompt["content"]
    assert "only launch arithmetic" in prompt["content"]  # the launcher's rules

    # the mismatch went back with its class and its worst element, cut to 300 characters
    second = requests[1]["json"]["messages"]
    assert second[:2] == [prompt, {"role": "assistant", "content": WRONG}] and len(second) == 3
    assert "wrong result" in feedback(requests[1]) and "spec 0" in feedback(requests[1])
    assert len(feedback(requests[1]).split("```")[1].strip()) <= 300
    # then the syntax error, after the first attempt and its feedback
    third = requests[2]["json"]["messages"]
    assert third[:3] == second and third[3] == {"role": "assistant", "content": SYNTAX} and len(third) == 5
    assert "syntax error" in feedback(requests[2]) and "expected ':'" in feedback(requests[2])

    # the syntax error was never written as a module; the correct one is the best, copied
    folder = tmp_path / "out" / "llm"
    assert not (folder / "attempt-02.py").exists() and (folder / "attempt-02.md").read_text() == SYNTAX
    assert result["best"] == str(folder / "kernel.py") and result["best_attempt"] == 3
    module = import_interpreted(folder / "kernel.py", "generated_bias_relu")
    for x, bias in [*spec.make_inputs("cpu"), (torch.randn(3, 17), torch.randn(17))]:
        torch.testing.assert_close(module.run(x, bias), spec.reference(x, bias))
    assert any("attempt 3/15: verified" in line for line in lines)


def test_an_unsafe_reply_never_runs_and_goes_back_as_unsafe(spec, tmp_path, worker, key):
    """Also: a reply without code is ``no_code``, and the conversation keeps the last two attempts."""
    sentinel = tmp_path / "sentinel"
    script = [unsafe(sentinel), "I would rather explain it in words.", WRONG, CORRECT]
    with ScriptedServer(script) as server:
        result, lines = generate(spec, tmp_path / "out", worker, server.url)
        requests = server.requests
    assert [a["failure"] for a in result["attempts"]] == ["unsafe", "no_code", "wrong_result", None]
    assert not sentinel.exists()
    folder = tmp_path / "out" / "llm"
    assert not (folder / "attempt-01.py").exists() and result["attempts"][0]["module"] is None
    assert "unsafe code" in feedback(requests[1]) and "def leak: a plain function" in feedback(requests[1])
    assert "no ```python block" in feedback(requests[2])
    # the fourth request: the task, then attempts 2 and 3 only (the unsafe reply has left)
    fourth = requests[3]["json"]["messages"]
    assert [m["role"] for m in fourth] == ["user", "assistant", "user", "assistant", "user"]
    assert fourth[1]["content"] == script[1] and fourth[3]["content"] == WRONG
    assert result["best_attempt"] == 4
    # the key went to the server as a Bearer token, and nowhere else
    assert all(r["headers"].get("authorization") == f"Bearer {key}" for r in requests)
    for path in tmp_path.rglob("*"):
        assert not path.is_file() or key.encode() not in path.read_bytes(), path
    assert lines and not any(key in line for line in lines)


def host_payloads(sentinel: Path) -> list[str]:
    """Correct modules whose host code would write ``sentinel`` if it ran (or compute on the host).
    The first two got through main's kernel blocklist (issue 23): torch.save in run() through an
    alias, after a proper launch; a plain function shipped beside run() (kernel.py carried it)."""
    path = repr(str(sentinel))

    def in_run(code: str) -> str:  # before run()'s return
        lines = "".join(f"    {line}\n" for line in code.splitlines())
        return CORRECT.replace("    return out\n", lines + "    return out\n")

    helper = f"\n\ndef save(out):\n    n = torch.nn\n    n.modules.module.torch.save(out, {path})\n    return out\n"
    return [
        in_run(f"n = torch.nn\nn.modules.module.torch.save(out, {path})"),
        reply(extra=helper),
        in_run(f"getattr(torch, 'sa' + 've')(out, {path})"),
        in_run(f"__import__('pathlib').Path({path}).write_text('ran')"),
        in_run(f"open({path}, 'w').write('ran')"),
        in_run("out = torch.relu(x + bias)"),  # the result computed on the host, the kernel for show
        in_run("out = torch.ops.aten.relu(out)"),
        in_run(f"[torch][0].save(out, {path})"),
        CORRECT.replace("def run(x, bias):", f"def run(x, bias, _=open({path}, 'w')):"),  # runs at import
        in_run(f"def inner():\n    torch.save(out, {path})\ninner()"),
        in_run(f"import pathlib\npathlib.Path({path}).write_text('ran')"),
        reply(extra=f"\n\n[torch][0].save(torch.ones(1), {path})\n"),  # at import
    ]


def test_host_code_outside_the_launcher_allowlist_never_runs_and_never_ships(spec, tmp_path, worker, key):
    """Issue 23: the reply's run() passes the launcher allowlist and nothing but its kernels and
    run() reaches a .py; a refused attempt leaves no module, the sentinel is never written, and
    kernel.py is tritune's assembly of the good reply's checked parts."""
    from tritune.llm.reply import first_python_block

    sentinel = tmp_path / "sentinel"
    payloads = host_payloads(sentinel)
    with ScriptedServer([*payloads, CORRECT]) as server:
        result, _ = generate(spec, tmp_path / "out", worker, server.url, max_iterations=len(payloads) + 1)
        requests = server.requests
    assert [a["failure"] for a in result["attempts"]] == ["unsafe"] * len(payloads) + [None]
    assert not sentinel.exists()
    assert "torch.nn is not allowed in run()" in feedback(requests[1])
    assert "def save: a plain function" in feedback(requests[2])
    folder = tmp_path / "out" / "llm"
    last = f"attempt-{len(payloads) + 1:02d}.py"
    assert sorted(p.name for p in folder.glob("*.py")) == [last, "kernel.py"]
    shipped = (folder / "kernel.py").read_text()
    assert shipped == assemble(first_python_block(CORRECT), [TENSOR, TENSOR], name="bias_relu").text
    assert "torch.nn" not in shipped and str(sentinel) not in shipped


def test_slower_is_fed_back_and_the_fastest_verified_module_is_kept(spec, tmp_path, worker, key):
    """Scripted times against a 1.0 ms eager reference: a module marked `slow` takes 1.5 ms, one
    marked `slower` 2.0 ms; both verify, neither ends the loop, the faster is the best."""
    def time_module(path: Path) -> dict:
        text = path.read_text()
        return {"spec 0": {"mean": 2.0 if "# slower" in text else 1.5 if "# slow" in text else 0.5}}

    slow, slower = reply(marker="slow"), reply(marker="slower")
    with ScriptedServer([slow, slower]) as server:
        result, _ = generate(spec, tmp_path / "a", worker, server.url, max_iterations=2, time_module=time_module,
                             reference_ms={"spec 0": {"mean": 1.0, "p50": 1.0}})
        requests = server.requests
    assert [a["failure"] for a in result["attempts"]] == ["slower", "slower"]
    assert all(a["verified"] for a in result["attempts"])
    assert "slower than the PyTorch reference" in feedback(requests[1]) and "1.5000 ms" in feedback(requests[1])
    assert result["best_attempt"] == 1
    assert Path(result["best"]).read_text() == (tmp_path / "a" / "llm" / "attempt-01.py").read_text()

    with ScriptedServer([slower, CORRECT, CORRECT]) as server:
        result, _ = generate(spec, tmp_path / "b", worker, server.url, time_module=time_module,
                             reference_ms={"spec 0": 1.0})
    assert [a["failure"] for a in result["attempts"]] == ["slower", None] and result["best_attempt"] == 2
    assert result["attempts"][1]["speedup"] == pytest.approx(2.0)


def test_the_prompt_states_each_dtype_s_tolerance_the_spec_s_override_first(tmp_path):
    """One line per dtype of the cases' tensors: the table's rule, exact for integers, the spec's
    override where it gives one (``GenSpec.tolerance_for``)."""
    path = tmp_path / "spec.py"
    path.write_text("import torch\n\ntolerance = {'float16': (0.02, 0.002)}\n\n\n"
                    "def reference(x, index):\n    return x[index]\n\n\n"
                    "def inputs(device):\n    return [(torch.randn(4, 40, device=device), torch.arange(3, device=device))]\n")
    spec = load_spec(path)
    lines = tolerance_text(spec, spec.cases("cpu")).splitlines()
    assert lines[:3] == ["- float16: |got - expected| <= 0.002 + 0.02 * |expected| (the spec's tolerance)",
                         "- float32: |got - expected| <= 1e-05 + 0.0001 * |expected|",
                         "- int64: exact"]
    assert lines[3].startswith("- NaN and Inf where the reference has them")


def test_dry_run_writes_the_first_prompt_and_sends_nothing(spec, tmp_path, worker, key):
    with ScriptedServer([]) as server:
        result, lines = generate(spec, tmp_path / "out", worker, server.url, dry_run=str(tmp_path / "prompts"))
        assert server.requests == []
    [prompt] = list((tmp_path / "prompts").glob("*.md"))
    text = prompt.read_text()
    assert "return torch.relu(x + bias)" in text and "f32[4,40]" in text and key not in text
    assert result["best"] is None and result["requests"] == 0 and not (tmp_path / "out" / "llm").exists()
    assert len(lines) == 1 and str(prompt) in lines[0]


def test_a_dry_run_prompt_holds_no_secret_even_where_the_spec_does(tmp_path, worker, key):
    """The prompt file is written by the LLM family's writer, which scrubs: a key pasted into the
    spec (here a comment, sent as the spec's source) never reaches the file."""
    path = tmp_path / "bias_relu.py"
    path.write_text(SPEC + f"# the endpoint's key: {key}\n")
    result, _ = generate(load_spec(path), tmp_path / "out", worker, "http://127.0.0.1:9",
                         dry_run=str(tmp_path / "prompts"))
    text = Path(result["prompt"]).read_text()
    assert "# the endpoint's key: [secret]" in text and key not in text


def test_an_unreachable_endpoint_is_one_line_and_no_best(spec, tmp_path, worker, key):
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result, lines = generate(spec, tmp_path / "out", worker, f"http://127.0.0.1:{port}/v1", retries=0)
    assert result["best"] is None and result["attempts"] == [] and result["requests"] == 0
    [said] = lines
    assert "unreachable" in said and "\n" not in said and key not in said


def test_the_command_without_a_gpu_runs_the_llm_path_and_writes_its_artefacts(tmp_path, key):
    """`tritune generate SPEC --out DIR --llm URL` on the CPU: the model-free path says it needs a
    GPU (a note), the model's verified module becomes DIR/kernel.py, and the report says so."""
    import json
    import os
    import subprocess
    import sys

    path = tmp_path / "bias_relu.py"
    path.write_text(SPEC)
    out = tmp_path / "out"
    with ScriptedServer([WRONG, CORRECT]) as server:
        done = subprocess.run([sys.executable, "-m", "tritune", "generate", str(path), "--out", str(out), "--llm",
                               server.url, "--llm-model", "scripted"], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "TRITON_INTERPRET": "1"})
    assert done.returncode == 0, done.stderr[-2000:]
    assert len(server.requests) == 2
    result = json.loads((out / "generate.json").read_text())
    assert result["winner"] == "llm" and result["check"]["ok"]
    assert any("model-free path needs a GPU" in note for note in result["notes"])
    assert (out / "kernel.py").read_text() == (out / "llm" / "kernel.py").read_text()
    assert "llm" in (out / "report.md").read_text().lower()
    for file in out.rglob("*"):
        if file.is_file():
            assert key not in file.read_text(errors="replace"), file


MATMUL_SPEC = '''import torch


def reference(x, w, bias):
    return torch.relu(x @ w + bias)


def inputs(device):
    g = torch.Generator().manual_seed(0)
    return [(torch.randn(8, 32, generator=g).to(device), torch.randn(32, 16, generator=g).to(device),
             torch.randn(16, generator=g).to(device))]
'''
MATMUL_MODULE = '''import torch
import triton
import triton.language as tl


@triton.jit
def row_kernel(x_ptr, w_ptr, bias_ptr, out_ptr, K: tl.constexpr, N: tl.constexpr):
    row = tl.program_id(0)
    k = tl.arange(0, K)
    n = tl.arange(0, N)
    x = tl.load(x_ptr + row * K + k)
    w = tl.load(w_ptr + k[:, None] * N + n[None, :])
    y = tl.sum(x[:, None] * w, axis=0) + tl.load(bias_ptr + n)
    tl.store(out_ptr + row * N + n, tl.maximum(y, 0.0))


def run(x, w, bias):
    out = torch.empty((x.shape[0], w.shape[1]), device=x.device, dtype=x.dtype)
    row_kernel[(x.shape[0],)](x, w, bias, out, K=x.shape[1], N=w.shape[1])
    return out
'''


def test_a_model_free_failure_leaves_the_llm_path_to_run(tmp_path, key, monkeypatch):
    """Inductor puts the matmul in a library call, which the model-free path refuses (one line):
    with --llm, that is a note, and the model's kernel is still asked for, verified and kept."""
    from tritune.generate.run import GenerateSettings, generate as run_generate

    monkeypatch.setenv("TRITON_INTERPRET", "1")
    path = tmp_path / "matmul_relu.py"
    path.write_text(MATMUL_SPEC)
    with ScriptedServer([f"```python\n{MATMUL_MODULE}```\n"]) as server:
        settings = GenerateSettings(budget_s=0, bench=False, interpret=True,
                                    llm=LLMSettings(url=server.url, model="scripted"))
        result = run_generate(path, tmp_path / "out", settings, log=lambda line: None)
        assert len(server.requests) == 1
    assert result["winner"] == "llm" and result["check"]["ok"], result["check"]
    [note] = [note for note in result["notes"] if "model-free path failed" in note]
    assert note.endswith("which the model-free path cannot put in kernel.py")  # whole, not cut short
    # tritune's assembly of the reply's checked parts
    assert (tmp_path / "out" / "kernel.py").read_text() == assemble(MATMUL_MODULE, [TENSOR] * 3,
                                                                    name="matmul_relu").text


def test_the_command_dry_run_without_a_gpu_writes_the_prompt_and_succeeds(tmp_path, key):
    """--llm-dry-run sends nothing, so nothing can verify: that is what was asked, not a failure."""
    import os
    import subprocess
    import sys

    path = tmp_path / "bias_relu.py"
    path.write_text(SPEC)
    out = tmp_path / "out"
    with ScriptedServer([]) as server:
        done = subprocess.run([sys.executable, "-m", "tritune", "generate", str(path), "--out", str(out), "--llm",
                               server.url, "--llm-model", "scripted", "--llm-dry-run"], capture_output=True,
                              text=True, timeout=600, env={**os.environ, "TRITON_INTERPRET": "1"})
        assert server.requests == []
    assert done.returncode == 0, done.stderr[-2000:]
    [prompt] = list((out / "llm-prompts").glob("*.md"))
    assert done.stdout.strip().splitlines()[-1] == f"bias_relu: llm dry run: no kernel.py (the prompt: {prompt})"
    assert not (out / "kernel.py").exists()


def test_a_reply_too_deep_to_compile_is_a_syntax_failure_not_a_crash():
    from tritune.generate.llm import _refusal

    deep = CORRECT.replace("    n = x.numel()\n", "    n = " + "+".join(["1"] * 30000) + "\n")
    (failure, message), module = _refusal(deep, "attempt-01.py", [TENSOR, TENSOR], "bias_relu")
    assert failure == "syntax" and "nested too deeply" in message and module == ""
