"""Read a worker's reply without letting it run code here: a restricted unpickler.

A worker runs code tritune did not write (a model's kernels, foreign source), jailed or not. Its
replies are pickles, and ``pickle.loads`` calls whatever a pickle names (``os.system`` through a
``__reduce__``): loaded with the default class lookup, a reply would run the payload's code in
the parent, outside the jail, next to the keys. So the parent reads every reply with ``load``:
at most ``MAX_REPLY_BYTES``, and a pickle that may name no class or function but ``ALLOWED``
(plain containers and scalars need none; ``Failure`` is the one class a reply carries). Jobs
return plain values (``to_json`` records); what else they return is refused here, not admitted.

A refused or malformed reply raises ``BadReply`` (one line naming what was refused); the worker
that sent it is not trusted again (``pool`` kills it: a ``crash``).
"""

from __future__ import annotations

import io
import pickle
from multiprocessing.connection import Connection
from typing import Any

from tritune.model.failures import KINDS
from tritune.worker.failures import Failure

MAX_REPLY_BYTES = 64 * 1024 * 1024
# (module, name) a reply's pickle may name: builtins' value types that older protocols name by
# global, and the failure record.
ALLOWED = frozenset({
    ("builtins", "bytearray"), ("builtins", "complex"), ("builtins", "frozenset"), ("builtins", "set"),
    ("builtins", "range"), ("builtins", "slice"),
    ("tritune.worker.failures", "Failure"),
})


class BadReply(Exception):
    """A worker's reply that is too big, not a pickle of plain values, or not of the protocol's
    shape; the message is one line."""


class _Unpickler(pickle.Unpickler):
    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in ALLOWED:
            raise BadReply(f"reply names {module}.{name}, which a reply may not hold")
        return super().find_class(module, name)

    def persistent_load(self, pid: Any) -> Any:
        raise BadReply("reply holds a persistent id")


def loads(data: bytes) -> Any:
    """The value pickled in ``data``, naming nothing outside ``ALLOWED``; ``BadReply`` else."""
    try:
        return _Unpickler(io.BytesIO(data)).load()
    except BadReply:
        raise
    except Exception as exc:  # noqa: BLE001 - any malformed pickle: the reply is refused
        raise BadReply(f"reply is not a readable pickle ({type(exc).__name__})") from None


def load(conn: Connection, *replies: str, length: int) -> tuple:
    """The next reply on ``conn``: a tuple of ``length`` items whose first is one of ``replies``;
    ``BadReply`` if it is too big (the connection is closed then), unreadable or of another
    shape. A ``"failed"`` reply's second item must be a sound ``Failure`` (its kind known, its
    text strings), a third item a number (seconds). ``EOFError`` and ``OSError`` as
    ``Connection.recv_bytes`` raises them (the worker died)."""
    try:
        data = conn.recv_bytes(MAX_REPLY_BYTES)
    except OSError as exc:
        if "bad message length" in str(exc):
            raise BadReply(f"reply is larger than {MAX_REPLY_BYTES // 2**20} MiB") from None
        raise
    reply = loads(bytes(data))
    if not isinstance(reply, tuple) or len(reply) != length or reply[0] not in replies:
        raise BadReply("reply is not of the worker protocol's shape")
    if reply[0] == "failed" and not _sound(reply[1]):
        raise BadReply("reply holds a malformed Failure")
    if length > 2 and (type(reply[2]) not in (int, float)):
        raise BadReply("reply's seconds are not a number")
    return reply


def _sound(failure: Any) -> bool:
    return (type(failure) is Failure and failure.kind in KINDS and isinstance(failure.message, str)
            and isinstance(failure.detail, str))
