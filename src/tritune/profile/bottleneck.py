"""What limits a kernel, from whatever facts are at hand, and what to try next (refinement hints).

TritonForge (seed 002) turns profiler reports into actionable feedback ("memory stalls => improve
tiling or staging, low occupancy => adjust register pressure") and its proposals into targeted
edits. tritune's proposers are model-free, so the classification also orders them: a
launch-bound kernel gains little from any knob, a memory-bound one far from the roofline gains
most from block sizes and warps, one at the roofline only from moving fewer bytes.

``classify(facts)`` walks an ordered list of rules (one named function each, first match wins):

1. launch-bound      time < 10 us, or CUDA-graph time well under the event-timed median
2. memory-near       >= 80% of copy bandwidth (or ncu memory SOL >= 80%)
3. tail-effect       too few programs to fill the SMs (under-filled grid)
4. compute-bound     ncu compute SOL >= 60% and above memory SOL
5. tail-effect       a last partial wave idling >= 20% of the SMs' time
6. latency-bound     ncu: both SOLs < 60%; static: low occupancy or register spills
7. memory-far        memory dominant (ncu), or a roofline fraction under 80% (assumed without ncu)
8. unknown           too few facts to say

Every fact is optional: ncu is absent on the CPU and on machines without it, and then the
classification rests on timing + static analysis and says so (``Bottleneck.missing``).
``hints_from_delta(before, after)`` compares two fact sets (TritonForge's RefineHint(R, R')).
Pure logic: no GPU, no torch.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Iterable, Mapping, Sequence

from tritune.model import families as names

# Thresholds, each with its reason.
LAUNCH_BOUND_MS = 0.010  # < 10 us: a launch's fixed cost (~3-5 us on H100) is a large share; the
#                          median Inductor kernel of DESIGN.md's 586 runs 7.7 us
GRAPH_GAP_RATIO = 0.6  # graph time < 60% of the event-timed median: launch gaps are > 40% of it
NEAR_ROOFLINE = 0.8  # >= 80% of copy bandwidth leaves <= 1.25x, and streaming kernels rarely pass 90%
SOL_BOUND_PCT = 60.0  # ncu's own SOL rule: a unit under 60% of peak is not what limits the kernel
LOW_OCCUPANCY = 0.25  # < 16 of 64 warps per SM: too few loads in flight to cover ~600-cycle DRAM latency
HIGH_REGISTERS = 128  # >= 128 registers/thread caps an SM at 16 warps (25% occupancy)
TAIL_WASTE = 0.2  # a last wave leaving >= 20% of the SMs' time idle is worth reshaping the grid
TAIL_MAX_WAVES = 4  # from 4 waves on, a partial last wave costs <= 1/8 of the time
MAX_SINGLE_ITERATION = 4096  # longest row made a single-iteration reduction (search.space.MAX_R0_BLOCK)
FLAT_CHANGE = 0.02  # a time change under 2% between two reports is no effect (DESIGN.md's noise scale)
STALL_SHIFT = 0.10  # a stall group's share moving by 10 points is a real shift, not sampling noise

KINDS = ("launch-bound", "memory-near-roofline", "memory-far-from-roofline", "latency-bound", "compute-bound",
         "tail-effect", "unknown")
# proposer families (``tritune.loop.families``); "source-rewrite" is the rules of ``tritune.rewrites``,
# which order themselves by the same kind (``search.rewrites.PREFERRED``)
FAMILIES = (names.LAUNCH_CONFIG, names.INDUCTOR_BLOCKS, names.PASSES, names.CACHE_HINTS, names.SOURCE_REWRITE)
NCU_FACTS = ("sol_memory_pct", "sol_compute_pct", "achieved_occupancy_pct", "stalls")

HINTS = {  # action -> what to do and why (TritonForge-style refinement hints)
    "increase_block": "increase BLOCK to cut programs and widen loads (16-byte vectors)",
    "decrease_block": "decrease BLOCK to make more programs, enough to fill every SM",
    "whole_waves": "change BLOCK so the programs fill whole waves (SMs x programs per SM)",
    "more_warps": "more warps to keep more loads in flight and hide latency",
    "fewer_warps": "fewer warps: less synchronisation and setup per program",
    "more_stages": "more pipeline stages (num_stages) to prefetch the next loop iterations",
    "fewer_stages": "fewer stages: less shared memory per program, more programs per SM",
    "maxnreg": "fewer registers (maxnreg) so more warps fit on an SM",
    "fix_spills": "registers spill: smaller BLOCK or fewer stages so the live values fit",
    "single_iteration_reduction": "single-iteration reduction (R0_BLOCK >= r0_numel): no loop, and the "
                                  "redundant loads seed 000 removes become visible to the passes",
    "passes": "exact IR passes: drop redundant loads and reduces (fewer bytes is the only way past the roofline)",
    "cache_hints": "cache hints: evict_first for data streamed once, evict_last for data read again",
    "fast_math": "fast-math division rewrites, where the user allows fast-math",
    "launch_overhead": "launch overhead dominates: CUDA graphs or fusion with neighbours (beyond a per-kernel "
                       "tuner); expect little from any knob",
    "stop": "within reach of the memory roofline: stop tuning this kernel",
    "revert": "occupancy rose but time got worse: occupancy is not the limiter; go back to larger tiles",
    "keep_direction": "faster with more memory throughput: continue in this direction",
    "switch_family": "no measurable effect: this knob is flat here, try another family",
}


@dataclasses.dataclass(frozen=True)
class Hint:
    action: str  # a key of HINTS: what a proposer can act on
    text: str


@dataclasses.dataclass(frozen=True)
class Facts:
    """What is known about one launch; every field optional. Percentages from ncu are 0..100,
    fractions (roofline, static occupancy) are 0..1."""

    duration_ms: float | None = None  # do_bench median, or ncu gpu__time_duration
    graph_ms: float | None = None  # per launch inside a CUDA graph (no launch gaps)
    roofline: float | None = None  # achieved GB/s over copy GB/s
    sol_memory_pct: float | None = None  # ncu Memory Throughput
    sol_compute_pct: float | None = None  # ncu Compute (SM) Throughput
    achieved_occupancy_pct: float | None = None  # ncu
    occupancy: float | None = None  # static theoretical occupancy (tritune.analyze)
    occupancy_limiter: str | None = None  # "registers", "shared", "warps", "blocks"
    registers: int | None = None  # per thread
    spill_bytes: int | None = None
    stalls: Mapping[str, float] | None = None  # ncu stall reason -> samples or share (any unit)
    programs: int | None = None  # grid x * y * z
    sm_count: int | None = None
    blocks_per_sm: int | None = None  # resident programs per SM (static occupancy)
    reduction: bool = False  # a looped reduction (Inductor triton_red_*)
    r0_numel: int | None = None
    r0_block: int | None = None

    @classmethod
    def from_mapping(cls, values: Mapping[str, Any]) -> "Facts":
        """From a dict that may mix bench results, analyze records and ncu metrics: known names
        are taken (``median_ms``/``time_ms`` -> duration, ``spills`` -> spill bytes, ``grid`` ->
        programs), anything else is ignored."""
        names = {f.name for f in dataclasses.fields(cls)}
        picked = {k: v for k, v in values.items() if k in names and v is not None}
        aliases = {"time_ms": "duration_ms", "median_ms": "duration_ms", "spills": "spill_bytes"}
        for alias, name in aliases.items():
            if values.get(alias) is not None:
                picked.setdefault(name, values[alias])
        grid = values.get("grid")
        if grid and "programs" not in picked:
            picked["programs"] = math.prod(int(g) for g in grid)
        return cls(**picked)

    def missing_ncu(self) -> bool:
        return all(getattr(self, name) is None for name in NCU_FACTS)


@dataclasses.dataclass(frozen=True)
class Bottleneck:
    kind: str  # one of KINDS
    reason: str
    hints: tuple[Hint, ...]
    proposers: tuple[str, ...]  # FAMILIES, most promising first
    knobs: tuple[str, ...] = ()  # launch-config knobs first in this order ("block" = any grid block)
    missing: tuple[str, ...] = ()  # facts the classification had to do without

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


# ------------------------------------------------------------------------------------- the rules

def _launch_bound(f: Facts) -> Bottleneck | None:
    if f.duration_ms is not None and f.duration_ms < LAUNCH_BOUND_MS:
        why = f"{1e3 * f.duration_ms:.1f} us per launch, under {1e3 * LAUNCH_BOUND_MS:.0f} us"
    elif f.duration_ms and f.graph_ms is not None and f.graph_ms < GRAPH_GAP_RATIO * f.duration_ms:
        why = f"graph time {1e3 * f.graph_ms:.1f} us is {f.graph_ms / f.duration_ms:.0%} of the median"
    else:
        return None
    hints = ["launch_overhead"] + (["single_iteration_reduction"] if _single_iteration_fits(f) else [])
    return _make("launch-bound", why, hints, (names.PASSES, names.SOURCE_REWRITE, names.INDUCTOR_BLOCKS,
                                              names.LAUNCH_CONFIG, names.CACHE_HINTS),
                 ("R0_BLOCK", "num_warps"))


def _memory_near(f: Facts) -> Bottleneck | None:
    near_roofline = f.roofline is not None and f.roofline >= NEAR_ROOFLINE
    near_sol = f.sol_memory_pct is not None and f.sol_memory_pct >= 100 * NEAR_ROOFLINE
    if not (near_roofline or near_sol):
        return None
    why = (f"{f.roofline:.0%} of copy bandwidth" if near_roofline else f"ncu memory SOL {f.sol_memory_pct:.0f}%")
    return _make("memory-near-roofline", why + ": only fewer bytes can help", ["passes", "cache_hints", "stop"],
                 (names.PASSES, names.CACHE_HINTS, names.SOURCE_REWRITE, names.LAUNCH_CONFIG, names.INDUCTOR_BLOCKS),
                 ("block", "num_warps"))


def _under_filled(f: Facts) -> Bottleneck | None:
    if not (f.programs and f.sm_count) or f.programs >= f.sm_count:
        return None
    why = f"{f.programs} programs for {f.sm_count} SMs: {1 - f.programs / f.sm_count:.0%} of the GPU idles"
    return _make("tail-effect", why, ["decrease_block", "more_warps"], (names.LAUNCH_CONFIG, names.SOURCE_REWRITE,
                 names.INDUCTOR_BLOCKS, names.PASSES, names.CACHE_HINTS), ("block", "num_warps"))


def _compute_bound(f: Facts) -> Bottleneck | None:
    if f.sol_compute_pct is None or f.sol_compute_pct < SOL_BOUND_PCT:
        return None
    if f.sol_memory_pct is not None and f.sol_memory_pct > f.sol_compute_pct:
        return None
    why = f"ncu compute SOL {f.sol_compute_pct:.0f}% (memory {_fmt_pct(f.sol_memory_pct)})"
    return _make("compute-bound", why, ["fast_math", "passes", "increase_block"],
                 (names.SOURCE_REWRITE, names.PASSES, names.LAUNCH_CONFIG, names.INDUCTOR_BLOCKS, names.CACHE_HINTS),
                 ("block", "num_warps", "num_stages"))


def _tail_effect(f: Facts) -> Bottleneck | None:
    if not (f.programs and f.sm_count and f.blocks_per_sm):
        return None
    waves = f.programs / (f.sm_count * f.blocks_per_sm)
    idle = (math.ceil(waves) - waves) / math.ceil(waves)
    if not 1 < waves < TAIL_MAX_WAVES or idle < TAIL_WASTE:
        return None
    why = f"{waves:.2f} waves of {f.sm_count}x{f.blocks_per_sm} programs: the last partial wave idles {idle:.0%}"
    return _make("tail-effect", why, ["whole_waves", "increase_block"], (names.LAUNCH_CONFIG, names.SOURCE_REWRITE,
                 names.INDUCTOR_BLOCKS, names.PASSES, names.CACHE_HINTS), ("block", "num_warps"))


def _latency_bound(f: Facts) -> Bottleneck | None:
    ncu_low = (f.sol_memory_pct is not None and f.sol_compute_pct is not None
               and max(f.sol_memory_pct, f.sol_compute_pct) < SOL_BOUND_PCT)
    static_low = f.occupancy is not None and f.occupancy < LOW_OCCUPANCY
    spills = bool(f.spill_bytes)
    if not (ncu_low or static_low or spills):
        return None
    reasons, hints = [], []
    if ncu_low:
        reasons.append(f"memory SOL {f.sol_memory_pct:.0f}% and compute SOL {f.sol_compute_pct:.0f}% both < "
                       f"{SOL_BOUND_PCT:.0f}%")
    group, share = dominant_stall(f.stalls)
    if group:
        reasons.append(f"{share:.0%} of stalls are {group}")
    if spills:
        reasons.append(f"{f.spill_bytes} bytes of register spills")
        hints.append("fix_spills")
    if static_low or (f.achieved_occupancy_pct is not None and f.achieved_occupancy_pct < 100 * LOW_OCCUPANCY):
        occ, which = (f.occupancy, "occupancy") if static_low else (f.achieved_occupancy_pct / 100, "achieved occupancy")
        limiter = f" (limited by {f.occupancy_limiter})" if f.occupancy_limiter else ""
        reasons.append(f"{which} {occ:.0%}{limiter}")
        if f.occupancy_limiter == "shared":
            hints.append("fewer_stages")
        elif f.occupancy_limiter == "registers" or (f.registers or 0) >= HIGH_REGISTERS:
            hints.append("maxnreg")
    hints += {"sync": ["fewer_warps"], "pipe": ["increase_block"]}.get(group or "", ["more_warps", "more_stages"])
    if _single_iteration_fits(f):
        hints.append("single_iteration_reduction")
    return _make("latency-bound", "; ".join(reasons), hints, (names.LAUNCH_CONFIG, names.SOURCE_REWRITE,
                 names.INDUCTOR_BLOCKS, names.PASSES, names.CACHE_HINTS), ("num_warps", "num_stages", "maxnreg", "block"))


def _memory_far(f: Facts) -> Bottleneck | None:
    ncu_memory = f.sol_memory_pct is not None and f.sol_memory_pct >= (f.sol_compute_pct or 0)
    if f.roofline is None and not ncu_memory:
        return None
    if f.roofline is not None:
        why = f"{f.roofline:.0%} of copy bandwidth"
    else:
        why = f"ncu memory SOL {f.sol_memory_pct:.0f}%"
    if not ncu_memory:
        why += " (assumed memory-bound without ncu, as streaming Triton kernels mostly are)"
    hints = (["single_iteration_reduction"] if _single_iteration_fits(f) else []) + \
        ["increase_block", "more_warps", "more_stages", "cache_hints"]
    return _make("memory-far-from-roofline", why, hints, (names.INDUCTOR_BLOCKS, names.SOURCE_REWRITE,
                                                          names.LAUNCH_CONFIG, names.CACHE_HINTS, names.PASSES),
                 ("block", "R0_BLOCK", "num_warps", "num_stages"))


RULES: tuple[Callable[[Facts], Bottleneck | None], ...] = (
    _launch_bound, _memory_near, _under_filled, _compute_bound, _tail_effect, _latency_bound, _memory_far,
)


def classify(facts: Facts | Mapping[str, Any]) -> Bottleneck:
    """The first rule of ``RULES`` that matches (module docstring), or ``unknown``."""
    f = facts if isinstance(facts, Facts) else Facts.from_mapping(facts)
    missing = _missing(f)
    for rule in RULES:
        found = rule(f)
        if found is not None:
            if missing:
                found = dataclasses.replace(found, missing=missing, reason=found.reason + _without(missing))
            return found
    return Bottleneck("unknown", "too few facts to classify" + _without(missing),
                      _hints(["increase_block", "more_warps"]), FAMILIES, ("block", "num_warps", "num_stages"), missing)


# ------------------------------------------------------------------------------ profiler deltas

def _slower_despite_occupancy(b: Facts, a: Facts) -> str | None:
    occ_b, occ_a = _occupancy_of(b), _occupancy_of(a)
    slower = _change(b.duration_ms, a.duration_ms) > FLAT_CHANGE
    if slower and occ_b is not None and occ_a is not None and occ_a > occ_b:
        return "revert"  # TritonForge case 3: smaller tiles raised occupancy and slowed the kernel
    return None


def _faster_with_more_throughput(b: Facts, a: Facts) -> str | None:
    throughput_up = ((a.sol_memory_pct or 0) > (b.sol_memory_pct or 0)) or ((a.roofline or 0) > (b.roofline or 0))
    return "keep_direction" if _change(b.duration_ms, a.duration_ms) < -FLAT_CHANGE and throughput_up else None


def _reached_roofline(b: Facts, a: Facts) -> str | None:
    return "stop" if a.roofline is not None and a.roofline >= NEAR_ROOFLINE > (b.roofline or 0) else None


def _spills_appeared(b: Facts, a: Facts) -> str | None:
    return "fix_spills" if (a.spill_bytes or 0) > (b.spill_bytes or 0) else None


def _memory_stalls_up(b: Facts, a: Facts) -> str | None:
    up = stall_shares(a.stalls).get("memory", 0) - stall_shares(b.stalls).get("memory", 0)
    return "more_stages" if up >= STALL_SHIFT else None  # memory stalls => improve tiling or staging


def _occupancy_fell(b: Facts, a: Facts) -> str | None:
    occ_b, occ_a = _occupancy_of(b), _occupancy_of(a)
    if occ_b is None or occ_a is None or occ_a >= occ_b * 0.75 or _change(b.duration_ms, a.duration_ms) < -FLAT_CHANGE:
        return None
    return "maxnreg"  # low occupancy => adjust register pressure


def _became_launch_bound(b: Facts, a: Facts) -> str | None:
    was = b.duration_ms is not None and b.duration_ms >= LAUNCH_BOUND_MS
    return "launch_overhead" if was and a.duration_ms is not None and a.duration_ms < LAUNCH_BOUND_MS else None


def _no_effect(b: Facts, a: Facts) -> str | None:
    change = _change(b.duration_ms, a.duration_ms)
    return "switch_family" if b.duration_ms and a.duration_ms and abs(change) < FLAT_CHANGE else None


DELTA_RULES: tuple[Callable[[Facts, Facts], str | None], ...] = (
    _reached_roofline, _slower_despite_occupancy, _faster_with_more_throughput, _spills_appeared,
    _memory_stalls_up, _occupancy_fell, _became_launch_bound, _no_effect,
)


def hints_from_delta(before: Facts | Mapping[str, Any], after: Facts | Mapping[str, Any]) -> tuple[Hint, ...]:
    """TritonForge's RefineHint(R, R'): hints from how the facts moved between two reports."""
    b = before if isinstance(before, Facts) else Facts.from_mapping(before)
    a = after if isinstance(after, Facts) else Facts.from_mapping(after)
    return _hints(action for rule in DELTA_RULES if (action := rule(b, a)) is not None)


# --------------------------------------------------------------------------------------- stalls

STALL_GROUPS = {  # ncu stall reason -> what it waits on
    "long_scoreboard": "memory", "lg_throttle": "memory", "tex_throttle": "memory", "drain": "memory",
    "imc_miss": "memory", "barrier": "sync", "membar": "sync", "math_pipe_throttle": "pipe", "wait": "pipe",
    "short_scoreboard": "pipe", "mio_throttle": "pipe", "dispatch_stall": "pipe", "not_selected": "issue",
    "selected": "issue", "no_instruction": "issue", "branch_resolving": "issue", "sleeping": "issue",
}
_STALL_PREFIXES = ("smsp__pcsamp_warps_issue_stalled_", "smsp__average_warp_latency_issue_stalled_",
                   "smsp__warp_issue_stalled_", "stall_", "stalled_")


def stall_reason(name: str) -> str:
    """``smsp__pcsamp_warps_issue_stalled_long_scoreboard`` (or ``Stall Long Scoreboard``) -> ``long_scoreboard``."""
    text = name.strip().lower().replace(" ", "_").split(".")[0]
    for prefix in _STALL_PREFIXES:
        if text.startswith(prefix):
            text = text[len(prefix):]
    for suffix in ("_not_issued", "_per_warp_active"):
        text = text.removesuffix(suffix)
    return text


def stall_shares(stalls: Mapping[str, float] | None) -> dict[str, float]:
    """Stall group -> share of all stalls (0..1); empty when nothing is known."""
    total: dict[str, float] = {}
    for name, value in (stalls or {}).items():
        if value is None or value <= 0:
            continue
        group = STALL_GROUPS.get(stall_reason(name), "other")
        total[group] = total.get(group, 0.0) + float(value)
    whole = sum(total.values())
    return {g: v / whole for g, v in total.items()} if whole else {}


def dominant_stall(stalls: Mapping[str, float] | None) -> tuple[str | None, float]:
    shares = stall_shares(stalls)
    if not shares:
        return None, 0.0
    group = max(shares, key=shares.get)
    return group, shares[group]


# -------------------------------------------------------------------------------------- helpers

def order_knobs(bottleneck: Bottleneck, names: Iterable[str]) -> list[str]:
    """``names`` (a launch's knob names) with the bottleneck's knobs first; ``"block"`` stands
    for every grid block constexpr (``BLOCK``, ``XBLOCK``, ``BLOCK_SIZE``...), not ``R0_BLOCK``."""
    names = list(names)
    ordered: list[str] = []
    for role in bottleneck.knobs:
        if role == "block":
            ordered += [n for n in names if "BLOCK" in n.upper() and n != "R0_BLOCK"]
        elif role in names:
            ordered.append(role)
    ordered += names
    return list(dict.fromkeys(ordered))


def _make(kind: str, reason: str, actions: Sequence[str], proposers: Sequence[str], knobs: Sequence[str]) -> Bottleneck:
    return Bottleneck(kind, reason, _hints(actions), tuple(proposers), tuple(knobs))


def _hints(actions: Iterable[str]) -> tuple[Hint, ...]:
    return tuple(Hint(action, HINTS[action]) for action in dict.fromkeys(actions))


def _single_iteration_fits(f: Facts) -> bool:
    return bool(f.reduction and f.r0_numel and f.r0_block and f.r0_block < f.r0_numel <= MAX_SINGLE_ITERATION)


def _occupancy_of(f: Facts) -> float | None:
    if f.achieved_occupancy_pct is not None:
        return f.achieved_occupancy_pct / 100
    return f.occupancy


def _change(before: float | None, after: float | None) -> float:
    """Relative time change (+0.1 = 10% slower); 0 when either is unknown."""
    if not before or after is None:
        return 0.0
    return after / before - 1.0


def _missing(f: Facts) -> tuple[str, ...]:
    missing = ["ncu"] if f.missing_ncu() else []
    missing += [name for name in ("duration_ms", "roofline", "occupancy") if getattr(f, name) is None]
    return tuple(missing)


def _without(missing: Sequence[str]) -> str:
    if "ncu" in missing:
        return " [no ncu: from timing + static analysis]"
    return ""


def _fmt_pct(value: float | None) -> str:
    return "unknown" if value is None else f"{value:.0f}%"
