"""The ``source-rewrite`` family: the rules of ``tritune.rewrites`` on the captured kernel.

Each applicable rule's rewrite of the capture's copy of the source (``Context.source``) becomes a
variant (``name`` = ``Rewrite.name``, ``source`` = the rewritten file, ``rewrite`` = the rule, its
class and parameters: ``search.chain``), verified in the mode of its class:

    exact      -> bitwise
    tolerance  -> tolerance (the tolerance table)
    fast_math  -> fast_math, and proposed only when the user allows fast-math

Proposals, most promising first (a candidate costs a build, a verification and a timing):

1. while a rewrite is the held decision: its rule's parameters walked, one value on each side of
   the current one per knob (``Rewrite.knobs``, rebuilt by ``Rule.apply``), with the decision's
   options and constexprs kept; the config search moves those on the same source meanwhile
   (``LaunchConfigSearch`` with a base). A neighbour that wins becomes the decision and the walk
   goes on from there;
2. every applicable rule's rewrites of the captured source, the rules the bottleneck points at
   first (``PREFERRED``), then those a hint asks for (``HINTED``), then the registry's order;
   each rule's first rewrite before any rule's second.

The rules may assume that the kernel's distinct pointer arguments do not overlap
(``KernelSource.noalias``) only for a launch whose tensors capture saw disjoint
(``aliasing.disjoint_at_capture``); a rewrite that relied on it (``Rewrite.assumes``) becomes a
variant that assumes it too, which the applier uses only where each live launch's tensors are
disjoint (``aliasing.Guard``), and runs the baseline elsewhere. A variant whose source and config were tried already is not proposed again.

``KernelSource.launch``, what the rules know of the captured launch (``launch_facts``):

    constexprs  {name: value} as launched
    options     {"num_warps": 4, "num_stages": 3, ...} as launched
    grid        [x, y, z] programs
    grid_rule   how the grid follows the arguments (``capture.grid_rule``'s JSON), or None
    signature   {parameter: Triton's type for it}: "*fp16" for a tensor, "i32"/"i64"/"fp32"/"u1"
                for a scalar (as Triton mangles its value), "constexpr"
    dtypes      {tensor parameter: torch dtype name, "float16"}
    shapes      {tensor parameter: [sizes]}
    scalars     {scalar parameter: value}
    sm_count    the GPU's SMs, from the profile's facts (left out when the profile has none; on
                the CPU the static analysis assumes an sm_90's)
"""

from __future__ import annotations

import itertools
import json
from typing import Iterator

from tritune.aliasing import disjoint_at_capture
from tritune.model import families
from tritune.model.launch import LaunchSpec
from tritune.model.variant import Variant
from tritune.rewrites import applicable
from tritune.rewrites.base import OPT_IN, NotRewritable, Rewrite
from tritune.search import chain
from tritune.search.family import Context, Family
from tritune.search.proposers import config_mode

# bottleneck kind -> rules first (issue 12: persistent grid for launch-bound and tail effects,
# pipelining and hoisting for latency and memory far from the roofline, dot for compute-bound)
PREFERRED = {
    "launch-bound": ("persistent-grid",),
    "tail-effect": ("persistent-grid",),
    "latency-bound": ("pipeline-loop", "hoist-invariant-load"),
    "memory-far-from-roofline": ("pipeline-loop", "hoist-invariant-load"),
    "memory-near-roofline": ("hoist-invariant-load",),  # fewer bytes is the only way past the roofline
    "compute-bound": ("broadcast-sum-to-dot",),
}
# hint action (the bottleneck's, or a refine hint after an acceptance) -> the rule that acts on it
HINTED = {"more_stages": "pipeline-loop", "launch_overhead": "persistent-grid", "whole_waves": "persistent-grid"}


class SourceRewriteProposer:
    name = families.SOURCE_REWRITE

    def propose_in(self, context: Context, limit: int) -> list[Variant]:
        text = context.source
        if limit <= 0 or text is None:
            return []
        launch = launch_facts(context.spec, context.profile.get("facts"))
        noalias = disjoint_at_capture(context.spec)
        tried = {_tried(t.variant) for t in context.trials}
        proposals: list[Variant] = []
        for variant in itertools.chain(self._walk(context, text, launch, noalias),
                                       self._first(context, text, launch, noalias)):
            if _tried(variant) in tried:
                continue
            tried.add(_tried(variant))
            proposals.append(variant)
            if len(proposals) >= limit:
                break
        return proposals

    def _walk(self, context: Context, text: str, launch: dict, noalias: bool) -> Iterator[Variant]:
        """The held rewrite's neighbours, one knob at a time, the held config kept."""
        held = context.accepted.rewrite
        if not held:
            return
        kernel = context.spec.kernel
        try:
            current = applicable.apply(held["rule"], text, kernel, held.get("params") or {}, launch=launch,
                                       noalias=noalias)
        except NotRewritable:
            return
        for knob in current.knobs:
            for value in _neighbours(tuple(knob.values), current.params.get(knob.name, knob.default)):
                try:
                    moved = applicable.apply(held["rule"], text, kernel, {**current.params, knob.name: value},
                                             launch=launch, noalias=noalias)
                except NotRewritable:
                    continue
                if _allowed(moved, context.fast_math, noalias):
                    yield chain.variant_of(moved, context.accepted)

    def _first(self, context: Context, text: str, launch: dict, noalias: bool) -> Iterator[Variant]:
        found = applicable.applicable(text, context.spec.kernel, launch=launch, noalias=noalias)
        by_rule: dict[str, list[Rewrite]] = {}
        for rewrite in found.rewrites:
            if _allowed(rewrite, context.fast_math, noalias):
                by_rule.setdefault(rewrite.rule, []).append(rewrite)
        order = rule_order(list(by_rule), context.bottleneck, context.hints)
        for rank in itertools.zip_longest(*(by_rule[name] for name in order)):  # each rule's first, then second
            for rewrite in rank:
                if rewrite is not None:
                    yield chain.variant_of(rewrite)


def rule_order(names: list[str], bottleneck: dict | None, hints: tuple[dict, ...] | list[dict] = ()) -> list[str]:
    """``names`` (registry order) with the bottleneck's preferred rules first, then the hinted ones."""
    bottleneck = bottleneck or {}
    actions = [h.get("action") for h in [*(bottleneck.get("hints") or ()), *hints] if isinstance(h, dict)]
    first = [*PREFERRED.get(bottleneck.get("kind") or "", ()), *(HINTED[a] for a in actions if a in HINTED)]
    rank = {name: i for i, name in enumerate(dict.fromkeys(first))}
    return sorted(names, key=lambda name: rank.get(name, len(rank)))  # stable: registry order after


def launch_facts(spec: LaunchSpec, facts: dict | None = None) -> dict:
    """What the rules know of the captured launch (module docstring); ``facts``: the profile's."""
    from triton.runtime.jit import mangle_type, type_canonicalisation_dict

    tensors = [a for a in spec.args if a.kind == "tensor"]
    signature = {a.name: "*" + type_canonicalisation_dict.get(a.dtype, a.dtype) if a.kind == "tensor"
                 else mangle_type(a.value) if a.kind == "scalar" else "constexpr" for a in spec.args}
    found = {"constexprs": dict(spec.constexprs), "options": dict(spec.options), "grid": list(spec.grid),
             "grid_rule": spec.grid_rule, "signature": signature, "dtypes": {a.name: a.dtype for a in tensors},
             "shapes": {a.name: list(a.shape or ()) for a in tensors},
             "scalars": {a.name: a.value for a in spec.args if a.kind == "scalar"}}
    if (facts or {}).get("sm_count"):
        found["sm_count"] = int(facts["sm_count"])
    return found


def mode(variant: Variant) -> str:
    """The rewrite's class decides; a config carried on top (a walked rule parameter keeps the
    decision's) adds the config's own mode."""
    if not (variant.options or variant.constexprs):
        return chain.rewrite_mode(variant)
    return config_mode(variant)  # already the weaker of the config's mode and the rewrite's


def family(fast_math: bool, root: str | None) -> Family:
    return Family(SourceRewriteProposer.name, SourceRewriteProposer(), mode, reads_context=True)


def _allowed(rewrite: Rewrite, fast_math: bool, noalias: bool) -> bool:
    """Fast-math rewrites only with ``--fast-math``; one that assumes no-alias only where capture
    saw the launch's tensors disjoint (a rule never assumes what it was not told it may)."""
    return (noalias or not rewrite.assumes) and (fast_math or rewrite.exact not in OPT_IN)


def _neighbours(values: tuple, value: object) -> list:
    """The values next to ``value`` on its ladder (every value when it is off the ladder)."""
    if value not in values:
        return list(values)
    index = values.index(value)
    return [values[i] for i in (index - 1, index + 1) if 0 <= i < len(values)]


def _tried(variant: Variant) -> tuple:
    """A candidate is its source, grid and config, whatever its name (persistent-grid's k changes
    the grid only)."""
    return (variant.source, json.dumps([variant.grid, variant.options, variant.constexprs], sort_keys=True,
                                       default=str))
