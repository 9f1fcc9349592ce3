"""Bytecode for jailed workers where the installed packages carry none: the parent has it compiled,
the workers only read it.

Where packages were installed without bytecode (``pip --no-compile``, ``PYTHONDONTWRITEBYTECODE``,
a read-only environment: containers often are), every fresh Python process compiles what it
imports from source. A jailed worker cannot write bytecode anywhere that outlives it, so each
one paid that at every start: on an H200 host, torch's import took 3.8 s in each lane worker
(2.6 s with this folder filled), and the Liger stack's imports (peft, transformers, sklearn:
1013 modules) 9-18 s.

Here (only when torch's own bytecode is missing, ``carried``), once a lane has ranked its keys
the parent asks its timing worker which source files its modules came from (``imported_job``:
torch, Triton, tritune's jobs, the capture's libraries), adds its own, and has them compiled
into a folder of tritune's (``config.bytecode_dir``) by a jailed subprocess of its own
(``fill``), at the lowest priority. The next run's jailed workers run with
``PYTHONPYCACHEPREFIX`` set to it, which their jail lets them read and not write. Not before it
was filled once (``FILLED``): with the prefix set, Python ignores every ``__pycache__``, so an
empty folder would make a first run slower than without it. So that the first run on a machine
starts from bytecode too, a capture (``tritune capture``, ``optimize -- COMMAND``) has the
packages every lane worker imports (``FIRST_FILL``: torch, Triton, tritune, as installed under
the roots) compiled while the program runs, on the cores it leaves idle (``filled_meanwhile``),
then what else the program's processes imported (they list it at exit: numpy, torch's other
needs, the standard library, libraries under the roots), waiting for the rest after it at most
``FILL_WAIT_S`` (~3,000 files: ~15 s of one idle core); its fill marks the folder ``FIRST``, not
``FILLED``, and each later capture tops it up with its own program's imports until a lane's fill
takes over. A lane's workers read a folder only first-filled where it holds each package of the
capture's kernels that carries bytecode of its own, and, for those beyond ``FIRST_FILL``, that
capture's fill finished (``usable``): with the prefix set, Python would ignore a package's own
bytecode and compile it in every worker.

Why this holds (the jail's rules stay as they were):

- What is compiled: only sources under the folders that are the same for every run and that
  every jailed worker may read (``roots``: the interpreter's prefixes, site-packages, tritune's
  package, each as the jail admits it). Never a program's folder, the capture or the parent's
  ``sys.path``: another run's workers (another capture, a model's code) read this folder.
- Who compiles: a subprocess in a jail of its own (Landlock: read those roots, write only the
  folder; seccomp; capabilities dropped), so a file is refused when it is opened, not only when
  the list is checked (a link swapped in between, a root parent's right to read any file).
  The parent never runs what it is told to compile; the list comes from a worker or a captured
  program, so it is checked path by path as well (``eligible``).
- The folder: granted to workers through the jail's own filter (``Policy.with_read``: never
  ``TRITUNE_HOME``, the home, a folder holding either, or one inside ``TRITUNE_HOME``); used
  only when it is a real folder of this user, writable by no one else, that tritune made
  (``MARKER``) or that was empty. No jailed process writes it; an unjailed worker is never
  given it (its code could write bytecode a later jailed worker loads); the parent never reads
  it. Python checks each file against its source's time and size, so an upgraded package's
  stale bytecode is not used.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import importlib.util
import itertools
import os
import shutil
import stat
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Iterator

from tritune import config

MAX_FILES = 20000  # a worker's list, bounded: more is not a list of imports
MAX_LISTS = 256  # a capture's lists of imports read (one a process: ``listed_imports``; as many written)
MAX_LISTED_BYTES = 16 << 20  # of them all
PATH_MAX = 4096  # a longer line is no path
FIRST_FILL = ("torch", "triton", "tritune")  # what every lane worker imports (``filled_meanwhile``)
FIRST = ".tritune-first-filled"  # written once a capture's fill of FIRST_FILL finished (``usable``)
COMPLETE = ".tritune-bytecode-complete"  # in a capture's folder: its fill finished, its program's imports too
FILL_WAIT_S = 60.0  # a capture waits this long for its fill after the program, then leaves it
MARKER = ".tritune-bytecode"  # in a folder tritune made for this
FILLED = ".tritune-filled"  # written once a fill finished: workers read the folder from then on
IMPORTED_JOB = "tritune.worker.bytecode:imported_job"
_FILLING: dict[str, subprocess.Popen] = {}  # folder -> the fill under way (one at a time per folder)


def _spec(module: str):
    """``module``'s spec, found without importing it; None where it is not found (or its parent
    cannot be)."""
    try:
        return importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None


def _source(module: str) -> str | None:
    """The ``.py`` file ``module`` is loaded from; None for one built in, frozen, an extension, a
    namespace package, or not found."""
    spec = _spec(module)
    return spec.origin if spec is not None and spec.origin and spec.origin.endswith(".py") else None


def carried(module: str = "torch") -> bool:
    """Whether ``module``'s package carries its bytecode where Python looks without a prefix (its
    ``__pycache__``); True where the module is not installed (nothing to do)."""
    source = _source(module)
    if source is None:
        return True
    try:
        cached = importlib.util.cache_from_source(source)
    except (NotImplementedError, ValueError):
        return True
    if sys.pycache_prefix:  # the parent's own prefix: look where the package itself keeps it
        cached = os.path.join(os.path.dirname(source), "__pycache__", os.path.basename(cached))
    return os.path.exists(cached)


def prefix(environ=None) -> Path | None:
    """The folder for bytecode, made (mode 0700, with ``MARKER``) if missing; None where the
    packages carry their own bytecode, where ``TRITUNE_BYTECODE`` says off, or where the folder
    cannot be trusted (``_own``) or made."""
    if carried():
        return None
    folder = config.bytecode_dir(environ)
    if folder is None:
        return None
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        if not _own(folder):
            return None
        (folder / MARKER).touch(mode=0o600, exist_ok=True)
    except OSError:
        return None
    return folder


def filled(folder: Path) -> bool:
    """Whether a lane's fill of ``folder`` finished once (workers read it from then on)."""
    return (folder / FILLED).is_file()


def usable(folder: Path, modules: Iterable[str], root: Path | None = None) -> bool:
    """Whether a lane whose capture (``root``) has kernel files that import ``modules``
    (``replay.warm``) gives its workers the folder: a lane's fill finished once (``FILLED``), or
    a capture's (``FIRST``) and each top-level package of ``modules`` that Python would read from
    bytecode of its own (a library, the standard library's ``typing``; not ``math`` or ``sys``,
    which it never compiles) has its bytecode in the folder (``compiled_in``), and, unless it is
    one of ``FIRST_FILL`` (which ``FIRST`` says were compiled), the capture's own fill finished
    (``COMPLETE`` in ``root``): with the prefix set, Python ignores a package's own bytecode and
    would compile what the folder lacks in every worker."""
    if filled(folder):
        return True
    if not (folder / FIRST).is_file():
        return False
    complete = root is not None and (root / COMPLETE).is_file()
    return all(compiled_in(folder, top) and (top in FIRST_FILL or complete)
               for top in {name.split(".")[0] for name in modules} if not _never_compiled(top) and carried(top))


def _never_compiled(module: str) -> bool:
    """Whether Python compiles nothing of ``module`` itself: built in, frozen, an extension, or not
    found (a namespace package counts as compiled: its submodules are)."""
    spec = _spec(module)
    if spec is None:
        return True
    if spec.origin is None or spec.origin == "namespace":
        return not spec.submodule_search_locations
    return not spec.origin.endswith(".py")


def compiled_in(folder: Path, module: str) -> bool:
    """Whether ``folder`` holds bytecode of ``module``'s own file (its ``__init__`` for a package)
    where Python looks for it with ``folder`` as the prefix: under the path it imports the module
    by, links not resolved. The compiler writes under the real path (``eligible``), so where a
    path entry is a link (a venv's ``lib64``), this is False, as Python would find nothing. Its
    existence only: the parent never reads what is in the folder."""
    source = _source(module)
    if source is None:
        return False
    path = os.path.abspath(source)
    name = f"{Path(path).stem}.{sys.implementation.cache_tag}.pyc"
    return Path(str(folder) + os.path.dirname(path), name).is_file()


def _own(folder: Path) -> bool:
    """A real folder (no link) of this user that no one else may write, and tritune's (its
    ``MARKER``) or empty: not ``/etc`` or a shared folder that ``TRITUNE_BYTECODE`` named."""
    info = os.lstat(folder)
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.geteuid() or info.st_mode & 0o022:
        return False
    return (folder / MARKER).is_file() or not any(folder.iterdir())


def roots() -> list[str]:
    """The folders whose sources may be compiled: the same for every run, and readable by every
    jailed worker (the interpreter's prefixes, site-packages, tritune's package, as the jail
    admits them: ``jail.readable``)."""
    import site

    from tritune.worker import jail

    found = [sys.prefix, sys.base_prefix, sys.exec_prefix, str(Path(__file__).resolve().parents[1])]
    if hasattr(site, "getsitepackages"):
        found += list(site.getsitepackages())
    return list(jail.readable(found))


def eligible(files: Iterable[object], allowed: Iterable[str]) -> list[str]:
    """Of ``files`` (a worker's list; at most ``4 * MAX_FILES`` looked at), the real paths of
    regular ``.py`` files under ``allowed``, each once, at most ``MAX_FILES``."""
    tops = [a.rstrip(os.sep) for a in allowed]
    kept: dict[str, None] = {}
    for name in itertools.islice(files, 4 * MAX_FILES):
        if len(kept) >= MAX_FILES:
            break
        if not isinstance(name, str) or not name.endswith(".py") or not os.path.isabs(name) or "\0" in name:
            continue
        try:
            real = os.path.realpath(name)
            inside = real.endswith(".py") and any(_inside(real, top) for top in tops)
            if not inside or not os.path.isfile(real):
                continue
        except OSError:  # a path it may not resolve (another user's /proc entry)
            continue
        kept[real] = None
    return list(kept)


def imported_job(payload: dict) -> list[str]:
    """A worker's job: the source file of every module it has imported."""
    return imported()


def imported() -> list[str]:
    """The source file of every module this process has imported."""
    found = []
    for module in list(sys.modules.values()):
        name = getattr(module, "__file__", None)
        if isinstance(name, str) and name.endswith(".py"):
            found.append(os.path.abspath(name))
    return found


def fill(folder: Path, files: Iterable[object], *, first: bool = False) -> subprocess.Popen | None:
    """Compile the ``files`` under ``roots`` into ``folder``, in a jailed subprocess of this process
    at the lowest priority (its compiles hold no lock of ours; the list goes to it from a thread,
    so a busy machine delays no caller); the process, for the caller to end if it must, or None
    when nothing needs it or a fill of the folder is under way. ``first``: it marks the folder
    ``FIRST`` when done, not ``FILLED`` (``filled_meanwhile``)."""
    running = _FILLING.get(str(folder))
    if running is not None and running.poll() is None:
        return None
    allowed = roots()
    sources = eligible(files, allowed)
    if not sources:
        return None
    # -P and the root folder as its working directory: nothing on its path but the interpreter's
    # and PYTHONPATH's, led by tritune's (a folder named ``tritune`` in the bytecode folder is
    # never imported); its own imports' bytecode does not go to the folder
    path = config.python_path_first(str(Path(__file__).resolve().parents[2]))
    env = config.environment({config.ENV_PYCACHE_PREFIX: None, config.ENV_PYTHONPATH: path})
    proc = subprocess.Popen([sys.executable, "-P", "-m", "tritune.worker.bytecode", *(["--first"] if first else []),
                             str(folder), *allowed],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            cwd="/", env=env)
    try:
        os.setpriority(os.PRIO_PROCESS, proc.pid, 19)
    except OSError:
        pass
    threading.Thread(target=_feed, args=(proc, "\n".join(sources).encode()), name="tritune-bytecode-list",
                     daemon=True).start()
    _FILLING[str(folder)] = proc
    return proc


def _feed(proc: subprocess.Popen, data: bytes) -> None:
    try:
        proc.stdin.write(data)
        proc.stdin.close()
    except OSError:  # it ended (killed): nothing to compile
        pass


def package_sources(names: Iterable[str]) -> list[str]:
    """The ``.py`` files of the packages ``names`` as installed under the roots (found on the
    entries of ``sys.path`` inside ``roots``, not imported: a ``torch`` folder in the working
    directory is not the one the workers import); tritune's own package where it is."""
    allowed = [a.rstrip(os.sep) for a in roots()]
    path = [p for p in sys.path if p and any(_inside(os.path.realpath(p), a) for a in allowed)]
    found: list[str] = []
    for name in names:
        if name == "tritune":
            locations = [str(Path(__file__).resolve().parents[1])]
        else:
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            locations = list(spec.submodule_search_locations or []) if spec is not None else []
        for location in locations:
            for folder, dirs, files in os.walk(location):
                dirs[:] = [d for d in dirs if d != "__pycache__"]
                found += [os.path.join(folder, f) for f in files if f.endswith(".py")]
    return found


def _inside(path: str, root: str) -> bool:
    return path == root or path.startswith(root + os.sep)


@contextlib.contextmanager
def filled_meanwhile(say: Callable[[str], None], complete: Path | None = None) -> Iterator[Path | None]:
    """While the block runs (a capture's program), ``FIRST_FILL``'s sources compiled into the
    folder (``fill``: jailed, at the lowest priority, ``first``), so that a first run's lane
    workers start from bytecode; after the block, the fill is waited for, then what else the
    program's processes imported (numpy, torch's other needs, the program's libraries under the
    roots), at most ``FILL_WAIT_S`` in all (``say`` tells why, and how it ended). The block is
    given the folder its processes list their imports into (``capture.program.run``'s
    ``imports``: made here, removed after; None where nothing is filled). A capture after the
    first on a machine (``FIRST``) compiles only what its program imported (its libraries: what
    is there already is skipped), until a lane's fill (``FILLED``) takes over. Nothing where
    packages carry their bytecode, the folder is off, or no jail could hold the compiler or grant
    workers the folder; a fill that cannot start is no failure of the capture. ``complete`` (the
    capture's ``COMPLETE``) is written where all of it finished and removed where a fill ran and
    did not (a capture refused before its program keeps its own): ``usable``. A block
    that raises (Ctrl-C in the program) kills the fill; Ctrl-C after it, or the wait's end,
    stops it and the capture goes on. A stopped fill writes no marker (each file it wrote is
    whole, and the next fill skips it): no worker uses a part-filled folder."""
    proc = folder = imports = None
    try:
        folder = prefix()
        if folder is not None and not filled(folder) and _grantable(folder):
            if not (folder / FIRST).is_file():
                proc = fill(folder, package_sources(FIRST_FILL), first=True)
            if proc is not None or (folder / FIRST).is_file():
                imports = Path(tempfile.mkdtemp(prefix="tritune-imports-"))
    except Exception:  # noqa: BLE001 - optional: the capture runs without it (TRITUNE_HOME unusable, no process left)
        pass
    try:
        try:
            yield imports
        except BaseException:
            stop(proc)
            raise
        if proc is not None or imports is not None:
            done = False
            try:
                done = _finish(say, folder, proc, imports) and imports is not None
            except KeyboardInterrupt:
                say(UNFINISHED)
            if complete is not None:
                with contextlib.suppress(OSError):  # the capture's folder gone: nothing to say there
                    if done:
                        complete.touch()
                    else:
                        complete.unlink(missing_ok=True)
    finally:
        if folder is not None:
            stop(_FILLING.get(str(folder)))
        if imports is not None:
            shutil.rmtree(imports, ignore_errors=True)


UNFINISHED = "left unfinished: an optimize run compiles the rest"


def _finish(say: Callable[[str], None], folder: Path, proc: subprocess.Popen | None, imports: Path | None) -> bool:
    """After the program: its fill of ``FIRST_FILL`` (``proc``, if this capture started one) waited
    for, then the files its processes listed compiled (what is compiled already is skipped:
    ``_current``), at most ``FILL_WAIT_S`` in all; said when either was still to do. Whether all
    of it finished."""
    began = time.monotonic()
    listed = listed_imports(imports) if imports is not None else []
    told = (proc is not None and proc.poll() is None) or bool(listed)
    if told:
        say(f"compiling what tritune's workers import into {folder} (this machine's packages carry no bytecode; "
            f"at most {FILL_WAIT_S:.0f} s, Ctrl-C skips it)")
    done = proc is None or _waited(proc, FILL_WAIT_S)
    done = done and (folder / FIRST).is_file()
    if done and listed:
        try:
            rest = fill(folder, listed, first=True)  # None: nothing eligible
        except Exception:  # noqa: BLE001 - optional, as the first: not compiled, so not done
            rest, done = None, False
        if rest is not None:
            done = _waited(rest, FILL_WAIT_S - (time.monotonic() - began))
    if told:
        say(f"compiled in {time.monotonic() - began:.0f} s more" if done else UNFINISHED)
    return done


def _waited(proc: subprocess.Popen, seconds: float) -> bool:
    """Whether ``proc`` ended well within ``seconds``; stopped otherwise (and on Ctrl-C)."""
    try:
        proc.wait(max(0.0, seconds))
    except (subprocess.TimeoutExpired, KeyboardInterrupt):
        pass
    stop(proc)
    return proc.returncode == 0


def listed_imports(folder: Path) -> list[str]:
    """The lines of the regular files ``*.txt`` in ``folder`` (``capture.recorder``: a program's
    processes wrote them, so nothing is followed or waited on, a FIFO or a device is skipped, at
    most ``MAX_LISTS`` files and ``MAX_LISTED_BYTES`` in all are read, a line longer than a path
    is dropped; ``eligible`` checks every path)."""
    found: dict[str, None] = {}
    try:
        where = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return []
    left = MAX_LISTED_BYTES
    try:
        for name in sorted(n for n in os.listdir(where) if n.endswith(".txt"))[:MAX_LISTS]:
            try:
                fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=where)
            except OSError:
                continue
            try:
                data = os.read(fd, left) if stat.S_ISREG(os.fstat(fd).st_mode) else b""
            except OSError:
                data = b""
            finally:
                os.close(fd)
            left -= len(data)
            found.update(dict.fromkeys(line for line in data.decode("utf-8", "replace").splitlines()
                                       if len(line) < PATH_MAX))
            if left <= 0:
                break
    except OSError:
        pass
    finally:
        os.close(where)
    return list(found)


def _grantable(folder: Path) -> bool:
    """Whether the compiler can be jailed and workers may be granted ``folder`` (``jail``)."""
    from tritune.worker import jail

    return jail.status().usable and bool(jail.readable([folder]))


def stop(proc: subprocess.Popen | None) -> None:
    """A fill ended now if it still runs: what it wrote stays (each file whole), no marker."""
    if proc is not None and proc.poll() is None:
        proc.kill()
        proc.wait()


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
            py_compile.compile(source, cfile=target, doraise=True,
                               invalidation_mode=py_compile.PycInvalidationMode.TIMESTAMP)
        except (py_compile.PyCompileError, OSError, ValueError, SyntaxError):
            continue
        written += 1
    return written


def _current(target: str, source: str) -> bool:
    """Whether ``target`` is bytecode of ``source`` as it is now (its header's time and size)."""
    try:
        with open(target, "rb") as f:
            header = f.read(16)
        info = os.stat(source)
    except OSError:
        return False
    return (len(header) == 16 and header[:4] == importlib.util.MAGIC_NUMBER
            and int.from_bytes(header[4:8], "little") == 0
            and int.from_bytes(header[8:12], "little") == int(info.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == info.st_size & 0xFFFFFFFF)


def main(argv: list[str]) -> int:
    """The fill process (``[--first] FOLDER ROOT...``): jailed first (read the roots, write the
    folder), then the list from stdin compiled, then ``FILLED`` (``FIRST`` with ``--first``)
    written."""
    from tritune.worker import jail

    first = bool(argv) and argv[0] == "--first"
    folder, *allowed = argv[1:] if first else argv
    sources = sys.stdin.read().splitlines()
    import py_compile  # noqa: F401 - what compiling imports, imported before the jail
    import tokenize  # noqa: F401

    os.umask(0o077)
    if not jail.status().usable:
        return 1  # unconfined, a swapped link could make it compile what a worker may not read
    jail.enter(jail.Policy(read=tuple(allowed), read_write=(folder,)))
    compile_into(folder, sources, allowed)
    Path(folder, FIRST if first else FILLED).touch()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
