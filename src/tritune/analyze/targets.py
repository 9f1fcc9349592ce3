"""GPU targets the analysis compiles for, with the per-SM limits that bound occupancy.

Numbers are NVIDIA's (CUDA C Programming Guide, "Technical Specifications per Compute
Capability", and the CUDA occupancy calculator): 64 Ki 32-bit registers per SM everywhere here,
registers allocated per warp in units of 256, shared memory allocated per block in units of 128
bytes plus 1 KiB the CUDA runtime reserves for every block (since sm_80).
"""

from __future__ import annotations

import dataclasses
import re


@dataclasses.dataclass(frozen=True)
class SMSpec:
    capability: int  # 90 for sm_90
    max_warps_per_sm: int
    max_blocks_per_sm: int
    shared_bytes_per_sm: int  # the largest shared-memory carve-out
    registers_per_sm: int = 65536
    register_alloc_unit: int = 256  # registers, per warp
    shared_alloc_unit: int = 128  # bytes, per block
    shared_reserved_per_block: int = 1024  # bytes the CUDA runtime keeps per block
    warp_size: int = 32

    @property
    def name(self) -> str:
        return f"sm_{self.capability}"


KIB = 1024

SPECS: dict[int, SMSpec] = {
    80: SMSpec(80, max_warps_per_sm=64, max_blocks_per_sm=32, shared_bytes_per_sm=164 * KIB),  # A100
    86: SMSpec(86, max_warps_per_sm=48, max_blocks_per_sm=16, shared_bytes_per_sm=100 * KIB),  # GA10x
    89: SMSpec(89, max_warps_per_sm=48, max_blocks_per_sm=24, shared_bytes_per_sm=100 * KIB),  # L4/L40
    90: SMSpec(90, max_warps_per_sm=64, max_blocks_per_sm=32, shared_bytes_per_sm=228 * KIB),  # H100/H200
    100: SMSpec(100, max_warps_per_sm=64, max_blocks_per_sm=32, shared_bytes_per_sm=228 * KIB),  # B200
}

DEFAULT_TARGET = "sm_90"

_TARGET = re.compile(r"^(?:sm_?)?(\d+)a?$", re.IGNORECASE)


def parse_target(text: str | int) -> SMSpec:
    """``"sm_90"``, ``"sm90"``, ``"90"``, ``"sm_90a"`` or ``90`` -> the spec for compute capability 90."""
    match = _TARGET.match(str(text).strip())
    capability = int(match.group(1)) if match else None
    if capability not in SPECS:
        known = ", ".join(spec.name for spec in SPECS.values())
        raise ValueError(f"unknown target {text!r}: expected one of {known} (or just the number, e.g. 90)")
    return SPECS[capability]
