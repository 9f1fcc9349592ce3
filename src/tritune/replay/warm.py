"""The libraries a capture's kernel files import, imported by a lane's workers at their start.

A kernel's first replay in a worker imports its file, and so the libraries the file imports. For
an Inductor kernel that is Inductor's runtime (~1-2 s); for a library's kernel it can be the
library and all it pulls in: Liger's ops import ``liger_kernel.utils``, which imports ``peft`` and
so ``transformers`` and ``sklearn``, 9-18 s in each fresh worker on an H200 machine
(``benchmarks/first_job.py``, 2026-11-28). Every verify worker paid that on its first candidate
and the timing worker on the ranking: in a 40-s run of two Liger kernels, ~10 s of the ranking
and 9-15 s of each candidate that landed on a fresh worker.

``kernel_imports(root)`` lists the modules the capture's kernel files import at their top level
(absolute imports, in the module body or its top-level ``if``/``try`` blocks), for
``Worker(warm=...)``: the workers import them at start, beside each other and the timing worker's
start; a failure there is no failure (the job that needs the module reports its own), and a
start that a warm import ends (an exit, a crash, a hang) is tried again without them
(``worker.pool``). The files are read with ``ast``, never run here. Left out, so that warming
never puts another module where a kernel expects its own: relative imports, and every name a
folder holding a kernel file's copy also holds (``helpers.py`` beside ``k.py``: the replay puts
that folder first on the path while it loads the file, and a ``helpers`` warmed from elsewhere
would already sit in ``sys.modules``), for every kernel file of the capture, not only the file
that imports it. A name in the program's own folder needs no such care: the replay puts that
folder last on the path, where an installed module of the same name wins as it does when warmed.
"""

from __future__ import annotations

import ast
import importlib.machinery
from pathlib import Path
from typing import Iterable

from tritune.capture.spec import confined, read_launches
from tritune.model.launch import SpecError

WARM_MAX = 64  # modules at most: a capture of many files imports the same few libraries


def kernel_imports(root: str | Path) -> tuple[str, ...]:
    """The modules to warm for the capture in ``root`` (module docstring), in first-seen order;
    () when it cannot be read (the jobs report that). Never raises: a lane is made with it."""
    try:
        return _kernel_imports(root)
    except Exception:  # noqa: BLE001 - a source too deep for ast (RecursionError, MemoryError), a bad spec...
        return ()


def imports_of(root: str | Path, sources: Iterable[str], parsed: dict[str, tuple[Path, list[str]]] | None = None
               ) -> tuple[str, ...]:
    """``kernel_imports`` for the kernel files ``sources`` (their names in the capture, as
    ``LaunchSpec.source``) of the capture in ``root``: a capture still running, the files its
    processes recorded so far (``loop.lanes.HeadStart``). ``parsed``: each file found before, by
    name, with its imports, kept there and not looked up or read again (a capture's copies never
    change: their names hold their hash). Never raises."""
    try:
        return _imports_of(root, sources, {} if parsed is None else parsed)
    except Exception:  # noqa: BLE001 - as kernel_imports
        return ()


def _kernel_imports(root: str | Path) -> tuple[str, ...]:
    try:
        specs = read_launches(root)
    except (SpecError, OSError, ValueError):
        return ()
    return _imports_of(root, (spec.source for spec in specs), {})


def _imports_of(root: str | Path, sources: Iterable[str], parsed: dict[str, tuple[Path, list[str]]]
                ) -> tuple[str, ...]:
    files: dict[Path, list[str]] = {}
    for name in dict.fromkeys(sources):
        if name not in parsed:
            path = _source(root, name)
            if path is None:
                continue
            parsed[name] = (path, _imports(path))
        path, imports = parsed[name]
        files.setdefault(path, imports)
    local = set().union(*(_local_names(folder) for folder in {path.parent for path in files}))
    found: dict[str, None] = {}
    for imports in files.values():
        for name in imports:
            if name.split(".")[0] not in local:
                found.setdefault(name)
    return tuple(found)[:WARM_MAX]


def _source(root: str | Path, name: str) -> Path | None:
    if not name:
        return None
    try:
        path = confined(root, name, "kernel source")
    except SpecError:
        return None
    return path if path.is_file() else None


def _imports(path: Path) -> list[str]:
    """The absolute module names ``path`` imports at its top level."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return []
    names: list[str] = []
    pending = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.Import):
            names.extend(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.append(node.module)
        elif isinstance(node, (ast.If, ast.Try)):
            pending[:0] = [*node.body, *node.orelse, *getattr(node, "finalbody", []),
                           *(stmt for handler in getattr(node, "handlers", []) for stmt in handler.body)]
    return names


def _local_names(folder: Path) -> set[str]:
    """Top-level module names a folder itself holds: ``x.py``, ``x.cpython-312-x86_64-linux-gnu.so``
    and every other module suffix, ``x/``."""
    suffixes = sorted(importlib.machinery.all_suffixes(), key=len, reverse=True)
    names = set()
    try:
        entries = list(folder.iterdir())
    except OSError:
        return names
    for entry in entries:
        if entry.is_dir():
            names.add(entry.name)
            continue
        for suffix in suffixes:
            if entry.name.endswith(suffix):
                names.add(entry.name[:-len(suffix)])
                break
    return names
