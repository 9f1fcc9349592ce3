"""``harvest``: compile a model with torch.compile on the GPU, run one step, keep its kernels.

Steps:
1. ``prepare_environment``: fresh ``TORCHINDUCTOR_CACHE_DIR`` and ``TRITON_CACHE_DIR`` (a warm
   cache would skip compilation and hide kernels), ``TORCHINDUCTOR_BENCHMARK_KERNEL=1`` (every
   kernel module becomes standalone: ``get_args()``, ``call()``, ``kernel_num_gb``) and
   ``TORCHINDUCTOR_FORCE_DISABLE_CACHES=1`` (no FX-graph or autotune cache hits; torch 2.11 writes
   ``force_disable_caches: True`` into every kernel's inductor_meta, seen in
   ``examples/inductor_harvested``). They are set in the environment, so Inductor's compile
   workers see them, and on ``torch.compiler.config`` / ``torch._inductor.config`` when already
   imported (they read the environment once, at import: ``import torch`` imports the first).
2. ``model_step``: build the model (``tritune.inductor.models``), ``torch.compile`` it, run one
   training step (forward + backward) or one inference step (forward, no grad).
3. Copy every kernel module from the Inductor cache to ``DIR/modules/<kernel>_<hash>.py``.
4. ``specs_from_modules`` on the copies -> ``DIR/launches.jsonl`` (+ ``sources/``, ``tensors/``).
   Kernels Inductor launched during the step keep the config its autotuner chose then.

Steps 3 and 4 write into a temporary directory beside DIR; its capture replaces DIR's
(``launches.jsonl``, ``sources/``, ``tensors/``, ``modules/``) only once complete, so a model that
fails to build or compile leaves DIR as it was (``--force`` once deleted DIR's capture first).

GPU only: ``HarvestError`` (exit status 2 in the CLI) on a machine without CUDA, checked with the
model's name before anything is written.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

from tritune import config
from tritune.capture.program import MODULES, install, stage_beside
from tritune.config import ENV_BENCHMARK_KERNEL, ENV_DISABLE_CACHES, ENV_INDUCTOR_CACHE, ENV_TRITON_CACHE
from tritune.inductor.models import ModelError, build, default_loss, resolve

MODES = ("train", "infer")
DTYPES = ("float32", "float16", "bfloat16")
DEFAULT_DTYPE = {"train": "float32", "infer": "float16"}  # seed 000: BERT train fp32, infer fp16

Log = Callable[[str], None]


class HarvestError(RuntimeError):
    """Harvest cannot run here or with these arguments; one line."""


@dataclasses.dataclass
class Harvest:
    out_dir: Path
    modules: list[Path]
    specs: list  # LaunchSpec
    errors: list  # FileError


def require_cuda() -> None:
    import torch

    if not torch.cuda.is_available():
        raise HarvestError(f"no CUDA GPU here (torch {torch.__version__}): harvest compiles and runs the "
                           "model with torch.compile on a GPU; run it on the GPU machine")


def check(model: str, mode: str = "train", dtype: str | None = None) -> None:
    """What can fail before the model runs, checked before anything is written: a CUDA GPU,
    the model's name (a ``MODULE:CALLABLE`` is imported), the mode and the dtype."""
    if mode not in MODES:
        raise HarvestError(f"mode {mode!r}: expected one of {', '.join(MODES)}")
    if (dtype or DEFAULT_DTYPE[mode]) not in DTYPES:
        raise HarvestError(f"dtype {dtype!r}: expected one of {', '.join(DTYPES)}")
    require_cuda()
    try:
        resolve(model)
    except ModelError as exc:
        raise HarvestError(str(exc)) from None


def prepare_environment(work_dir: str | Path) -> dict[str, str]:
    """Fresh caches under ``work_dir`` and standalone kernel modules; returns what was set."""
    work = Path(work_dir)
    env = {
        ENV_INDUCTOR_CACHE: str(work / "inductor"),
        ENV_TRITON_CACHE: str(work / "triton"),
        ENV_BENCHMARK_KERNEL: "1",
        ENV_DISABLE_CACHES: "1",
    }
    for key in (ENV_INDUCTOR_CACHE, ENV_TRITON_CACHE):
        Path(env[key]).mkdir(parents=True, exist_ok=True)
    config.update(env)  # read by torch/Triton here and in Inductor's compile workers
    # Config modules imported before this read their environment already (`import torch` imports
    # torch.compiler.config, where force_disable_caches lives; Inductor's is an alias of it).
    compiler_config = sys.modules.get("torch.compiler.config")
    if compiler_config is not None:
        compiler_config.force_disable_caches = True
    inductor_config = sys.modules.get("torch._inductor.config")
    if inductor_config is not None:
        inductor_config.benchmark_kernel = True
        inductor_config.force_disable_caches = True
    return env


def model_step(model: str, mode: str, batch: int, dtype: str | None = None, log: Log | None = None) -> None:
    """torch.compile ``model`` and run one step (train: forward + backward; infer: no grad)."""
    import torch

    check(model, mode, dtype)
    dtype_name = dtype or DEFAULT_DTYPE[mode]
    log = log or (lambda _: None)
    factory = resolve(model)
    log(f"building {model} ({mode}, batch {batch}, {dtype_name})")
    work = build(factory, batch=batch, dtype=getattr(torch, dtype_name), device="cuda", mode=mode)
    log("compiling with torch.compile and running one step (minutes for a large model)")
    if mode == "train":
        work.model.train()
        loss_fn = work.loss_fn or default_loss
        step = torch.compile(lambda: loss_fn(work.forward()))
        step().backward()
    else:
        work.model.eval()
        compiled = torch.compile(work.model)
        with torch.no_grad():
            compiled(**work.inputs) if isinstance(work.inputs, dict) else compiled(*work.inputs)
    torch.cuda.synchronize()


def collect_modules(cache_dir: str | Path, out_dir: str | Path) -> dict[Path, str]:
    """Copy the kernel modules under ``cache_dir`` to ``out_dir/modules``; copy -> original path."""
    from tritune.capture.inductor_modules import KERNEL_DEF, kernel_files

    target = Path(out_dir) / MODULES
    target.mkdir(parents=True, exist_ok=True)
    copies = {}
    for original in sorted(kernel_files(cache_dir)):
        text = Path(original).read_text()
        name = KERNEL_DEF.search(text).group(1)
        # kernel names restart in every graph (forward and backward both have ..._0): add the hash
        copy = target / f"{name}_{Path(original).stem[:10]}.py"
        shutil.copyfile(original, copy)
        copies[copy] = original
    return copies


def harvest(model: str, out_dir: str | Path, *, mode: str = "train", batch: int = 8,
            dtype: str | None = None, log: Log | None = None, keep_cache: bool = False) -> Harvest:
    """Steps 1-4 of the module docstring; ``log`` gets one line per step and per module. A
    capture already in ``out_dir`` is replaced once the new one is complete."""
    log = log or (lambda _: None)
    out = Path(out_dir)
    check(model, mode, dtype)  # before touching the environment: `import torch` reads none of it
    stage = stage_beside(out, "harvest")
    work = Path(tempfile.mkdtemp(prefix="tritune-harvest-"))
    try:
        env = prepare_environment(work)
        try:
            model_step(model, mode, batch, dtype, log)
        except ModelError as exc:
            raise HarvestError(str(exc)) from None
        from tritune.capture.inductor_modules import specs_from_modules, tuned_autotuners

        copies = collect_modules(env[ENV_INDUCTOR_CACHE], stage)
        if not copies:
            raise HarvestError(f"torch.compile generated no Triton kernel module for {model} ({mode})")
        log(f"{len(copies)} kernel modules -> {out / MODULES}")
        settled = tuned_autotuners()
        tuned = {os.path.realpath(copy): settled[os.path.realpath(original)]
                 for copy, original in copies.items() if os.path.realpath(original) in settled}
        log(f"{len(tuned)} of them with the config Inductor chose during the step, "
            f"{len(copies) - len(tuned)} autotuned again on their own inputs")
        done = [0]

        def progress(path: str, error: str | None) -> None:
            done[0] += 1
            log(f"[{done[0]}/{len(copies)}] {Path(path).name}" + (f": {error}" if error else ""))

        specs, errors = specs_from_modules(sorted(copies), stage, launch=True, tuned=tuned, progress=progress)
        specs = relocate(stage, out, specs)
        install(stage, out)
        errors = [dataclasses.replace(e, file=str(out / MODULES / Path(e.file).name)) for e in errors]
        return Harvest(out, [out / MODULES / copy.name for copy in sorted(copies)], specs, errors)
    finally:
        shutil.rmtree(stage, ignore_errors=True)
        if not keep_cache:
            shutil.rmtree(work, ignore_errors=True)
        else:
            log(f"caches kept in {work}")


def relocate(stage: Path, out: Path, specs: list) -> list:
    """The specs of ``stage``'s capture with their module files (``source_file``, an absolute
    path) where ``install`` will put them, rewritten into its ``launches.jsonl``."""
    from tritune.capture.spec import LAUNCHES, write_launches

    path = stage / LAUNCHES
    if not path.exists():  # no module gave a spec
        return specs
    with path.open() as handle:
        header = json.loads(handle.readline())
    header.pop("tritune_launches", None)
    staged = str(stage.resolve())
    for spec in specs:
        if spec.source_file.startswith(staged + os.sep):
            spec.source_file = str(out.resolve() / spec.source_file[len(staged) + 1:])
    write_launches(stage, specs, **header)
    return specs
