"""Load a captured kernel from the capture directory (or a variant's source text).

The copy of the kernel's file under ``DIR/sources/`` is imported as a fresh module (Inductor
modules through the same shim ``tritune analyze`` uses, so they import on a CPU machine too), and
the kernel is found by name, peeled down to the ``@triton.jit`` function (``JITFunction``, or
``InterpretedFunction`` under ``TRITON_INTERPRET=1``) through any autotune/heuristics/Inductor
wrapper: replay launches the exact configuration the program launched, so the wrappers' choice
is already in the spec.

The copy is read once: its whole-file hash (``LaunchSpec.file_hash``, recorded at capture; its top
level runs on import, so all of it must be what was captured) and the kernel's own hash are checked
on those bytes, and the module is compiled from the same bytes, its lines served to ``inspect``
(and so to Triton's ``@jit`` and interpreter) from them through ``linecache``: a file changed
after the check is never run. A capture made before ``file_hash`` was recorded (None) is checked
by the kernel's hash alone, still on the one read: what runs is what was checked, but a change
to its top level is not seen; capture again to have the whole file checked.

Importing runs the file's top level, once per process and file content (``tritune.imports``):
the candidates of one launch that differ only in options or constexprs share one module, a
variant's source text gets its own. A script whose launches are not under
``if __name__ == "__main__":`` would run them again here; capture records that file anyway.
Only the kernel's own file is copied: if it imports sibling modules of the program, the
original file's directory (``spec.source_file``) is searched too, when it exists on this machine.
"""

from __future__ import annotations

import atexit
import contextlib
import functools
import hashlib
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, Iterator

from tritune.capture.spec import confined_source, file_hash, source_hash
from tritune.errors import one_line
from tritune.imports import import_file
from tritune.model.failures import COMPILE_ERROR
from tritune.model.launch import LaunchSpec, SpecError

_WRAPPER_DEPTH = 8


class KernelLoadError(RuntimeError):
    """The kernel's file does not import, or does not define the kernel."""

    failure_kind = COMPILE_ERROR  # for the worker: a candidate's source that does not build


def is_jit(obj: Any) -> bool:
    from triton.runtime.jit import JITFunction
    from triton.runtime.interpreter import InterpretedFunction

    return isinstance(obj, (JITFunction, InterpretedFunction))


def innermost(obj: Any) -> Any | None:
    """The ``@triton.jit`` function under any number of wrappers that keep it as ``.fn``."""
    for _ in range(_WRAPPER_DEPTH):
        if is_jit(obj):
            return obj
        obj = getattr(obj, "fn", None)
        if obj is None:
            return None
    return None


def load_kernel(spec: LaunchSpec, root: str | Path, source: str | None = None) -> Any:
    """The kernel of ``spec``: from ``root/spec.source``, or from ``source`` text when given.
    The capture's copy must lie inside ``root`` and be the file captured: it is read once, its
    whole-file hash (``spec.file_hash``) and the kernel's hash (``spec.source_hash``) are checked
    on those bytes, and the module is made of those same bytes (``import_file(data=...)``)."""
    if source is None:
        if not spec.source:  # the recorder found no file to copy (a kernel made by exec, in a notebook...)
            raise SpecError(f"{spec.id}: capture kept no copy of {spec.kernel}'s file "
                            f"({spec.source_file or 'the program named none'}): nothing to replay")
        path = confined_source(root, spec)
        if not spec.source_hash:
            raise SpecError(f"{spec.id}: the launch names no source_hash for {spec.kernel}: refused (a capture "
                            "always records it); capture again")
        data = _read_once(spec, path)
        if spec.file_hash is not None and file_hash(data) != spec.file_hash:
            raise SpecError(f"{spec.id}: {path} is not the file captured (its whole-file hash differs from the "
                            "spec's file_hash): refused; capture again")
        hashes = declared_hashes(path, spec.kernel, data)  # checked before the file runs
        if not hashes:
            raise KernelLoadError(f"{path.name}: no @triton.jit kernel named {spec.kernel!r}")
        if spec.source_hash not in hashes:
            raise SpecError(f"{spec.id}: {path} holds another {spec.kernel} than the one captured (its source hash "
                            "differs from the spec's): refused; capture again")
        return _kernel_in(path, spec.kernel, data, _program_dir(spec))
    # Each text gets its own file, kept until exit: the module's ``__file__`` (Inductor writes
    # its autotune cache beside it) and a place for sibling imports; its lines are served from
    # the bytes themselves (``tritune.imports``).
    data = source.encode()
    digest = hashlib.sha256(data).hexdigest()[:12]
    path = _variant_dir() / digest / Path(spec.source).name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return _kernel_in(path, spec.kernel, data, _program_dir(spec))


def _read_once(spec: LaunchSpec, path: Path) -> bytes:
    """The kernel file's bytes: everything checked and run is these, never a second read."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        raise SpecError(f"{spec.id}: kernel source {path} is missing from the capture directory") from None
    except OSError as exc:
        raise SpecError(f"{path}: cannot read the kernel's source ({exc.strerror or exc})") from None


def declared_hashes(path: Path, name: str, data: bytes | None = None) -> set[str]:
    """The hashes capture may have recorded for a function ``name`` defined in ``path`` (whose
    bytes are ``data`` when the caller read them), read from the text without running it: of
    ``JITFunction.src`` (plain launches) and of ``inspect.getsource`` (Inductor's fallback). Each
    is rebuilt as Python builds it: the lines from the first decorator through
    ``inspect.getblock``, dedented, cut at ``def`` for ``src``."""
    import ast
    import importlib.util
    import inspect
    import re
    import textwrap

    try:
        text = importlib.util.decode_source(path.read_bytes() if data is None else data)
        tree = ast.parse(text)
    except SyntaxError as exc:  # what importing it would have said
        raise KernelLoadError(f"{path.name}: import failed: {one_line(exc)}") from None
    except (OSError, ValueError) as exc:
        raise SpecError(f"{path}: cannot read the kernel's source ({type(exc).__name__}: {exc})") from None
    lines = text.splitlines(keepends=True)
    found = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) or node.name != name:
            continue
        first = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        block = "".join(inspect.getblock(lines[first:]))
        found.add(source_hash(block))
        dedented = textwrap.dedent(block)
        start = re.search(r"^def\s+\w+\s*\(", dedented, re.MULTILINE)
        if start is not None:
            found.add(source_hash(dedented[start.start():]))
    return found


@functools.cache
def _variant_dir() -> Path:
    path = Path(tempfile.mkdtemp(prefix="tritune-variants-"))
    atexit.register(shutil.rmtree, path, ignore_errors=True)
    return path


def _program_dir(spec: LaunchSpec) -> str | None:
    directory = Path(spec.source_file).parent
    return str(directory) if spec.source_file and directory.is_dir() else None


@contextlib.contextmanager
def _also_on_path(directory: str | None) -> Iterator[None]:
    """``directory`` last on sys.path: siblings of the copy win, the program's own come next."""
    if directory is None or directory in sys.path:
        yield
        return
    sys.path.append(directory)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(directory)


def _kernel_in(path: Path, name: str, data: bytes, program_dir: str | None = None) -> Any:
    try:
        with _also_on_path(program_dir):
            module = import_file(path, data=data)
    except Exception as exc:  # noqa: BLE001 - a candidate's source may raise anything
        raise KernelLoadError(f"{path.name}: import failed: {one_line(exc)}") from exc
    found = innermost(getattr(module, name, None))
    if found is not None and found.fn.__name__ == name:
        return found
    for value in vars(module).values():  # the kernel bound to another name
        found = innermost(value)
        if found is not None and found.fn.__name__ == name:
            return found
    raise KernelLoadError(f"{path.name}: no @triton.jit kernel named {name!r}")
