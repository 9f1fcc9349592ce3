"""Theoretical occupancy: resident warps per SM over the SM's maximum, from static resources.

Two answers, and the report keeps the smaller:

- Seed 003's register formula, faithfully: ``max_warps = min(64, floor(65536 / (regs * 32)))``,
  ``occupancy = max_warps / 64``. It ignores allocation granularity and block boundaries.
- The real limits (the CUDA occupancy calculator's model): whole blocks of ``num_warps`` warps
  are resident, bounded by the SM's warp slots, its block slots, its register file (registers
  allocated per warp in units of 256) and its shared memory (per block: ``shared + 1 KiB``
  reserved, rounded up to 128 bytes).

``limiter`` names the bound that sets the result; ties are joined with ``+``.
"""

from __future__ import annotations

import dataclasses
import math

from tritune.analyze.targets import SMSpec

SEED003_MAX_WARPS = 64
SEED003_REGISTERS_PER_SM = 65536


@dataclasses.dataclass(frozen=True)
class Occupancy:
    occupancy: float  # min(seed003, real): resident warps / max warps per SM
    seed003: float
    real: float
    limiter: str  # "warps", "blocks", "registers", "shared", joined with "+" on ties
    active_warps: int  # real model
    blocks_per_sm: int
    blocks_by: dict[str, int]  # limit name -> blocks per SM that limit alone allows


def seed003_occupancy(registers: int) -> float:
    """Seed 003: max_warps = min(64, floor(65536 / (regs * 32))); occupancy = max_warps / 64."""
    if registers <= 0:
        return 1.0
    max_warps = min(SEED003_MAX_WARPS, SEED003_REGISTERS_PER_SM // (registers * 32))
    return max_warps / SEED003_MAX_WARPS


def theoretical_occupancy(spec: SMSpec, *, registers: int, num_warps: int, shared_bytes: int) -> Occupancy:
    blocks_by = {
        "warps": spec.max_warps_per_sm // num_warps,
        "blocks": spec.max_blocks_per_sm,
        "registers": _blocks_by_registers(spec, registers, num_warps),
        "shared": _blocks_by_shared(spec, shared_bytes),
    }
    blocks = min(blocks_by.values())
    active_warps = blocks * num_warps
    real = active_warps / spec.max_warps_per_sm
    seed = seed003_occupancy(registers)
    if seed < real:
        limiter = "registers(seed003)"
    else:
        limiter = "+".join(name for name, allowed in blocks_by.items() if allowed == blocks)
    return Occupancy(
        occupancy=min(seed, real),
        seed003=seed,
        real=real,
        limiter=limiter,
        active_warps=active_warps,
        blocks_per_sm=blocks,
        blocks_by=blocks_by,
    )


def _blocks_by_registers(spec: SMSpec, registers: int, num_warps: int) -> int:
    if registers <= 0:
        return spec.max_blocks_per_sm
    unit = spec.register_alloc_unit
    per_warp = math.ceil(registers * spec.warp_size / unit) * unit
    warps = spec.registers_per_sm // per_warp
    return warps // num_warps


def _blocks_by_shared(spec: SMSpec, shared_bytes: int) -> int:
    unit = spec.shared_alloc_unit
    per_block = math.ceil((shared_bytes + spec.shared_reserved_per_block) / unit) * unit
    return spec.shared_bytes_per_sm // per_block
