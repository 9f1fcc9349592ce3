"""Static facts of one captured launch: registers, spills, shared memory, occupancy, the grid.

Two sources, the real one first:

- on a CUDA GPU, the replay's own compiled kernel: the driver's register count and local-memory
  size (``n_regs``, ``n_spills``: what the loaded binary uses) and ``metadata.shared``; the SM
  count from the device.
- elsewhere (CI, a CPU box, ``TRITON_INTERPRET=1``), the kernel compiled for sm_90 on the CPU
  the way ``tritune analyze`` does (``analyze.compile``, ``analyze.resources``: ptxas -v on the
  PTX); the specialization comes from Triton's own binder run on meta tensors of the captured
  layout (no memory allocated, alignment as the real pointers would have it). The SM count is then
  the target's usual one (``SM_COUNTS``), marked assumed. Options other than num_warps and
  num_stages (maxnreg...) and a variant's compiler passes are not applied on this path.

Occupancy (theoretical, and what limits it) comes from ``analyze.occupancy`` on either source.
Reduction facts for Inductor's looped reductions (``triton_red_*``): ``r0_numel`` (the row
length, ``kernel_facts.r0_numel``) and the launch's ``R0_BLOCK``.

``static_facts`` never raises for a kernel that does not compile: ``static_error`` says why and
the facts that need no compiler (grid, reduction) are still there.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from tritune.kernel_facts import LOOPED, inductor_kind
from tritune.model.launch import LaunchSpec

CPU_TARGET = 90  # what CPU-side analysis compiles for: the GPU machine's H100/H200
SM_COUNTS = {80: 108, 90: 132, 100: 148}  # A100, H100/H200 SXM, B200: the usual SKU of each target
STATIC_KEYS = (
    "registers", "spill_bytes", "shared_bytes", "num_warps", "occupancy", "occupancy_limiter", "blocks_per_sm",
    "grid", "programs", "sm_count", "sm_count_assumed", "capability", "reduction", "r0_numel", "r0_block",
    "static_source", "static_error",
)


def static_facts(spec: LaunchSpec, root: str | Path, variant: Any = None, *, device: str | None = None) -> dict:
    """Every key of ``STATIC_KEYS`` (None where unknown); see the module doc for the sources."""
    from tritune.errors import one_line
    from tritune.model.variant import Variant
    from tritune.replay import interpreting

    variant = Variant() if variant is None else variant
    facts: dict[str, Any] = dict.fromkeys(STATIC_KEYS)
    use_gpu = not interpreting() and _cuda_device(device or _captured_device(spec))
    replay = _replay(spec, root, variant, device=use_gpu or "cpu")
    facts.update(grid=list(replay.grid), programs=math.prod(replay.grid), **reduction_facts(spec, replay.constexprs))
    try:
        found = _from_gpu(replay, use_gpu) if use_gpu else _from_cpu_compile(spec, replay)
    except Exception as exc:  # noqa: BLE001 - any compiler failure is a fact about the kernel
        facts["static_error"] = one_line(exc)
        return facts
    facts.update(found)
    facts.update(_occupancy(facts))
    return facts


def reduction_facts(spec: LaunchSpec, constexprs: dict[str, Any]) -> dict[str, Any]:
    """Inductor looped reduction (``triton_red_*``): its row length and block; else all off."""
    if spec.kind != "inductor" or inductor_kind(spec.kernel) != LOOPED:
        return {"reduction": False, "r0_numel": None, "r0_block": None}
    from tritune.kernel_facts import r0_numel

    block = constexprs.get("R0_BLOCK", constexprs.get("RBLOCK"))
    return {"reduction": True, "r0_numel": r0_numel(spec), "r0_block": int(block) if block is not None else None}


# --------------------------------------------------------------------------------- the sources

def _from_gpu(replay: Any, device: str) -> dict[str, Any]:
    import torch

    with torch.cuda.device(torch.device(device)):
        kernel = replay.compile()
        kernel[tuple(replay.grid)]  # loads the binary without launching: the driver fills n_regs, n_spills
        major, minor = torch.cuda.get_device_capability()
        sm_count = torch.cuda.get_device_properties(torch.device(device)).multi_processor_count
    return {"registers": int(kernel.n_regs), "spill_bytes": int(kernel.n_spills),
            "shared_bytes": int(kernel.metadata.shared), "num_warps": int(kernel.metadata.num_warps),
            "capability": major * 10 + minor, "sm_count": int(sm_count), "sm_count_assumed": False,
            "static_source": f"compiled kernel on {device}"}


def _from_cpu_compile(spec: LaunchSpec, replay: Any) -> dict[str, Any]:
    from tritune.analyze import resources
    from tritune.analyze.compile import compile_kernel
    from tritune.analyze.launch import Launch
    from tritune.capture._language_shim import compilable_language
    from tritune.capture.jit_launch import Kernel

    kernel = Kernel(replay.fn)  # .jit: a compilable JITFunction even of an interpreted kernel
    params = _meta_params(spec, replay.constexprs)
    _, specialization, _ = kernel.binder(*params.values())
    types = [s[0] for s in specialization]
    launch = Launch(
        signature=dict(zip(kernel.names, types)),
        constexprs={n: v for n, t, v in zip(kernel.names, types, params.values()) if t == "constexpr"},
        sources={},
        attrs={(i,): kernel.backend.parse_attr(s[1]) for i, s in enumerate(specialization)
               if s[0] != "constexpr" and isinstance(s[1], str)},
        num_warps=int(replay.options.get("num_warps", 4)),
        num_stages=int(replay.options.get("num_stages", 3)),
    )
    with compilable_language():  # the interpreter may have left triton.language patched
        compiled = compile_kernel(kernel.jit, launch, CPU_TARGET)
    used = resources.measure(compiled.ptx, CPU_TARGET, enable_fp_fusion=compiled.enable_fp_fusion)
    return {"registers": used.registers, "spill_bytes": used.spill_bytes, "shared_bytes": compiled.shared_bytes,
            "num_warps": compiled.num_warps, "capability": CPU_TARGET, "sm_count": SM_COUNTS[CPU_TARGET],
            "sm_count_assumed": True, "static_source": f"sm_{CPU_TARGET} compile on the CPU"}


def _occupancy(facts: dict[str, Any]) -> dict[str, Any]:
    from tritune.analyze import occupancy
    from tritune.analyze.targets import SPECS

    sm = SPECS.get(facts["capability"])
    if sm is None:
        return {}
    occ = occupancy.theoretical_occupancy(sm, registers=facts["registers"], num_warps=facts["num_warps"],
                                          shared_bytes=facts["shared_bytes"])
    return {"occupancy": occ.occupancy, "occupancy_limiter": occ.limiter, "blocks_per_sm": occ.blocks_per_sm}


# ------------------------------------------------------------------------------------ helpers

def _meta_params(spec: LaunchSpec, constexprs: dict[str, Any]) -> dict[str, Any]:
    """Every parameter in order, tensors as meta-device views of the captured layout: the binder
    sees their dtype and alignment (offset x itemsize from an aligned base), nothing is allocated."""
    import torch

    values: dict[str, Any] = {}
    for arg in spec.args:
        if arg.kind == "tensor":
            storage = torch.empty(arg.storage_size, dtype=getattr(torch, arg.dtype), device="meta")
            values[arg.name] = storage.as_strided(arg.shape, arg.stride, arg.storage_offset)
        elif arg.kind == "constexpr":
            values[arg.name] = constexprs[arg.name]
        else:
            values[arg.name] = arg.value  # a scalar, or None
    return values


def _replay(spec: LaunchSpec, root: str | Path, variant: Any, *, device: str) -> Any:
    from tritune.replay import Replay

    return Replay(spec, variant, root=root, device=device)


def _captured_device(spec: LaunchSpec) -> str | None:
    return next((a.device for a in spec.tensors if a.device), None)


def _cuda_device(device: str | None) -> str | None:
    """``device`` when it is a CUDA device this process can use, else None."""
    if not device or not str(device).startswith("cuda"):
        return None
    import torch

    return str(device) if torch.cuda.is_available() else None
