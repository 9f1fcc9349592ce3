"""Run the analysis over a file or a directory: one plain dict per kernel (JSON-ready).

Every record has every key of ``RECORD_KEYS``; what could not be computed is ``None`` and
``error`` says why in one line. A file that cannot be imported gives one record with
``kernel=None``. Analysis goes on past every error.

Analysis compiles for a GPU target, so it runs with Triton's interpreter switched off even when
``TRITON_INTERPRET=1`` is exported (a CPU user running tritune's other commands has it set):
under the interpreter ``@triton.jit`` makes no ``JITFunction`` to compile.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any, Iterable, Mapping

from tritune.analyze import discover, launch, occupancy, ptx, resources, ttir
from tritune.analyze.compile import compile_kernel
from tritune.analyze.targets import DEFAULT_TARGET, SMSpec, parse_target
from tritune.errors import one_line
from tritune.imports import interpreter_off
from tritune.passes import preview

RECORD_KEYS = (
    "kernel", "file", "target", "kind",
    "num_warps", "num_stages", "constexprs", "inferred", "signature",
    "ttir_ops", "rewrites", "rewrites_error", "ptx",
    "registers", "spills", "spill_store_bytes", "spill_load_bytes", "stack_bytes", "shared_bytes",
    "occupancy", "occupancy_seed003", "occupancy_limiter",
    "error",
)

# Files above this many get a progress bar on stderr.
PROGRESS_MIN_FILES = 4
IMPORT_TIMEOUT_S = 60.0  # per file: a top level that blocks is skipped, not waited for


def analyze_path(
    path: str | Path,
    *,
    target: str | int = DEFAULT_TARGET,
    constexprs: Mapping[str, Any] | None = None,
    signature: Mapping[str, str] | None = None,
    num_warps: int | None = None,
    fast_math: bool = False,
    kernel_filter: str | None = None,
    progress: bool = False,
    timeout_s: float | None = IMPORT_TIMEOUT_S,
) -> list[dict[str, Any]]:
    """Analyse every kernel under ``path``; see ``RECORD_KEYS`` for what each dict holds.
    ``timeout_s``: how long each file's import may take (None: no limit)."""
    spec = parse_target(target)
    files = discover.python_files(path)
    records: list[dict[str, Any]] = []
    with _progress(len(files) if progress else 0) as advance, interpreter_off():
        for file in files:
            kernels, error = discover.discover_file(file, timeout_s=timeout_s)
            if error is not None:
                records.append(_record(file=error.file, target=spec.name, error=error.error))
            for kernel in kernels:
                if kernel_filter is None or kernel.name == kernel_filter:
                    records.append(analyze_kernel(
                        kernel, spec, constexprs=constexprs, signature=signature,
                        num_warps=num_warps, fast_math=fast_math))
            advance(file)
    return records


def analyze_kernel(
    kernel: discover.Kernel,
    spec: SMSpec,
    *,
    constexprs: Mapping[str, Any] | None = None,
    signature: Mapping[str, str] | None = None,
    num_warps: int | None = None,
    fast_math: bool = False,
) -> dict[str, Any]:
    record = _record(kernel=kernel.name, file=kernel.file, target=spec.name, kind=kernel.kind)
    try:
        spec_launch = launch.infer_launch(kernel, constexprs=constexprs, signature=signature, num_warps=num_warps)
        record.update(
            num_warps=spec_launch.num_warps, num_stages=spec_launch.num_stages,
            constexprs=spec_launch.constexprs, inferred=spec_launch.inferred,
            signature={k: v for k, v in spec_launch.signature.items() if v != "constexpr"},
        )
        compiled = compile_kernel(kernel.fn, spec_launch, spec.capability)
        record.update(
            ttir_ops=ttir.count_ops(compiled.ttir),
            ptx=ptx.parse_ptx(compiled.ptx).to_dict(),
            shared_bytes=compiled.shared_bytes,
            num_warps=compiled.num_warps,
        )
        record["rewrites"], record["rewrites_error"] = preview_rewrites(compiled.ttir, fast_math=fast_math)
        used = resources.measure(compiled.ptx, spec.capability, enable_fp_fusion=compiled.enable_fp_fusion)
        occ = occupancy.theoretical_occupancy(
            spec, registers=used.registers, num_warps=compiled.num_warps, shared_bytes=compiled.shared_bytes)
        record.update(
            registers=used.registers, spills=used.spill_bytes, spill_store_bytes=used.spill_store_bytes,
            spill_load_bytes=used.spill_load_bytes, stack_bytes=used.stack_bytes,
            occupancy=occ.occupancy, occupancy_seed003=occ.seed003, occupancy_limiter=occ.limiter,
        )
    except KeyboardInterrupt:
        raise
    except BaseException as exc:  # noqa: BLE001 - one kernel's failure must not stop the run
        record["error"] = one_line(exc)
    return record


def preview_rewrites(ttir_text: str, *, fast_math: bool) -> tuple[dict[str, int] | None, str | None]:
    """``tritune.passes.preview``: pass name -> ops each pass alone would remove or rewrite."""
    try:
        return {name: int(count) for name, count in preview(ttir_text, fast_math=fast_math).items()}, None
    except Exception as exc:  # noqa: BLE001
        return None, one_line(exc)


def analysed(records: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records of kernels that were analysed (no error)."""
    return [r for r in records if r["kernel"] is not None and r["error"] is None]


def _record(**values: Any) -> dict[str, Any]:
    record = dict.fromkeys(RECORD_KEYS)
    record.update(values)
    return record


@contextlib.contextmanager
def _progress(total: int):
    """Yield ``advance(file)``; a bar on stderr, only on a terminal and for enough files."""
    from rich.console import Console

    console = Console(stderr=True)
    if total < PROGRESS_MIN_FILES or not console.is_terminal:
        yield _no_progress
        return
    from rich.progress import Progress

    with Progress(console=console, transient=True) as bar:
        task = bar.add_task("analysing", total=total)

        def advance(file: Path) -> None:
            bar.update(task, advance=1, description=f"analysing {Path(file).name[:40]}")

        yield advance


def _no_progress(file: Path) -> None:
    return None
