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
start, and a failure there is no failure (the job that needs the module reports its own). The
files are read with ``ast``, never run here. Left out, so that warming never puts another module
where the kernel expects its own: relative imports, and every name whose top-level package lies
in a kernel file's folder in the capture or its program's folder (the replay puts the program's
folder on the path while it loads the kernel, where a sibling ``utils`` is the program's, not a
package of the same name on the path).
"""

from __future__ import annotations

import ast
from pathlib import Path

from tritune.capture.spec import LaunchSpec, SpecError, confined_source, read_launches

WARM_MAX = 64  # modules at most: a capture of many files imports the same few libraries


def kernel_imports(root: str | Path) -> tuple[str, ...]:
    """The modules to warm for the capture in ``root`` (module docstring), in first-seen order;
    () when it cannot be read (the jobs report that)."""
    try:
        specs = read_launches(root)
    except (SpecError, OSError, ValueError):
        return ()
    found: dict[str, None] = {}
    seen: set[Path] = set()
    for spec in specs:
        path = _source(root, spec)
        if path is None or path in seen:
            continue
        seen.add(path)
        local = _local_names(path.parent) | _local_names(Path(spec.source_file).parent if spec.source_file else None)
        for name in _imports(path):
            if name.split(".")[0] not in local:
                found.setdefault(name)
    return tuple(found)[:WARM_MAX]


def _source(root: str | Path, spec: LaunchSpec) -> Path | None:
    if not spec.source:
        return None
    try:
        path = confined_source(root, spec)
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


def _local_names(folder: Path | None) -> set[str]:
    """Top-level module names a folder itself holds (``x.py``, ``x/``)."""
    if folder is None or not folder.is_dir():
        return set()
    try:
        return {entry.stem if entry.suffix == ".py" else entry.name for entry in folder.iterdir()
                if entry.suffix == ".py" or entry.is_dir()}
    except OSError:
        return set()
