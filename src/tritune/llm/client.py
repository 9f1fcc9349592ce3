"""Chat completions from any OpenAI-compatible endpoint (hosted, vLLM, ollama, llama.cpp).

``ChatClient(base_url, model).chat(messages)`` POSTs ``{base_url}/chat/completions`` and returns a
``Reply`` (the text, the tokens it cost, the time, the attempts). It retries what may pass (HTTP
429 and 5xx, a refused or dropped connection, a timeout), waiting ``Retry-After`` when the server
names a wait and doubling backoff when it does not; everything else, and the last failure, is an
``LLMError`` of one line that a caller can show as is and go on without the model.

The key (``config.llm_api_key()`` unless given) is sent as a Bearer token and nowhere else: every
message goes through ``redact``, and no ``LLMError`` chains the httpx exception that raised it
(that exception holds the request, headers included).

httpx is imported when a client is made, not with this module: the GPU machines that only replay
stored decisions have no httpx and never talk to a model.
"""

from __future__ import annotations

import dataclasses
import email.utils
import json
import time
import urllib.parse
from typing import Any, Callable

from tritune import config
from tritune.secrets import scrub_data

_FROM_CONFIG: Any = object()  # ``key`` left out: ask config (None given means "send no key")
BODY_CHARS = 200  # of an error body in a message: enough for a server's reason, one line


class LLMError(RuntimeError):
    """One line saying what went wrong with the endpoint; never holds the key.

    ``kind`` lets a caller decide whether to go on asking: ``"url"`` (not a usable base URL),
    ``"setup"`` (httpx missing), ``"unreachable"``, ``"timeout"``, ``"http"`` (an error status,
    in ``status``), ``"garbage"`` (a 2xx that is not a chat completion), or ``"other"`` (raised
    by a caller). ``attempts`` is how many requests were made before giving up.
    """

    def __init__(self, message: str, *, kind: str = "other", status: int | None = None,
                 attempts: int = 0):
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.attempts = attempts


@dataclasses.dataclass(frozen=True)
class Usage:
    """Tokens a reply cost, as the server counted them (zeros where it did not say)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        if not isinstance(other, Usage):
            return NotImplemented
        return Usage(self.prompt_tokens + other.prompt_tokens,
                     self.completion_tokens + other.completion_tokens)

    @classmethod
    def from_json(cls, usage: Any) -> "Usage":
        usage = usage if isinstance(usage, dict) else {}
        return cls(_count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens")))


def _count(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


@dataclasses.dataclass(frozen=True)
class Reply:
    text: str  # choices[0].message.content
    usage: Usage
    model: str  # the model that answered, as the server names it (else the one asked for)
    seconds: float  # wall time of the whole call: every attempt and every wait between them
    attempts: int  # requests made: 1 unless some were retried


def redact(text: str, key: str | None) -> str:
    """``text`` with every occurrence of ``key`` replaced by ``***`` (unchanged without a key)."""
    return text.replace(key, "***") if key else text


def check_base_url(url: str) -> str:
    """``url`` without its trailing slash if it is ``http(s)://host[:port][/path]``, else
    ``LLMError``. Credentials, a query or a fragment are refused without echoing them: the key
    belongs in ``TRITUNE_LLM_API_KEY``, where it is never written down."""
    text = url.strip()
    try:
        parts = urllib.parse.urlsplit(text)
        parts.port  # raises ValueError for a port that is not a number in 0..65535
    except ValueError as exc:  # the URL is not echoed: it may hold credentials
        problem = f"LLM endpoint URL is not a URL ({exc})"
    else:
        shown = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}{parts.path}"
        if parts.username is not None or parts.password is not None:
            problem = (f"LLM endpoint {shown} carries credentials in the URL: give the key in "
                       f"{config.ENV_LLM_KEY} instead")
        elif parts.scheme not in ("http", "https") or not parts.hostname:
            problem = f"LLM endpoint {text!r} is not http(s)://host[:port][/path]"
        elif parts.query or parts.fragment:
            problem = f"LLM endpoint {shown} has a query or fragment: give the base URL only"
        elif any(c.isspace() for c in text):
            problem = f"LLM endpoint {text!r} contains white space"
        elif parts.path.rstrip("/").endswith("/chat/completions"):
            problem = (f"LLM endpoint {shown}: give the base URL (e.g. http://host:8000/v1), "
                       f"without /chat/completions")
        else:
            return text.rstrip("/")
    # A key pasted where the URL goes must not come back in the message.
    raise LLMError(redact(_one_line(problem), config.llm_api_key()), kind="url")


@dataclasses.dataclass
class _Failure:
    """One failed attempt, kept as text so that no httpx exception outlives its ``except``."""

    message: str
    kind: str
    retry: bool
    status: int | None = None
    wait: float | None = None  # what Retry-After asked for, in seconds


class ChatClient:
    """See the module doc. Use as a context manager (or call ``close``) to free its connections."""

    def __init__(self, base_url: str, model: str, *, key: str | None = _FROM_CONFIG,
                 max_tokens: int | None = None, temperature: float | None = None,
                 connect_timeout_s: float = 10.0, read_timeout_s: float = 300.0,
                 retries: int = 4, backoff_s: float = 1.0, max_wait_s: float = 60.0,
                 transport: Any = None, sleep: Callable[[float], None] = time.sleep):
        self.base_url = check_base_url(base_url)
        self.model = model
        self._key = config.llm_api_key() if key is _FROM_CONFIG else (key or None)
        if self._key and not (self._key.isascii() and self._key.isprintable()
                              and " " not in self._key):
            # httpx's error for such a header would quote the key
            raise LLMError(f"the LLM key ({config.ENV_LLM_KEY}, else {config.ENV_OPENAI_KEY}) has "
                           f"characters an HTTP header cannot carry", kind="setup")
        self.max_tokens = max_tokens
        self.temperature = temperature
        self.connect_timeout_s = connect_timeout_s
        self.read_timeout_s = read_timeout_s
        self.retries = max(0, retries)
        self.backoff_s = backoff_s
        self.max_wait_s = max_wait_s
        self._sleep = sleep
        try:
            import httpx
        except ImportError:
            raise LLMError("the LLM proposer needs httpx: pip install httpx",
                           kind="setup") from None
        self._httpx = httpx
        # Write and pool waits get the read timeout: a prompt is small, a busy server is not.
        self._http = httpx.Client(timeout=httpx.Timeout(read_timeout_s, connect=connect_timeout_s),
                                  transport=transport)

    def __repr__(self) -> str:  # the key stays out, as everywhere
        return f"ChatClient({self.base_url!r}, {self.model!r})"

    def __enter__(self) -> "ChatClient":
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        self._http.close()

    def chat(self, messages: list[dict]) -> Reply:
        """The model's answer to ``messages`` (``[{"role": ..., "content": ...}, ...]``)."""
        # the prompt quotes candidates' messages, which may quote what a candidate read: no secret
        # goes into the body (the key goes in the Authorization header alone)
        payload: dict[str, Any] = {"model": self.model, "messages": scrub_data(messages)}
        if self.max_tokens is not None:
            payload["max_tokens"] = self.max_tokens
        if self.temperature is not None:
            payload["temperature"] = self.temperature
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        start = time.monotonic()
        attempt = 0
        while True:
            attempt += 1
            outcome = self._attempt(payload, headers)
            if isinstance(outcome, Reply):
                return dataclasses.replace(outcome, seconds=time.monotonic() - start,
                                           attempts=attempt)
            if not outcome.retry or attempt > self.retries:
                break
            wait = outcome.wait if outcome.wait is not None else self.backoff_s * 2 ** (attempt - 1)
            self._sleep(min(wait, self.max_wait_s))
        message = outcome.message + (f" ({attempt} attempts)" if attempt > 1 else "")
        raise LLMError(redact(message, self._key), kind=outcome.kind, status=outcome.status,
                       attempts=attempt)

    def _attempt(self, payload: dict, headers: dict) -> Reply | _Failure:
        httpx = self._httpx
        where = f"LLM endpoint {self.base_url}"
        try:
            response = self._http.post(f"{self.base_url}/chat/completions", json=payload,
                                       headers=headers)
        except httpx.TimeoutException as exc:
            connecting = isinstance(exc, httpx.ConnectTimeout)
            limit = self.connect_timeout_s if connecting else self.read_timeout_s
            return _Failure(f"{where} timed out after {limit:g} s", "timeout", retry=True)
        except (httpx.NetworkError, httpx.RemoteProtocolError) as exc:
            return _Failure(f"{where} unreachable ({_reason(exc)})", "unreachable", retry=True)
        except httpx.HTTPError as exc:  # a proxy error, a protocol httpx does not speak...
            return _Failure(f"{where} failed ({_reason(exc)})", "unreachable", retry=False)
        status = response.status_code
        if status >= 300:
            body = _one_line(response.text)[:BODY_CHARS]
            return _Failure(f"{where} answered HTTP {status}: {body}", "http",
                            retry=status == 429 or status >= 500, status=status,
                            wait=_retry_after(response.headers.get("retry-after")))
        return self._parse(response, where)

    def _parse(self, response: Any, where: str) -> Reply | _Failure:
        try:
            data = json.loads(response.content)
        except ValueError:  # UnicodeDecodeError included
            return _garbage(where, f"not JSON: {_one_line(response.text)[:80]}")
        try:
            text = data["choices"][0]["message"]["content"]
        except (KeyError, IndexError, TypeError):
            text = None
        if not isinstance(text, str):
            error = data.get("error") if isinstance(data, dict) else None
            if error:  # some proxies answer 200 with {"error": ...}
                return _garbage(where, f"error: {_one_line(json.dumps(error))[:BODY_CHARS]}")
            return _garbage(where, "no choices[0].message.content string")
        model = data.get("model")
        return Reply(text=text, usage=Usage.from_json(data.get("usage")),
                     model=model if isinstance(model, str) and model else self.model,
                     seconds=0.0, attempts=0)


def _garbage(where: str, why: str) -> _Failure:
    return _Failure(f"{where} answered something that is not a chat completion ({why})", "garbage",
                    retry=False)


def _reason(exc: BaseException) -> str:
    """The OS's words for a network failure ("connection refused"), found down the exception's
    context chain where httpx and httpcore wrap it; else the exception's own first line."""
    link: BaseException | None = exc
    seen: set[int] = set()
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if isinstance(link, OSError) and link.strerror:
            return link.strerror[:1].lower() + link.strerror[1:]
        link = link.__cause__ or link.__context__
    return _one_line(str(exc)) or type(exc).__name__


def _retry_after(value: str | None) -> float | None:
    """``Retry-After`` in seconds: a number of seconds, or an HTTP date; None if absent or bad."""
    if not value:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        if when.tzinfo is None:  # RFC 9110 dates are GMT
            return None
        seconds = when.timestamp() - time.time()
    return max(0.0, seconds) if seconds == seconds else None  # NaN is no wait


def _one_line(text: str) -> str:
    return " ".join(text.split())
