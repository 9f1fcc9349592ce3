"""Launches capture saw but could not record, each named with why: ``DIR/skipped.jsonl``.

A launch whose arguments a ``LaunchSpec`` cannot describe (a ``TensorDescriptor``, a constexpr
that is an arbitrary object: ``jit_launch.UnsupportedLaunch``), or whose recording failed (its
kernel file could not be copied, a bug of ours), is not dropped: the recorder keeps one record
per kernel and reason with the number of launches it covers, and ``finalize`` writes them next
to ``launches.jsonl``::

    {"tritune_skipped": 1}
    {"kernel": "k", "module": "m", "source_file": "...", "kind": "unsupported", "reason": "...", "count": 3}

``kind``: ``unsupported`` (capture cannot describe this launch), ``error`` (describing or
recording it failed). ``tritune capture`` and ``tritune optimize`` print them (``lines``); the
fidelity benchmark counts them. No file when nothing was skipped.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Iterable

SKIPPED = "skipped.jsonl"
VERSION = 1
KINDS = ("unsupported", "error")


@dataclasses.dataclass
class Skipped:
    kernel: str
    module: str
    source_file: str
    kind: str  # see KINDS
    reason: str  # one line
    count: int = 1

    @property
    def id(self) -> str:
        body = json.dumps([self.kernel, self.module, self.kind, self.reason])
        return hashlib.sha256(body.encode()).hexdigest()[:16]

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, body: dict) -> "Skipped":
        fields = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in body.items() if k in fields})


def of_launch(fn: object, kind: str, error: BaseException | str) -> Skipped:
    """The record of a launch of jit function ``fn`` (or a tuner's) that was not recorded."""
    from tritune.errors import one_line

    python_fn = fn
    while hasattr(python_fn, "fn"):
        python_fn = python_fn.fn
    source_file = ""
    try:
        import inspect

        source_file = inspect.getsourcefile(python_fn) or ""  # type: ignore[arg-type]
    except (TypeError, OSError):
        pass
    reason = error if isinstance(error, str) else one_line(error)
    return Skipped(getattr(python_fn, "__name__", "?"), getattr(python_fn, "__module__", "") or "", source_file,
                   kind, reason)


def merge(records: Iterable[Skipped]) -> list[Skipped]:
    """Equal records (same kernel, module, kind and reason) as one, their counts added."""
    merged: dict[str, Skipped] = {}
    for record in records:
        if record.id in merged:
            merged[record.id].count += record.count
        else:
            merged[record.id] = dataclasses.replace(record)
    return list(merged.values())


def write(directory: str | Path, records: Iterable[Skipped]) -> Path | None:
    """``DIR/skipped.jsonl`` (atomically), or no file (an old one removed) when there are none."""
    path = Path(directory) / SKIPPED
    records = list(records)
    if not records:
        path.unlink(missing_ok=True)
        return None
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w") as handle:
        handle.write(json.dumps({"tritune_skipped": VERSION}) + "\n")
        for record in records:
            handle.write(json.dumps(record.to_json()) + "\n")
    tmp.replace(path)
    return path


def read(directory: str | Path) -> list[Skipped]:
    """The skipped launches of a capture directory (none without the file); a damaged file is a
    ``SpecError`` naming it."""
    from tritune.model.launch import SpecError

    path = Path(directory)
    path = path / SKIPPED if path.is_dir() else path.with_name(SKIPPED)
    if not path.exists():
        return []
    records = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        try:
            body = json.loads(line)
        except json.JSONDecodeError:
            raise SpecError(f"{path}:{number}: not JSON: the file is damaged") from None
        if number == 1:
            if not isinstance(body, dict) or body.get("tritune_skipped") != VERSION:
                raise SpecError(f"{path}:1: not a tritune skipped-launches file of version {VERSION}")
            continue
        if not isinstance(body, dict):
            raise SpecError(f"{path}:{number}: expected a JSON object")
        records.append(Skipped.from_json(body))
    return records


def lines(records: Iterable[Skipped], limit: int = 20) -> list[str]:
    """A headline and one line per record (most launches first), for a terminal."""
    records = sorted(records, key=lambda r: (-r.count, r.kernel, r.reason))
    if not records:
        return []
    total = sum(r.count for r in records)
    kernels = len({(r.module, r.kernel) for r in records})
    out = [f"{total} launch(es) of {kernels} kernel(s) were not captured ({SKIPPED}):"]
    for record in records[:limit]:
        out.append(f"  {record.kernel}: {record.kind}: {record.reason} ({record.count} launch(es))")
    if len(records) > limit:
        out.append(f"  ... and {len(records) - limit} more reason(s) in {SKIPPED}")
    return out
