"""The launch-configuration space of one captured launch: which knobs a variant may turn.

A knob is a launch option (``num_warps``, ``num_stages``) or a block-size constexpr whose change
keeps the kernel correct by construction:

- a constexpr the grid is computed from (``grid_rule``): ``BLOCK`` in ``cdiv(n, BLOCK)``, or
  Inductor's ``XBLOCK``/``YBLOCK``: the grid follows it, every element keeps one program. For a
  program's own kernel capture only takes a block its program index reaches memory through
  (``capture.grid_blocks``);
- Inductor's ``R0_BLOCK`` of a looped reduction (``triton_red_*``): the loop covers ``r0_numel``
  whatever the block, and ``R0_BLOCK >= r0_numel`` makes the loop a single iteration, the case
  where seed 000's redundant loads appear and the passes pay.

Other constexprs (a row kernel's ``BLOCK_N`` that must cover the row, flags, dtypes) are not
knobs: changing them changes what the kernel computes. Verification still checks every variant.
Values are powers of two (an Inductor kernel's blocks from 1, as Inductor's own configs and its
coordinate descent go; other grid blocks from 16), a grid block's from 1/16 of the captured value
to ``BLOCK_REACH`` times it (a far-off first round jumps x64: ``search.proposers``);
``options`` absent from a capture take Triton's defaults (4 warps, 3 stages).

``maxnreg`` (the PTX ``.maxnreg`` cap on 32-bit registers per thread; Triton's CUDA launch
option, ``CUDAOptions.maxnreg`` in 3.6) comes last. Its values are the caps at which one more
4-warp block fits an sm_90 SM (``maxnreg_steps``): registers are allocated 8 per thread (256 per
warp) out of 65536, so 168 registers allow 3 blocks of 128 threads, 128 allow 4, ... 32 allow 16
(the 64-warp maximum). A cap between two steps buys no occupancy, only spills; 8-warp blocks step
at a subset of these values. Unset (``None``, the capture's usual value) is the top of the ladder:
without a cap ptxas may use 255 registers, so ``maxnreg=255`` is left out as the same thing.
When the baseline's register count is known (``knobs(spec, registers=N)``, from the analysis),
only caps below it are offered: a cap at or above what the kernel uses changes nothing, and a
descent whose first step changes nothing stops there.
The interpreter ignores every launch option (``num_warps``, ``num_stages`` and ``maxnreg``
alike), so the space does not depend on where it runs: on the CPU these variants time the same.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import triton

from tritune.analyze.targets import SPECS, SMSpec
from tritune.kernel_facts import LOOPED, DEFAULT_OPTIONS as BACKEND_DEFAULTS, inductor_kind, r0_numel
from tritune.model.launch import LaunchSpec

DEFAULT_OPTIONS = {**BACKEND_DEFAULTS, "maxnreg": None}  # the search's starting point: no register cap
WARPS = (1, 2, 4, 8, 16, 32)
STAGES = (1, 2, 3, 4, 5)
MIN_BLOCK, MAX_BLOCK = 16, 8192
# A block knob's ladder goes down to 1/16 of the captured value and up to this many times it: a
# far-off first round jumps x64 (``search.proposers``), and the descent may go two steps beyond
BLOCK_REACH = 256
# Inductor's blocks go down to 1: XBLOCK=1 is its usual persistent-reduction config, its
# max-autotune lists hold (XBLOCK, R0_BLOCK) = (1, 2048) and (64, 4), and its coordinate descent
# halves a block until it reaches 0 (torch 2.13, CoordescTuner.value_too_small)
MIN_INDUCTOR_BLOCK = 1
MAX_R0_BLOCK = 4096  # a single-iteration row beyond this spills registers on sm_90 (fp32 rows)
INDUCTOR_GRID_BLOCKS = ("XBLOCK", "YBLOCK", "ZBLOCK")
# what Inductor's coordinate descent walks (torch 2.13, CoordescTuner.tunable_fields, outside
# matmul templates): the other knobs here, num_stages and maxnreg, it never turns
COORDINATE_DESCENT_KNOBS = (*INDUCTOR_GRID_BLOCKS, "R0_BLOCK", "num_warps")
MAX_REGISTERS = 255  # per thread, the hardware's limit: what an unset maxnreg lets ptxas use
REGISTER_STEP_WARPS = 4  # maxnreg steps are counted in blocks of Triton's default 4 warps


@dataclasses.dataclass(frozen=True)
class Knob:
    name: str
    kind: str  # "option" or "constexpr"
    values: tuple[Any, ...]  # ascending; None (an unset option) last, as the top
    current: Any

    def neighbours(self, value: Any) -> list[Any]:
        """The values one step below and above ``value`` (fewer at the ends); for a value off the
        ladder (a trimmed maxnreg ladder, another proposer's block), the nearest on each side."""
        if value in self.values:
            index = self.values.index(value)
            return [self.values[i] for i in (index - 1, index + 1) if 0 <= i < len(self.values)]
        lower = [v for v in self.values if above(value, v)]
        upper = [v for v in self.values if above(v, value)]
        return lower[-1:] + upper[:1]


def rank(value: Any) -> tuple[int, Any]:
    """Sort key of a knob value: None (unset: no cap, the compiler's choice) above every number."""
    return (1, 0) if value is None else (0, value)


def above(value: Any, other: Any) -> bool:
    """``value > other`` where None is the top: safe for ``maxnreg``'s unset value."""
    return rank(value) > rank(other)


def current_options(spec: LaunchSpec) -> dict[str, Any]:
    return {**DEFAULT_OPTIONS, **{k: v for k, v in spec.options.items() if k in DEFAULT_OPTIONS}}


def knobs(spec: LaunchSpec, *, registers: int | None = None) -> list[Knob]:
    """Every knob of ``spec``, block sizes first (they move the grid), then warps, stages and
    maxnreg. ``registers``: the baseline's registers per thread when known (trims maxnreg)."""
    found = [_block_knob(spec, name) for name in grid_blocks(spec)]
    r0 = r0_block_knob(spec)
    if r0 is not None:
        found.append(r0)
    options = current_options(spec)
    found.append(Knob("num_warps", "option", WARPS, options["num_warps"]))
    found.append(Knob("num_stages", "option", STAGES, options["num_stages"]))
    found.append(maxnreg_knob(options["maxnreg"], registers))
    return [k for k in found if k is not None]


def maxnreg_knob(current: int | None, registers: int | None = None) -> Knob:
    """Register caps from unset (the top) down the occupancy steps, below ``registers`` if known."""
    steps = [v for v in maxnreg_steps() if registers is None or v < registers]
    if current is not None and current not in steps:
        steps = sorted({*steps, current})
    return Knob("maxnreg", "option", (*steps, None), current)


def maxnreg_steps(sm: SMSpec = SPECS[90], num_warps: int = REGISTER_STEP_WARPS) -> tuple[int, ...]:
    """The largest per-thread register counts at which 1, 2, ... blocks of ``num_warps`` warps
    fit the register file, below ``MAX_REGISTERS``; sm_90, 4 warps:
    (32, 40, 48, 56, 64, 72, 80, 96, 128, 168) for 16, 12, 10, 9, 8, 7, 6, 5, 4, 3 blocks.
    regs(b) = floor(65536 / (b * 128 threads)) rounded down to the 8-register allocation unit."""
    unit = sm.register_alloc_unit // sm.warp_size  # registers per thread per allocation step
    threads = num_warps * sm.warp_size
    steps = set()
    for blocks in range(1, sm.max_warps_per_sm // num_warps + 1):
        regs = sm.registers_per_sm // (blocks * threads) // unit * unit
        if regs < MAX_REGISTERS:
            steps.add(regs)
    return tuple(sorted(steps))


def grid_blocks(spec: LaunchSpec) -> list[str]:
    """Constexprs the grid is computed from."""
    rule = spec.grid_rule or {}
    if rule.get("kind") == "cdiv":
        names = [d["block"] for d in rule.get("dims", []) if "block" in d]
    elif rule.get("kind") == "inductor":
        names = [n for n in INDUCTOR_GRID_BLOCKS if n in spec.constexprs]
    else:
        names = []
    unexplained = set(spec.extra.get("grid_unexplained") or ())
    return [n for n in dict.fromkeys(names) if n in spec.constexprs and n not in unexplained
            and _is_power_of_two(spec.constexprs[n])]


def _block_knob(spec: LaunchSpec, name: str) -> Knob | None:
    value = spec.constexprs[name]
    low = MIN_INDUCTOR_BLOCK if spec.kind == "inductor" else MIN_BLOCK
    values = tuple(v for v in _powers(low, MAX_BLOCK) if value // 16 <= v <= value * BLOCK_REACH) or (value,)
    if value not in values:
        values = tuple(sorted({*values, value}))
    return Knob(name, "constexpr", values, value)


def r0_block_knob(spec: LaunchSpec) -> Knob | None:
    """``R0_BLOCK`` of an Inductor looped reduction, up to a single iteration over the row."""
    if spec.kind != "inductor" or "R0_BLOCK" not in spec.constexprs or inductor_kind(spec.kernel) != LOOPED:
        return None
    value = spec.constexprs["R0_BLOCK"]
    if not _is_power_of_two(value):
        return None
    numel = r0_numel(spec)
    top = min(MAX_R0_BLOCK, triton.next_power_of_2(numel)) if numel else MAX_R0_BLOCK
    values = tuple(v for v in _powers(MIN_INDUCTOR_BLOCK, max(top, value)))
    return Knob("R0_BLOCK", "constexpr", values, value)


def _powers(low: int, high: int) -> list[int]:
    out, v = [], 1
    while v <= high:
        if v >= low:
            out.append(v)
        v *= 2
    return out


def _is_power_of_two(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0 and value & (value - 1) == 0

