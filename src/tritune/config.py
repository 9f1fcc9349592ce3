"""Typed configuration: the one place that reads and writes environment variables.

Every other module asks here (``config.interpreting()``, ``config.ncu_path()``...) and builds a
child's environment here (``config.environment``), so that what tritune reacts to is listed once
(a test fails when another module touches ``os.environ``). This module imports only the
standard library and nothing heavy: ``capture/_boot/sitecustomize.py`` imports it in every
process of a ``tritune capture`` / ``tritune run`` command.

tritune's own variables (all optional):

``TRITUNE_PASSES``
    Comma-separated pass names to install into Triton's compiler in every process that imports
    tritune's cache manager (Inductor's compile workers included). ``exact`` names the default
    exact set, ``fast`` the exact set plus the fast-math passes. Empty or unset: no passes.
``TRITUNE_FAST_MATH``
    ``1`` allows fast-math rewrites (division reassociation, reciprocal of non-power-of-two
    constants). Off by default: exact rewrites only.
``TRITUNE_STAGES``
    Which IR stages the passes run on: ``ttir`` (default) or ``ttir,ttgir``.
``TRITUNE_DEBUG``
    ``1`` verifies the module after every pass and fails loudly if a pass leaves it invalid.

``TRITUNE_CAPTURE_DIR``
    Set by ``tritune capture`` for the command it runs: every Python process of that command
    records its Triton launches into this directory (``capture_dir()``, read by
    ``capture/_boot/sitecustomize.py`` at start-up).

``TRITUNE_STORE``
    Path of a decision store whose verified decisions every Python process applies at launch
    time (``tritune.apply``), for programs one cannot edit; set by ``tritune run --store``
    (``store_path()``, read by ``capture/_boot/sitecustomize.py``, first on ``PYTHONPATH``);
    apply starts once the process imports Triton. A missing or unreadable store is one line on
    stderr and the program runs as written.

``TRITUNE_INDUCTOR_CACHE``
    ``1`` (set by ``tritune run`` unless ``--no-inductor-cache``): the processes applying
    ``TRITUNE_STORE`` also write Inductor decisions that only change config knobs into
    Inductor's autotune cache, where later compiles take them with no hook
    (``serve_through_inductor()``, ``tritune.apply.inductor_cache``).
``TRITUNE_NCU``
    Path of the Nsight Compute CLI that ``tritune.profile`` runs (``ncu_path()``). Unset: ``ncu``
    on ``PATH``, else ``/usr/local/cuda/bin/ncu``; none of them: profiles fall back to timing +
    static analysis and say so. A path that is not an executable file is reported as such.

``TRITUNE_HOME``
    Where tritune keeps per-user state: the secret that signs decision stores (``store.key``,
    see ``tritune.store.signing``). Default ``~/.tritune``, created with mode 0700 on first use
    (``home()``). Stores signed under one home are not trusted under another: tests and
    sandboxes that set it get a store of their own. The GPU locks of ``tritune optimize --jobs``
    live under it too (``gpu_lock_path()``): processes with the same home share a GPU politely.

``TRITUNE_LLM_API_KEY`` (else ``OPENAI_API_KEY``)
    The key ``tritune optimize --llm`` sends as a Bearer token (``llm_api_key()``). Never written
    to a store, a result, a report, a log or an exception; removed from every worker's
    environment (``SECRET_ENV``), so a candidate's code cannot read it.

``TRITUNE_JAIL_MISSING``
    Comma-separated jail mechanisms to treat as missing on this machine (``landlock``,
    ``seccomp``; ``all``): tests of what tritune does where a kernel lacks them
    (``jail_missing()``, read by ``tritune.worker.jail.status``). Unset: every mechanism found
    is used.

``TRITUNE_BYTECODE``
    The folder of the bytecode tritune compiles for its jailed workers where the installed
    packages carry none (``bytecode_dir()``, ``tritune.worker.bytecode``). Default
    ``$XDG_CACHE_HOME/tritune/bytecode`` (``~/.cache/...``); ``off``: none.

Other programs' variables tritune reads or sets:

``TRITON_INTERPRET``
    Triton's switch to run kernels on the CPU, read when a kernel is decorated. tritune reads it
    (``interpreting()``, parsed as Triton parses it) to replay and verify on the CPU, and sets it
    around loading a decided variant so that it is made like the kernel it replaces. Unset on a
    machine without a GPU, the commands that launch kernels set it to 1 for themselves and the
    processes they start (``tritune.gpu``), and say so.
``TRITON_CACHE_MANAGER``
    Set by ``tritune.compiler.enable`` to tritune's salted cache manager; another manager
    already set there is refused (``cache_manager()``).
``TRITON_CACHE_DIR``, ``TORCHINDUCTOR_CACHE_DIR``, ``TORCHINDUCTOR_BENCHMARK_KERNEL``,
``TORCHINDUCTOR_FORCE_DISABLE_CACHES``
    Set by ``tritune harvest`` for the model it compiles: fresh caches, standalone kernel modules.
    ``TORCHINDUCTOR_CACHE_DIR`` is read too (``inductor_cache_dir()``): the only folder under
    which ``tritune.apply.inductor_cache`` writes or deletes a file.
``TORCHINDUCTOR_COMPILE_THREADS``
    ``1`` in a jailed worker: Inductor compiles in the worker itself, not in a pool of
    processes that would outlive the call (``tritune.worker.jail`` kills those after each one).
``HOME``, ``TMPDIR``
    The user's home (``user_home()``), which a jailed worker may not read; a jailed worker gets
    its scratch folder as both, and ``TRITON_CACHE_DIR``/``TORCHINDUCTOR_CACHE_DIR`` inside it
    (``tritune.worker.jail``).
``PYTHONPATH``
    Led by the boot folder for the commands of ``tritune capture`` / ``tritune run``
    (``tritune.boot``), and by tritune's package root for profiled targets.
``PYTHONPYCACHEPREFIX``
    Set to ``bytecode_dir()`` for jailed workers where the packages carry no bytecode: they read
    what the parent compiled there (``tritune.worker.bytecode``).
``XDG_CACHE_HOME``
    Where ``bytecode_dir()`` lies by default.
``PYTHONUNBUFFERED``
    Set to ``1`` in worker processes, so that a print just before a crash reaches their log.
``PATH``
    Where ``ncu`` is looked for (``search_path()``).
``CUDA_VISIBLE_DEVICES``
    The GPUs this process may use (``visible_devices()``): ``tritune optimize --devices`` counts
    from them, and sets it for each lane's workers, one GPU each (``tritune.loop.lanes``).

Code reads ``config.current()`` for the pass settings. The scoped switch is
``tritune.compiler.enabled()``: it works through these variables so that processes started
inside it (Inductor's workers) inherit it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
from typing import TYPE_CHECKING, Iterator, Mapping

if TYPE_CHECKING:
    from pathlib import Path

ENV_PASSES = "TRITUNE_PASSES"
ENV_FAST_MATH = "TRITUNE_FAST_MATH"
ENV_STAGES = "TRITUNE_STAGES"
ENV_DEBUG = "TRITUNE_DEBUG"
ENV_CAPTURE_DIR = "TRITUNE_CAPTURE_DIR"
ENV_CAPTURE_IMPORTS = "TRITUNE_CAPTURE_IMPORTS"  # a folder: a captured process lists its imports there at exit
ENV_STORE = "TRITUNE_STORE"
ENV_NCU = "TRITUNE_NCU"
ENV_SERVE_INDUCTOR = "TRITUNE_INDUCTOR_CACHE"
ENV_HOME = "TRITUNE_HOME"
ENV_LLM_KEY = "TRITUNE_LLM_API_KEY"
ENV_OPENAI_KEY = "OPENAI_API_KEY"
# Secrets no child process gets: a worker runs the code of candidates, a model's among them.
SECRET_ENV = (ENV_LLM_KEY, ENV_OPENAI_KEY)
ENV_JAIL_MISSING = "TRITUNE_JAIL_MISSING"
ENV_BYTECODE = "TRITUNE_BYTECODE"
ENV_HEAD_START = "TRITUNE_HEAD_START"  # off: a run's lanes start after its capture, not beside it
OFF = frozenset({"off", "0", "no", "false"})  # what turns a setting off (any case)
ENV_PYCACHE_PREFIX = "PYTHONPYCACHEPREFIX"
ENV_XDG_CACHE = "XDG_CACHE_HOME"
ENV_INTERPRET = "TRITON_INTERPRET"
ENV_CACHE_MANAGER = "TRITON_CACHE_MANAGER"
ENV_TRITON_CACHE = "TRITON_CACHE_DIR"
ENV_INDUCTOR_CACHE = "TORCHINDUCTOR_CACHE_DIR"
ENV_BENCHMARK_KERNEL = "TORCHINDUCTOR_BENCHMARK_KERNEL"
ENV_DISABLE_CACHES = "TORCHINDUCTOR_FORCE_DISABLE_CACHES"
ENV_COMPILE_THREADS = "TORCHINDUCTOR_COMPILE_THREADS"
ENV_PYTHONPATH = "PYTHONPATH"
ENV_UNBUFFERED = "PYTHONUNBUFFERED"
ENV_PATH = "PATH"
ENV_VISIBLE_DEVICES = "CUDA_VISIBLE_DEVICES"
ENV_USER_HOME = "HOME"
ENV_TMPDIR = "TMPDIR"
ENV_CC = "CC"  # the C compiler Triton builds its launchers with, when set
# What a jailed worker keeps of this process's environment (``jail_environment``): what Python,
# the dynamic loader, CUDA, Triton, torch and tritune read, by name or prefix; nothing else of
# the user's (a cloud token, a proxy's password) reaches code a model wrote.
JAIL_ENV_NAMES = ("PATH", "LANG", "LANGUAGE", "TZ", "TERM", "USER", "LOGNAME", "LD_LIBRARY_PATH", "CC", "CXX",
                  "OMP_NUM_THREADS")
JAIL_ENV_PREFIXES = ("LC_", "PYTHON", "CUDA_", "NVIDIA_", "TRITON_", "TORCH", "PYTORCH_", "MKL_", "OPENBLAS_",
                     "KMP_", "TRITUNE_")
# A name holding one of these is left out whatever its prefix (``TRITON_..._TOKEN``).
_SECRET_WORDS = ("KEY", "TOKEN", "SECRET", "PASSW", "CREDENTIAL", "AUTH")

DEFAULT_HOME = "~/.tritune"
_TRUE = {"1", "true", "yes", "on"}
# What Triton's getenv_bool takes for true (case-insensitive, not stripped): reading
# TRITON_INTERPRET any other way could disagree with Triton about where kernels run.
_TRITON_TRUE = {"1", "true", "yes", "on", "y"}


class ConfigError(ValueError):
    """A variable's value cannot be used; the message names the variable and the value."""


@dataclasses.dataclass(frozen=True)
class Config:
    passes: tuple[str, ...] = ()
    fast_math: bool = False
    stages: tuple[str, ...] = ("ttir",)
    debug: bool = False

    @classmethod
    def from_env(cls, environ: Mapping[str, str] | None = None) -> "Config":
        env = _env(environ)
        return cls(
            passes=_split(env.get(ENV_PASSES, "")),
            fast_math=env.get(ENV_FAST_MATH, "").strip().lower() in _TRUE,
            stages=_split(env.get(ENV_STAGES, "")) or ("ttir",),
            debug=env.get(ENV_DEBUG, "").strip().lower() in _TRUE,
        )

    def to_env(self) -> dict[str, str]:
        """The environment that reproduces this config in another process."""
        return {
            ENV_PASSES: ",".join(self.passes),
            ENV_FAST_MATH: "1" if self.fast_math else "0",
            ENV_STAGES: ",".join(self.stages),
            ENV_DEBUG: "1" if self.debug else "0",
        }


def _split(text: str) -> tuple[str, ...]:
    return tuple(part.strip() for part in text.split(",") if part.strip())


def _env(environ: Mapping[str, str] | None) -> Mapping[str, str]:
    return os.environ if environ is None else environ


def current() -> Config:
    """The config in force, read from the environment at each call."""
    return Config.from_env()


# ------------------------------------------------------------------------------ readers
# Each takes ``environ`` (default: this process's) so that tests need not touch the real one.

def capture_dir(environ: Mapping[str, str] | None = None) -> str | None:
    return _env(environ).get(ENV_CAPTURE_DIR) or None


def capture_imports(environ: Mapping[str, str] | None = None) -> str | None:
    """The folder a captured process lists the files it imported into when it exits (a capture's
    bytecode fill made it: ``worker.bytecode.filled_meanwhile``); None: it lists nothing."""
    return _env(environ).get(ENV_CAPTURE_IMPORTS) or None


def store_path(environ: Mapping[str, str] | None = None) -> str | None:
    return _env(environ).get(ENV_STORE) or None


def serve_through_inductor(environ: Mapping[str, str] | None = None) -> bool:
    return _env(environ).get(ENV_SERVE_INDUCTOR, "") == "1"


def inductor_cache_dir(environ: Mapping[str, str] | None = None) -> str | None:
    """``TORCHINDUCTOR_CACHE_DIR`` as set, or None (Inductor's default then applies)."""
    return _env(environ).get(ENV_INDUCTOR_CACHE, "").strip() or None


def ncu_path(environ: Mapping[str, str] | None = None) -> str:
    """The ncu the user named, or ``""``."""
    return _env(environ).get(ENV_NCU, "").strip()


def search_path(environ: Mapping[str, str] | None = None) -> str | None:
    return _env(environ).get(ENV_PATH)


def cache_manager(environ: Mapping[str, str] | None = None) -> str | None:
    return _env(environ).get(ENV_CACHE_MANAGER) or None


def interpreting(environ: Mapping[str, str] | None = None) -> bool:
    """Whether Triton runs kernels decorated now on the CPU (``TRITON_INTERPRET``)."""
    return _env(environ).get(ENV_INTERPRET, "").lower() in _TRITON_TRUE


def interpret_setting(environ: Mapping[str, str] | None = None) -> str | None:
    """``TRITON_INTERPRET`` as set (stripped), or None where it is unset or empty: whether the
    user chose (``tritune.gpu`` sets it to 1 only where they did not)."""
    return _env(environ).get(ENV_INTERPRET, "").strip() or None


def visible_devices(environ: Mapping[str, str] | None = None) -> list[str] | None:
    """The GPUs ``CUDA_VISIBLE_DEVICES`` leaves this process (indices or UUIDs), in its order;
    None when it is unset (every GPU). Not checked against the host: a worker reports what CUDA
    makes of it."""
    value = _env(environ).get(ENV_VISIBLE_DEVICES)
    if value is None:
        return None
    return [part.strip() for part in value.split(",") if part.strip()]


def llm_api_key(environ: Mapping[str, str] | None = None) -> str | None:
    """The LLM endpoint's key: ``TRITUNE_LLM_API_KEY``, else ``OPENAI_API_KEY``; None if neither
    is set (a local server may need none)."""
    env = _env(environ)
    for name in (ENV_LLM_KEY, ENV_OPENAI_KEY):
        value = env.get(name, "").strip()
        if value:
            return value
    return None


def jail_missing(environ: Mapping[str, str] | None = None) -> frozenset[str]:
    """The jail mechanisms ``TRITUNE_JAIL_MISSING`` says to treat as missing (lower case)."""
    return frozenset(part.lower() for part in _split(_env(environ).get(ENV_JAIL_MISSING, "")))


def c_compiler(environ: Mapping[str, str] | None = None) -> str | None:
    """``CC`` when set: the C compiler Triton builds its launchers with (else one on ``PATH``)."""
    return _env(environ).get(ENV_CC, "").strip() or None


def user_home(environ: Mapping[str, str] | None = None) -> str | None:
    """The user's home folder (``HOME``, else the password database's), absolute; None if
    neither names one."""
    given = _env(environ).get(ENV_USER_HOME, "").strip()
    if not given:
        import pwd

        try:
            given = pwd.getpwuid(os.getuid()).pw_dir
        except KeyError:
            return None
    return os.path.abspath(given) if given else None


def secret_sources(environ: Mapping[str, str] | None = None) -> tuple[tuple[str, ...], str]:
    """What ``tritune.secrets`` keeps out of what tritune writes and sends: the values of the
    secrets the environment holds (``SECRET_ENV``: each LLM key that is set, stripped), and
    ``TRITUNE_HOME`` as given (``home_path`` of it: where the signing key is)."""
    env = _env(environ)
    return tuple(value for value in (env.get(name, "").strip() for name in SECRET_ENV) if value), env.get(ENV_HOME, "")


def home_path(environ: Mapping[str, str] | None = None) -> Path:
    """Where ``home()`` is, without making it."""
    from pathlib import Path

    given = _env(environ).get(ENV_HOME, "").strip()
    return Path(given or DEFAULT_HOME).expanduser().absolute()


def home(environ: Mapping[str, str] | None = None) -> Path:
    """``TRITUNE_HOME`` (default ``~/.tritune``), created with mode 0700 if missing;
    ``ConfigError`` if it exists and is not a directory, or cannot be made."""
    path = home_path(environ)
    try:
        path.mkdir(mode=0o700, parents=True)
    except FileExistsError:
        if not path.is_dir():
            raise ConfigError(f"{ENV_HOME}={path}: exists and is not a directory") from None
    except OSError as exc:
        raise ConfigError(f"{ENV_HOME}={path}: cannot be created ({exc.strerror or exc})") from None
    else:
        os.chmod(path, 0o700)  # mkdir's mode goes through the umask
    return path


def bytecode_dir(environ: Mapping[str, str] | None = None) -> "Path | None":
    """``TRITUNE_BYTECODE`` (``off``, ``0``, ``no``: None), default ``$XDG_CACHE_HOME/tritune/bytecode``
    (``~/.cache`` without it), absolute; not made here."""
    from pathlib import Path

    env = _env(environ)
    given = env.get(ENV_BYTECODE, "").strip()
    if given.lower() in OFF:
        return None
    if given:
        return Path(given).expanduser().absolute()
    base = env.get(ENV_XDG_CACHE, "").strip() or os.path.join(user_home(environ) or "~", ".cache")
    return Path(base).expanduser().absolute() / "tritune" / "bytecode"


def head_start(environ: Mapping[str, str] | None = None) -> bool:
    """Whether ``tritune optimize -- COMMAND`` starts its lanes' workers while it captures the
    program (``loop.lanes.HeadStart``): yes unless ``TRITUNE_HEAD_START`` is ``off``, ``0``,
    ``no`` or ``false`` (a program that needs all of the machine's memory or cores as it runs)."""
    return _env(environ).get(ENV_HEAD_START, "").strip().lower() not in OFF


def gpu_lock_path(name: str, environ: Mapping[str, str] | None = None) -> Path:
    """The lock file of one GPU (``tritune.worker.gpulock``): ``home()/locks/gpu-NAME.lock``,
    ``NAME`` the device's UUID (CUDA_VISIBLE_DEVICES renumbers indices, never UUIDs)."""
    safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
    return home(environ) / "locks" / f"gpu-{safe}.lock"


# ------------------------------------------------------------------------------ writers

def environment(overrides: Mapping[str, str | None] | None = None, *,
                environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """A child process's environment: this one (or ``environ``) with ``overrides`` applied, a
    value of ``None`` removing the variable."""
    env = dict(_env(environ))
    for key, value in (overrides or {}).items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = value
    return env


def jail_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """What a jailed worker's environment keeps of this one (or ``environ``): the variables
    ``JAIL_ENV_NAMES`` and ``JAIL_ENV_PREFIXES`` admit, less ``SECRET_ENV`` and any name that
    looks like a secret's; ``TRITUNE_HOME`` made explicit (the worker's ``HOME`` is elsewhere)."""
    kept = {}
    for name, value in _env(environ).items():
        upper = name.upper()
        if name in SECRET_ENV or any(word in upper for word in _SECRET_WORDS):
            continue
        if name in JAIL_ENV_NAMES or name.startswith(JAIL_ENV_PREFIXES):
            kept[name] = value
    kept[ENV_HOME] = str(home(environ))
    return kept


def python_path_first(folder: str, environ: Mapping[str, str] | None = None) -> str:
    """``PYTHONPATH`` with ``folder`` first (and nowhere else), for ``environment``."""
    rest = [p for p in _env(environ).get(ENV_PYTHONPATH, "").split(os.pathsep) if p and p != folder]
    return os.pathsep.join([folder, *rest])


def update(values: Mapping[str, str | None]) -> dict[str, str | None]:
    """Set (``None``: remove) variables in this process and the children it starts from now on;
    returns what they were, for ``update`` to put back."""
    previous = {key: os.environ.get(key) for key in values}
    for key, value in values.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    return previous


@contextlib.contextmanager
def override(values: Mapping[str, str | None] | None = None, /, **more: str | None) -> Iterator[None]:
    """``update`` for the duration of a block: everything is as before when it exits."""
    previous = update({**(values or {}), **more})
    try:
        yield
    finally:
        update(previous)
