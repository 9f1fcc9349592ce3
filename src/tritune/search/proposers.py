"""Proposers: given a launch and what was tried so far, the next variants worth building.

All proposers share one interface (``propose(spec, trials, limit) -> list[Variant]``), so the
loop can order them by the bottleneck and an LLM proposer can join later behind the same gates.

``LaunchConfigSearch`` is a coordinate descent over ``space.knobs``: from the best verified
configuration so far (the captured launch until a candidate beats its time, ``baseline_ms``) it
proposes one-step neighbours of one knob at a time (block sizes first, then warps, then stages,
or the order the bottleneck asks for), moves to a neighbour when it is faster, and is exhausted
when no untried neighbour is left. Before the first step it proposes its ``seeds``, for an
Inductor kernel the configs Inductor's max-autotune would time (``search.inductor_configs``), in
Inductor's order: several knobs move at once there, which a descent one step at a time reaches
late or never; the descent then starts from the fastest, as Inductor's coordinate descent does.
It spends a budget on the knobs that matter rather than on a blind grid (4 knobs x 6 values is
1296 points; descent tries ~10-20).
It learns from failures: a configuration that fails for resources (Triton's ``OutOfResources``:
shared memory, threads; ptxas's shared-data and register-cap limits; CUDA refusing the launch)
rules out every larger value of that knob, so a bigger form is never retried.
``maxnreg`` is unset (None) in most captures; None ranks above every cap (``space.rank``), so
the descent steps down from it and the ceilings compare it without a TypeError. Given the
baseline's register count (``registers``), its first step is the first cap that changes anything.

On a source rewrite (``base``, the held decision when a rewrite made it: ``search.chain``) the
descent runs on the rewritten source: its variants carry that source and rule, it starts from the
decision's own config, and only trials on that source are its history. Without a base, variants
with a source (cache hints, a looped reduction) are another family's and not its history.
In the loop it reads its knob order, the register count, the baseline's time, the base, the
kernel's source (for the seeds) and the profile's facts from the ``Context`` (``propose_in``).

A launch far from its roofline (``roofline`` under ``FAR_FROM_ROOFLINE`` of the copy bandwidth,
from the profile's facts) is rarely one step from its best: a vector add launched at BLOCK=16 runs
at ~7% of the roofline, and a x2 descent reaches BLOCK=32 where BLOCK=1024 gives ~10x. Its first
group then also spans the space (``span_configs``): every block knob x4, x16, x64 and /4 where its
ladder allows, each with warps matched to the tile (``ELEMENTS_PER_WARP``, halved and doubled: a
bigger block wants more warps, and no warp without an element), stages spread two steps either way
on the most promising (for a kernel with a loop, or whose source is not known); the static cost
model (``search.cost``) ranks them and keeps the best ``SPAN_SIZE``, less room for the stages and
for the captured shape's own warps halved and doubled (the descent's first steps, which the
matched warps can miss: the suite's decode attention, 2 warps where 8 and 16 were matched). The
descent then walks from the fastest. Near the roofline, with none known (the interpreter's times give none) or for a
launch-bound kernel (its time is the launch's), the first group is the seeds alone, as before. The
first group may hold more than a round (``first_round_size`` says how many: a loop may ask for that
many).

``PassSetProposer`` proposes tritune's exact pass set, and the fast-math set only when the user
allows fast-math. It proposes the exact set under the no-alias assumption: ``NOALIAS`` in its pass
list, which the compiler hook gives the passes that can use it, and in ``assumes``, which the
applier checks at each launch (``passes=("exact", "noalias"), assumes=("noalias",)``) only for a launch whose tensor arguments capture saw disjoint
(``aliasing.disjoint_at_capture``; a capture that did not record it gets none) and whose kernel
loads one pointer expression twice around a store (``_may_merge_across_store``: the pattern the
assumption unlocks, so kernels where it could change nothing cost no candidate).
"""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterable, Iterator, Protocol

from tritune.aliasing import disjoint_at_capture
from tritune.errors import resource_failure_text
from tritune.model import families
from tritune.model.failures import COMPILE_ERROR, RUNTIME_FAULT
from tritune.model.launch import LaunchSpec
from tritune.model.trial import Trial
from tritune.model.variant import NOALIAS, Variant
from tritune.search import chain, cost, inductor_configs, space

if TYPE_CHECKING:
    from tritune.search.family import Context

FAR_FROM_ROOFLINE = 0.30  # issue 24: below this fraction of the copy roofline, the first group spans
SPAN_BLOCK_SCALES = (4, 16, 64, 1 / 4)  # each block knob's jumps from the start
SPAN_SIZE = 12  # spanning configs kept, the cost model's best (a round or three of candidates)
ELEMENTS_PER_WARP = 256  # Inductor's pointwise rule (triton_heuristics: num_warps ~ block / 256)
SPAN_MAX_WARPS = 16


class Proposer(Protocol):
    name: str

    def propose(self, spec: LaunchSpec, trials: list[Trial], limit: int) -> list[Variant]: ...


def config_of(spec: LaunchSpec, variant: Variant) -> dict[str, Any]:
    """Every knob's value in ``variant`` (the spec's where the variant does not set it)."""
    values = {}
    for knob in space.knobs(spec):
        source = variant.options if knob.kind == "option" else variant.constexprs
        values[knob.name] = source.get(knob.name, knob.current)
    return values


def variant_of(spec: LaunchSpec, config: dict[str, Any], *, name: str | None = None) -> Variant:
    """The variant setting ``config``, keeping only what differs from the captured launch; ``tiled``
    where its constexprs move a grid whose rule capture read from the source (``Variant.tiled``)."""
    options, constexprs = {}, {}
    for knob in space.knobs(spec):
        value = config.get(knob.name, knob.current)
        if value != knob.current:
            (options if knob.kind == "option" else constexprs)[knob.name] = value
    tiled = bool(constexprs) and bool((spec.grid_rule or {}).get("tiles"))
    variant = Variant(options=options, constexprs=constexprs, tiled=tiled)
    return dataclasses.replace(variant, name=name or variant.describe())


class LaunchConfigSearch:
    name = families.LAUNCH_CONFIG

    def __init__(self, order: Iterable[str] | None = None, registers: int | None = None,
                 base: Variant | None = None, seeds: Iterable[dict[str, Any]] = (),
                 baseline_ms: float | None = None, roofline: float | None = None,
                 facts: dict[str, Any] | None = None, loops: bool = True) -> None:
        self.order = list(order or [])  # knob names first in this order (e.g. from the bottleneck)
        self.registers = registers  # the baseline's registers per thread, when analysed
        self.base = base  # a variant made by a source rewrite: configs on its source (module docstring)
        self.seeds = [dict(seed) for seed in seeds]  # configs tried before the descent (module docstring)
        self.baseline_ms = baseline_ms  # the captured launch's time: the descent moves only to faster
        self.roofline = roofline  # the launch's fraction of the copy roofline, when timed on a GPU
        self.facts = dict(facts or {})  # the profile's facts: the cost model's GPU and baseline
        self.loops = loops  # the kernel may loop (stages pipeline a loop's loads: none, nothing to spread)

    @classmethod
    def for_context(cls, context: Context) -> "LaunchConfigSearch":
        """The search the loop runs (``search.family.Context``): the bottleneck's knob order, the
        baseline's registers and time, the held decision as the base when a rewrite made it, and
        Inductor's max-autotune configs as the seeds, after the store's configs for kernels like
        this one (``search.prior``); the profile's roofline and facts (whether and how the first
        group spans)."""
        base = context.accepted if context.accepted.rewrite else None
        facts = (context.profile or {}).get("facts") or {}
        roofline = facts.get("roofline")
        if (context.bottleneck or {}).get("kind") == "launch-bound":
            roofline = None  # its time is the launch's, not its memory traffic's: no block size moves it
        seeds = [*context.prior, *inductor_configs.seeds(context.spec, context.source)]
        return cls(knob_order(context.spec, context.knob_roles), context.registers, base, seeds, context.baseline_ms,
                   roofline=float(roofline) if isinstance(roofline, (int, float)) else None, facts=facts,
                   loops=_may_loop(context.source, context.spec.kernel))

    def propose_in(self, context: Context, limit: int) -> list[Variant]:
        """The loop's call: ``for_context``'s search."""
        return self.for_context(context).propose(context.spec, context.trials, limit)

    def start(self, spec: LaunchSpec) -> dict[str, Any]:
        """The config the search starts from: the base's (a rewrite's decision) or the captured launch's."""
        return config_of(spec, self.base if self.base is not None else Variant())

    def seed_configs(self, spec: LaunchSpec) -> list[dict[str, Any]]:
        """The seeds as whole configs over ``start``, then (far from the roofline) the spanning
        configs: what the search proposes before the descent (the loop asks which of a round's
        proposals they are: ``loop.kernel._seeded``)."""
        start = self.start(spec)
        seeds = [{**start, **seed} for seed in self.seeds]
        return seeds + [c for c in self.span_configs(spec) if c not in seeds]

    def far(self) -> bool:
        """Far from the roofline: the first group spans the space (module docstring)."""
        return self.roofline is not None and self.roofline < FAR_FROM_ROOFLINE

    def span_configs(self, spec: LaunchSpec, ceilings: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        """Far from the roofline, the spanning configs around ``start``, the cost model's best first
        (module docstring); none near it. ``ceilings``: configs at or over a value that failed for
        resources are dropped after the cut, so the configs are always a subset of those without."""
        if not self.far():
            return []
        found = {k.name: k for k in space.knobs(spec, registers=self.registers)}
        start = self.start(spec)
        shapes = [start]
        for knob in (k for k in found.values() if k.kind == "constexpr"):
            for scale in SPAN_BLOCK_SCALES:
                value = round(start[knob.name] * scale)
                if value in knob.values and value != start[knob.name]:
                    shapes.append({**start, knob.name: value})
        configs = [{**shape, "num_warps": warps} for shape in shapes for warps in self._span_warps(spec, shape)]
        baseline = cost.Baseline.from_facts(self.facts, self.registers)
        machine = cost.Machine.from_facts(self.facts)
        ranked = _unique(cost.rank(spec, [c for c in configs if c != start], baseline=baseline, machine=machine))
        if not ranked:
            return []
        stages = _two_steps(found["num_stages"], start["num_stages"]) if self.loops else []
        spread = [{**ranked[0], "num_stages": v} for v in stages]
        spread = [c for c in spread if c not in ranked]
        # the captured shape's warps one step either way, kept beside the cut: the first steps a
        # descent takes, which warps matched to an elementwise tile can miss (an attention kernel
        # whose tile is a head's rows: 8 and 16 warps matched, 2 the win)
        near = [c for c in ({**start, "num_warps": w} for w in self._near_warps(spec, start)) if c not in spread]
        size = max(1, SPAN_SIZE - len(spread))
        missing = [c for c in near if c not in ranked[:size]]
        cut = ranked[:max(1, size - len(missing))]
        kept = cut + spread + [c for c in near if c not in cut]
        return [c for c in kept if not _over(c, ceilings or {})]

    def _near_warps(self, spec: LaunchSpec, start: dict[str, Any]) -> list[int]:
        """The captured shape's warps halved and doubled, where they are warps a launch may take
        (doubled, none with fewer elements than threads)."""
        current = start["num_warps"]
        if not isinstance(current, int) or isinstance(current, bool):
            return []
        tile = cost.estimate(spec, start).tile
        return [w for w in (current // 2, current * 2)
                if w in space.WARPS and w <= SPAN_MAX_WARPS and (w < current or tile >= w * 32)]

    def _span_warps(self, spec: LaunchSpec, shape: dict[str, Any]) -> list[int]:
        """Warps for a block shape: matched to its tile (``ELEMENTS_PER_WARP`` elements a warp),
        halved and doubled, none with fewer elements than threads (a thread without work)."""
        tile = cost.estimate(spec, shape).tile
        matched = min(SPAN_MAX_WARPS, max(1, 1 << round(math.log2(max(1.0, tile / ELEMENTS_PER_WARP)))))
        spread = [w for w in (matched // 2, matched, matched * 2) if w in space.WARPS and w <= SPAN_MAX_WARPS]
        return [w for w in spread if w == matched or tile >= w * 32]

    def first_round_size(self, context: Context) -> int:
        """How many configs the first group holds (seeds, and far from the roofline the spanning
        configs) untried: a loop may ask for that many in its first round instead of
        ``per_round``. 0 when the first group is done."""
        return self.for_context(context).first_left(context.spec, context.trials)

    def first_left(self, spec: LaunchSpec, trials: list[Trial]) -> int:
        """``first_round_size`` of this search: its first group's configs not tried yet."""
        tried = {_key(config_of(spec, t.variant)) for t in trials if self._on_base(t.variant)}
        tried.add(_key(self.start(spec)))
        first = next(self._groups(spec, trials, [], self.start(spec)))
        return len({_key(c) for c in first} - tried)

    def propose(self, spec: LaunchSpec, trials: list[Trial], limit: int) -> list[Variant]:
        knobs = self._ordered(space.knobs(spec, registers=self.registers))
        tried = {_key(config_of(spec, t.variant)) for t in trials if self._on_base(t.variant)}
        baseline = self.start(spec)
        tried.add(_key(baseline))
        proposals: list[Variant] = []
        for group in self._groups(spec, trials, knobs, baseline):
            for config in group:
                if _key(config) in tried:
                    continue
                tried.add(_key(config))
                proposals.append(self._variant(spec, config))
                if len(proposals) >= limit:
                    return proposals
            if proposals:
                return proposals  # one group at a time: the seeds, then one knob at a time
        return proposals

    def _groups(self, spec: LaunchSpec, trials: list[Trial], knobs: list[space.Knob],
                baseline: dict[str, Any]) -> Iterator[list[dict[str, Any]]]:
        """The configs to propose, a group at a time: the seeds (Inductor's max-autotune configs,
        in its order) and, far from the roofline, the spanning configs; then each knob's
        neighbours of the best so far (coordinate descent: it starts from the best of the first
        group). None at or above a value that failed for resources (``ceilings``): a bigger form
        is never retried."""
        ceilings = self.ceilings(spec, trials)
        start = self.start(spec)
        seeds = [config for config in ({**start, **seed} for seed in self.seeds) if not _over(config, ceilings)]
        yield seeds + [c for c in self.span_configs(spec, ceilings) if c not in seeds]
        best = self.best(spec, trials) or baseline
        for knob in knobs:
            yield [{**best, knob.name: value} for value in knob.neighbours(best[knob.name])
                   if not _over({knob.name: value}, ceilings)]

    def best(self, spec: LaunchSpec, trials: list[Trial]) -> dict[str, Any] | None:
        """The fastest verified config on this search's kernel; the captured launch's own when
        ``baseline_ms`` is known and none beats it (a slower neighbour is never walked from)."""
        timed = [t for t in trials if t.ok and t.time_ms is not None and self._on_base(t.variant)]
        if self.base is None and self.baseline_ms is not None:
            timed.append(Trial(Variant(), True, self.baseline_ms))
        if not timed:
            return None
        return config_of(spec, min(timed, key=lambda t: t.time_ms).variant)

    def ceilings(self, spec: LaunchSpec, trials: list[Trial]) -> dict[str, Any]:
        """Knob -> the smallest value that failed for resources while it was larger than captured."""
        limits: dict[str, Any] = {}
        currents = {k.name: k.current for k in space.knobs(spec)}
        for trial in trials:
            # the trial's failure came back from a worker as text: its exception is gone. CUDA's
            # "too many resources requested for launch" comes as a runtime_fault (its text says CUDA)
            if trial.failure not in (COMPILE_ERROR, RUNTIME_FAULT) or not resource_failure_text(trial.message):
                continue
            for name, value in config_of(spec, trial.variant).items():
                if space.above(value, currents[name]):
                    limits[name] = min(value, limits.get(name, value), key=space.rank)
        return limits

    def _on_base(self, variant: Variant) -> bool:
        """Whether a trial is on this search's kernel: the base's source and grid, else the captured one."""
        base = self.base or Variant()
        return not variant.passes and (variant.source, variant.grid) == (base.source, base.grid)

    def _variant(self, spec: LaunchSpec, config: dict[str, Any]) -> Variant:
        variant = variant_of(spec, config)
        return variant if self.base is None else chain.on_rewrite(self.base, variant)

    def _ordered(self, knobs: list[space.Knob]) -> list[space.Knob]:
        rank = {name: i for i, name in enumerate(self.order)}
        return sorted(knobs, key=lambda k: rank.get(k.name, len(rank)))


def config_mode(variant: Variant) -> str:
    """A launch config is checked against the tolerance table (another block or warp count may
    reorder a reduction); a register cap alone changes no operation (bitwise). On a rewritten
    source, the rewrite's own mode if that is weaker."""
    only_registers = not variant.constexprs and set(variant.options) == {"maxnreg"}
    return chain.weakest("bitwise" if only_registers else "tolerance", chain.rewrite_mode(variant))


def knob_order(spec: LaunchSpec, roles: Iterable[str]) -> list[str]:
    """Knob names most promising first: the bottleneck's roles; for a launch Inductor's coordinate
    descent already tuned, the knobs it never turns (num_stages, maxnreg) before those it walked
    to a local optimum (its blocks and warps), whatever the roles."""
    from tritune.profile.bottleneck import Bottleneck, order_knobs

    names = order_knobs(Bottleneck("given", "", (), (), tuple(roles)), [k.name for k in space.knobs(spec)])
    if spec.kind == "inductor" and spec.extra.get("config_from") == "coordinate_descent":
        names.sort(key=lambda name: name in space.COORDINATE_DESCENT_KNOBS)  # stable: roles kept within
    return names


class PassSetProposer:
    name = families.PASSES

    def __init__(self, fast_math: bool = False, root: str | Path | None = None) -> None:
        self.fast_math = fast_math
        self.root = Path(root) if root is not None else None  # the capture directory (its sources/)

    def propose(self, spec: LaunchSpec, trials: list[Trial], limit: int) -> list[Variant]:
        wanted = [Variant(name="passes=exact", passes=("exact",))]
        if self.fast_math:
            wanted.append(Variant(name="passes=fast fast-math", passes=("fast",), fast_math=True))
        if disjoint_at_capture(spec) and _may_merge_across_store(self._source(spec), spec.kernel):
            wanted.append(Variant(name="passes=exact+noalias, assumes noalias", passes=("exact", NOALIAS),
                                  assumes=(NOALIAS,)))
        done = {t.variant.key() for t in trials}
        return [v for v in wanted if v.key() not in done][:limit]

    def _source(self, spec: LaunchSpec) -> str | None:
        path = self.root / spec.source if self.root is not None and spec.source else Path(spec.source_file or "")
        try:
            return path.read_text() if path.is_file() else None
        except (OSError, UnicodeDecodeError):
            return None


def _may_merge_across_store(source: str | None, kernel: str) -> bool:
    """The kernel loads one pointer expression (the same text) twice and stores somewhere: the
    loads ``merge-redundant-loads`` keeps apart only for a store between them. A cheap look at
    the source, never a legality check (the pass decides on the IR)."""
    try:
        tree = ast.parse(source or "")
    except SyntaxError:
        return False
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    if function is None:
        return False
    calls = [n for n in ast.walk(function) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)]
    loaded = [ast.dump(c.args[0]) for c in calls if c.func.attr == "load" and c.args]
    stores = any(c.func.attr == "store" for c in calls)
    return stores and len(set(loaded)) < len(loaded)


def _may_loop(source: str | None, kernel: str) -> bool:
    """The kernel has a loop (``for``/``while`` in its body), or its source cannot be read."""
    try:
        tree = ast.parse(source or "")
    except SyntaxError:
        return True
    function = next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel), None)
    return function is None or any(isinstance(n, (ast.For, ast.While)) for n in ast.walk(function))


def _over(config: dict[str, Any], ceilings: dict[str, Any]) -> bool:
    """Some knob of ``config`` at or above the value that failed for resources (``ceilings``)."""
    return any(name in config and not space.above(ceiling, config[name]) for name, ceiling in ceilings.items())


def _key(config: dict[str, Any]) -> tuple:
    return tuple(sorted(config.items()))


def _unique(configs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``configs`` without repeats, in order."""
    kept: dict[tuple, dict[str, Any]] = {}
    for config in configs:
        kept.setdefault(_key(config), config)
    return list(kept.values())


def _two_steps(knob: space.Knob, value: Any) -> list[Any]:
    """The ladder's values two steps below and above ``value`` (a spread the descent reaches late)."""
    if value not in knob.values:
        return []
    index = knob.values.index(value)
    return [knob.values[i] for i in (index - 2, index + 2) if 0 <= i < len(knob.values)]
