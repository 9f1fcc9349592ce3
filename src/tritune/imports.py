"""Import a user's kernel file as a module: once per process and content, its side effects contained.

``import_file(path)`` is how analyze, capture (Inductor modules), replay and the workers load a
kernel file. Importing runs the file's top level, so:

- once: the module is cached per (resolved path, content hash, interpreter on/off) for the life of
  the process. Replaying nine candidates of one file imports it once; a variant's new source text
  is another content, so it gets its own module; so does the same file under the interpreter
  (``@triton.jit`` makes an ``InterpretedFunction`` then, a ``JITFunction`` otherwise). A failed
  import is not cached. Callers must not change what the module holds (it is shared).
- prints: what the top level prints is kept off stdout (stdout is for reports and ``--json``),
  and one line on stderr says so: "FILE: prints on import (N lines); its top level ran once here".
- ``sys.exit``: a ``SystemExit`` from the top level becomes ``TopLevelExit``, one line naming the
  call and the fix, instead of ending tritune with a bare ``SystemExit: 3``.
- ``timeout_s``: an import that has not finished after that long raises ``ImportTimeout``.
- read once: the module is compiled from the bytes that were read (and hashed: the cache key, and
  a caller's own check through ``data=``), never from a second read of the file; its lines are
  served to ``inspect`` from those bytes (``linecache``).

Each file is imported under a unique module name with its directory first on ``sys.path`` for the
duration of the import; sibling modules it imported from there are forgotten afterwards. Inductor
kernel modules import through ``_inductor_shim``, so they import on a machine without a GPU.

``interpreter_off()`` switches ``TRITON_INTERPRET`` off in this process for its duration, through
Triton's own knob (``triton.knobs.runtime``), for analysis: it compiles for a GPU target, which
needs ``JITFunction``s, even when the user has the interpreter exported for running on the CPU.
Triton's own library (``tl.sum``, ``tl.cdiv``...) is decorated when Triton is imported, so
``import_triton_compiling()`` (``tritune.analyze`` calls it first) imports Triton with the
variable unset; a process that imported Triton under the interpreter before cannot compile, and
``interpreter_off`` says so (``InterpreterImported``).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import importlib.util
import io
import itertools
import linecache
import os
import signal
import sys
import threading
import time
from pathlib import Path
from types import ModuleType
from typing import Iterator

from tritune import _inductor_shim
from tritune.config import ENV_INTERPRET as INTERPRET_VARIABLE  # Triton's own switch
from tritune.errors import InputError

MODULE_PREFIX = "_tritune_file_"

_modules: dict[tuple[str, str, bool], ModuleType] = {}
_counter = itertools.count()


@dataclasses.dataclass(frozen=True)
class FileError:
    """A file that could not be used (its import failed...), with the one line that says why."""

    file: str
    error: str


class TopLevelExit(InputError):
    """The file's top level called ``sys.exit`` (or raised ``SystemExit``) when imported."""


class ImportTimeout(InputError):
    """The file's import did not finish in the time allowed."""


class InterpreterImported(InputError):
    """Triton was imported under ``TRITON_INTERPRET=1`` in this process: nothing compiles here."""


class _Alarm(BaseException):
    # BaseException: a top level's own ``except Exception`` must not swallow the deadline.
    pass


def import_file(path: str | Path, *, timeout_s: float | None = None, fresh: bool = False,
                data: bytes | None = None) -> ModuleType:
    """The module of ``path`` (see the module doc); the file's own exception if its import fails.
    ``fresh``: a new module, neither taken from nor kept in the cache, for a caller that changes
    what the module holds (a benchmark that re-tunes a candidate's autotuner). ``data``: the
    file's bytes, already read (and checked) by the caller: the module is made of them and the
    file is not read again."""
    given = str(path)
    path = Path(path).resolve()
    source = path.read_bytes() if data is None else data
    key = (str(path), hashlib.sha256(source).hexdigest(), jit_interprets())
    if fresh:
        return _import(given, path, key[1], source, timeout_s)
    module = _modules.get(key)
    if module is None:
        module = _modules[key] = _import(given, path, key[1], source, timeout_s)
    return module


@contextlib.contextmanager
def interpreter_off() -> Iterator[None]:
    """``TRITON_INTERPRET`` off inside (see the module doc); Triton's knob scope restores it."""
    import_triton_compiling()
    _check_triton_compiles()
    from triton import knobs

    with knobs.runtime.scope():
        knobs.runtime.interpret = False
        yield


def import_triton_compiling() -> None:
    """Import Triton, if this process has not yet, with ``TRITON_INTERPRET`` unset: Triton's own
    ``@jit`` library is then made of ``JITFunction``s, which compile for a GPU (and which the
    interpreter runs as well: kernels decorated later under the variable still interpret)."""
    if "triton" in sys.modules:
        return
    from tritune import config

    with config.override({config.ENV_INTERPRET: None}):  # unset for the import only
        import triton  # noqa: F401


def _check_triton_compiles() -> None:
    from triton.language import standard
    from triton.runtime.jit import JITFunction

    if not isinstance(standard.cdiv, JITFunction):
        raise InterpreterImported(f"Triton was imported with {INTERPRET_VARIABLE}=1 in this process, so its "
                                  "library cannot compile for a GPU: analyse in a process started without it")


def jit_interprets() -> bool:
    """Whether ``@triton.jit`` makes interpreted kernels now: Triton's knob, which it read from
    ``TRITON_INTERPRET`` (``interpreter_off`` turns it off inside)."""
    from triton import knobs  # what ``@triton.jit`` reads when it decorates

    return bool(knobs.runtime.interpret)


def _import(given: str, path: Path, digest: str, source: bytes, timeout_s: float | None) -> ModuleType:
    name = f"{MODULE_PREFIX}{path.stem}_{digest[:10]}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise ImportError(f"cannot import {path}")
    module = importlib.util.module_from_spec(spec)
    text = source.decode(errors="replace")
    shim = _inductor_shim.inductor_without_gpu() if _inductor_shim.needs_inductor(text) else contextlib.nullcontext()
    printed = io.StringIO()
    sys.modules[name] = module
    try:
        with _on_sys_path(str(path.parent)), contextlib.redirect_stdout(printed), shim, _deadline(timeout_s):
            _execute(module, path, source)
    except SystemExit as exc:
        sys.modules.pop(name, None)
        call = "sys.exit()" if exc.code is None else f"sys.exit({exc.code!r})"
        raise TopLevelExit(f"calls {call} on import: guard its top level with "
                           '`if __name__ == "__main__":`') from None
    except _Alarm:
        sys.modules.pop(name, None)
        raise ImportTimeout(f"import did not finish in {timeout_s:g} s: skipped") from None
    except BaseException:
        sys.modules.pop(name, None)
        raise
    finally:
        _warn_printed(given, printed.getvalue())
    return module


def _execute(module: ModuleType, path: Path, source: bytes) -> None:
    """Run ``source`` (the bytes the caller hashed) as ``module``'s code, without reading ``path``
    again: the file may have changed since, and a ``__pycache__`` beside it is not consulted (an
    unchecked-hash ``.pyc`` planted there would run instead of the source). Its lines go into
    ``linecache`` under ``path``, with no modification time, so that ``inspect.getsource`` (which
    Triton's ``@jit`` and its interpreter read the kernel through) sees these bytes, not the
    file's current text, and ``linecache.checkcache`` leaves them be."""
    code = compile(source, str(path), "exec", dont_inherit=True)
    lines = importlib.util.decode_source(source).splitlines(keepends=True)
    linecache.cache[str(path)] = (len(source), None, lines, str(path))
    exec(code, module.__dict__)  # noqa: S102 - importing a file is running it, as exec_module does


def _warn_printed(given: str, text: str) -> None:
    lines = len(text.splitlines())
    if lines:
        print(f"tritune: {given}: prints on import ({lines} line{'s' * (lines != 1)}); "
              "its top level ran once here", file=sys.stderr)


@contextlib.contextmanager
def _deadline(timeout_s: float | None) -> Iterator[None]:
    """Raise ``_Alarm`` in the importing frame after ``timeout_s`` (POSIX, main thread only).

    Why a timer signal: the import runs in the main thread as it would without a deadline, and
    SIGALRM interrupts what a blocking top level does (``time.sleep``, socket and lock waits, a
    Python loop), so the half-run module is dropped and analysis goes on in the same process.
    A thread cannot be stopped (the hung import would keep running, and Python waits for it at
    exit), and a subprocess probe would import every file twice, in a process that pays Triton's
    import again, which is what importing once is meant to avoid. Not interrupted: a C call that
    ignores signals until it returns. Elsewhere (Windows, another thread) there is no deadline.
    """
    usable = (timeout_s is not None and hasattr(signal, "setitimer")
              and threading.current_thread() is threading.main_thread())
    if not usable:
        yield
        return

    def alarm(signum: int, frame: object) -> None:
        raise _Alarm()

    previous = signal.signal(signal.SIGALRM, alarm)
    outer, _ = signal.setitimer(signal.ITIMER_REAL, timeout_s)
    start = time.monotonic()
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer:  # someone else's timer (pytest-timeout's, say) was running: give it back
            signal.setitimer(signal.ITIMER_REAL, max(outer - (time.monotonic() - start), 1e-3))


@contextlib.contextmanager
def _on_sys_path(directory: str) -> Iterator[None]:
    """``directory`` first on sys.path; sibling modules it imports are forgotten afterwards, so
    a ``helpers.py`` in another analysed directory is not taken for this one's."""
    before = set(sys.modules)
    sys.path.insert(0, directory)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.path.remove(directory)
        for name in set(sys.modules) - before:
            file = getattr(sys.modules.get(name), "__file__", None) or ""
            if file.startswith(directory + os.sep):
                del sys.modules[name]
