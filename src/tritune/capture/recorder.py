"""Where captured launches go: one ``Recorder`` per process, writing into a capture directory.

Nothing is lost when the program dies: each new distinct launch is appended at once to
``DIR/parts/<pid>.jsonl`` (``{"spec": ...}``), followed by its kernel's source file copied to
``DIR/sources/`` and its index tensors saved to ``DIR/tensors/``. Repeats only bump a counter,
written as ``{"counts": {spec id: n}}`` lines (cumulative; the last one counts) at most once a
second, at ``close()`` and at interpreter exit. A process killed before writing counts leaves
each of its launches counted once. ``finalize(DIR)`` merges every part (and a ``launches.jsonl``
already there) into ``DIR/launches.jsonl``, summing the counts of equal launches, and removes the
parts. A forked child starts its own part.

A launch that cannot be recorded (``skip``: its arguments cannot be described, or recording it
failed) is a ``{"skipped": ...}`` line naming its kernel and why (``capture.skipped``); repeats
only count, written as ``{"skip_counts": {record id: n}}`` with the counts. ``finalize`` merges
them into ``DIR/skipped.jsonl``: no launch is dropped without a word.

Integer input tensors keep their values (indices that must stay in range): their storage from
``storage_offset`` to ``storage_size`` (what replay allocates) is saved 1-D as
``DIR/tensors/<spec id>_<arg>.pt`` when at most ``SAVE_LIMIT_BYTES``; a larger one records its
observed ``[low, high]`` instead (``values="range"``).
"""

from __future__ import annotations

import atexit
import contextlib
import itertools
import json
import os
import shutil
import stat
import sys
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Hashable, Iterable, Iterator

from tritune.capture import skipped as skipped_file
from tritune.capture.skipped import Skipped
from tritune.capture.spec import SOURCES, TENSORS, file_hash, json_default, read_launches, write_launches
from tritune.model.launch import LaunchSpec, SpecError

PARTS = "parts"
MAX_IMPORT_LISTS = 256  # lists of imports written in all (the capture reads as many: ``worker.bytecode.MAX_LISTS``)
SAVE_LIMIT_BYTES = 64 << 20  # index tensors up to this size are saved with their real values
FLUSH_SECONDS = 1.0
MAX_PART_BYTES = 16 << 20  # ``Recorded`` reads this much at most of the part files of a capture under way


class Recorder:
    """Collects distinct launches of this process into ``out_dir`` (see the module docstring)."""

    def __init__(self, out_dir: str | Path):
        self.dir = Path(out_dir).resolve()
        self.listener = None  # the JIT shim's listener, once triton is imported
        self.inductor = None  # tritune.capture.inductor, once torch._inductor is imported
        self._open()
        _live.add(self)

    def _open(self) -> None:
        self.pid = os.getpid()
        self.specs: dict[str, LaunchSpec] = {}  # spec key -> spec
        self.counts: dict[str, int] = {}  # spec key -> launches
        self.fast: dict[Hashable, str | Skipped] = {}  # cheap launch key (see jit_launch) -> spec key
        self.skips: dict[str, Skipped] = {}  # launches that cannot be recorded, by record id
        self._sources: dict[str, tuple[str, str]] = {}  # source file -> its copy (relative to dir), its hash
        self._part: Path | None = None
        self._dirty = False
        self._flushed = time.monotonic()

    # -- the hot path ----------------------------------------------------------------------

    def bump(self, fast_key: Hashable) -> bool:
        """Count one more launch under ``fast_key``; False if it was never seen (build a spec)."""
        key = self.fast.get(fast_key)
        if key is None:
            return False
        if key.__class__ is str:
            self.counts[key] += 1
        else:  # a launch that cannot be recorded: counted in its skipped record
            key.count += 1
        self._dirty = True
        if time.monotonic() - self._flushed > FLUSH_SECONDS:
            self.flush()
        return True

    def skip(self, fast_key: Hashable | None, record: Skipped) -> None:
        """A launch that cannot be recorded, and why: kept in ``skipped.jsonl`` (``capture.skipped``)
        with the number of launches; later ones under ``fast_key`` only count there."""
        found = self.skips.get(record.id)
        if found is None:
            found = self.skips[record.id] = record
            self._append({"skipped": record.to_json()})
        else:
            found.count += record.count
        if fast_key is not None:
            self.fast[fast_key] = found
        self._dirty = True

    # -- new launches ----------------------------------------------------------------------

    def add(self, spec: LaunchSpec, values: dict[str, Any] | None = None, fast_key: Hashable = None) -> LaunchSpec:
        """Record one launch of ``spec``; returns the stored spec (the first one seen of its key).

        ``values``: the launch's live tensors by argument name; non-written integer tensors among
        them are saved (or their range recorded) as described above.
        """
        key = spec.key()
        if key in self.specs:
            if fast_key is not None:
                self.fast[fast_key] = key
            self.counts[key] += 1
            self._dirty = True
            return self.specs[key]
        if spec.source_file and not spec.source:
            spec.source, spec.file_hash = self._copy_source(spec.source_file)
        for arg in spec.tensors:
            if values is not None and arg.name in values:
                self._keep_values(spec, arg, values[arg.name])
        self._append({"spec": spec.to_json()})  # first: a spec that cannot be written is not counted
        self.specs[key] = spec
        self.counts[key] = 1
        if fast_key is not None:
            self.fast[fast_key] = key
        self._dirty = True
        return spec

    def _copy_source(self, source_file: str) -> tuple[str, str]:
        """The copy of ``source_file`` under ``DIR/sources/`` (relative to DIR) and the hash of
        the bytes copied (``LaunchSpec.file_hash``)."""
        if source_file in self._sources:
            return self._sources[source_file]
        path = Path(source_file)
        data = path.read_bytes()
        digest = file_hash(data)
        relative = f"{SOURCES}/{digest[:16]}_{path.stem}.py"
        _write_atomic(self.dir / relative, data)
        self._sources[source_file] = relative, digest
        return relative, digest

    def _keep_values(self, spec: LaunchSpec, arg, tensor: Any) -> None:
        import torch

        if arg.written or not isinstance(tensor, torch.Tensor):
            return
        if tensor.dtype.is_floating_point or tensor.dtype.is_complex or tensor.dtype == torch.bool:
            return  # random values of the dtype are as good as the real ones
        offset, size = tensor.storage_offset(), arg.storage_size
        real = tensor.untyped_storage().nbytes() // tensor.element_size()
        if size <= real and (size - offset) * tensor.element_size() <= SAVE_LIMIT_BYTES:
            region = tensor.detach().as_strided((size - offset,), (1,), offset).cpu().clone()
            relative = f"{TENSORS}/{spec.id}_{arg.name}.pt"
            path = self.dir / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            tmp = path.with_suffix(f".{os.getpid()}.tmp")
            torch.save(region, tmp)
            tmp.replace(path)
            arg.values, arg.data = "saved", relative
        elif tensor.numel():
            arg.values, arg.low, arg.high = "range", int(tensor.min()), int(tensor.max())

    # -- the part file ---------------------------------------------------------------------

    def _append(self, record: dict) -> None:
        if self._part is None:
            parts = self.dir / PARTS
            parts.mkdir(parents=True, exist_ok=True)
            self._part = _fresh(parts, str(self.pid))
        with self._part.open("a") as handle:
            handle.write(json.dumps(record, default=json_default) + "\n")

    def flush(self) -> None:
        """Write the counts so far (cheap; a no-op when nothing changed)."""
        self._flushed = time.monotonic()
        if not self._dirty or self._part is None or os.getpid() != self.pid:
            return
        self._dirty = False
        self._append({"counts": {spec.id: self.counts[key] for key, spec in self.specs.items()}})
        if self.skips:
            self._append({"skip_counts": {id_: record.count for id_, record in self.skips.items()}})

    def close(self) -> None:
        self.flush()

    def _on_triton(self, _module: Any) -> None:
        from tritune.capture import _jit_shim
        from tritune.capture.jit_launch import JitListener

        if self.listener is None:
            self.listener = JitListener(self)
            _jit_shim.install(self.listener)

    def _on_inductor(self, _module: Any) -> None:
        try:
            from tritune.capture import inductor
        except ModuleNotFoundError as exc:
            if exc.name == "tritune.capture.inductor":
                return  # no Inductor support in this tritune
            raise
        if self.inductor is None:
            inductor.install(self.add)
            self.inductor = inductor

    @property
    def total(self) -> int:
        return sum(self.counts.values())


_live: "weakref.WeakSet[Recorder]" = weakref.WeakSet()


def _flush_all() -> None:
    for recorder in list(_live):
        recorder.close()
    _list_imports()


def _list_imports() -> None:
    """Where the capture asked (``config.capture_imports``: a folder it made), the source files this
    process imported, one a line: the capture compiles the workers' bytecode from them where
    packages carry none (``worker.bytecode.filled_meanwhile``). Best effort: nothing is lost
    without it."""
    from tritune import config

    folder = config.capture_imports()
    if folder is None or not any(r.pid == os.getpid() for r in list(_live)):
        return
    try:
        if len(os.listdir(folder)) >= MAX_IMPORT_LISTS:  # a program of many processes: the capture has enough
            return
        files = [os.path.abspath(name) for module in list(sys.modules.values())
                 if isinstance(name := getattr(module, "__file__", None), str) and name.endswith(".py")]
        for n in itertools.count():  # a pid the program reused: another name
            try:
                with open(os.path.join(folder, f"{os.getpid()}-{n}.txt"), "x") as handle:
                    handle.write("\n".join(files))
                break
            except FileExistsError:
                continue
    except Exception:  # noqa: BLE001 - at a program's exit: never its failure
        pass


def _reopen_all_in_child() -> None:
    for recorder in list(_live):
        recorder._open()


atexit.register(_flush_all)
if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reopen_all_in_child)


def _fresh(directory: Path, stem: str) -> Path:
    """``DIR/<stem>.jsonl``, or ``<stem>-<n>.jsonl`` if a process with our pid wrote one already."""
    path, n = directory / f"{stem}.jsonl", 1
    while path.exists():
        path, n = directory / f"{stem}-{n}.jsonl", n + 1
    path.touch()
    return path


def _write_atomic(path: Path, data: bytes) -> None:
    if path.exists():
        return  # same name, same content: the name holds the content's hash
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    tmp.replace(path)


# ------------------------------------------------------------------------------ merging

def finalize(directory: str | Path, **header: Any) -> list[LaunchSpec]:
    """Merge ``DIR/parts/*.jsonl`` (and an existing ``DIR/launches.jsonl``) into ``launches.jsonl``.

    Equal launches (same ``spec.key()``) are one line with the sum of their counts; the first
    seen wins for everything else. The parts are removed once the merged file is written; an
    existing ``launches.jsonl`` they add nothing to is left as it was (its header names the
    command that made it). Returns the merged specs (possibly none: a program without Triton
    launches).
    """
    directory = Path(directory)
    merged: dict[str, LaunchSpec] = {}
    existed = (directory / "launches.jsonl").exists()
    if existed:
        _merge(merged, read_launches(directory))
    skips = skipped_file.read(directory)
    parts = sorted((directory / PARTS).glob("*.jsonl")) if (directory / PARTS).is_dir() else []
    added = 0  # launches and skips the parts hold: none leaves an existing capture as it was (its header too)
    for part in parts:
        fresh, fresh_skips = read_part(part), read_part_skips(part)
        _merge(merged, fresh)
        skips.extend(fresh_skips)
        added += len(fresh) + len(fresh_skips)
    if (merged or parts) and (added or not existed):
        write_launches(directory, merged.values(), **header)
    if added:
        skipped_file.write(directory, skipped_file.merge(skips))
    if (directory / PARTS).is_dir():
        shutil.rmtree(directory / PARTS, ignore_errors=True)
    return list(merged.values())


def _merge(merged: dict[str, LaunchSpec], specs: Iterable[LaunchSpec]) -> None:
    for spec in specs:
        key = spec.key()
        if key in merged:
            merged[key].count += spec.count
        else:
            merged[key] = spec


def read_part(path: Path) -> list[LaunchSpec]:
    """The specs of one part file, each with the last count written for it (else 1).

    A torn last line (the process died mid-write) is skipped; any other bad line is a SpecError.
    """
    specs: dict[str, LaunchSpec] = {}
    counts: dict[str, int] = {}
    lines = path.read_text().split("\n")
    for number, line in enumerate(lines, start=1):
        if not line:
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError:
            if number == len(lines):  # the last line, without its newline: torn
                continue
            raise SpecError(f"{path}:{number}: not JSON: the part file is damaged") from None
        if "spec" in record:
            try:
                spec = LaunchSpec.from_json(record["spec"])
            except SpecError as exc:
                raise SpecError(f"{path}:{number}: {exc}") from None
            specs.setdefault(spec.id, spec)
        elif "counts" in record:
            counts = record["counts"]
    for spec_id, spec in specs.items():
        spec.count = int(counts.get(spec_id, 1))
    return list(specs.values())


class Recorded:
    """What a capture under way has recorded (its processes' part files, as ``Recorder`` writes them):
    the kernel files its launches name (``LaunchSpec.source``), read as the files grow, each byte
    once and ``MAX_PART_BYTES`` in all, a line once it is whole. A part that is no regular file
    is not read (a link, a FIFO); a line that is no launch record is skipped. The user's program
    writes these files: they are read with care, never run."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sources: dict[str, None] = {}
        self._read: dict[str, int] = {}  # part file name -> bytes read (whole lines)
        self._left = MAX_PART_BYTES

    def look(self, stop: Callable[[], bool] = lambda: False) -> bool:
        """Read what the part files gained (until ``stop()``); whether new kernel files were named."""
        before = len(self.sources)
        try:
            paths = sorted((self.root / PARTS).glob("*.jsonl"))
        except OSError:
            return False
        for path in paths:
            if stop() or self._left <= 0:
                break
            try:
                self._grow(path)
            except OSError:  # gone, or not to be opened now: the next look tries again
                continue
        return len(self.sources) > before

    def _grow(self, path: Path) -> None:
        done = self._read.get(path.name, 0)
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_size <= done:
                return
            os.lseek(fd, done, os.SEEK_SET)
            want, chunks = min(info.st_size - done, self._left), []
            while want > 0:
                chunk = os.read(fd, want)
                if not chunk:
                    break
                chunks.append(chunk)
                want -= len(chunk)
        finally:
            os.close(fd)
        data = b"".join(chunks)
        whole = data.rfind(b"\n") + 1
        if whole == 0:
            if len(data) >= self._left:
                self._left = 0  # a line longer than all that is left: nothing more is read
            return
        self._read[path.name] = done + whole
        self._left -= whole
        for line in data[:whole].splitlines():
            self._line(line)

    def _line(self, line: bytes) -> None:
        if not line.startswith(b'{"spec"'):  # ``Recorder._append``'s other records (counts), skipped unparsed
            return
        try:
            record = json.loads(line)
        except ValueError:
            return
        spec = record.get("spec") if isinstance(record, dict) else None
        source = spec.get("source") if isinstance(spec, dict) else None
        if isinstance(source, str) and source:
            self.sources.setdefault(source)


def read_part_skips(path: Path) -> list[Skipped]:
    """The skipped-launch records of one part file, each with the last count written for it."""
    records: dict[str, Skipped] = {}
    counts: dict[str, int] = {}
    for line in path.read_text().split("\n"):
        try:
            record = json.loads(line) if line else None
        except json.JSONDecodeError:
            continue  # read_part has said what is wrong with the file
        if not isinstance(record, dict):
            continue
        if "skipped" in record:
            found = Skipped.from_json(record["skipped"])
            records.setdefault(found.id, found)
        elif "skip_counts" in record:
            counts = record["skip_counts"]
    for record_id, record in records.items():
        record.count = int(counts.get(record_id, record.count))
    return list(records.values())


# ------------------------------------------------------------------- starting and stopping

def start(out_dir: str | Path) -> Recorder:
    """Record this process's Triton launches into ``out_dir`` until ``stop``.

    The JIT shim goes in once ``triton`` is imported (now, if it is); Inductor's launches are
    recorded by ``tritune.capture.inductor`` (when that module exists) once ``torch._inductor``
    is imported.
    """
    from tritune.capture import _after_import

    recorder = Recorder(out_dir)
    recorder.hooks = [("triton", _after_import.when_imported("triton", recorder._on_triton)),
                      ("torch._inductor", _after_import.when_imported("torch._inductor", recorder._on_inductor))]
    return recorder


def stop(recorder: Recorder) -> None:
    from tritune.capture import _after_import, _jit_shim

    for name, callback in getattr(recorder, "hooks", []):
        _after_import.cancel(name, callback)
    if recorder.listener is not None:
        _jit_shim.uninstall(recorder.listener)
        recorder.listener = None
    if recorder.inductor is not None:
        recorder.inductor.uninstall()
        recorder.inductor = None
    recorder.close()


@contextlib.contextmanager
def capture(out_dir: str | Path, *, merge: bool = True) -> Iterator[Recorder]:
    """``with capture("DIR"): ...`` records the launches made inside into ``DIR``.

    With ``merge`` (default) ``DIR/launches.jsonl`` is written on exit (``finalize``): launches
    already in it are kept and counts of equal launches are added up.
    """
    recorder = start(out_dir)
    try:
        yield recorder
    finally:
        stop(recorder)
        if merge:
            finalize(out_dir)
