"""The LLM family in the loop, on the CPU, against a real HTTP server on 127.0.0.1 that speaks the
chat-completions protocol with scripted replies. Building and verifying are real (interpreter
workers); only the times are scripted (``retime``): the correct rewrite is the fast one."""

from __future__ import annotations

from pathlib import Path

import pytest
from llm_server import Raw, ScriptedServer, Slow
from test_loop import captured, worker  # noqa: F401 - module-scoped fixtures shared

from tritune import config
from tritune.loop import optimize
from tritune.loop.evaluate import Evaluator
from tritune.model.request import RunRequest
from tritune.model.settings import ArbiterSettings, LLMSettings, LoopSettings
from tritune.store import DecisionStore

KEY = "sk-test-DO-NOT-LEAK-7f3a9c"
HEADER = "import triton\nimport triton.language as tl\n\n\n"
SIGNATURE = "def scale_add_kernel(x_ptr, y_ptr, out_ptr, n, alpha, BLOCK: tl.constexpr):\n"
BODY = ("    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)\n    mask = offsets < n\n"
        "    x = tl.load(x_ptr + offsets, mask=mask)\n    y = tl.load(y_ptr + offsets, mask=mask)\n")


def reply(store_line: str, marker: str = "", signature: str = SIGNATURE, extra: str = "") -> str:
    code = f"@triton.jit\n{signature}{BODY}    {store_line}  # {marker}\n{extra}"
    return f"Here is a faster version.\n\n```python\n{code}```\n"


CORRECT = reply("tl.store(out_ptr + offsets, y + alpha * x, mask=mask)", "fast")
WRONG = reply("tl.store(out_ptr + offsets, x * alpha - y, mask=mask)", "wrong")
CHANGED = reply("tl.store(out_ptr + offsets, x * scale + y, mask=mask)", "renamed",
                signature=SIGNATURE.replace("alpha", "scale"))


def unsafe(sentinel: Path) -> str:
    """Correct arithmetic, and a module-level call that would write ``sentinel`` on import."""
    extra = f"\n\ndef _leak():\n    open({str(sentinel)!r}, 'w').write('ran')\n\n\nLEAKED = _leak()\n"
    return reply("tl.store(out_ptr + offsets, x * alpha + y, mask=mask)", "unsafe", extra=extra)


def llm_pays(spec, variant, measured_ms):
    return 0.5 if "# fast" in (variant.source or "") else 1.0


def run_llm(captured, out, worker, url, **llm):
    settings = LoopSettings(arbiter=ArbiterSettings(require_meaningful=False), max_candidates=4, per_round=2,
                            families=("llm",), llm=LLMSettings(url=url, model="scripted", **llm))
    lines: list[str] = []
    results = optimize(captured, RunRequest(out, settings=settings), log=lines.append, evaluator=Evaluator(captured, retime=llm_pays, worker=worker))
    return results, lines


def files_under(*roots: Path):
    for root in roots:
        for path in Path(root).rglob("*"):
            if path.is_file():
                yield path


@pytest.fixture
def key(monkeypatch):
    monkeypatch.setenv(config.ENV_LLM_KEY, KEY)
    return KEY


def test_proposal_remediation_sandbox_and_the_key_end_to_end(captured, tmp_path, worker, key):
    sentinel = tmp_path / "sentinel"
    script = [Raw(429, "slow down", {"Retry-After": "0"}), WRONG, unsafe(sentinel),
              "I would rather explain it in words.", CHANGED, CORRECT]
    with ScriptedServer(script) as server:
        results, lines = run_llm(captured, tmp_path / "out", worker, server.url, rounds=3, fixes=1)
        requests = server.requests

    [kernel] = results.kernels
    assert kernel.accepted and "# fast" in _decision_source(tmp_path / "out" / "decisions.db")
    llm = kernel.llm
    assert llm["rounds"] == 3 and llm["replies"] == 5
    assert llm["failures"] == {"wrong_result": 1, "unsafe": 1, "no_code": 1, "signature": 1}
    assert [a["role"] for a in llm["attempts"]] == ["propose", "fix", "propose", "fix", "propose"]
    # the wrong result went back with its class and its worst element
    fix_prompt = requests[2]["json"]["messages"][-1]["content"]
    assert "wrong result" in fix_prompt and "out_ptr" in fix_prompt
    assert requests[2]["json"]["messages"][-2] == {"role": "assistant", "content": WRONG}
    # the unsafe reply never ran: its module-level write did not happen, and no candidate was made of it
    assert not sentinel.exists()
    assert not any("unsafe" in (c.variant or "") for c in kernel.candidates)
    # the key went to the server as a Bearer token, and nowhere else
    assert all(r["headers"].get("authorization") == f"Bearer {key}" for r in requests)
    home = config.home()
    for path in files_under(tmp_path, home):
        assert key.encode() not in path.read_bytes(), path
    assert not any(key in line for line in lines)
    # every reply is stored with the candidate it made or why it was refused
    with DecisionStore(tmp_path / "out" / "decisions.db") as store:
        exchanges = store.llm_exchanges()
    assert len(exchanges) == 5 and all(e.trusted and e.outcome for e in exchanges)
    assert [e.outcome.get("failure") for e in exchanges] == ["wrong_result", "unsafe", "no_code", "signature", None]
    assert results.llm["cost"]["requests"] == 5


def test_a_later_run_reads_the_stored_replies_instead_of_asking_again(captured, tmp_path, worker, key):
    """A run cut after the model's first reply (here: given one round), run again with more: the
    first prompt is the same, so its reply comes from the store; only the new round is asked for."""
    with ScriptedServer([WRONG]) as server:
        first, _ = run_llm(captured, tmp_path / "out", worker, server.url, rounds=1, fixes=0)
    assert not first.kernels[0].accepted and len(server.requests) == 1
    with ScriptedServer([CORRECT]) as again:  # a second request for the first prompt would take CORRECT
        later, _ = run_llm(captured, tmp_path / "out", worker, again.url, rounds=2, fixes=0)
    assert len(again.requests) == 1 and "wrong result" in again.requests[0]["json"]["messages"][1]["content"]
    assert later.kernels[0].accepted and later.llm["cost"]["reused"] == 1
    assert [a.get("failure") for a in later.kernels[0].llm["attempts"]] == ["wrong_result", None]


def test_an_endpoint_that_times_out_is_one_line_and_the_run_goes_on(captured, tmp_path, worker, key):
    with ScriptedServer([Slow(3.0, CORRECT)]) as server:
        results, lines = run_llm(captured, tmp_path / "out", worker, server.url, timeout_s=0.5, retries=0)
    [kernel] = results.kernels
    assert kernel.ran and not kernel.accepted
    [said] = [line for line in lines if "llm:" in line]
    assert "timed out" in said and "\n" not in said and key not in said
    assert results.llm["broken"]


def test_dry_run_writes_the_prompts_and_sends_nothing(captured, tmp_path, worker, key):
    with ScriptedServer([]) as server:
        results, _ = run_llm(captured, tmp_path / "out", worker, server.url, dry_run=str(tmp_path / "prompts"))
        assert server.requests == []
    [prompt] = list((tmp_path / "prompts").glob("*.md"))
    text = prompt.read_text()
    assert "scale_add_kernel" in text and "## How the program launches" in text and key not in text
    assert not results.kernels[0].accepted


def _decision_source(db: Path) -> str:
    with DecisionStore(db) as store:
        [decision] = store.decisions()
    return decision.variant.source or ""


def test_a_reply_is_keyed_by_its_prompt_without_the_measured_numbers():
    """A resumed run measures its baseline anew: times and speedups must not change the key;
    code, shapes and the model must."""
    from tritune.llm.family import prompt_key

    def prompt(best_ms: str, code: str = "x = 1.5", shape: str = "[1024]") -> list[dict]:
        return [{"role": "system", "content": "rules"},
                {"role": "user", "content": f"shape {shape}\nbest: 1.{best_ms} ms, 2.5e-3 s, 1.25x\n"
                                            f"```python\n{code}\n```\n"}]

    assert prompt_key("m", prompt("0123")) == prompt_key("m", prompt("0456"))
    assert prompt_key("m", prompt("0123")) != prompt_key("m", prompt("0123", code="x = 2.5"))
    assert prompt_key("m", prompt("0123")) != prompt_key("m", prompt("0123", shape="[2048]"))
    assert prompt_key("m", prompt("0123")) != prompt_key("other", prompt("0123"))
