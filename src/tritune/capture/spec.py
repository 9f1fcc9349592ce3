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
                ``tritune.capture.constexprs`` writes it (``tl.float16`` is ``{"tl_dtype": "fp16"}``;
                JSON scalars as they are). Replay and apply ``decode`` it.

The grid: ``grid`` is the launch's grid as a 3-tuple. ``grid_rule`` says how it follows from the
arguments when a variant changes a constexpr (``None``: the grid is fixed)::

    {"kind": "cdiv", "dims": [{"numel": "n_elements", "block": "BLOCK_SIZE"}, {"const": 1}, ...]}
        dim = ceil(value of arg/constexpr `numel` / value of constexpr `block`)
    {"kind": "inductor", "grid_type": "Grid1D", ...}
        Inductor's own grid rule (see ``tritune.capture.inductor``)
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from pathlib import Path, PurePath
from typing import Any, Iterable, Iterator

from tritune.capture import constexprs as codec

VERSION = 1
LAUNCHES = "launches.jsonl"
SOURCES = "sources"
TENSORS = "tensors"

ARG_KINDS = ("tensor", "scalar", "none", "constexpr")
KERNEL_KINDS = ("jit", "autotune", "heuristics", "inductor")


class SpecError(ValueError):
    """A launch spec (or file of them) that cannot be used; the message names what and where."""


@dataclasses.dataclass
class ArgSpec:
    name: str
    kind: str
    # tensor
    shape: list[int] | None = None
    stride: list[int] | None = None
    dtype: str | None = None  # torch dtype name without "torch.": "float16", "int64", "bool"
    device: str | None = None  # "cuda:0", "cpu"
    storage_offset: int = 0
    storage_size: int | None = None  # elements; >= the furthest element the view reaches
    written: bool = False
    values: str = "random"  # "random", "saved", "range"
    data: str | None = None  # path under the capture dir, for values == "saved"
    low: int | float | None = None  # for values == "range": integers drawn from [low, high]
    high: int | float | None = None
    # scalar
    value: Any = None
    type: str | None = None  # "int", "float", "bool"

    def __post_init__(self) -> None:
        if self.kind not in ARG_KINDS:
            raise SpecError(f"argument {self.name!r}: unknown kind {self.kind!r} (expected one of {ARG_KINDS})")
        if self.kind == "tensor":
            if self.shape is None or self.stride is None or self.dtype is None:
                raise SpecError(f"tensor argument {self.name!r} needs shape, stride and dtype")
            if len(self.shape) != len(self.stride):
                raise SpecError(f"tensor argument {self.name!r}: shape {self.shape} and stride {self.stride} differ in rank")
            if self.storage_size is None:
                self.storage_size = min_storage_size(self.shape, self.stride, self.storage_offset)
            if self.values not in ("random", "saved", "range"):
                raise SpecError(f"tensor argument {self.name!r}: unknown values {self.values!r}")
            if self.values == "saved" and not self.data:
                raise SpecError(f"tensor argument {self.name!r}: values 'saved' without data")

    @property
    def numel(self) -> int:
        return math.prod(self.shape) if self.kind == "tensor" else 0

    @property
    def is_tensor(self) -> bool:
        return self.kind == "tensor"

    def to_json(self) -> dict:
        keep = {"name": self.name, "kind": self.kind}
        if self.kind == "tensor":
            keep.update(shape=self.shape, stride=self.stride, dtype=self.dtype, device=self.device,
                        storage_offset=self.storage_offset, storage_size=self.storage_size,
                        written=self.written, values=self.values)
            if self.values == "saved":
                keep["data"] = self.data
            if self.values == "range":
                keep.update(low=self.low, high=self.high)
        elif self.kind == "scalar":
            keep.update(value=self.value, type=self.type)
        return keep


def min_storage_size(shape: Iterable[int], stride: Iterable[int], offset: int = 0) -> int:
    """Elements a storage needs to hold a view: ``offset + 1 + sum((size - 1) * stride)``; 0 if empty."""
    shape, stride = list(shape), list(stride)
    if any(size == 0 for size in shape):
        return offset
    return offset + 1 + sum((size - 1) * abs(step) for size, step in zip(shape, stride))


@dataclasses.dataclass
class LaunchSpec:
    kernel: str  # the @triton.jit function's name
    kind: str  # "jit", "autotune", "heuristics" or "inductor": the outermost wrapper
    module: str  # the module the kernel was defined in, as the program named it
    source_file: str  # the file it came from, as seen by the program (informational)
    source: str  # the copy under DIR/sources/ that replay imports (relative to DIR)
    source_hash: str  # sha256 of the kernel function's source text
    args: list[ArgSpec]  # every parameter, in order
    constexprs: dict[str, Any]
    options: dict[str, Any]  # num_warps, num_stages, maxnreg, ... as launched
    grid: list[int]  # 3 entries
    grid_rule: dict | None = None
    count: int = 1
    # How `written` was found: "ttir" (pointer params traced to stores in the kernel's TTIR),
    # "ttir-conservative" (a pointer reached an op the trace does not follow: counted as written),
    # "observed" (tensors compared before/after one launch; misses writes of unchanged values),
    # "inductor" (Inductor's out_ptr/in_out_ptr names and mutated args), "unknown" (all written).
    writes_from: str = "ttir"
    extra: dict = dataclasses.field(default_factory=dict)  # e.g. Inductor's kernel_num_gb
    # sha256 of the whole copy under DIR/sources/ (``file_hash``), checked before replay runs any
    # of it; None in captures made before it was recorded (the kernel's own hash is checked then)
    file_hash: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in KERNEL_KINDS:
            raise SpecError(f"kernel {self.kernel!r}: unknown kind {self.kind!r} (expected one of {KERNEL_KINDS})")
        grid = list(self.grid) + [1] * (3 - len(self.grid))
        if len(grid) != 3 or not all(isinstance(g, int) and g >= 0 for g in grid):
            raise SpecError(f"kernel {self.kernel!r}: grid {self.grid!r} is not up to 3 non-negative ints")
        self.grid = grid
        self.args = [a if isinstance(a, ArgSpec) else ArgSpec(**a) for a in self.args]

    @property
    def id(self) -> str:
        """Short stable name of this launch: the kernel name and a hash of its key."""
        return f"{self.kernel}-{hashlib.sha256(self.key().encode()).hexdigest()[:10]}"

    def key(self) -> str:
        """What makes two launches the same launch (everything except the count)."""
        body = {
            "source_hash": self.source_hash, "kernel": self.kernel, "constexprs": self.constexprs,
            "options": self.options, "grid": self.grid,
            "args": [_key_arg(a) for a in self.args],
        }
        return json.dumps(body, sort_keys=True, default=str)

    @property
    def tensors(self) -> list[ArgSpec]:
        return [a for a in self.args if a.is_tensor]

    @property
    def written(self) -> list[ArgSpec]:
        return [a for a in self.args if a.is_tensor and a.written]

    def arg(self, name: str) -> ArgSpec:
        for a in self.args:
            if a.name == name:
                return a
        raise KeyError(name)

    def to_json(self) -> dict:
        body = dataclasses.asdict(self)
        body["args"] = [a.to_json() for a in self.args]
        body["id"] = self.id
        return body

    @classmethod
    def from_json(cls, body: dict) -> "LaunchSpec":
        body = dict(body)
        body.pop("id", None)
        if isinstance(body.get("extra"), dict) and codec.AS_TEXT in body["extra"] \
                and isinstance(body.get("constexprs"), dict):  # an older capture's dtypes as text
            body["extra"], body["constexprs"] = dict(body["extra"]), dict(body["constexprs"])
            codec.migrate(body["constexprs"], body["extra"])
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(body) - fields)
        if unknown:
            raise SpecError(f"unknown field(s) {unknown}")
        missing = sorted(f.name for f in dataclasses.fields(cls)
                         if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                         and f.name not in body)
        if missing:
            raise SpecError(f"missing field(s) {missing}")
        try:
            return cls(**body)
        except TypeError as exc:
            raise SpecError(str(exc)) from None


def _key_arg(a: ArgSpec) -> list:
    if a.kind == "tensor":
        return [a.name, a.shape, a.stride, a.dtype, a.storage_offset]
    if a.kind == "scalar":
        return [a.name, a.type, a.value]
    return [a.name, a.kind]


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
    value as ``capture.constexprs`` encodes it; anything else fails (``UnsupportedConstexpr``)
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
