"""Bytecode for jailed workers where the installed packages carry none: the parent compiles it,
the workers only read it.

Where packages were installed without bytecode (``pip --no-compile``, ``PYTHONDONTWRITEBYTECODE``,
a read-only environment: containers often are), every fresh Python process compiles what it
imports from source. A jailed worker cannot write bytecode anywhere that outlives it, so each
one paid that at every start: on an H200 host, torch's import took 3.8 s in each lane worker
(1.7-2 s where the bytecode is there), and the Liger stack's imports (peft, transformers,
sklearn: 1013 modules) 9-18 s.

Here (``prefix``: only when torch's own bytecode is missing, ``carried``), a lane's jailed
workers run with ``PYTHONPYCACHEPREFIX`` set to a folder of tritune's (``config.bytecode_dir``)
that their jail lets them read and not write. After a lane's timing worker started, the parent
asks it which source files its modules came from (``imported_job``: torch, Triton, tritune's
jobs and the capture's libraries) and compiles them there in a subprocess of its own (``fill``):
the next run's workers load them. The first run is as fast as before, no faster.

Why this holds (the jail's rules stay as they were): the parent never runs what it is told to
compile, and compiles only files under the folders the workers' jail lets them read already
(``Policy.read``: the interpreter, site-packages, tritune's package, the capture...;
``eligible``), so the bytecode holds nothing a worker could not read. The folder itself is
granted through the jail's own filter (``Policy.with_read``): never ``TRITUNE_HOME``, the home,
a folder holding either, or one inside ``TRITUNE_HOME``. The list comes from a worker, so it is checked
here, path by path (a source elsewhere, a link out of those folders, a name that is not a ``.py``
file: left out). No jailed process writes the folder; an unjailed worker is never given it (its
code could write bytecode a later jailed worker loads); the parent never reads it. Python checks
each file against its source's time and size, so an upgraded package's stale bytecode is not
used.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path
from typing import Iterable

from tritune import config

MAX_FILES = 20000  # a worker's list, bounded: more is not a list of imports
FILL_TIMEOUT_S = 300.0
_HEADER = 16  # magic, flags, source mtime, source size (PEP 552)
IMPORTED_JOB = "tritune.worker.bytecode:imported_job"


def carried(module: str = "torch") -> bool:
    """Whether ``module``'s package carries its bytecode where Python looks without a prefix (its
    ``__pycache__``); True where the module is not installed (nothing to do)."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return True
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True
    try:
        cached = importlib.util.cache_from_source(spec.origin)
    except (NotImplementedError, ValueError):
        return True
    if sys.pycache_prefix:  # the parent's own prefix: look where the package itself keeps it
        cached = os.path.join(os.path.dirname(spec.origin), "__pycache__", os.path.basename(cached))
    return os.path.exists(cached)


def prefix(environ=None) -> Path | None:
    """The folder jailed workers read bytecode from, made (mode 0700) if missing; None where the
    packages carry their own bytecode, where ``TRITUNE_BYTECODE`` says off, or where it cannot be
    made."""
    if carried():
        return None
    folder = config.bytecode_dir(environ)
    if folder is None:
        return None
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError:
        return None
    return folder


def eligible(files: Iterable[object], allowed: Iterable[str]) -> list[str]:
    """Of ``files`` (a worker's list), the real paths of regular ``.py`` files under ``allowed``,
    each once, at most ``MAX_FILES``."""
    tops = [a.rstrip(os.sep) + os.sep for a in allowed]
    kept: dict[str, None] = {}
    for name in files:
        if len(kept) >= MAX_FILES:
            break
        if not isinstance(name, str) or not name.endswith(".py") or not os.path.isabs(name) or "\0" in name:
            continue
        real = os.path.realpath(name)
        if not real.endswith(".py") or not any(real.startswith(top) for top in tops) or not os.path.isfile(real):
            continue
        kept[real] = None
    return list(kept)


def imported_job(payload: dict) -> list[str]:
    """A worker's job: the source file of every module it has imported."""
    found = []
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str) and name.endswith(".py"):
            found.append(os.path.abspath(name))
    return found


def fill(folder: Path, files: Iterable[object], allowed: Iterable[str]) -> subprocess.Popen | None:
    """Compile the ``files`` under ``allowed`` (the workers' jail's read-only folders:
    ``Policy.read``) into ``folder``, in a subprocess of this process (its compiles hold no lock
    of ours); the process, for the caller to wait for or end, or None when nothing needs it. The
    subprocess checks the list again."""
    allowed = [str(a) for a in allowed]
    sources = eligible(files, allowed)
    if not sources:
        return None
    # run in ``folder``: ``-m`` puts the working directory first on the path, and that one is ours
    proc = subprocess.Popen([sys.executable, "-m", "tritune.worker.bytecode", str(folder), *allowed],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd=folder, env=config.environment({config.ENV_PYCACHE_PREFIX: None}))
    try:
        proc.stdin.write("\n".join(sources).encode())
        proc.stdin.close()
    except OSError:
        pass
    return proc


def compile_into(folder: str, sources: Iterable[str], allowed: Iterable[str]) -> int:
    """Each eligible source compiled to where Python looks for it under ``folder`` as
    ``PYTHONPYCACHEPREFIX``, unless what is there is current; how many were written."""
    import py_compile

    sys.pycache_prefix = folder  # cache_from_source (py_compile's default target) then points there
    written = 0
    for source in eligible(sources, allowed):
        target = importlib.util.cache_from_source(source)
        if _current(target, source):
            continue
        try:
            py_compile.compile(source, cfile=target, doraise=True)
        except (py_compile.PyCompileError, OSError, ValueError, SyntaxError):
            continue
        written += 1
    return written


def _current(target: str, source: str) -> bool:
    """Whether ``target`` is bytecode of ``source`` as it is now (its header's time and size)."""
    try:
        with open(target, "rb") as f:
            header = f.read(_HEADER)
        stat = os.stat(source)
    except OSError:
        return False
    return (len(header) == _HEADER and header[:4] == importlib.util.MAGIC_NUMBER
            and int.from_bytes(header[4:8], "little") == 0
            and int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def main(argv: list[str]) -> int:
    folder, *allowed = argv
    os.umask(0o077)
    compile_into(folder, sys.stdin.read().splitlines(), allowed)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
