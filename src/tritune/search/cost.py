"""A static cost model: which launch configs of one kernel are worth building first.

It orders candidates before any is built, from facts known without running them: the bytes a
program loads (its tile of each tensor the launch reads, ``bench.roofline.is_read``), its programs
(the grid its grid rule gives for the config's block sizes), the programs resident on an SM
(``analyze.occupancy``: warps, registers, shared memory, the SM's block slots; GPU facts from
``analyze.targets.SPECS``) and the waves they run in. It predicts no time, only an order:
``estimate(...).score`` is a relative throughput in 0..1, the product of four factors, each a
reason a config is slow:

- **bytes in flight** (Little's law): an SM keeps the memory system busy only with about
  ``IN_FLIGHT_BYTES`` of loads outstanding (DRAM latency x its share of the bandwidth). A program
  issues its tile's loads at once, so an SM has ``resident programs x bytes a program loads per
  iteration`` in flight, x; the factor is ``1 - exp(-x / IN_FLIGHT_BYTES)`` (linear while far
  below, saturating above: more in flight never hurts). A BLOCK=16 vector add (4 warps, 16
  resident programs x 128 B) keeps ~2 KiB in flight: 0.06, about the 7% of the copy roofline
  measured on an H200.
- **warps to hide latency**: fewer than ``LATENCY_WARPS`` resident warps leave an SM idle between
  one program's loads and the next's (index math, stores, the next program's start).
- **balance**: programs spread over SMs in whole waves; the last, partial wave (or a grid with
  fewer programs than SMs) leaves SMs idle.
- **spills**: an estimated register count above the hardware's 255 goes through local memory.

Registers are estimated from the baseline's count, scaled with the elements a thread holds: a
fixed part (indices, pointers, ``FIXED_REGISTERS``) plus, for each element a thread loads, the
32-bit registers of the tensors it reads. The tile is the elements of the largest tensor over
the programs (a looped reduction: one iteration's, ``R0_BLOCK`` of ``r0_numel``). Shared memory,
where the baseline uses any, is scaled with the tile and the stages (pipelined loads' buffers).
These are estimates to rank with; every candidate is still built, verified and timed.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Iterable, Mapping

# Triton first, as ``space`` imports it: importing ``tritune.analyze`` before Triton would load
# Triton compiling (``imports.import_triton_compiling``) in a process meant to interpret
import triton  # noqa: F401

from tritune.analyze.occupancy import theoretical_occupancy
from tritune.analyze.targets import SPECS, SMSpec
from tritune.kernel_facts import itemsize, r0_numel
from tritune.model.launch import LaunchSpec
from tritune.search import space

# ~0.8 us of DRAM latency x an H200's 4.8 TB/s shared by 132 SMs ~ 29 KB; an H100's 3.35 TB/s ~ 20 KB
IN_FLIGHT_BYTES = 32 * 1024
LATENCY_WARPS = 16  # a quarter of an sm_80/90 SM's 64 warp slots
FIXED_REGISTERS = 16  # program id, offsets, masks and base pointers: what a thread holds whatever its tile
DEFAULT_REGISTERS = 32  # the baseline's count when the analysis found none
DEFAULT_SM_COUNT = 132  # an H100/H200 SXM (``profile.static.SM_COUNTS``)


@dataclasses.dataclass(frozen=True)
class Machine:
    """The GPU the candidates will run on: its SM limits and SM count."""

    sm: SMSpec = SPECS[90]
    sm_count: int = DEFAULT_SM_COUNT

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any] | None) -> "Machine":
        """From a profile's facts (``capability``, ``sm_count``); an H100/H200 where they are unknown."""
        facts = facts or {}
        sm = SPECS.get(facts.get("capability") or 90, SPECS[90])
        return cls(sm, int(facts.get("sm_count") or DEFAULT_SM_COUNT))


@dataclasses.dataclass(frozen=True)
class Baseline:
    """What the analysis measured on the captured launch; the estimates scale from it."""

    registers: int | None = None
    shared_bytes: int | None = None

    @classmethod
    def from_facts(cls, facts: Mapping[str, Any] | None, registers: int | None = None) -> "Baseline":
        facts = facts or {}
        return cls(registers or facts.get("registers"), facts.get("shared_bytes"))


@dataclasses.dataclass(frozen=True)
class Estimate:
    programs: int
    warps: int
    tile: float  # elements a program holds at once
    registers: int  # per thread, estimated
    blocks_per_sm: int  # resident programs an SM allows
    waves: float  # programs / (SMs x blocks per SM)
    score: float  # relative throughput: higher ranks first

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def rank(spec: LaunchSpec, configs: Iterable[dict[str, Any]], *, baseline: Baseline = Baseline(),
         machine: Machine = Machine()) -> list[dict[str, Any]]:
    """``configs`` best first by ``estimate``; ties keep their given order."""
    configs = list(configs)
    scores = [estimate(spec, config, baseline=baseline, machine=machine).score for config in configs]
    order = sorted(range(len(configs)), key=lambda i: -scores[i])
    return [configs[i] for i in order]


def estimate(spec: LaunchSpec, config: dict[str, Any], *, baseline: Baseline = Baseline(),
             machine: Machine = Machine()) -> Estimate:
    """The cost model's view of ``spec`` launched with ``config`` (knob name -> value; the
    captured launch's value for a knob it does not set). See the module doc."""
    start = {k.name: k.current for k in space.knobs(spec)}
    config = {**start, **config}
    sm = machine.sm
    warps = int(config.get("num_warps") or space.DEFAULT_OPTIONS["num_warps"])
    programs, tile = _programs(spec, config), _tile(spec, config)
    tile0 = _tile(spec, start)
    registers = _registers(spec, tile / (warps * sm.warp_size), tile0 / (start["num_warps"] * sm.warp_size),
                           baseline.registers)
    shared = _shared(baseline.shared_bytes, tile / tile0, config.get("num_stages"), start.get("num_stages"))
    occupancy = theoretical_occupancy(sm, registers=min(registers, space.MAX_REGISTERS), num_warps=warps,
                                      shared_bytes=shared)
    blocks = occupancy.blocks_per_sm
    if blocks == 0:  # does not fit an SM at all: it would fail to launch
        return Estimate(programs, warps, tile, registers, 0, math.inf, 0.0)
    resident = min(blocks, math.ceil(programs / machine.sm_count))  # programs an SM holds at once
    rounds = math.ceil(programs / (machine.sm_count * blocks))
    in_flight = resident * _load_bytes(spec, tile)
    score = ((1.0 - math.exp(-in_flight / IN_FLIGHT_BYTES))
             * min(1.0, resident * warps / LATENCY_WARPS)
             * programs / (machine.sm_count * resident * rounds)
             * min(1.0, space.MAX_REGISTERS / registers))
    return Estimate(programs, warps, tile, registers, blocks, programs / (machine.sm_count * blocks), score)


def programs(spec: LaunchSpec, config: dict[str, Any]) -> int:
    """Programs the launch runs with ``config``'s block sizes (knobs it leaves out: the captured ones)."""
    start = {k.name: k.current for k in space.knobs(spec)}
    return _programs(spec, {**start, **config})


def _programs(spec: LaunchSpec, config: dict[str, Any]) -> int:
    """A ``cdiv`` grid rule's grid; any other (Inductor's), the captured grid scaled by the grid
    blocks: exact but for rounding, and no import of Inductor's grid code to rank a config."""
    rule = spec.grid_rule or {}
    constexprs = {**spec.constexprs, **{k: v for k, v in config.items() if k in spec.constexprs}}
    if rule.get("kind") == "cdiv":
        values = {**{a.name: a.value for a in spec.args if a.kind == "scalar"}, **constexprs}
        try:
            grid = [int(d["const"]) if "const" in d else math.ceil(int(values[d["numel"]]) / int(values[d["block"]]))
                    for d in rule["dims"]]
            return max(1, math.prod(grid))
        except (KeyError, ValueError, TypeError, ZeroDivisionError):
            pass  # a rule naming what the launch lacks: scaled, as below
    scale = math.prod(spec.constexprs[name] / constexprs[name] for name in space.grid_blocks(spec))
    return max(1, math.ceil(math.prod(spec.grid) * scale))


def _tile(spec: LaunchSpec, config: dict[str, Any]) -> float:
    """Elements of the largest tensor a program holds at once (a looped reduction: per iteration)."""
    from tritune.bench.roofline import view_elements  # here: importing tritune.bench loads its timing code

    largest = max((view_elements(a) for a in spec.tensors), default=1) or 1
    tile = largest / _programs(spec, config)
    numel = r0_numel(spec) if space.r0_block_knob(spec) is not None else None
    if numel:
        tile *= min(1.0, config["R0_BLOCK"] / numel)
    return max(1.0, tile)


def _load_bytes(spec: LaunchSpec, tile: float) -> float:
    """Bytes one program loads per tile: the tile's elements of every tensor the kernel reads."""
    return tile * _read_itemsizes(spec)


def _read_itemsizes(spec: LaunchSpec) -> int:
    """Bytes loaded per element of the tile, summed over the tensors read (at least one's)."""
    from tritune.bench.roofline import is_read

    sizes = [_itemsize(a.dtype) for a in spec.tensors if is_read(spec, a)]
    return sum(sizes) or max((_itemsize(a.dtype) for a in spec.tensors), default=4)


def _itemsize(dtype: str) -> int:
    """Bytes per element; 4 for a dtype ``kernel_facts`` does not know (a ranking, never a failure)."""
    try:
        return itemsize(dtype)
    except ValueError:
        return 4


def _registers(spec: LaunchSpec, per_thread: float, per_thread0: float, registers0: int | None) -> int:
    """Registers per thread holding ``per_thread`` elements, scaled from the baseline's count."""
    per_element = max(1.0, _read_itemsizes(spec) / 4)  # 32-bit registers per element loaded

    def model(elements: float) -> float:
        return FIXED_REGISTERS + per_element * max(1.0, elements)

    known = registers0 or DEFAULT_REGISTERS
    return max(FIXED_REGISTERS, math.ceil(known * model(per_thread) / model(per_thread0)))


def _shared(shared0: int | None, tile_ratio: float, stages: Any, stages0: Any) -> int:
    """Shared memory per program, scaled from the baseline's with the tile and the stages."""
    if not shared0:
        return 0
    stage_ratio = (stages / stages0) if isinstance(stages, int) and isinstance(stages0, int) and stages0 else 1.0
    return math.ceil(shared0 * tile_ratio * stage_ratio)
