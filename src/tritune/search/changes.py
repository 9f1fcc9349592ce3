"""Which knobs a variant turns, relative to the captured launch: what the results say won.

``changed_knobs(spec, variant)`` names them, in the order of the launch-config space (grid
blocks, ``R0_BLOCK``, ``num_warps``, ``num_stages``, ``maxnreg``), then any other option or
constexpr, passes (``pass:exact``, ``pass:fast fast-math``), and what a source rewrite changes:

    ["XBLOCK", "num_warps"]                      a launch-config variant
    ["evict:load0=evict_first"]                  a cache-hint rewrite, one entry per load
    ["persistent->looped", "R0_BLOCK"]           a persistent reduction rewritten to loop
    ["pipeline-loop(S=3)", "num_warps"]          a source rewrite rule with its parameters, then
                                                 the config found on the rewritten kernel
    ["source"]                                   a source text no proposer here named
    ["pass:exact", "assume:noalias"]             a variant valid only under an assumption

A value equal to the captured one is not a change (a decision imported from another store may
spell out defaults). What a source of tritune's proposers changes is the variant's ``knobs``,
which the proposer that wrote it sets (``search.cache_hints``, ``search.looped_reduction``); a rule
of ``tritune.rewrites`` is read from ``Variant.rewrite`` and comes first (``search.chain``); a
source with neither (a model's, or a variant stored before ``knobs`` existed) is ``source``.
"""

from __future__ import annotations

from tritune.model.launch import LaunchSpec
from tritune.model.variant import Variant
from tritune.search import chain, space

_UNSET = object()  # an option the captured launch does not name: any value set is a change


def changed_knobs(spec: LaunchSpec, variant: Variant) -> list[str]:
    current = {**space.current_options(spec), **spec.options, **spec.constexprs}
    turned = [name for name, value in {**variant.options, **variant.constexprs}.items()
              if current.get(name, _UNSET) != value]
    order = {knob.name: i for i, knob in enumerate(space.knobs(spec))}
    found = sorted(turned, key=lambda name: (order.get(name, len(order)), name))
    if variant.passes:
        found += [f"pass:{name}" + (" fast-math" if variant.fast_math else "") for name in variant.passes]
    if variant.rewrite:
        found = [chain.label(variant.rewrite), *found]  # the chain: the rule and its parameters, then the config
    elif variant.source is not None:
        found += list(variant.knobs) or ["source"]
    found += [f"assume:{name}" for name in variant.assumes]
    return list(dict.fromkeys(found))

