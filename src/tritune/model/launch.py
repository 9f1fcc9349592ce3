"""A captured launch as a value: ``LaunchSpec`` and its arguments (``ArgSpec``).

The contract between capture (which writes it), replay, verification, the search, the store and
the applier (which read it). The file around it (``launches.jsonl``, the argument kinds, the grid
rules) is described in ``tritune.capture.spec``, which reads and writes it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from typing import Any, Iterable

from tritune.model import constexprs as codec

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


