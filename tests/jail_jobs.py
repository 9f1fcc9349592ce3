"""Jobs for tests/worker/test_worker_jail.py: each runs in a (jailed) worker and tries one escape, or one
thing a jailed worker must still do. An escape job returns what it got, or raises what stopped it."""

from __future__ import annotations

import ctypes
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

SLEEPER = "import time; time.sleep(300)"


def read_file(path):
    with open(path, "rb") as f:
        return f.read()


def list_dir(path):
    return sorted(os.listdir(path))


def write_file(path):
    with open(path, "w") as f:
        f.write("escaped")
    return path


def write_in_scratch(_payload=None):
    with open("here.txt", "w") as f:
        f.write("fine")
    fd, name = tempfile.mkstemp()
    os.close(fd)
    return {"cwd": os.getcwd(), "tmp": name, "read": open("here.txt").read()}


def connect_tcp(port):
    with socket.create_connection(("127.0.0.1", port), timeout=2) as s:
        s.sendall(b"escaped")
    return "connected"


def connect_tcp_socket_allowed(port):
    """The socket made, connect refused: what Landlock alone stops (seccomp off)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.settimeout(2)
        s.connect(("127.0.0.1", port))
        s.sendall(b"escaped")
    finally:
        s.close()
    return "connected"


def send_udp(port):
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.sendto(b"escaped", ("127.0.0.1", port))
    return "sent"


def connect_unix(path):
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
        s.connect(path)
        s.sendall(b"escaped")
    return "connected"


def proc_file(path):
    """``/proc/PID/environ`` or ``mem`` of another process, by name (``PPID`` is the parent)."""
    path = path.replace("PPID", str(os.getppid()))
    with open(path, "rb") as f:
        if path.endswith("/mem"):
            f.seek(0x400000)
        return f.read(4096)


def ptrace_parent(_payload=None):
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    pid = os.getppid()
    if libc.ptrace(ctypes.c_long(16), ctypes.c_long(pid), None, None) != 0:  # PTRACE_ATTACH
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    libc.ptrace(ctypes.c_long(17), ctypes.c_long(pid), None, None)  # PTRACE_DETACH
    return "attached"


def kill_parent(_payload=None):
    os.kill(os.getppid(), signal.SIGTERM)
    return "sent"


def setsid(_payload=None):
    """``setsid()`` in a fork (the worker itself leads its session already, where it fails anyway)."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
        except OSError as exc:
            os._exit(exc.errno)
        os._exit(0)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise OSError(code, os.strerror(code))
    return "new session"


def detach_with_setsid(marker):
    """``setsid sleep 300 &``: the setsid tool, then Popen's own new session, then a plain child."""
    found = {}
    try:
        subprocess.Popen(["setsid", sys.executable, "-c", SLEEPER, marker])
        found["setsid"] = "started"
    except OSError as exc:
        found["setsid"] = str(exc)
    try:
        subprocess.Popen([sys.executable, "-c", SLEEPER, marker], start_new_session=True)
        found["start_new_session"] = "started"
    except (OSError, subprocess.SubprocessError) as exc:
        found["start_new_session"] = str(exc)
    subprocess.Popen([sys.executable, "-c", SLEEPER, marker])  # in the group: must die after the call
    time.sleep(0.3)  # the setsid tool forks before it tries
    return found


def fork_setsid(marker):
    """``os.setsid()`` in a fork, then exec a sleeper: its session is new only if setsid worked."""
    pid = os.fork()
    if pid == 0:
        try:
            os.setsid()
        except OSError:
            pass
        os.execv(sys.executable, [sys.executable, "-c", SLEEPER, marker])
    return pid


def double_fork(marker):
    """The daemon's double fork: the grandchild is orphaned, reparented away from the worker."""
    pid = os.fork()
    if pid == 0:
        if os.fork() == 0:
            try:
                os.setsid()
            except OSError:
                pass
            os.execv(sys.executable, [sys.executable, "-c", SLEEPER, marker])
        os._exit(0)
    os.waitpid(pid, 0)
    return "forked"


def capabilities(_payload=None):
    from tritune.worker.jail import capabilities as caps

    status = open("/proc/self/status").read()
    nnp = next(line.split()[1] for line in status.splitlines() if line.startswith("NoNewPrivs:"))
    secc = next(line.split()[1] for line in status.splitlines() if line.startswith("Seccomp:"))
    return {**caps(), "NoNewPrivs": int(nnp), "Seccomp": int(secc), "uid": os.getuid()}


def torch_and_triton(_payload=None):
    import torch
    import triton

    return {"torch": torch.__version__, "triton": triton.__version__, "env": _cache_env()}


def _cache_env():
    from tritune import config

    return {name: config.environment().get(name) for name in (config.ENV_TRITON_CACHE, config.ENV_INDUCTOR_CACHE,
                                                                 config.ENV_TMPDIR)}


def interpreted_add(_payload=None):
    """A Triton kernel on the interpreter (the worker's env sets TRITON_INTERPRET=1)."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, out_ptr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs) + 1)

    x = torch.arange(16, dtype=torch.float32)
    out = torch.empty_like(x)
    add_one[(1,)](x, out, BLOCK=16)
    return out.tolist()


def compile_for_h100(_payload=None):
    """``triton.compile`` for sm_90 on this CPU: ptxas from Triton's package, the cache written."""
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from triton.runtime.jit import JITFunction

    from jail_kernel import scale

    kernel = JITFunction(scale)
    compiled = triton.compile(ASTSource(fn=kernel, signature={"x_ptr": "*fp32", "out_ptr": "*fp32", "n": "i32"},
                                        constexprs={"BLOCK": 128}), target=GPUTarget("cuda", 90, 32))
    return {"kinds": sorted(compiled.asm), "cache": _cache_env()}


def compile_for_h100_files(_payload=None):
    """``compile_for_h100``, and the files of the worker's Triton cache before and after it: none
    new when the binary was already there (built by another worker sharing the cache)."""
    import os

    from tritune import config

    def files():
        found = set()
        for folder, _, names in os.walk(config.environment()[config.ENV_TRITON_CACHE]):
            found.update(os.path.join(folder, name) for name in names)
        return found

    before = files()
    compiled = compile_for_h100()
    return {**compiled, "before": sorted(before), "after": sorted(files())}


def ncu_refusal(_payload=None):
    """Why ncu will not run here (a jailed worker): the kind of ``NcuUnavailable``."""
    from tritune.profile.ncu import NcuUnavailable
    from tritune.profile.runner import run_ncu

    try:
        run_ncu(None, "/nonexistent")
    except NcuUnavailable as exc:
        return exc.kind
    return "ran"


def gpu_add(_payload=None):
    """A Triton kernel compiled (its launcher by gcc) and launched on the GPU, jailed."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def add_one(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(out_ptr + offs, tl.load(x_ptr + offs, mask=mask) + 1, mask=mask)

    x = torch.arange(1000, device="cuda", dtype=torch.float32)
    out = torch.empty_like(x)
    add_one[(triton.cdiv(1000, 256),)](x, out, 1000, BLOCK=256)
    torch.cuda.synchronize()
    return {"ok": bool(torch.equal(out, x + 1)), "gpu": torch.cuda.get_device_name(), "cache": _cache_env()}


def try_gpu_lock(path):
    """Take the GPU lock at ``path`` exclusively without waiting; whether it was free."""
    from tritune.worker.gpulock import GpuLock

    lock = GpuLock(path)
    try:
        got = lock.acquire(True, blocking=False)
        lock.release()
        return got
    finally:
        lock.close()
