"""The jail: code tritune did not write runs in a worker the operating system confines.

A model's kernels, a foreign store's source and the top level of a capture's kernel file run in
worker processes (``Worker(jail=policy(...))``). The child enters the jail (``enter``) as soon
as it has its settings, before its first thread, its preload imports and any job; from then on
it and every process it starts:

- files (Landlock, ``landlock``): read and execute only the interpreter, site-packages, the
  parent's ``sys.path`` (never the user's home itself, nor a folder holding it or
  ``TRITUNE_HOME``), tritune's package, the system's libraries and tools (``/usr``, ``/lib``,
  ``/bin``... and a few files of ``/etc``), ``/proc`` and ``/sys``, the capture directory and
  the program's own folder, and where the packages carry no bytecode the folder tritune's
  jailed compiler filled for them (``bytecode``, ``Policy.with_read``); read and write only its
  scratch folder (``HOME``, ``TMPDIR``, and a Triton and Inductor cache of its own there: a
  jailed job cannot poison the user's Triton cache whose launcher ``.so`` files other processes
  load) or, for an evaluator's workers, one Triton cache they share and nothing else loads
  (``pool.SharedCache``: one trust domain, which says why), the GPU's device files (ioctl too)
  and ``/dev/null`` and its kind; open and lock the GPU lock files of ``TRITUNE_HOME/locks`` that
  the parent made for it (``lock_files``: the CPU's and each of this machine's GPUs'), create
  none there. Not ``TRITUNE_HOME`` (``store.key``), not a store, not the user's home. Not
  ``/dev/shm``: a file left there outlives the worker (a channel to later processes, the
  user's RAM), and nothing a worker runs needs it (no job shares tensors or CUDA memory with
  another process). A root worker is held too: Landlock does not look at file modes or
  capabilities.
- network: no TCP bind or connect (Landlock ABI >= 4), no ``socket()`` of any family
  (``seccomp``), no abstract unix socket and no signal to a process outside the jail
  (Landlock scopes, ABI >= 6).
- processes: no ``setsid``/``setpgid`` (``seccomp``), so everything a job starts stays in the
  worker's process group, whose members other than the worker the parent kills after every
  call (``end_strays``) and all of which it kills when the worker ends; no ``ptrace``, no
  ``process_vm_readv``/``writev``; Landlock also refuses ptrace and ``/proc/PID/mem`` to any
  process outside the jail (not ``/proc/PID/environ``: the next two points keep that).
- privileges: ``no_new_privs``, and every capability dropped (the bounding set too, when run as
  root), so a root worker is no more than its files allow: no ``CAP_DAC_OVERRIDE``,
  ``CAP_DAC_READ_SEARCH``, ``CAP_SYS_PTRACE``, ``CAP_SYS_ADMIN``.

The parent (``protect_parent``) is not dumpable: no process of its user without
``CAP_SYS_PTRACE`` reads its ``/proc/PID/environ`` (the LLM key) or its memory. Three locks on
that door, each enough alone (tests/worker/test_worker_jail.py tries each): the parent not dumpable,
Landlock (a jailed process reaches no process outside its jail that way), and, as root, the
dropped capabilities (a process may only read one whose capabilities it holds).

Where a mechanism is missing (``status``), one line on stderr says which; a caller running a
model's code or foreign source refuses (``JailUnavailable``) unless the user said
``--unsafe-no-jail`` (``for_workers``); the user's own capture runs unjailed, said once.

What it does not stop: a GPU kernel reads the device memory it is given; timing side channels;
what the jail lets it read (the capture, the program's folder, site-packages) it can copy into
its own results. Linux only; Landlock and seccomp bind a process and its descendants only.
"""

from __future__ import annotations

import ctypes
import dataclasses
import glob
import os
import platform
import re
import signal
import sys
import threading
from pathlib import Path
from typing import Iterable

from tritune import config
from tritune.worker import landlock, seccomp
from tritune.worker.gpulock import GpuLock

# System folders every worker needs (the dynamic loader, gcc for Triton's launchers, ldconfig for
# libcuda, ptxas's libraries), and the few files of /etc they read: not all of /etc.
SYSTEM_DIRS = ("/usr", "/lib", "/lib32", "/lib64", "/libx32", "/bin", "/sbin", "/opt/nvidia", "/usr/local/cuda",
               "/proc", "/sys")
ETC_FILES = ("/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/nsswitch.conf", "/etc/passwd",
             "/etc/group", "/etc/localtime", "/etc/os-release", "/etc/alternatives", "/etc/gcrypt", "/etc/nvidia")
COMPILERS = ("cc", "gcc", "clang")
DEVICE_GLOBS = ("/dev/null", "/dev/zero", "/dev/full", "/dev/random", "/dev/urandom", "/dev/nvidia*",
                "/dev/nvidia-caps/*")
NVIDIA_GPUS = "/proc/driver/nvidia/gpus"  # one folder per GPU, its UUID in ``information``
REQUIRED = ("landlock", "seccomp", "no_new_privs")

_PR_GET_DUMPABLE, _PR_SET_DUMPABLE = 3, 4
_PR_GET_SECCOMP = 21
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS, _PR_GET_NO_NEW_PRIVS = 38, 39
_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL = 47, 4
_CAP_SETPCAP = 8
_CAPABILITY_VERSION_3 = 0x20080522
_CAPSET = {"x86_64": 126, "aarch64": 91}

_libc = ctypes.CDLL(None, use_errno=True)
_libc.prctl.argtypes = [ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong]
_libc.syscall.restype = ctypes.c_long
_said: set[str] = set()
_entered: "Policy | None" = None


class JailError(RuntimeError):
    """The jail could not be entered, or is needed and missing; the message is one line."""


class JailUnavailable(JailError):
    """A model's code or foreign source would run unjailed: refused (``for_workers``)."""


@dataclasses.dataclass(frozen=True)
class Policy:
    """What a jailed worker may reach (module docstring); paths absolute. ``landlock``,
    ``seccomp``, ``caps``: tests turn one mechanism off to see another hold alone."""

    read: tuple[str, ...] = ()  # read and execute
    read_write: tuple[str, ...] = ()  # everything but making device files
    devices: tuple[str, ...] = ()  # device files: read, write, ioctl
    locks: tuple[str, ...] = ()  # lock files that may be opened and locked (``lock_files``)
    landlock: bool = True
    seccomp: bool = True
    caps: bool = True

    def with_scratch(self, folder: str | Path) -> "Policy":
        """This policy plus the worker's own scratch folder, read-write."""
        return dataclasses.replace(self, read_write=(*self.read_write, str(folder)))

    def with_read(self, folder: str | Path) -> "Policy":
        """This policy plus ``folder``, read-only (``bytecode.prefix``), unless it is a folder no
        jailed worker may see (``TRITUNE_HOME``, the user's home, one holding either, one inside
        ``TRITUNE_HOME``): then this policy as it is."""
        return dataclasses.replace(self, read=tuple(dict.fromkeys((*self.read, *readable([folder])))))


@dataclasses.dataclass(frozen=True)
class Status:
    """Which mechanisms this machine has (``status()``)."""

    landlock_abi: int
    seccomp: bool
    no_new_privs: bool
    caps: bool  # capabilities can be dropped (capset; as root the bounding set too)
    machine: str
    forced: frozenset[str] = frozenset()  # treated as missing (``config.jail_missing``)

    @property
    def missing(self) -> list[str]:
        """Missing mechanisms, required ones (``REQUIRED``) first."""
        found = []
        if self.landlock_abi < 1:
            found.append("landlock")
        if not self.seccomp:
            found.append("seccomp")
        if not self.no_new_privs:
            found.append("no_new_privs")
        if not self.caps:
            found.append("caps")
        if 1 <= self.landlock_abi < 4:
            found.append("landlock-net")
        if 1 <= self.landlock_abi < 6:
            found.append("landlock-scopes")
        return found

    @property
    def usable(self) -> bool:
        """Every required mechanism is here: a jail holds files, sockets and processes."""
        return not set(REQUIRED) & set(self.missing)

    def describe(self) -> str:
        """One line: what the jail uses here, or what it lacks."""
        have = []
        if self.landlock_abi:
            have.append(f"Landlock ABI {self.landlock_abi}")
        if self.seccomp:
            have.append(f"seccomp ({self.machine})")
        if self.no_new_privs:
            have.append("no_new_privs")
        if self.caps:
            have.append("capabilities dropped")
        line = "worker jail: " + (", ".join(have) or "nothing")
        missing = self.missing
        if missing:
            line += f"; missing: {', '.join(missing)}"
            if "seccomp" in missing and seccomp.machine() is None:
                line += f" (no filter for machine {self.machine})"
        return line


def status() -> Status:
    """The mechanisms this machine has, less those ``TRITUNE_JAIL_MISSING`` names."""
    forced = config.jail_missing()
    every = "all" in forced
    abi = 0 if every or "landlock" in forced else landlock.abi()
    has_seccomp = not (every or "seccomp" in forced) and _prctl(_PR_GET_SECCOMP) >= 0 and seccomp.available()
    nnp = not (every or "no_new_privs" in forced) and _prctl(_PR_GET_NO_NEW_PRIVS) >= 0
    caps = not (every or "caps" in forced) and platform.machine() in _CAPSET
    return Status(abi, has_seccomp, nnp, caps, platform.machine(), frozenset(forced))


# ----------------------------------------------------------------------------- the policy

def policy(capture_dir: str | Path | None = None, program_dir: str | Path | Iterable[str | Path] | None = None,
           extra_read: Iterable[str | Path] = (), *, extra_write: Iterable[str | Path] = ()) -> Policy:
    """The policy of a worker that imports ``capture_dir``'s kernel files (read-only), and
    ``program_dir`` (one folder or several: the captured program's own, for its sibling
    imports). ``extra_write``: folders it writes (made here if missing). Any folder that is the
    user's home, or holds it or ``TRITUNE_HOME``, is left out, wherever it comes from."""
    programs = [program_dir] if isinstance(program_dir, (str, Path)) else list(program_dir or ())
    read = [sys.prefix, sys.base_prefix, sys.exec_prefix, *_site_packages(),
            *(p for p in sys.path if isinstance(p, str) and p), str(Path(__file__).resolve().parents[1]),
            *SYSTEM_DIRS, *ETC_FILES, *_toolchains(), *programs, *extra_read]
    if capture_dir is not None:
        read.append(capture_dir)
    writes = []
    for folder in extra_write:
        Path(folder).mkdir(parents=True, exist_ok=True)
        writes.append(folder)
    forbidden = _forbidden()
    devices = sorted({path for pattern in DEVICE_GLOBS for path in glob.glob(pattern)})
    return Policy(read=_allowed(read, forbidden), read_write=_allowed(writes, forbidden),
                  devices=tuple(devices), locks=_allowed(lock_files(), forbidden, below_home=True))


def _toolchains() -> list[str]:
    """The install folders of ``CC`` and the C compilers on ``PATH`` (Triton builds its launchers with one)
    that lie outside the system folders: ``/opt/gcc`` for ``/opt/gcc/bin/gcc`` (the GPU machine's,
    2026-11-28), so that its ``libexec`` and ``lib`` are there too."""
    import shutil

    found = []
    for name in (config.c_compiler(), *COMPILERS):
        path = shutil.which(name) if name else None
        if path is None:
            continue
        prefix = Path(os.path.realpath(path)).parent.parent
        if len(prefix.parts) > 1 and not any(_holds(folder, str(prefix)) for folder in SYSTEM_DIRS):
            found.append(str(prefix))
    return found


def lock_files(gpus: str = NVIDIA_GPUS) -> list[str]:
    """The GPU lock files a jailed worker may take (``loop.jobs.gpu_lock``), made here where
    missing, each with its gate: the CPU's, and each GPU's of this machine by the UUID its
    driver lists in ``gpus`` (torch names a GPU's lock by it too). A worker opens and locks them;
    it creates nothing in ``TRITUNE_HOME/locks``."""
    names = ["cpu"]
    for info in sorted(glob.glob(os.path.join(gpus, "*", "information"))):
        try:
            text = Path(info).read_text(errors="replace")
        except OSError:
            continue
        for line in text.splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "GPU UUID" and value.strip():
                names.append(value.strip().removeprefix("GPU-"))
    files = []
    for name in names:
        lock = GpuLock(config.gpu_lock_path(name))
        lock.path.parent.mkdir(parents=True, exist_ok=True)
        for path in (lock.path, lock.gate_path):
            os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600))
            files.append(str(path))
    return files


def _site_packages() -> list[str]:
    import site

    found = list(site.getsitepackages()) if hasattr(site, "getsitepackages") else []
    user = site.getusersitepackages() if hasattr(site, "getusersitepackages") else None
    return found + ([user] if isinstance(user, str) else [])


def readable(paths: Iterable[str | Path]) -> tuple[str, ...]:
    """``paths`` resolved, less those no jailed worker may see (a forbidden folder, one holding
    one, one inside ``TRITUNE_HOME``) and those missing: what a policy may grant of them."""
    return _allowed(paths, _forbidden())


def _forbidden() -> list[str]:
    """The folders no jailed worker may see: TRITUNE_HOME (the signing key) and the user's home."""
    found = [str(config.home().resolve())]
    home = config.user_home()
    if home:
        found.append(os.path.realpath(home))
    return found


def _allowed(paths: Iterable[str | Path], forbidden: list[str], *, below_home: bool = False) -> tuple[str, ...]:
    """``paths`` made absolute and resolved, each once, less those that are a forbidden folder or
    hold one. ``below_home``: a path inside TRITUNE_HOME is fine (the lock files)."""
    kept: list[str] = []
    for path in paths:
        real = os.path.realpath(os.path.abspath(os.fspath(path)))
        if any(_holds(real, f) for f in forbidden) or (not below_home and any(_holds(f, real) for f in forbidden[:1])):
            continue  # a folder inside TRITUNE_HOME is refused too, unless asked for (locks)
        if real not in kept and os.path.exists(real):
            kept.append(real)
    return tuple(kept)


def same_reach(a: Policy | None, b: Policy | None) -> bool:
    """Whether workers jailed by ``a`` and by ``b`` reach the same: both unjailed, or every
    folder one of them reads lies in a folder the other reads, and their writes, devices, lock
    files and mechanisms are the same (``LocalLane``'s head start: workers started before the
    capture by a policy made then are kept only where the capture's own policy is that one)."""
    if a is None or b is None:
        return a is b
    return (all(reads(b.read, path) for path in a.read) and all(reads(a.read, path) for path in b.read)
            and set(a.read_write) == set(b.read_write) and set(a.devices) == set(b.devices)
            and set(a.locks) == set(b.locks) and (a.landlock, a.seccomp, a.caps) == (b.landlock, b.seccomp, b.caps))


def reads(granted: Iterable[str], path: str) -> bool:
    """Whether a jail that reads the folders ``granted`` reads ``path`` (one of them, or inside
    one), links resolved on both sides as Landlock resolves them."""
    real = os.path.realpath(path)
    return any(_holds(os.path.realpath(folder), real) for folder in granted)


def _holds(folder: str, path: str) -> bool:
    """``folder`` is ``path`` or one of its parents."""
    return path == folder or path.startswith(folder.rstrip("/") + "/")


# ----------------------------------------------------------------------------- entering it

def enter(policy: Policy) -> None:
    """Jail this process for good (module docstring): irreversible. Must be called before the
    process has a second thread (Landlock binds the calling thread and what it starts). Raises
    ``JailError`` if a mechanism the policy uses is missing or fails."""
    global _entered
    threads = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc/self/task") else threading.active_count()
    if threads > 1:
        raise JailError(f"jail: this process already runs {threads} threads; enter the jail before any starts")
    found = status()
    wanted = [name for name, used in (("landlock", policy.landlock), ("seccomp", policy.seccomp),
                                      ("no_new_privs", True), ("caps", policy.caps)) if used]
    lacking = [name for name in wanted if name in found.missing]
    if lacking:
        raise JailError(f"jail: missing {', '.join(lacking)} ({found.describe()})")
    # CUDA's driver writes under its own /proc/PID when it starts and fails without it ("Error
    # 304: OS call failed", seen on an H200, 2026-11-28: benchmarks/containment/jail_cuda_bisect.py)
    own = dataclasses.replace(policy, read_write=(*policy.read_write, f"/proc/{os.getpid()}"))
    ruleset = _ruleset(own, found.landlock_abi) if policy.landlock else None
    try:
        if _prctl(_PR_SET_NO_NEW_PRIVS, 1) != 0:
            raise JailError(f"jail: PR_SET_NO_NEW_PRIVS failed: {os.strerror(ctypes.get_errno())}")
        if policy.caps:
            drop_capabilities()
        if ruleset is not None:
            ruleset.restrict_self()
        if policy.seccomp:
            seccomp.install()
    except OSError as exc:
        raise JailError(f"jail: {exc}") from None
    finally:
        if ruleset is not None:
            ruleset.close()
    _entered = policy


def entered() -> Policy | None:
    """The policy this process is jailed by, None if it is not (jobs ask: ``profile``)."""
    return _entered


def _ruleset(policy: Policy, abi: int) -> landlock.Ruleset:
    ruleset = landlock.Ruleset(abi)
    try:
        for paths, rights in ((policy.read, landlock.READ), (policy.read_write, landlock.READ_WRITE),
                              (policy.devices, landlock.DEVICE), (policy.locks, landlock.LOCK_FILES)):
            for path in paths:
                ruleset.allow(path, rights)
    except OSError as exc:
        ruleset.close()
        raise JailError(f"jail: {exc}") from None
    return ruleset


def drop_capabilities() -> None:
    """Every capability of this process gone: the bounding set (when it may: as root), the
    ambient set, then effective, permitted and inheritable (``capset``). Checked after."""
    last = _cap_last()
    if _has_cap(_CAP_SETPCAP):
        for cap in range(last + 1):
            if _prctl(_PR_CAPBSET_DROP, cap) != 0 and ctypes.get_errno() != 22:  # EINVAL: no such cap
                raise JailError(f"jail: PR_CAPBSET_DROP {cap}: {os.strerror(ctypes.get_errno())}")
    _prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL)  # EINVAL before Linux 4.3: there is none
    header = (ctypes.c_uint32 * 2)(_CAPABILITY_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()  # two of {effective, permitted, inheritable}, all zero
    number = _CAPSET.get(platform.machine())
    if number is None or _libc.syscall(ctypes.c_long(number), ctypes.byref(header), ctypes.byref(data)) != 0:
        raise JailError(f"jail: capset failed: {os.strerror(ctypes.get_errno())}")
    left = {k: v for k, v in capabilities().items() if k in ("CapEff", "CapPrm", "CapAmb", "CapInh") and v}
    if left:
        raise JailError(f"jail: capabilities left after dropping them: {left}")


def capabilities(pid: int | str = "self") -> dict[str, int]:
    """``CapInh``/``CapPrm``/``CapEff``/``CapBnd``/``CapAmb`` of a process, from ``/proc``."""
    found = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name, _, value = line.partition(":")
            if name.startswith("Cap"):
                found[name] = int(value.strip(), 16)
    return found


def _has_cap(cap: int) -> bool:
    try:
        return bool(capabilities().get("CapEff", 0) >> cap & 1)
    except OSError:
        return False


def _cap_last() -> int:
    try:
        return int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        return 63


def _prctl(option: int, arg: int = 0) -> int:
    return _libc.prctl(option, arg, 0, 0, 0)


# ----------------------------------------------------------------------------- the parent

def protect_parent() -> bool:
    """This process (the one holding the keys) not dumpable: no process of this user without
    ``CAP_SYS_PTRACE`` reads its ``/proc/PID/environ``, ``mem`` or attaches to it. Safe to
    repeat; False where prctl is not Linux's."""
    try:
        return _prctl(_PR_SET_DUMPABLE, 0) == 0
    except (AttributeError, OSError):
        return False


def end_strays(group: int, keep: int) -> int:
    """SIGKILL every live process of process group ``group`` but ``keep`` (the worker, after a
    call: what its job started must not outlive the call), until none is left; how many were
    killed. Each through a pidfd, its group read again after opening it, so a recycled pid is
    never signalled."""
    killed: set[int] = set()  # by pid: a killed process is still a member until it is gone
    for _ in range(100):  # a job forking as fast as it can loses to this long before
        found = [pid for pid in _members(group) if pid != keep]
        if not found:
            break
        killed.update(pid for pid in found if _kill_member(pid, group))
    return len(killed)


def _members(group: int) -> list[int]:
    members = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            state_group = _state_and_group(int(entry))
            if state_group is not None and state_group[1] == group and state_group[0] not in "ZX":
                members.append(int(entry))
    return members


def _state_and_group(pid: int) -> tuple[str, int] | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            text = f.read().decode(errors="replace")
    except OSError:
        return None
    fields = text.rsplit(")", 1)[1].split()  # after the command name, which may hold anything
    return fields[0], int(fields[2])  # state, pgrp (fields 3 and 5)


def _kill_member(pid: int, group: int) -> int:
    try:
        fd = os.pidfd_open(pid)
    except OSError:
        return 0
    try:
        again = _state_and_group(pid)
        if again is None or again[1] != group:
            return 0
        signal.pidfd_send_signal(fd, signal.SIGKILL)
        return 1
    except OSError:
        return 0
    finally:
        os.close(fd)


# ----------------------------------------------------------------------------- the callers

def for_workers(capture_dir: str | Path | None = None, *, untrusted: bool, unsafe_no_jail: bool = False,
                program_dirs: Iterable[str | Path] | None = None, extra_read: Iterable[str | Path] = (),
                extra_write: Iterable[str | Path] = ()) -> Policy | None:
    """The policy for workers that import ``capture_dir``'s kernels, or None to run unjailed.

    ``untrusted``: they run a model's code or foreign source; where the jail is missing that is
    refused (``JailUnavailable``) unless ``unsafe_no_jail``. ``unsafe_no_jail``: the user asked
    for no jail, said once. Otherwise, a missing jail is said once and the workers run unjailed.
    ``program_dirs`` default to the folders of the capture's programs (``launches.jsonl``)."""
    if not check(untrusted=untrusted, unsafe_no_jail=unsafe_no_jail):
        return None
    if program_dirs is None:
        program_dirs = program_folders(capture_dir) if capture_dir is not None else ()
    return policy(capture_dir, list(program_dirs), extra_read, extra_write=extra_write)


def check(*, untrusted: bool, unsafe_no_jail: bool = False) -> bool:
    """Whether workers are to be jailed (``for_workers``' rules), saying once why not; a command
    calls it first, so that a refusal comes before anything runs. ``JailUnavailable`` when
    ``untrusted`` code would run unjailed without ``unsafe_no_jail``."""
    if unsafe_no_jail:
        say("tritune: --unsafe-no-jail: workers run untrusted code with everything you can reach "
            "(your key, your home, the network)")
        return False
    found = status()
    if not found.usable:
        if untrusted:
            raise JailUnavailable(f"{found.describe()}: refusing to run a model's code or foreign source "
                                  "unjailed; --unsafe-no-jail runs it anyway, with everything you can reach")
        say(f"tritune: {found.describe()}: workers run your capture's code unjailed")
        return False
    if found.missing:
        say(f"tritune: {found.describe()}")
    return True


_GENERATED = re.compile(r"c[a-z0-9]{40,}\.py")  # Inductor's name for a module it wrote (its code's hash)


def program_folders(capture_dir: str | Path) -> list[str]:
    """The folders of the programs whose launches ``capture_dir`` holds, where they exist here:
    those of its kernel files, for the modules beside them they import. Not those of the files
    Inductor generated (named ``c<hash>.py`` in its cache folder): they import nothing beside
    them. A program's own kernel that Inductor's heuristics launch keeps its folder."""
    from tritune.capture.spec import read_launches
    from tritune.model.launch import SpecError

    try:
        specs = read_launches(capture_dir)
    except (SpecError, OSError):
        return []
    folders = {str(Path(s.source_file).parent) for s in specs
               if s.source_file and not (s.kind == "inductor" and _GENERATED.fullmatch(Path(s.source_file).name))}
    return sorted(f for f in folders if os.path.isdir(f))


def say(line: str) -> None:
    """``line`` on stderr, once per process."""
    if line not in _said:
        _said.add(line)
        print(line, file=sys.stderr)
