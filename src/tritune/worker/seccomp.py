"""A seccomp filter, built by hand: the syscalls a jailed worker is refused (EPERM).

``program()`` is a classic-BPF program over ``struct seccomp_data`` (``nr`` at offset 0,
``arch`` at 4). It reads:

    arch != this machine's           -> EPERM   (an i386 ``int 0x80`` or an arm32 call would
                                                  otherwise reach syscalls by other numbers)
    x86_64: nr >= 0x40000000 (x32)    -> EPERM
    socket(AF_UNIX, ...)              -> allow
    socket(any other family)          -> EPERM
    connect                           -> ECONNREFUSED (as if nothing listened)
    nr in REFUSED                     -> EPERM
    anything else                     -> allow

Why ``socket(AF_UNIX)`` is allowed: CUDA's driver makes one when it starts (it looks for an MPS
server) and fails to start at all, "Error 304: OS call failed", when ``socket`` is refused (seen
on an H200, 2026-11-28: ``benchmarks/containment/jail_cuda_bisect.py``). Such a socket reaches
nothing: ``connect`` is refused for every socket, ``sendto``/``sendmsg``/``sendmmsg`` (a datagram
to an address) are in REFUSED, an abstract name is scoped away by Landlock and a path by its file
rights, and no other family can be made. Worker messages go over pipes.

REFUSED: ``setsid``/``setpgid`` (a job's processes stay in the worker's process group, which the parent
kills after every call), ``ptrace``, ``process_vm_readv``/``writev`` (no other process's
memory), and ``io_uring_*`` (its requests open sockets and connect without passing through
this filter). Only x86_64 and aarch64 are known: elsewhere ``machine()`` is None and the jail
reports seccomp missing.

Installed with ``seccomp(SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC)``, so every thread of
the process gets it, after ``PR_SET_NO_NEW_PRIVS``. Standard library only.
"""

from __future__ import annotations

import ctypes
import os
import platform
import struct

AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
X32_SYSCALL_BIT = 0x40000000
# name -> (x86_64, aarch64) syscall numbers
REFUSED = {
    "sendto": (44, 206),
    "sendmsg": (46, 211),
    "sendmmsg": (307, 269),
    "setsid": (112, 157),
    "setpgid": (109, 154),
    "ptrace": (101, 117),
    "process_vm_readv": (310, 270),
    "process_vm_writev": (311, 271),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
}
SOCKET = (41, 198)
CONNECT = (42, 203)
AF_UNIX = 1
ECONNREFUSED = 111
_SECCOMP_SYSCALL = {"x86_64": 317, "aarch64": 277}

# classic BPF
LD_W_ABS = 0x20  # BPF_LD | BPF_W | BPF_ABS
JEQ_K = 0x15  # BPF_JMP | BPF_JEQ | BPF_K
JGE_K = 0x35  # BPF_JMP | BPF_JGE | BPF_K
RET_K = 0x06  # BPF_RET | BPF_K
RET_ALLOW = 0x7FFF0000
RET_ERRNO = 0x00050000
OFFSET_NR, OFFSET_ARCH, OFFSET_ARG0 = 0, 4, 16  # args[0]'s low word (little-endian machines)

_SET_MODE_FILTER = 1
_FILTER_FLAG_TSYNC = 1
_GET_ACTION_AVAIL = 2


class SeccompError(OSError):
    """The filter could not be installed."""


def machine() -> str | None:
    """``x86_64`` or ``aarch64`` when this filter knows the machine's syscalls, else None."""
    name = platform.machine().lower()
    name = {"amd64": "x86_64", "arm64": "aarch64"}.get(name, name)
    return name if name in AUDIT_ARCH else None


def program(arch: str, errno: int = 1) -> list[tuple[int, int, int, int]]:
    """The filter for ``arch`` as (code, jt, jf, k) instructions (module docstring); ``errno``:
    what a refused call returns (EPERM)."""
    column = 0 if arch == "x86_64" else 1
    numbers = sorted({numbers[column] for numbers in REFUSED.values()})
    deny = (RET_K, 0, 0, RET_ERRNO | errno)
    allow = (RET_K, 0, 0, RET_ALLOW)
    refuse_connect = (RET_K, 0, 0, RET_ERRNO | ECONNREFUSED)
    # the tail, from its end: [..., allow, deny, refuse_connect, load arg0, is AF_UNIX?, allow, deny]
    checks = len(numbers)
    body: list[tuple[int, int, int, int]] = [(LD_W_ABS, 0, 0, OFFSET_ARCH),
                                             (JEQ_K, 1, 0, AUDIT_ARCH[arch]),
                                             deny,
                                             (LD_W_ABS, 0, 0, OFFSET_NR)]
    if arch == "x86_64":
        body.append((JGE_K, checks + 3, 0, X32_SYSCALL_BIT))  # to the deny after allow
    body.append((JEQ_K, checks + 4, 0, SOCKET[column]))  # to "load arg0"
    body.append((JEQ_K, checks + 2, 0, CONNECT[column]))  # to refuse_connect
    for i, number in enumerate(numbers):
        body.append((JEQ_K, checks - i, 0, number))  # to the deny after allow
    return body + [allow, deny, refuse_connect,
                   (LD_W_ABS, 0, 0, OFFSET_ARG0), (JEQ_K, 0, 1, AF_UNIX), allow, deny]


def pack(instructions: list[tuple[int, int, int, int]]) -> bytes:
    """``struct sock_filter[]``: u16 code, u8 jt, u8 jf, u32 k each."""
    return b"".join(struct.pack("=HBBI", *ins) for ins in instructions)


def run(instructions: list[tuple[int, int, int, int]], nr: int, arch: int, arg0: int = 0) -> int:
    """What the filter returns for a syscall ``nr`` of ``arch`` whose first argument is ``arg0``:
    a small interpreter of the instructions used here, for tests (the kernel runs the real thing)."""
    data = {OFFSET_NR: nr, OFFSET_ARCH: arch, OFFSET_ARG0: arg0}
    pc, acc = 0, 0
    while True:
        code, jt, jf, k = instructions[pc]
        if code == LD_W_ABS:
            acc = data[k]
        elif code == RET_K:
            return k
        elif code in (JEQ_K, JGE_K):
            taken = acc == k if code == JEQ_K else acc >= k
            pc += jt if taken else jf
        else:
            raise ValueError(f"instruction {code:#x} is not one this filter uses")
        pc += 1


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


class _Fprog(ctypes.Structure):
    _fields_ = [("len", ctypes.c_ushort), ("filter", ctypes.c_void_p)]


def available() -> bool:
    """Whether this kernel takes a filter whose action is an errno (Linux >= 3.5 with seccomp on)
    and this module knows the machine."""
    arch = machine()
    if arch is None:
        return False
    action = ctypes.c_uint32(RET_ERRNO)
    result = _libc.syscall(ctypes.c_long(_SECCOMP_SYSCALL[arch]), ctypes.c_uint(_GET_ACTION_AVAIL),
                           ctypes.c_uint(0), ctypes.byref(action))
    return result == 0


def install() -> None:
    """Install the filter on every thread of this process (no_new_privs must be set)."""
    arch = machine()
    if arch is None:
        raise SeccompError(0, f"seccomp: no filter for machine {platform.machine()!r}")
    code = pack(program(arch))
    buffer = ctypes.create_string_buffer(code, len(code))
    prog = _Fprog(len(code) // 8, ctypes.cast(buffer, ctypes.c_void_p))
    result = _libc.syscall(ctypes.c_long(_SECCOMP_SYSCALL[arch]), ctypes.c_uint(_SET_MODE_FILTER),
                           ctypes.c_uint(_FILTER_FLAG_TSYNC), ctypes.byref(prog))
    if result != 0:
        err = ctypes.get_errno()
        raise SeccompError(err, f"seccomp: {os.strerror(err) if result < 0 else f'thread {result} refused TSYNC'}")
