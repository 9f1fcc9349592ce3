"""Registers, spills and stack per kernel, from ``ptxas -v`` run on the kernel's PTX.

Triton runs ``ptxas -v`` itself but discards the log, and the loaded-kernel attributes
(``n_regs``, ``n_spills``) need a GPU. We re-run the ptxas Triton ships (found through Triton's
own ``get_ptxas``), with the flags Triton uses for the cubin, so the numbers are those of the
binary Triton builds. Shared memory comes from the compiled kernel's ``metadata.shared``.
"""

from __future__ import annotations

import dataclasses
import os
import re
import subprocess
import tempfile

_PROPERTIES = re.compile(
    r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_REGISTERS = re.compile(r"Used (\d+) registers")
_BARRIERS = re.compile(r"used (\d+) barriers")


@dataclasses.dataclass(frozen=True)
class Resources:
    registers: int
    spill_store_bytes: int
    spill_load_bytes: int
    stack_bytes: int
    barriers: int | None

    @property
    def spill_bytes(self) -> int:
        return self.spill_store_bytes + self.spill_load_bytes


class ResourceError(RuntimeError):
    pass


def parse_ptxas_log(text: str) -> Resources:
    """The first function's properties in a ``ptxas -v`` log (Triton's PTX has one entry)."""
    registers = _REGISTERS.search(text)
    properties = _PROPERTIES.search(text)
    if registers is None or properties is None:
        raise ResourceError(f"unexpected ptxas -v output: {text.strip()[:200]!r}")
    barriers = _BARRIERS.search(text)
    stack, spill_stores, spill_loads = (int(group) for group in properties.groups())
    return Resources(
        registers=int(registers.group(1)),
        spill_store_bytes=spill_stores,
        spill_load_bytes=spill_loads,
        stack_bytes=stack,
        barriers=int(barriers.group(1)) if barriers else None,
    )


def measure(ptx: str, capability: int, *, enable_fp_fusion: bool = True) -> Resources:
    from triton.backends.nvidia.compiler import get_ptxas, sm_arch_from_capability

    with tempfile.TemporaryDirectory(prefix="tritune-ptxas-") as tmp:
        source = os.path.join(tmp, "kernel.ptx")
        with open(source, "w") as handle:
            handle.write(ptx)
        command = [
            get_ptxas(capability).path, "-lineinfo", "-v",
            *([] if enable_fp_fusion else ["--fmad=false"]),
            f"--gpu-name={sm_arch_from_capability(capability)}", source,
            "-o", os.path.join(tmp, "kernel.cubin"),
        ]
        done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ResourceError(f"ptxas -v failed ({done.returncode}): {done.stderr.strip()[:200]}")
    return parse_ptxas_log(done.stderr + done.stdout)
