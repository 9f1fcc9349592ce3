"""Inductor kernel modules (written with ``TORCHINDUCTOR_BENCHMARK_KERNEL=1``) as launch specs.

Such a module holds one ``@triton.jit`` kernel under a ``CachingAutotuner`` and is standalone:
``get_args()`` makes inputs of the real shapes (``rand_strided``), ``call(args)`` launches.

``specs_from_modules(paths, out_dir)``:
  on a GPU   imports each module and runs ``call(get_args())`` under the Inductor capture shim,
             so the spec holds the config Inductor's autotuner picked (``config_from``
             ``"autotuned"``, or ``"only"`` for a single config) and the launched grid. A kernel
             whose autotuner Inductor already settled in this process (``tuned``: during the
             model's step) launches through that autotuner, so Inductor's choice is what gets
             recorded (``"inductor"``).
  on a CPU   (no CUDA, or ``TRITON_INTERPRET=1``) launches nothing: ``get_args()`` runs with
             ``rand_strided`` making host tensors (integer ones zero-filled as Inductor does),
             the config is the kernel's first (``config_from="first"``: computed by this
             machine's torch from the module's device properties, which may differ from what the
             GPU machine's torch would try) and the grid comes from ``grid_for``.
Specs go through the capture ``Recorder`` (source copied to ``DIR/sources``, integer inputs
saved to ``DIR/tensors``) and are merged into ``DIR/launches.jsonl``. A module that fails is a
one-line ``FileError`` and the others go on.

Also here, shared with ``benchmarks/inductor_passes.py``: ``kernel_files`` (find kernel modules
in an Inductor cache), ``loaded_modules``, ``tuned_autotuners`` and ``autotuner_of``.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any, Callable, Iterable
from unittest import mock

from tritune.capture._jit_shim import is_interpreted
from tritune.capture.inductor_spec import launch_spec
from tritune.errors import one_line
from tritune.imports import FileError, import_file
from tritune.model.launch import LaunchSpec, SpecError

KERNEL_DEF = re.compile(r"^def (triton_([a-z]+)_\w+)\(", re.MULTILINE)

Progress = Callable[[str, "str | None"], None]  # (file, error or None) after each module


def kernel_files(cache_dir: str | Path) -> set[str]:
    """Inductor kernel modules under ``cache_dir`` (not the graph wrappers, which embed kernel
    sources as strings and hold an ``AsyncCompile``)."""
    found = set()
    for path in Path(cache_dir).rglob("*.py"):
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError):
            continue
        if is_kernel_module(text):
            found.add(str(path.resolve()))
    return found


def is_kernel_module(text: str) -> bool:
    return ("triton_heuristics" in text and "def get_args" in text and "AsyncCompile" not in text
            and KERNEL_DEF.search(text) is not None)


def loaded_modules() -> dict[str, Any]:
    """Modules Inductor already loaded in this process, by real path (their autotuners are tuned)."""
    candidates = list(sys.modules.values())
    try:
        from torch._inductor.codecache import PyCodeCache

        for attr in ("modules", "modules_no_attr"):
            held = getattr(PyCodeCache, attr, [])
            candidates += list(held.values() if isinstance(held, dict) else held)
    except Exception:  # noqa: BLE001 - an Inductor without PyCodeCache: sys.modules is enough
        pass
    found = {}
    for module in candidates:
        try:
            path = getattr(module, "__file__", None)
        except Exception:  # noqa: BLE001 - lazy modules may refuse attribute access
            continue
        if isinstance(path, str):
            found[os.path.realpath(path)] = module
    return found


def tuned_autotuners() -> dict[str, Any]:
    """Inductor's live ``CachingAutotuner``s in this process, by the real path of their kernel
    module. Kernels compiled in Inductor's worker processes come back pickled: the parent never
    imports their module, so they are found in the globals of the graph wrappers that launch them
    (and of kernel modules compiled in the parent)."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    found = {}
    with warnings.catch_warnings():  # isinstance on some modules' deprecated globals warns
        warnings.simplefilter("ignore")
        for module in loaded_modules().values():
            try:
                values = list(vars(module).values())
            except TypeError:
                continue
            for value in values:
                filename = getattr(value, "filename", None) if isinstance(value, CachingAutotuner) else None
                if isinstance(filename, str):
                    found[os.path.realpath(filename)] = value
    return found


def autotuner_of(module: Any) -> Any:
    """The module's ``CachingAutotuner`` (the kernel named by its ``def triton_...``)."""
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    match = KERNEL_DEF.search(Path(module.__file__).read_text())
    tuner = getattr(module, match.group(1), None) if match else None
    if isinstance(tuner, CachingAutotuner):
        return tuner
    for value in vars(module).values():
        if isinstance(value, CachingAutotuner):
            return value
    raise SpecError("no Inductor kernel (CachingAutotuner) in the module")


def can_launch() -> bool:
    """True where Inductor modules can really run: a CUDA device is present."""
    import torch

    return torch.cuda.is_available()


def interpreted(tuner: Any) -> bool:
    """Under ``TRITON_INTERPRET=1`` the kernel is an ``InterpretedFunction``: never launched here."""
    return is_interpreted(tuner.fn)


def specs_from_modules(paths: Iterable[str | Path], out_dir: str | Path, *, launch: bool | None = None,
                       tuned: dict[str, Any] | None = None,
                       progress: Progress | None = None) -> tuple[list[LaunchSpec], list[FileError]]:
    """Launch specs of the kernel modules ``paths`` written to ``out_dir`` (see the module doc).

    ``launch``: run each module (GPU) or build its spec without launching (CPU); default: run
    where ``can_launch()``. ``tuned``: real path of a module -> the ``CachingAutotuner`` Inductor
    already settled for its kernel (``tuned_autotuners``); the module then launches through it.
    Returns the merged specs of ``out_dir`` and one error per module that failed.
    """
    from tritune.capture import inductor
    from tritune.capture.recorder import Recorder, finalize
    from tritune.capture.skipped import Skipped

    launch = can_launch() if launch is None else launch
    tuned = tuned or {}
    recorder = Recorder(out_dir)
    errors: list[FileError] = []
    for path in paths:
        path, error = str(path), None
        try:
            module = import_file(path)
            tuner = autotuner_of(module)
            settled = tuned.get(os.path.realpath(path))
            if launch and not interpreted(tuner):
                # call() looks the kernel up by name at call time; the module is shared (imported
                # once per process), so the settled autotuner stands in only for this launch
                swap = (mock.patch.object(module, tuner.fn.__name__, settled, create=True)
                        if settled is not None else contextlib.nullcontext())
                with swap:
                    _launch(module, path, recorder, inductor)
            else:
                spec, values = host_spec(module, tuner, path)
                recorder.add(spec, values)
        except Exception as exc:  # noqa: BLE001 - one module failing must not stop the others
            error = one_line(exc)
            errors.append(FileError(path, error))
            # named in skipped.jsonl too: the capture says which kernel modules it lacks, and why
            recorder.skip(None, Skipped(Path(path).stem, "", path, "error", error))
        if progress is not None:
            progress(path, error)
    recorder.close()
    return finalize(out_dir, source="inductor modules"), errors


def _launch(module: Any, path: str, recorder: Any, inductor: Any) -> None:
    """Run the module once on its own ``get_args()`` with the capture shim in place."""
    import torch

    seen: list[LaunchSpec] = []

    def add(spec: LaunchSpec, values: dict) -> None:
        _name_after(spec, path)  # the module as the user has it, not a temporary cache path
        seen.append(recorder.add(spec, values))

    with inductor.recording(add):
        torch.manual_seed(0)
        module.call(module.get_args())
        torch.cuda.synchronize()
    if not seen:
        raise SpecError("call(get_args()) launched no Inductor kernel")


def host_spec(module: Any, tuner: Any, path: str) -> tuple[LaunchSpec, dict]:
    """The spec of the module's kernel at its first config, built on the host without launching."""
    # get_args() looks the name up at call time; the module is shared, so only for this call
    with mock.patch.object(module, "rand_strided", host_rand_strided):
        args = module.get_args()
    props = getattr(tuner, "device_props", None)
    device = f"{props.type}:{props.index}" if props is not None and props.index is not None else None
    # an autotuner that compiled its configs has dropped them (torch 2.11+): its results remain
    configs = (list(tuner.configs or ()) or [r.config for r in getattr(tuner, "compile_results", None) or ()]
               or [launcher.config for launcher in getattr(tuner, "launchers", None) or ()])
    if not configs:
        raise SpecError("the kernel has no config to build a spec from")
    spec, values = launch_spec(tuner, args, configs[0], config_from="first", device=device)
    return _name_after(spec, path), values


def _name_after(spec: LaunchSpec, path: str) -> LaunchSpec:
    """Name the spec's module after its file: the import name is a throwaway (a hash, or ours)."""
    spec.source_file = str(Path(path).resolve())
    spec.module = Path(path).stem
    return spec


def host_rand_strided(size, stride, dtype=None, device="cpu", extra_size: int = 0):
    """``torch._dynamo.testing.rand_strided`` on the host, uninitialized for floats (their
    values do not matter to a spec) and zero for integers (as Inductor fills them)."""
    import torch

    from tritune.model.launch import min_storage_size

    dtype = dtype or torch.float32
    needed = extra_size + min_storage_size(size, stride)
    make = torch.empty if (dtype.is_floating_point or dtype.is_complex) else torch.zeros
    return torch.as_strided(make(needed, dtype=dtype, device="cpu"), size, stride)
