"""Whether this machine has a GPU Triton can launch on, decided once; where it has none, the
commands that launch kernels run them under Triton's interpreter (``TRITON_INTERPRET=1``).

Triton picks its driver by asking torch (``torch.cuda.is_available()``, its NVIDIA and AMD
drivers alike); with none, every launch ends in "0 active drivers ([]). There should only be
one." ``present()`` answers the same question without importing torch or initialising CUDA in
this process (the parent never does: ``loop.lanes.visible_gpus``): a torch built without CUDA or
ROCm (its ``torch/version.py``, read as text), ``CUDA_VISIBLE_DEVICES`` set to none, no CUDA
driver library to load (NVIDIA) or no ``/dev/kfd`` (AMD): no GPU.

``interpreted_without_gpu(say)`` is what a command runs in (``commands.checks.runs_kernels``):
under ``TRITON_INTERPRET=1`` already, or on a GPU, nothing changes; without a GPU it sets
``TRITON_INTERPRET=1`` (``config.override``: for this process and every process it starts)
until the command ends, and the line saying so is said by ``announce()`` just before the first
process that may launch a kernel starts (``boot.run``: the user's program; a ``Worker``): a
command refused on its inputs says that alone, in one line. Where the user set
``TRITON_INTERPRET`` to something else (``0``), it is left alone: one line says to set it to 1,
and ``NoGPU`` is raised. Standard library only.
"""

from __future__ import annotations

import ast
import contextlib
import ctypes
import functools
import importlib.util
import os
from pathlib import Path
from typing import Callable, Iterator

from tritune import config

CUDA_LIBRARY = "libcuda.so.1"  # the driver's library (``worker.cuda_driver`` opens the same)
ROCM_DEVICE = "/dev/kfd"  # the AMD kernel driver's device, present where ROCm can run
RUNNING = "no GPU found: running under Triton's interpreter (TRITON_INTERPRET=1)"
_pending: list[Callable[[], None]] = []  # the line ``announce`` says, once


class NoGPU(RuntimeError):
    """No GPU, and ``TRITON_INTERPRET`` set to keep the interpreter off: kernels cannot run."""


@functools.lru_cache(maxsize=None)
def present() -> bool:
    """Whether Triton finds a GPU driver here (module docstring), decided once per process."""
    if config.visible_devices() == []:  # CUDA_VISIBLE_DEVICES="": torch sees no device
        return False
    build = torch_build()
    if build == "cuda":
        return _loads(CUDA_LIBRARY)
    if build == "hip":
        return os.path.exists(ROCM_DEVICE)
    return False


def torch_build() -> str | None:
    """``"cuda"``, ``"hip"`` or None (a CPU build, or no torch), from ``torch/version.py`` read
    as text (``build_of``): importing torch takes seconds, and Triton's drivers need it anyway."""
    try:
        spec = importlib.util.find_spec("torch")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    try:
        return build_of((Path(list(spec.submodule_search_locations)[0]) / "version.py").read_text())
    except (OSError, UnicodeDecodeError):
        return None


def build_of(version_py: str) -> str | None:
    """What a ``torch/version.py`` says torch was built for: ``"hip"`` where ``hip`` is set,
    ``"cuda"`` where ``cuda`` is, else None (``"2.13.0+cpu"``: ``cuda = None``)."""
    try:
        tree = ast.parse(version_py)
    except (SyntaxError, ValueError):
        return None
    values = {}
    for node in tree.body:
        target = node.target if isinstance(node, ast.AnnAssign) else (
            node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id in ("cuda", "hip") and node.value is not None:
            try:
                values[target.id] = ast.literal_eval(node.value)
            except ValueError:
                values[target.id] = "?"  # not a literal: some build; a GPU is looked for
    if values.get("hip"):
        return "hip"
    return "cuda" if values.get("cuda") else None


def _loads(library: str) -> bool:
    """Whether the dynamic loader finds ``library`` (loaded, not initialised: no ``cuInit``)."""
    try:
        ctypes.CDLL(library)
    except OSError:
        return False
    return True


@contextlib.contextmanager
def interpreted_without_gpu(say: Callable[[str], None]) -> Iterator[None]:
    """The block run under Triton's interpreter where there is no GPU (module docstring); ``say``
    gets the one line that tells the user."""
    if config.interpreting() or present():
        yield
        return
    given = config.interpret_setting()
    if given is not None:
        say(f"no GPU found, and {config.ENV_INTERPRET}={given} keeps Triton's interpreter off: "
            f"set {config.ENV_INTERPRET}=1 to run the kernels on the CPU")
        raise NoGPU(given)
    _pending.append(lambda: say(RUNNING))
    try:
        with config.override({config.ENV_INTERPRET: "1"}):
            yield
    finally:
        _pending.clear()


def announce() -> None:
    """Say that kernels run under the interpreter for want of a GPU, once, where a command set it
    (``interpreted_without_gpu``); called just before a process that may launch kernels starts."""
    while _pending:
        try:
            said = _pending.pop()
        except IndexError:  # another thread said it
            return
        said()
