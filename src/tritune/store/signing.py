"""Signatures that prove this user's tritune wrote a store entry: nothing else is run or trusted.

A store holds code: a decision's variant may carry kernel source that ``tritune run`` imports, and
an evaluated candidate's record tells ``optimize`` it need not run again. A store made elsewhere
(a colleague, a CI cache, an edit with sqlite3) is therefore used only through ``tritune store
import``, which verifies and times it again here. Everything tritune writes is signed with an
HMAC-SHA256 under a per-user secret, and only entries whose signature verifies are used:

    decision    HMAC(secret, ["tritune-decision/1", key sha, variant])     at ``set_decision``
    candidate   HMAC(secret, ["tritune-candidate/1", key sha, variant])    at ``add_candidate``
    outcome     HMAC(secret, ["tritune-outcome/1", key sha, variant hash,
                              verified|rejected, failure kind, verification, timings])
                                                                           at ``finish_candidate``
    profile     HMAC(secret, ["tritune-profile/1", key sha, variant hash, profile])   at ``set_profile``
    exchange    HMAC(secret, ["tritune-llm-exchange/1", prompt sha, key sha, reply])  at ``add_llm_exchange``
                (a stored reply is code: an interrupted run reuses it only when this user stored it)
    decision traits
                HMAC(secret, ["tritune-decision-traits/1", key sha, traits])  at ``set_decision``
                (what the decided kernel was: they seed other kernels' searches, ``store.priors``)
    Inductor cache entry
                HMAC(secret, ["tritune-inductor-cache/1", path, key sha, kernel, previous, written])
                (a file tritune wrote into Inductor's cache and what to put back: ``remove`` writes
                or deletes that path, so only an entry this user stored is followed)

The key sha is recomputed from the key's fields (kernel, source hash, specialization, GPU,
capability, Triton version), so moving a signed variant to another key or GPU breaks it; the
variant is its canonical JSON (sorted keys), so any edit of options, constexprs, passes or
source breaks it. The secret is 32 random bytes in ``$TRITUNE_HOME/store.key`` (default
``~/.tritune``; the folder is 0700, the file 0600), made on first use; a key file that others
can read is refused, as ssh refuses such a key: anyone who can read it can forge entries; so is a
key or folder that another user owns (or a link to one that another user owns: they could point
it elsewhere), or a folder others may write (they could replace the key).
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import json
import os
import secrets
import stat
from pathlib import Path
from typing import Any

from tritune import config
from tritune.store.schema import StoreError

KEY_FILE = "store.key"
_KEY_BYTES = 32

DECISION, CANDIDATE, OUTCOME, PROFILE = ("tritune-decision/1", "tritune-candidate/1", "tritune-outcome/1",
                                         "tritune-profile/1")
EXCHANGE = "tritune-llm-exchange/1"
INDUCTOR_CACHE = "tritune-inductor-cache/1"
TRAITS = "tritune-decision-traits/1"


class Signer:
    """Signs and checks store entries with one secret."""

    def __init__(self, secret: bytes) -> None:
        if len(secret) < 16:
            raise StoreError("a store signing secret needs at least 16 bytes")
        self._secret = secret

    def sign(self, kind: str, *fields: Any) -> str:
        body = json.dumps([kind, *fields], sort_keys=True, separators=(",", ":"), default=str)
        return hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()

    # the three kinds, each signed and checked through one place, so their fields cannot drift
    def decision(self, key_sha: str, variant: dict) -> str:
        return self.sign(DECISION, key_sha, variant)

    def candidate(self, key_sha: str, variant: dict) -> str:
        return self.sign(CANDIDATE, key_sha, variant)

    def outcome(self, key_sha: str, variant_hash: str, status: str, failure_kind: str | None,
                verification: Any, timings: Any) -> str:
        # accepted <-> verified is the arbiter's bookkeeping (set_decision), not a new outcome
        verdict = "verified" if status in ("verified", "accepted") else "rejected"
        return self.sign(OUTCOME, key_sha, variant_hash, verdict, failure_kind, verification, timings)

    def profile(self, key_sha: str, variant_hash: str, profile: Any) -> str:
        return self.sign(PROFILE, key_sha, variant_hash, profile)

    def exchange(self, prompt_sha: str, key_sha: str, reply: str) -> str:
        return self.sign(EXCHANGE, prompt_sha, key_sha, reply)

    def traits(self, key_sha: str, traits: Any) -> str:
        return self.sign(TRAITS, key_sha, traits)

    def traits_ok(self, signature: str | None, key_sha: str, traits: Any) -> bool:
        return _same(signature, self.traits(key_sha, traits))

    def inductor_entry(self, path: str, key_sha: str, kernel: str, previous: str | None, written: str) -> str:
        return self.sign(INDUCTOR_CACHE, path, key_sha, kernel, previous, written)

    def inductor_entry_ok(self, signature: str | None, *fields: Any) -> bool:
        return _same(signature, self.inductor_entry(*fields))

    def exchange_ok(self, signature: str | None, prompt_sha: str, key_sha: str, reply: str) -> bool:
        return _same(signature, self.exchange(prompt_sha, key_sha, reply))

    def decision_ok(self, signature: str | None, key_sha: str, variant: dict) -> bool:
        return _same(signature, self.decision(key_sha, variant))

    def candidate_ok(self, signature: str | None, key_sha: str, variant: dict) -> bool:
        return _same(signature, self.candidate(key_sha, variant))

    def outcome_ok(self, signature: str | None, *fields: Any) -> bool:
        return _same(signature, self.outcome(*fields))

    def profile_ok(self, signature: str | None, key_sha: str, variant_hash: str, profile: Any) -> bool:
        return _same(signature, self.profile(key_sha, variant_hash, profile))


def _same(signature: str | None, expected: str) -> bool:
    return isinstance(signature, str) and hmac.compare_digest(signature, expected)


def local_signer() -> Signer:
    """The signer of this user (``$TRITUNE_HOME/store.key``), made on first use."""
    return _signer_at(str(key_path()))


def key_path() -> Path:
    try:
        return config.home() / KEY_FILE
    except config.ConfigError as exc:
        raise StoreError(str(exc)) from None


@functools.lru_cache(maxsize=4)
def _signer_at(path: str) -> Signer:
    return Signer(_read_or_make(Path(path)))


def _read_or_make(path: Path) -> bytes:
    try:
        _private(path.parent, "folder", stat.S_IWGRP | stat.S_IWOTH, "700")  # others could replace the key
    except OSError as exc:
        raise StoreError(f"{path.parent}: cannot check the store signing folder ({exc.strerror or exc})") from None
    if not path.exists():
        try:
            _make(path)
        except OSError as exc:
            raise StoreError(f"{path}: the store signing key cannot be made ({exc.strerror or exc})") from None
    try:
        _private(path, "key", stat.S_IRWXG | stat.S_IRWXO, "600")  # others could forge entries
        secret = bytes.fromhex(path.read_text().strip())
    except (OSError, ValueError) as exc:
        raise StoreError(f"{path}: the store signing key cannot be read ({exc})") from None
    if len(secret) < 16:
        raise StoreError(f"{path}: the store signing key is too short: remove it and a new one is made "
                         "(entries signed with the old one then need `tritune store import`)")
    return secret


def _private(path: Path, what: str, forbidden: int, mode: str) -> None:
    """Refuse a key (or its folder) that another user owns or may change: as ssh refuses a key."""
    if os.name != "posix":
        return
    link = path.lstat()  # a link of another user's: they may point it at a folder of theirs at any time
    if stat.S_ISLNK(link.st_mode) and link.st_uid != os.getuid():
        raise StoreError(f"{path}: the store signing {what} is a link that belongs to another user (uid "
                         f"{link.st_uid}): set TRITUNE_HOME to a folder of your own")
    info = path.stat()
    if info.st_uid != os.getuid():
        raise StoreError(f"{path}: the store signing {what} belongs to another user (uid {info.st_uid}): "
                         f"set TRITUNE_HOME to a folder of your own")
    if info.st_mode & forbidden:
        raise StoreError(f"{path}: the store signing {what} is open to others (mode "
                         f"{stat.S_IMODE(info.st_mode):o}): run `chmod {mode} {path}`")


def _make(path: Path) -> None:
    """Write a fresh key atomically: two processes starting at once end up with the same key
    (the second one's link fails and it reads the first one's)."""
    temporary = path.with_name(f".{KEY_FILE}.{os.getpid()}.{secrets.token_hex(4)}")
    fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        with os.fdopen(fd, "w") as handle:
            handle.write(secrets.token_hex(_KEY_BYTES) + "\n")
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temporary, path)
        except FileExistsError:
            pass
    finally:
        temporary.unlink(missing_ok=True)
