"""Secrets never enter text that tritune stores, reports or sends (``tritune.secrets``, issue 23).

A sentinel LLM key and a sentinel signing key are planted; a candidate fails with a message (and
detail) that quotes both, as a candidate that read them and raised would. Neither may then be
found in the store's file, ``optimize.json``, ``kernels.jsonl``, the report, the log, or any
request the model's server received but in its Authorization header. Every test here fails
when ``scrub`` returns its text unchanged."""

from __future__ import annotations

import ast
import base64
import json
import os
from pathlib import Path

import pytest
from llm_server import Raw, ScriptedServer
from test_llm_loop import llm_pays, reply
from test_loop import captured, worker  # noqa: F401 - module-scoped fixtures shared

from tritune import config, secrets
from tritune.llm.client import ChatClient
from tritune.loop import optimize
from tritune.loop.evaluate import Evaluated, Evaluator
from tritune.model.request import RunRequest
from tritune.model.settings import ArbiterSettings, LLMSettings, LoopSettings
from tritune.model.trial import Trial
from tritune.store import DecisionStore
from tritune.worker.failures import Failure

LLM_KEY = "sk-sentinel-LLM-KEY-4e1d0b7c"
SIGNING = bytes(range(0x40, 0x60))  # 32 bytes: the sentinel signing key


def leaks(key: bytes = SIGNING) -> list[bytes]:
    """Every form of the sentinels a file may hold (text forms, UTF-8)."""
    forms = [LLM_KEY, key.hex(), key.hex().upper(), base64.b64encode(key).decode(),
             base64.urlsafe_b64encode(key).decode().rstrip("=")]
    return [form.encode() for form in forms] + [key]


@pytest.fixture
def sentinels(tmp_path, monkeypatch) -> Path:
    """A home with the sentinel signing key, and the sentinel LLM key in the environment."""
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    key_file = home / "store.key"
    key_file.write_text(SIGNING.hex() + "\n")
    key_file.chmod(0o600)
    monkeypatch.setenv(config.ENV_HOME, str(home))
    monkeypatch.setenv(config.ENV_LLM_KEY, LLM_KEY)
    return key_file


def test_every_form_of_every_secret_is_scrubbed(sentinels, monkeypatch):
    monkeypatch.setenv(config.ENV_OPENAI_KEY, "sk-the-other-one-99")
    texts = [LLM_KEY, "sk-the-other-one-99", SIGNING.hex(), SIGNING.hex().upper(), base64.b64encode(SIGNING).decode(),
             base64.urlsafe_b64encode(SIGNING).decode().rstrip("="), SIGNING.decode("latin-1"), repr(SIGNING)[2:-1],
             json.dumps(SIGNING.decode("latin-1"))[1:-1]]
    for text in texts:
        assert secrets.scrub(f"said: {text}.") == "said: [secret].", text
    assert secrets.scrub_data({"a": [f"x {LLM_KEY}", 1, None], LLM_KEY: (SIGNING.hex(),)}) == \
        {"a": ["x [secret]", 1, None], "[secret]": ("[secret]",)}
    assert secrets.scrub(None) is None and secrets.scrub("nothing secret") == "nothing secret"


def test_short_values_are_left_alone_and_a_new_key_file_is_read_again(sentinels, monkeypatch):
    monkeypatch.setenv(config.ENV_LLM_KEY, "abc")  # too short to mean anything: "abc" stays in text
    assert secrets.scrub("abc " + SIGNING.hex()) == "abc [secret]"
    other = bytes(range(0x80, 0xa0))
    sentinels.write_text(other.hex() + "\n")  # the file changed: its new key is scrubbed
    assert secrets.scrub(other.hex()) == "[secret]"
    sentinels.unlink()  # none yet (the signer makes it on first use): nothing to scrub, no error
    assert secrets.scrub(other.hex()) == other.hex()


def test_the_module_sits_at_the_bottom_and_names_the_signer_s_key_file():
    from tritune.store import signing

    tree = ast.parse(Path(secrets.__file__).read_text())
    imported = {alias.name for node in ast.walk(tree) if isinstance(node, ast.ImportFrom) and node.module == "tritune"
                for alias in node.names}
    imported |= {node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                 and (node.module or "").startswith("tritune.")}
    assert imported <= {"config", "errors", "tritune.config", "tritune.errors"}
    assert secrets.KEY_FILE == signing.KEY_FILE


def test_the_store_writes_no_secret_in_any_column(sentinels, tmp_path):
    from tritune.model.key import DecisionKey
    from tritune.model.variant import Variant

    leak = f"boom {LLM_KEY} {SIGNING.hex()}"
    key = DecisionKey(source_hash="s" * 64, kernel="k", specialization="x", gpu_name="g", capability=0,
                      triton_version="3")
    path = tmp_path / "decisions.db"
    with DecisionStore(path) as store:
        run = store.start_run({"note": leak}, leak)
        cand = store.add_candidate(run, key, Variant(name="v", constexprs={"BLOCK": 64}))
        store.claim(cand.id, run)
        store.finish_candidate(cand.id, "rejected", failure={"kind": "crash", "message": leak, "detail": leak},
                               verification={"ok": False, "message": leak})
        [found] = store.candidates()
    assert found.message == found.detail == "boom [secret] [secret]" and found.signed  # the outcome still verifies
    assert not [form for form in leaks() for file in tmp_path.glob("decisions.db*") if form in file.read_bytes()]


def test_the_chat_client_sends_the_key_in_its_header_alone(sentinels):
    with ScriptedServer(["fine"]) as server:
        with ChatClient(server.url, "m") as client:
            client.chat([{"role": "user", "content": f"the last candidate said: {LLM_KEY} {SIGNING.hex()}"}])
    [request] = server.requests
    assert request["headers"]["authorization"] == f"Bearer {LLM_KEY}"
    assert request["json"]["messages"][0]["content"] == "the last candidate said: [secret] [secret]"


class Leaky(Evaluator):
    """Real evaluation, but a candidate whose source says ``# leak`` fails with a message and a
    detail quoting both sentinels, as one that read them and raised would."""

    message = f"{LLM_KEY} {SIGNING.hex()} {base64.b64encode(SIGNING).decode()}"

    def candidates(self, spec, items, verify_timeout_s=None):
        for variant, mode in items:
            if "# leak" in (variant.source or ""):
                failure = Failure("runtime_fault", self.message, detail=f"Traceback: {self.message}")
                yield Evaluated(Trial(variant, False, failure=failure.kind, message=failure.message), failure=failure)
            else:
                yield from super().candidates(spec, [(variant, mode)], verify_timeout_s)


def test_a_candidate_that_quotes_the_secrets_leaves_them_nowhere(captured, tmp_path, worker, sentinels):  # noqa: F811
    from tritune.report import write_report

    leaking = reply("tl.store(out_ptr + offsets, x * alpha + y, mask=mask)", "leak")
    lines: list[str] = []
    out = tmp_path / "out"
    refusal = Raw(400, f"no: {LLM_KEY} {SIGNING.hex()}")  # the endpoint's error body is said in the log
    words = "I would rather explain it in words."  # no code: nothing more to build (the test stays quick)
    with ScriptedServer([leaking, words, refusal]) as server:
        settings = LoopSettings(arbiter=ArbiterSettings(require_meaningful=False), max_candidates=4, per_round=2,
                                families=("llm",), llm=LLMSettings(url=server.url, model="scripted", rounds=2, fixes=1))
        results = optimize(captured, RunRequest(out, settings=settings), log=lines.append, evaluator=Leaky(captured, retime=llm_pays, worker=worker))
        requests = server.requests
    write_report(results, out / "report")  # from what the loop holds in memory, not from optimize.json

    [kernel] = results.kernels
    assert [c.failure for c in kernel.candidates] == ["runtime_fault"]
    assert len(requests) == 3 and "[secret]" in json.dumps(requests[1]["json"])  # the fix prompt quoted it
    assert any("HTTP 400: no: " in line and "[secret]" in line for line in lines), lines
    assert all(r["headers"]["authorization"] == f"Bearer {LLM_KEY}" for r in requests)
    bodies = [json.dumps(r["json"]).encode() for r in requests]
    files = [path for path in out.rglob("*") if path.is_file()]
    assert {"decisions.db", "optimize.json", "kernels.jsonl", "report.md", "report.html"} <= {p.name for p in files}
    found = [(form, str(path.relative_to(out))) for path in files for form in leaks() if form in path.read_bytes()]
    found += [(form, "a request") for body in bodies for form in leaks() if form in body]
    found += [(form, "the log") for line in lines for form in leaks() if form in line.encode()]
    assert found == []
    assert b"[secret]" in b"".join(path.read_bytes() for path in out.glob("decisions.db*"))  # the message, scrubbed
    for name in ("optimize.json", "kernels.jsonl", "report/report.md", "report/report.html"):
        assert "[secret]" in (out / name).read_text(), name  # each said the message: scrubbed, not left out
    assert os.stat(sentinels).st_size  # the key is where it was: only its copies in text are gone
