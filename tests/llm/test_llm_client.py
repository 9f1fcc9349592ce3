"""``tritune.llm.client``: chat completions against a real HTTP server on 127.0.0.1, scripted."""

from __future__ import annotations

import email.utils
import socket
import subprocess
import sys
import time
import traceback

import httpx
import pytest
from llm_server import Completion, Raw, ScriptedServer, Slow

from tritune import config
from tritune.llm.client import ChatClient, LLMError, Reply, Usage, check_base_url, redact

KEY = "sk-tritune-test-7f3a9c51e2"
ASK = [{"role": "user", "content": "make this kernel faster"}]


class Waits(list):
    """A ``sleep`` that records the waits instead of sleeping."""

    def __call__(self, seconds: float) -> None:
        self.append(seconds)


def client(url: str, waits: Waits | None = None, **options) -> ChatClient:
    options.setdefault("key", KEY)
    options.setdefault("read_timeout_s", 5.0)
    return ChatClient(url, "test-model", sleep=waits if waits is not None else Waits(), **options)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def failure(call) -> LLMError:
    with pytest.raises(LLMError) as info:
        call()
    return info.value


def test_a_reply_with_its_usage_the_bearer_key_and_the_request_sent():
    with ScriptedServer([Completion("faster kernel", 120, 30)]) as srv:
        with client(srv.url + "/", max_tokens=512, temperature=0.2) as llm:  # trailing slash: same
            reply = llm.chat(ASK)
    assert reply == Reply("faster kernel", Usage(120, 30), "scripted-model", reply.seconds, 1)
    assert 0 < reply.seconds < 5
    [request] = srv.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["authorization"] == f"Bearer {KEY}"
    assert request["json"] == {"model": "test-model", "messages": ASK, "max_tokens": 512,
                               "temperature": 0.2}


def test_no_key_no_authorization_header_and_the_options_left_out():
    with ScriptedServer(["ok"]) as srv, client(srv.url, key=None) as llm:
        assert llm.chat(ASK).text == "ok"
    assert "authorization" not in srv.requests[0]["headers"]
    assert srv.requests[0]["json"] == {"model": "test-model", "messages": ASK}


def test_the_key_comes_from_config_when_not_given():
    with config.override({config.ENV_LLM_KEY: None, config.ENV_OPENAI_KEY: KEY}):
        with ScriptedServer(["ok"]) as srv, ChatClient(srv.url, "m") as llm:
            llm.chat(ASK)
    assert srv.requests[0]["headers"]["authorization"] == f"Bearer {KEY}"


def test_usage_missing_from_the_reply_counts_zero_and_usages_add():
    with ScriptedServer([Completion("x", usage=False), "abcdefgh"]) as srv, client(srv.url) as llm:
        assert llm.chat(ASK).usage == Usage(0, 0)
        counted = llm.chat(ASK).usage  # the server's default count: characters // 4
    assert counted == Usage(len(ASK[0]["content"]) // 4, 2)
    assert Usage(1, 2) + Usage(30, 40) == Usage(31, 42)


def test_429_waits_as_retry_after_says_then_succeeds():
    waits = Waits()
    with ScriptedServer([Raw(429, "rate limited", {"Retry-After": "2"}), "done"]) as srv:
        reply = client(srv.url, waits).chat(ASK)
    assert (reply.text, reply.attempts, waits, len(srv.requests)) == ("done", 2, [2.0], 2)


def test_retry_after_as_a_date_and_every_wait_capped():
    date = email.utils.formatdate(time.time() + 30, usegmt=True)
    waits = Waits()
    with ScriptedServer([Raw(503, "busy", {"Retry-After": date}),
                         Raw(429, "later", {"Retry-After": "3600"}), "done"]) as srv:
        assert client(srv.url, waits, max_wait_s=60).chat(ASK).attempts == 3
    assert 25 < waits[0] <= 30 and waits[1] == 60


def test_5xx_backs_off_exponentially_then_gives_up_naming_the_status():
    waits = Waits()
    with ScriptedServer([Raw(503, "overloaded"), Raw(502, "bad gateway"), "done"]) as srv:
        assert client(srv.url, waits, backoff_s=0.5).chat(ASK).attempts == 3
    assert waits == [0.5, 1.0]
    waits = Waits()
    with ScriptedServer([Raw(500, "boom")] * 3) as srv:
        llm = client(srv.url, waits, retries=2, backoff_s=1, max_wait_s=1.5)
        error = failure(lambda: llm.chat(ASK))
    assert str(error) == f"LLM endpoint {srv.url} answered HTTP 500: boom (3 attempts)"
    assert (error.kind, error.status, error.attempts, waits) == ("http", 500, 3, [1, 1.5])


def test_a_client_error_is_not_retried():
    waits = Waits()
    body = '{"error": {"message": "unknown\nmodel", "pad": "' + "x" * 300 + '"}}'
    with ScriptedServer([Raw(400, body), "never sent"]) as srv:
        error = failure(lambda: client(srv.url, waits).chat(ASK))
    assert (len(srv.requests), waits, error.status, error.attempts) == (1, [], 400, 1)
    message = str(error)
    assert message.startswith(f"LLM endpoint {srv.url} answered HTTP 400: "
                              '{"error": {"message": "unknown model"')
    assert "\n" not in message and len(message) < len(srv.url) + 250


@pytest.mark.parametrize("body, why", [
    ("<html>gateway</html>", "not JSON: <html>gateway</html>"),
    ({"object": "list", "data": []}, "no choices[0].message.content string"),
    ({"choices": [{"message": {"content": None, "tool_calls": []}}]},
     "no choices[0].message.content string"),
    ({"error": {"message": "context too long"}}, 'error: {"message": "context too long"}'),
])
def test_a_2xx_that_is_not_a_chat_completion(body, why):
    with ScriptedServer([Raw(200, body), "never sent"]) as srv:
        error = failure(lambda: client(srv.url).chat(ASK))
    assert str(error) == (f"LLM endpoint {srv.url} answered something that is not a chat "
                          f"completion ({why})")
    assert (error.kind, len(srv.requests)) == ("garbage", 1)


def test_an_unreachable_endpoint_is_retried_then_one_line():
    url = f"http://127.0.0.1:{free_port()}/v1"
    waits = Waits()
    error = failure(lambda: client(url, waits, retries=2).chat(ASK))
    assert str(error) == f"LLM endpoint {url} unreachable (connection refused) (3 attempts)"
    assert (error.kind, error.attempts, waits) == ("unreachable", 3, [1.0, 2.0])
    error = failure(lambda: client(url, retries=0).chat(ASK))
    assert str(error) == f"LLM endpoint {url} unreachable (connection refused)"


def test_a_slow_reply_past_the_read_timeout():
    with ScriptedServer([Slow(5, "too late")]) as srv:
        started = time.monotonic()
        error = failure(lambda: client(srv.url, read_timeout_s=0.3, retries=0).chat(ASK))
        assert time.monotonic() - started < 3
    assert str(error) == f"LLM endpoint {srv.url} timed out after 0.3 s"
    assert error.kind == "timeout"


def test_a_timeout_is_retried_and_a_slow_reply_in_time_is_fine():
    waits = Waits()
    with ScriptedServer([Slow(5, "too late"), Slow(0.05, "in time")]) as srv:
        reply = client(srv.url, waits, read_timeout_s=0.3).chat(ASK)
    assert (reply.text, reply.attempts, waits) == ("in time", 2, [1.0])


def test_the_key_never_appears_in_an_error():
    """A server that echoes the key in its error body, and every other failure: the key is in no
    message, repr or traceback, and no error drags along the httpx exception (it holds the
    request's headers)."""
    errors = []
    with ScriptedServer([Raw(401, f"invalid key {KEY}"), Raw(200, f"not json {KEY}"),
                         Raw(200, {"error": {"key": KEY}}), Slow(5, "late")]) as srv:
        for _ in range(3):
            errors.append(failure(lambda: client(srv.url).chat(ASK)))
        errors.append(failure(lambda: client(srv.url, read_timeout_s=0.2, retries=0).chat(ASK)))
    errors.append(failure(lambda: client(f"http://127.0.0.1:{free_port()}", retries=0).chat(ASK)))
    errors.append(failure(lambda: client(f"http://u:{KEY}@127.0.0.1:1/v1")))
    errors.append(failure(lambda: client(f"ftp://u:{KEY}@127.0.0.1:1/v1")))
    errors.append(failure(lambda: client("http://127.0.0.1:1/v1", key=KEY + "é")))
    with config.override({config.ENV_LLM_KEY: KEY}):
        errors.append(failure(lambda: check_base_url(KEY)))  # the key pasted for the URL
    assert "invalid key ***" in str(errors[0]) and errors[0].status == 401
    assert [e.kind for e in errors] == ["http", "garbage", "garbage", "timeout", "unreachable",
                                        "url", "url", "setup", "url"]
    for error in errors:
        shown = str(error) + repr(error) + "".join(traceback.format_exception(error))
        assert KEY not in shown and "\n" not in str(error)
        assert error.__cause__ is None and error.__context__ is None
    assert KEY not in repr(client("http://127.0.0.1:1"))


def test_redact():
    assert redact(f"a {KEY} b {KEY}", KEY) == "a *** b ***"
    assert redact("nothing to hide", None) == redact("nothing to hide", "") == "nothing to hide"


@pytest.mark.parametrize("url, expected", [
    ("http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"),
    (" https://api.example.com/v1/ ", "https://api.example.com/v1"),
    ("http://localhost:11434", "http://localhost:11434"),
    ("http://[::1]:8000/v1", "http://[::1]:8000/v1"),
])
def test_check_base_url_accepts(url, expected):
    assert check_base_url(url) == expected


@pytest.mark.parametrize("url, message", [
    ("127.0.0.1:8000/v1", "LLM endpoint '127.0.0.1:8000/v1' is not http(s)://host[:port][/path]"),
    ("ftp://host/v1", "LLM endpoint 'ftp://host/v1' is not http(s)://host[:port][/path]"),
    ("http:///v1", "LLM endpoint 'http:///v1' is not http(s)://host[:port][/path]"),
    ("http://host:99999/v1", "LLM endpoint URL is not a URL (Port out of range 0-65535)"),
    ("http://user:pw@host/v1", "LLM endpoint http://host/v1 carries credentials in the URL: "
                               "give the key in TRITUNE_LLM_API_KEY instead"),
    ("http://host/v1?api-key=s3cret", "LLM endpoint http://host/v1 has a query or fragment: "
                                      "give the base URL only"),
    ("http://host/v1/chat/completions",
     "LLM endpoint http://host/v1/chat/completions: give the base URL (e.g. http://host:8000/v1), "
     "without /chat/completions"),
    ("http://ho st/v1", "LLM endpoint 'http://ho st/v1' contains white space"),
])
def test_check_base_url_refuses_in_one_line(url, message):
    error = failure(lambda: check_base_url(url))
    assert (str(error), error.kind) == (message, "url")


def test_an_httpx_transport_can_stand_in_for_the_network():
    def answer(request: httpx.Request) -> httpx.Response:
        content = {"model": "mock", "choices": [{"message": {"content": "hi"}}]}
        return httpx.Response(200, json=content)

    reply = client("http://nowhere.invalid/v1", transport=httpx.MockTransport(answer)).chat(ASK)
    assert (reply.text, reply.model, reply.usage) == ("hi", "mock", Usage())


def test_without_httpx_the_module_imports_and_a_client_says_what_to_install():
    code = ("import sys; sys.modules['httpx'] = None\n"
            "from tritune.llm.client import ChatClient, LLMError\n"
            "try:\n    ChatClient('http://127.0.0.1:1/v1', 'm')\n"
            "except LLMError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "the LLM proposer needs httpx: pip install httpx"
