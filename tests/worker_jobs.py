"""Jobs for tests/worker/test_worker.py: each runs in a worker's child process and misbehaves on purpose."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys
import time


def echo(payload):
    return {"got": payload, "pid": os.getpid()}


def target(_payload=None):
    """A target job's reply (``loop.jobs.target_job``) without asking torch: the interpreter's."""
    return {"gpu": "interpreter", "capability": 0, "triton_version": "test", "copy_gbps": None, "meaningful": False,
            "pid": os.getpid()}


def pid(_payload=None):
    return os.getpid()


def raise_value_error(payload):
    raise ValueError(f"bad payload {payload!r}\nsecond line")


def compile_type_error(_payload=None):
    """A pointer plus a float: Triton's frontend rejects it, no GPU needed."""
    import triton
    import triton.language as tl
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    @triton.jit
    def bad(x_ptr):
        x = tl.load(x_ptr)
        tl.store(x_ptr + 1.5, x)

    triton.compile(ASTSource(fn=bad, signature={"x_ptr": "*fp32"}, constexprs={}),
                   target=GPUTarget("cuda", 90, 32))


def segfault(_payload=None):
    print("about to read address 0", flush=True)
    ctypes.string_at(0)


def hang(_payload=None):
    time.sleep(100)


def hang_with_grandchild(_payload=None):
    """Starts a sleeping grandchild, records its pid in the file named by the payload, hangs."""
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(100)"])
    with open(_payload, "w") as f:
        f.write(str(child.pid))
    time.sleep(100)


def cuda_fault(_payload=None):
    raise RuntimeError("CUDA error: an illegal memory access was encountered")


def env(names):
    return {name: os.environ.get(name) for name in names} | {
        "dont_write_bytecode": sys.flags.dont_write_bytecode,
    }


def stderr_then_fail(_payload=None):
    os.write(2, b"C-level stderr line\n")  # as a crash in C code would write it
    print("python stdout line")
    raise KeyError("after output")


def flood_then_fail(_payload=None):
    print("first words")
    print("x" * 100_000)  # more than the kept tail: the start goes, the end stays
    print("last words", file=sys.stderr)
    raise KeyError("after a flood")


def unpicklable_result(_payload=None):
    return lambda: None


def exit_code(code):
    os._exit(code)


def interpreted_kernel(offset):
    """Runs a Triton kernel on the CPU (the worker's env sets TRITON_INTERPRET=1) and returns
    its output; an ``offset`` far past the tensor reads out of bounds."""
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def shift(x_ptr, out_ptr, OFFSET: tl.constexpr, BLOCK: tl.constexpr):
        offs = tl.arange(0, BLOCK)
        tl.store(out_ptr + offs, tl.load(x_ptr + offs + OFFSET) * 2)

    x = torch.arange(8, dtype=torch.float32)
    out = torch.zeros(8)
    shift[(1,)](x, out, OFFSET=offset, BLOCK=8)
    return {"out": out.tolist(), "interpreted": type(shift).__name__}


def exit_slowly(seconds):
    """The child, when it stops, takes ``seconds`` to exit (as one holding CUDA does)."""
    import atexit

    atexit.register(time.sleep, seconds)
    return os.getpid()


def at_exit_writes(path):
    """The child, when it stops, writes ``path`` from an exit function (as a replay's variant
    folder is removed, ``replay.kernel._variant_dir``)."""
    import atexit
    from pathlib import Path

    atexit.register(Path(path).write_text, "exit functions ran")
    return os.getpid()


class _RunsWhenLoaded:
    """Unpickled, calls ``os.system`` (where it is loaded): what a payload puts in a reply."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (os.system, (f"echo ran > {self.path}",))


def reply_that_runs_code(payload):
    """A value whose unpickling runs a shell command writing ``payload`` (a path)."""
    return {"fine": 1, "evil": _RunsWhenLoaded(payload)}


def failure_that_runs_code(payload):
    """A raw 'failed' reply whose Failure hides the same reduction (sent on the pipe itself)."""
    from multiprocessing.connection import Connection

    from tritune.worker.failures import Failure

    out = Connection(int(sys.argv[2]), readable=False)
    out.send(("failed", Failure("error", "x", _RunsWhenLoaded(payload)), 0.0))
    time.sleep(30)


def huge_reply(payload):
    """A reply of ``payload`` bytes."""
    return b"x" * payload


def numpy_scalar(_payload=None):
    import numpy

    return numpy.float64(1.5)


def imported(names):
    """Which of ``names`` this child has imported, and the folder it keeps bytecode in."""
    return {"modules": {name: name in sys.modules for name in names}, "pycache_prefix": sys.pycache_prefix,
            "pid": os.getpid()}
