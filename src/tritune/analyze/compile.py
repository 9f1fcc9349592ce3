"""Compile one kernel for a GPU target on the CPU: ``triton.compile(ASTSource(...), target=...)``.

Analysis compiles into a tritune-private Triton cache (a temporary directory per process,
removed at exit), so it never reads stale binaries from, nor writes into, the user's Triton
cache. Any stages-inspection hook (tritune's passes included) is switched off while compiling:
the analysis reports the kernel as Triton builds it, and ``rewrites`` reports what passes would do.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import io
import shutil
import tempfile

import triton
from triton import knobs
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from triton.runtime.jit import JITFunction

from tritune.analyze.launch import Launch

WARP_SIZE = 32


@dataclasses.dataclass(frozen=True)
class Compiled:
    name: str
    capability: int
    ttir: str
    ttgir: str
    ptx: str
    cubin: bytes
    shared_bytes: int
    num_warps: int
    num_stages: int
    enable_fp_fusion: bool


def compile_kernel(fn: JITFunction, launch: Launch, capability: int) -> Compiled:
    source = ASTSource(fn, signature=launch.signature, constexprs=launch.constexprs, attrs=launch.attrs)
    options = {"num_warps": launch.num_warps, "num_stages": launch.num_stages}
    # Triton prints ptxas failures (the whole PTX) to stdout; the exception says enough, and
    # stdout belongs to the report (--json).
    with _private_cache(), contextlib.redirect_stdout(io.StringIO()):
        compiled = triton.compile(source, target=GPUTarget("cuda", capability, WARP_SIZE), options=options)
    metadata = compiled.metadata
    return Compiled(
        name=metadata.name,
        capability=capability,
        ttir=compiled.asm["ttir"],
        ttgir=compiled.asm["ttgir"],
        ptx=compiled.asm["ptx"],
        cubin=compiled.asm["cubin"],
        shared_bytes=int(metadata.shared),
        num_warps=int(metadata.num_warps),
        num_stages=int(metadata.num_stages),
        enable_fp_fusion=bool(metadata.enable_fp_fusion),
    )


_cache_dir: str | None = None


def analysis_cache_dir() -> str:
    global _cache_dir
    if _cache_dir is None:
        _cache_dir = tempfile.mkdtemp(prefix="tritune-analyze-cache-")
        atexit.register(shutil.rmtree, _cache_dir, ignore_errors=True)
    return _cache_dir


@contextlib.contextmanager
def _private_cache():
    with knobs.cache.scope(), knobs.runtime.scope():
        knobs.cache.dir = analysis_cache_dir()
        knobs.runtime.add_stages_inspection_hook = None
        yield
