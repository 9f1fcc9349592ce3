"""Secrets never enter text that tritune stores, reports or sends: ``scrub(text)``.

The secrets are the LLM key(s) in the environment (``config.SECRET_ENV``) and the store signing
key (``$TRITUNE_HOME/store.key``, ``tritune.store.signing``). Code that tritune did not write
runs in its workers, and what it says (an exception's message, its output) travels back as text:
a candidate that got hold of a key could otherwise put it into the store, ``optimize.json``, the
report, the log, or the next prompt sent to a model (issue 23). ``scrub`` replaces every known
form of every secret with ``[secret]``:

- an LLM key as it is, JSON-escaped and HTML-escaped (as it would appear in a JSON column, in
  ``optimize.json``, in ``report.html``);
- the signing key as its file holds it (hex), in upper-case hex, in base64 (standard and
  URL-safe, with and without padding), and its raw bytes (read as Latin-1, and as Python
  writes them in a ``bytes`` repr).

Values shorter than ``MIN_CHARS`` are left alone: replacing them would mangle ordinary text and
they protect nothing. The choke points that call it: every parameter the store's SQLite
connection writes (``store.connection``), ``RunResults.write`` and ``kernels.jsonl``
(``loop``), the loop's log lines (``loop.session``), the report's files (``report.write``), the
chat client's request body (``llm.client``: the key goes in the Authorization header alone) and
a dry run's prompt files (``llm.family``).

Cheap enough to call on every write: the secrets' forms are computed once per set of values
(the key file is read once, and again only when it changes; a missing one is looked for again,
as the signer makes it on first use), and a text without any of them costs one search per form.

This module sits at the bottom of the import graph with ``config`` and ``errors``.
"""

from __future__ import annotations

import base64
import functools
import html
import json
import os
from pathlib import Path
from typing import Any, Iterable

from tritune import config

MARK = "[secret]"
MIN_CHARS = 8  # shorter values are not scrubbed (a key is far longer: ours are 64 hex digits)
KEY_FILE = "store.key"  # ``tritune.store.signing.KEY_FILE``: this module cannot import the store


def scrub(text: str) -> str:
    """``text`` with every known form of every secret replaced by ``[secret]``. Anything but a
    ``str`` (None included) is returned as it is."""
    return _scrub(text, forms()) if isinstance(text, str) and text else text


def write_json(path: str | Path, body: Any, indent: int | None = None) -> None:
    """``body`` as JSON in ``path``, scrubbed (no secret in any message it holds) and atomically: a
    reader never sees half a file, an interrupted write leaves the old one."""
    path = Path(path)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(scrub(json.dumps(body, indent=indent, default=str)))
    os.replace(tmp, path)


def scrub_each(values: Iterable[Any]) -> tuple:
    """``scrub`` of each value (the secrets looked up once): a statement's parameters."""
    found = forms()
    return tuple(_scrub(v, found) if isinstance(v, str) and v else v for v in values)


def _scrub(text: str, found: tuple[str, ...]) -> str:
    for form in found:
        if form in text:
            text = text.replace(form, MARK)
    return text


def scrub_data(value: Any) -> Any:
    """``value`` (JSON-like: dicts, lists, tuples, strings, numbers) with every string in it,
    keys included, scrubbed; a new value where anything changed."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, dict):
        return {scrub(k) if isinstance(k, str) else k: scrub_data(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(scrub_data(v) for v in value)
    return value


def forms() -> tuple[str, ...]:
    """Every form ``scrub`` replaces now, longest first (so that no form is cut by a shorter one)."""
    values, home = config.secret_sources()
    return _forms(values, _signing_key(_key_file(home)))


@functools.lru_cache(maxsize=8)
def _key_file(home: str) -> Path:
    return config.home_path({config.ENV_HOME: home}) / KEY_FILE


@functools.lru_cache(maxsize=8)
def _forms(values: tuple[str, ...], key: bytes | None) -> tuple[str, ...]:
    found: set[str] = set()
    for value in values:
        found |= _text_forms(value)
    if key is not None:
        found |= _key_forms(key)
    return tuple(sorted((f for f in found if len(f) >= MIN_CHARS), key=len, reverse=True))


def _text_forms(value: str) -> set[str]:
    return {value, json.dumps(value)[1:-1], html.escape(value)}


def _key_forms(raw: bytes) -> set[str]:
    encoded = {base64.b64encode(raw).decode(), base64.urlsafe_b64encode(raw).decode()}
    found = {raw.hex(), raw.hex().upper(), raw.decode("latin-1"), repr(raw)[2:-1]}
    found |= encoded | {e.rstrip("=") for e in encoded}
    return {form for text in found for form in _text_forms(text)}


_KEYS: dict[tuple, bytes | None] = {}  # (path, inode, mtime, size) -> the key it held


def _signing_key(path: Path) -> bytes | None:
    """The signing key's bytes as its file holds them (hex); read again only when the file
    changed (one ``stat`` a call); None while there is none (the signer makes it on first use)."""
    try:
        info = path.stat()
    except OSError:
        return None
    stamp = (str(path), info.st_ino, info.st_mtime_ns, info.st_size)
    if stamp not in _KEYS:
        try:
            key = bytes.fromhex(path.read_text().strip())
        except (OSError, ValueError, UnicodeDecodeError):
            key = None
        if len(_KEYS) > 16:
            _KEYS.clear()
        _KEYS[stamp] = key
    return _KEYS[stamp]
