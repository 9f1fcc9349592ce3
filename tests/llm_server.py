"""A scripted OpenAI-compatible chat-completions server for tests (standard library only).

    with ScriptedServer(["a reply", Raw(429, "slow down", {"Retry-After": "2"}), "another"]) as srv:
        ChatClient(srv.url, "m").chat([...])
        srv.requests  # [{"path": "/v1/chat/completions", "headers": {...}, "json": {...}}, ...]

Each POST takes the next item of the script, in order:

- a string: a chat completion with that content, its usage counted as ``len(prompt) // 4`` and
  ``len(content) // 4`` (the prompt: every message's content, joined);
- ``Completion(text, prompt_tokens, completion_tokens)``: the same with the counts given (None:
  counted as above), ``usage=False`` leaving usage out;
- ``Raw(status, body, headers)``: that answer as is (an error, garbage); a dict or list body is
  sent as JSON;
- ``Slow(seconds, item)``: ``item`` after a pause (a timeout for a client that waits less).

A request past the end of the script gets HTTP 500 saying so, so a test whose code calls the
model more often than it planned fails visibly. The server listens on 127.0.0.1, on a free port.
"""

from __future__ import annotations

import dataclasses
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Union


@dataclasses.dataclass(frozen=True)
class Completion:
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    usage: bool = True
    model: str = "scripted-model"


@dataclasses.dataclass(frozen=True)
class Raw:
    status: int
    body: Any = ""
    headers: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass(frozen=True)
class Slow:
    seconds: float
    item: "Item"


Item = Union[str, Completion, Raw, Slow]


def completion_json(item: Completion, request: Any) -> dict:
    """The chat completion a server would send for ``item`` in answer to ``request``."""
    messages = request.get("messages") if isinstance(request, dict) else None
    prompt = "".join(str(m.get("content", "")) for m in messages or [] if isinstance(m, dict))
    data: dict[str, Any] = {
        "id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": item.model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": item.text}}],
    }
    if item.usage:
        prompt_tokens = len(prompt) // 4 if item.prompt_tokens is None else item.prompt_tokens
        completion_tokens = (len(item.text) // 4 if item.completion_tokens is None
                             else item.completion_tokens)
        data["usage"] = {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                         "total_tokens": prompt_tokens + completion_tokens}
    return data


class ScriptedServer:
    def __init__(self, script: list[Item]):
        self.script = list(script)
        self.requests: list[dict] = []
        self._lock = threading.Lock()
        self._closing = threading.Event()  # ends the pauses of Slow items at once on close
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a client gone after a timeout leaves a thread behind
        # serve_forever notices shutdown() once per poll: its default 0.5 s would be most of a test
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,),
                                        daemon=True)
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> "ScriptedServer":
        self._thread.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join()

    def _next(self, request: dict) -> Item:
        with self._lock:
            self.requests.append(request)
            if len(self.requests) > len(self.script):
                return Raw(500, f"ScriptedServer: script exhausted ({len(self.script)} items, "
                                f"this is request {len(self.requests)})")
            return self.script[len(self.requests) - 1]

    def _answer(self, item: Item, request: dict) -> tuple[int, bytes, dict]:
        while isinstance(item, Slow):
            self._closing.wait(item.seconds)
            item = item.item
        if isinstance(item, str):
            item = Completion(item)
        if isinstance(item, Completion):
            item = Raw(200, completion_json(item, request.get("json")))
        body = item.body
        headers = dict(item.headers)
        if isinstance(body, (dict, list)):
            body = json.dumps(body)
            headers.setdefault("Content-Type", "application/json")
        if isinstance(body, str):
            body = body.encode()
            headers.setdefault("Content-Type", "text/plain; charset=utf-8")
        return item.status, body, headers


def _handler(server: ScriptedServer) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:  # noqa: N802 - http.server's name
            raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            try:
                body = json.loads(raw)
            except ValueError:
                body = None
            request = {"path": self.path, "json": body,
                       "headers": {name.lower(): value for name, value in self.headers.items()}}
            status, payload, headers = server._answer(server._next(request), request)
            try:
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)
            except (BrokenPipeError, ConnectionResetError):
                pass  # the client gave up waiting (a Slow item past its timeout)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - quiet tests
            pass

    return Handler
