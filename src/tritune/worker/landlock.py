"""Landlock through ctypes: which files a jailed worker may touch, no TCP, no signals out.

Linux's unprivileged sandbox (``Documentation/userspace-api/landlock.rst``): a process builds a
ruleset that *handles* some access rights, allows some of them beneath some directories or on
some files, and restricts itself; from then on every handled right not allowed by a rule is
refused (EACCES) to it and to every process it starts, whatever the file modes say and whoever
it runs as. Allow-only: a folder is reachable iff some rule covers it or one of its parents, so
granting ``~/.pyenv`` never grants ``~/.tritune``.

Three syscalls (444-446, the same numbers on every architecture) and three structs. What each
ABI version added, and so what this module handles where it is found:

    1  (5.13)  the file rights: execute, read, write, list, make, remove
    2  (5.19)  REFER: link or rename into another folder
    3  (6.2)   TRUNCATE
    4  (6.7)   TCP bind and connect (no rule added: every port refused)
    5  (6.10)  IOCTL_DEV: ioctl on device files (the GPU's are allowed, by rule)
    6  (6.12)  scopes: no abstract unix socket and no signal to a process outside the jail
    7  (6.15)  audit flags only

Standard library only: the worker's child imports it before anything heavy.
"""

from __future__ import annotations

import ctypes
import os
import stat

_SYS_CREATE_RULESET, _SYS_ADD_RULE, _SYS_RESTRICT_SELF = 444, 445, 446
_CREATE_RULESET_VERSION = 1 << 0
_RULE_PATH_BENEATH = 1

# The file rights, by the ABI that brought them.
EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1

_FS_BY_ABI = {1: (1 << 13) - 1, 2: REFER, 3: TRUNCATE, 5: IOCTL_DEV}
# What a rule on a file (not a folder) may allow; more is EINVAL.
FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV

# What the jail grants, before masking by the ABI found.
READ = EXECUTE | READ_FILE | READ_DIR
READ_WRITE = READ | ((1 << 16) - 1) & ~(MAKE_CHAR | MAKE_BLOCK | IOCTL_DEV)
DEVICE = READ_FILE | WRITE_FILE | TRUNCATE | IOCTL_DEV
LOCK_FILES = READ_FILE | WRITE_FILE  # the GPU lock files the parent made: open and lock, not create


class LandlockError(OSError):
    """A Landlock call failed (the message names the call and the path, if any)."""


class _RulesetAttr(ctypes.Structure):
    _fields_ = [("handled_access_fs", ctypes.c_uint64), ("handled_access_net", ctypes.c_uint64),
                ("scoped", ctypes.c_uint64)]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1  # __attribute__((packed)): 12 bytes
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def abi() -> int:
    """The Landlock ABI version of this kernel; 0 when it has none (or it is disabled)."""
    version = _libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), None, ctypes.c_size_t(0),
                            ctypes.c_uint32(_CREATE_RULESET_VERSION))
    return max(0, int(version))


def fs_rights(version: int) -> int:
    """Every file right of ABI ``version``."""
    return sum(bits for since, bits in _FS_BY_ABI.items() if version >= since)


def _check(result: int, what: str) -> int:
    if result < 0:
        err = ctypes.get_errno()
        raise LandlockError(err, f"{what}: {os.strerror(err)}")
    return result


class Ruleset:
    """One ruleset under construction: ``allow`` paths, then ``restrict_self`` (irreversible)."""

    def __init__(self, version: int) -> None:
        if version < 1:
            raise LandlockError(0, "this kernel has no Landlock")
        self.version = version
        self.handled = fs_rights(version)
        net = NET_BIND_TCP | NET_CONNECT_TCP if version >= 4 else 0
        scoped = SCOPE_ABSTRACT_UNIX_SOCKET | SCOPE_SIGNAL if version >= 6 else 0
        attr = _RulesetAttr(self.handled, net, scoped)
        self.fd = _check(_libc.syscall(ctypes.c_long(_SYS_CREATE_RULESET), ctypes.byref(attr),
                                       ctypes.c_size_t(ctypes.sizeof(attr)), ctypes.c_uint32(0)),
                         "landlock_create_ruleset")

    def allow(self, path: str, rights: int) -> bool:
        """Allow ``rights`` (masked by this ABI and, on a file, by what a file can take) beneath
        ``path``; False when it does not exist (nothing to allow)."""
        try:
            fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
        except FileNotFoundError:
            return False
        except OSError as exc:
            raise LandlockError(exc.errno or 0, f"{path}: {exc.strerror}") from None
        try:
            allowed = rights & self.handled
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                allowed &= FILE_RIGHTS
            attr = _PathBeneathAttr(allowed, fd)
            _check(_libc.syscall(ctypes.c_long(_SYS_ADD_RULE), ctypes.c_int(self.fd), ctypes.c_int(_RULE_PATH_BENEATH),
                                 ctypes.byref(attr), ctypes.c_uint32(0)), f"landlock_add_rule {path}")
        finally:
            os.close(fd)
        return True

    def restrict_self(self) -> None:
        """Enforce the ruleset on this thread and every process it starts (needs no_new_privs)."""
        try:
            _check(_libc.syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(self.fd), ctypes.c_uint32(0)),
                   "landlock_restrict_self")
        finally:
            self.close()

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1
