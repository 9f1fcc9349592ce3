"""A captured launch, as data: everything needed to rebuild it without the original program.

One ``LaunchSpec`` per distinct launch (same kernel, same specialization, same shapes, same
scalars); ``count`` says how often the program made it. A capture directory holds::

    DIR/launches.jsonl     one JSON object per distinct launch (``LaunchSpec.to_json``)
    DIR/sources/<sha>.py   a copy of each kernel's source file, so replay needs only DIR
                           (its whole-file hash is each launch's ``file_hash``)
    DIR/tensors/<id>.pt    input tensors whose values matter (index tensors), saved as captured

The first line of ``launches.jsonl`` is a header ``{"tritune_launches": VERSION, ...}``; a file
from another version, a truncated line, or a line missing a field is a ``SpecError`` that names
the file, the line and what is wrong.

Argument kinds (``ArgSpec.kind``):
  ``tensor``    shape, stride, dtype, device, storage_offset, storage_size (elements the storage
                must hold), ``written`` (the kernel stores to it), ``values``: how replay fills it
                (``random``; ``saved`` with ``data`` = a path under DIR; ``range`` with ``low``/
                ``high`` for integer tensors whose real values were not kept).
  ``scalar``    ``value`` and ``type`` (``int``, ``float``, ``bool``).
  ``none``      the argument was None.
  ``constexpr`` a ``tl.constexpr`` parameter; its value is in ``LaunchSpec.constexprs``, as
                ``tritune.model.constexprs`` writes it (``tl.float16`` is ``{"tl_dtype": "fp16"}``;
                JSON scalars as they are). Replay and apply ``decode`` it.

The grid: ``grid`` is the launch's grid as a 3-tuple. ``grid_rule`` says how it follows from the
arguments when a variant changes a constexpr (``None``: the grid is fixed)::

    {"kind": "cdiv", "dims": [{"numel": "n_elements", "block": "BLOCK_SIZE"}, {"const": 1}, ...]}
        dim = ceil(value of arg/constexpr `numel` / value of constexpr `block`)
    {"kind": "inductor", "grid_type": "Grid1D", ...}
        Inductor's own grid rule (see ``tritune.capture.inductor``)
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path, PurePath
from typing import Any, Iterable, Iterator

from tritune.model import constexprs as codec
from tritune.model.launch import ArgSpec, LaunchSpec, SpecError

VERSION = 1
LAUNCHES = "launches.jsonl"
SOURCES = "sources"
TENSORS = "tensors"


def source_hash(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def file_hash(data: bytes) -> str:
    """The hash of a kernel file's whole content (``LaunchSpec.file_hash``): its top level runs
    on import, so all of it must be what was captured, not only the kernel's text."""
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------------------------ the file

def header(**extra: Any) -> dict:
    return {"tritune_launches": VERSION, **extra}


def write_launches(directory: str | Path, specs: Iterable[LaunchSpec], **header_extra: Any) -> Path:
    """Write ``DIR/launches.jsonl`` atomically (a temp file renamed over the old one)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / LAUNCHES
    tmp = path.with_suffix(".jsonl.tmp")
    with tmp.open("w") as handle:
        handle.write(json.dumps(header(**header_extra)) + "\n")
        for spec in specs:
            handle.write(json.dumps(spec.to_json(), default=json_default) + "\n")
    tmp.replace(path)
    return path


def json_default(value: Any) -> Any:
    """``json.dumps``'s ``default`` for launch records: numpy / torch scalars as numbers, a constexpr
    value as ``model.constexprs`` encodes it; anything else fails (``UnsupportedConstexpr``)
    rather than being written as its text, which nothing could turn back."""
    if hasattr(value, "item") and not isinstance(value, (tuple, dict)):  # numpy / torch scalars
        return value.item()
    return codec.encode(value)


def read_launches(directory: str | Path) -> list[LaunchSpec]:
    """The specs of a capture directory (or of a ``launches.jsonl`` path); ``SpecError`` if unusable."""
    path = Path(directory)
    if path.is_dir():
        if not (path / LAUNCHES).exists():
            what = "an empty directory" if not any(path.iterdir()) else f"a directory without {LAUNCHES}"
            raise SpecError(f"{path}: {what}, not a `tritune capture` directory (capture into it first)")
        path = path / LAUNCHES
    if not path.exists():
        raise SpecError(f"{path}: no such file (is this a `tritune capture` directory?)")
    specs = list(iter_launches(path))
    for spec in specs:
        if spec.source:  # "" when the program's file could not be copied: nothing to import
            confined_source(path.parent, spec)
        for arg in spec.tensors:
            if arg.values == "saved":
                confined_data(path.parent, arg)
    return specs


def confined_source(root: str | Path, spec: LaunchSpec) -> Path:
    """``root/spec.source``, refused unless it is a relative path that stays inside ``root``: a
    launches file names the kernel file replay imports, and an import runs the file."""
    return confined(root, spec.source, f"{spec.id}: kernel source")


def confined_data(root: str | Path, arg: ArgSpec) -> Path:
    """``root/arg.data`` (a saved tensor's file), refused as ``confined`` says: a launches file
    must not make replay read (or ship to a Ray lane) a file of the user's outside its directory."""
    return confined(root, arg.data or "", f"argument {arg.name!r}: saved values")


def confined(root: str | Path, name: str, what: str) -> Path:
    """``root/name``, refused (``SpecError``, one line starting with ``what``) unless ``name`` is a
    relative path without ``..`` that stays inside ``root`` once links are resolved."""
    relative = PurePath(name)
    if not name or relative.is_absolute() or ".." in relative.parts:
        raise SpecError(f"{what} {name!r} is outside the capture directory: refused "
                        "(a launches file may only name files under its own directory)")
    path = Path(root) / relative
    if not path.resolve().is_relative_to(Path(root).resolve()):  # a link pointing out
        raise SpecError(f"{what} {name!r} leads outside the capture directory: refused")
    return path


def iter_launches(path: Path) -> Iterator[LaunchSpec]:
    try:
        data = path.read_bytes()
    except OSError as exc:  # a directory in its place, no permission, an I/O error
        raise SpecError(f"{path}: cannot read it: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise SpecError(f"{path}:{line}: not UTF-8 text (byte {exc.start}): not a tritune launches file, "
                        "or a damaged one") from None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    elif lines:
        raise SpecError(f"{path}:{len(lines)}: last line does not end in a newline: the file is truncated")
    if not lines:
        raise SpecError(f"{path}: empty file (no header): not a tritune launches file")
    first = _parse_line(path, 1, lines[0])
    if "tritune_launches" not in first:
        raise SpecError(f"{path}:1: no tritune_launches header: not a tritune launches file")
    found = first["tritune_launches"]
    if found != VERSION:
        newer = isinstance(found, int) and found > VERSION
        raise SpecError(f"{path}:1: written by spec version {found}, this tritune reads version {VERSION}: "
                        + ("upgrade tritune to read it" if newer else "capture again"))
    for number, line in enumerate(lines[1:], start=2):
        body = _parse_line(path, number, line)
        try:
            yield LaunchSpec.from_json(body)
        except SpecError as exc:
            raise SpecError(f"{path}:{number}: {exc}") from None


def _parse_line(path: Path, number: int, line: str) -> dict:
    try:
        body = json.loads(line)
    except json.JSONDecodeError as exc:
        raise SpecError(f"{path}:{number}: not JSON ({exc.msg} at column {exc.colno}): the file is truncated or damaged") from None
    if not isinstance(body, dict):
        raise SpecError(f"{path}:{number}: expected a JSON object, got {type(body).__name__}")
    return body
