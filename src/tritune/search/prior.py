"""Where a search starts: the configs the store already decided for kernels like this one.

``prior_configs(store, key, spec, category)`` gives whole launch configs over ``spec``'s knobs
(``space.knobs``), best first, deduplicated, at most ``LIMIT``. ``LaunchConfigSearch`` proposes
them first among its seeds (before Inductor's max-autotune configs); a candidate built from one
says so in its record (``from_prior``: "seeded from the store").

1. The same kernel source decided elsewhere (another shape bucket, another run, another GPU of
   the same name and capability): each decision's config, the most confident (highest confirmed
   speedup) first. A decision with signed traits gives its whole decided config; an older one
   the options and constexprs its variant set.
2. Other kernels of the same category (``loop.category``) and size class (``store.size_class``:
   log2 of the largest tensor's bytes, within one) on this GPU: the ``CATEGORY_LIMIT`` configs
   decided most often, expressed over this spec's knobs. A kernel of category ``other`` (its
   source could not be read) gets none.

A sibling key's verified candidates that were not decided do not seed: the store keeps no
baseline time beside them to tell a fast one, and the fastest of a key is its decision.

Configs move between kernels by knob *role* (``knob_roles``), not by name: launch options and
``R0_BLOCK`` are themselves; an Inductor kernel's grid blocks are Inductor's names (``XBLOCK``);
a hand-written kernel's are the grid dimension they divide (``grid0``: ``BLOCK`` of one kernel
is ``BLOCK_SIZE`` of another, and never Inductor's ``XBLOCK``). A role this spec lacks is left
out (the config gives only the knobs it has); ``maxnreg`` does not move between kernels (a cap
depends on the kernel's own register use). A config is dropped when it is illegal here: a value
off its knob's values (a grid block: not a power of two between the space's bounds, which is
wider than the descent's window, so a far-off launch can start from a decided block), or when
what is left changes nothing. Ceilings (resource failures) are the search's: it never proposes
a seed at or above one.

Only decisions this user signed and still uses seed anything, and only those of earlier runs
(``store.priors``: a run's own decisions would make N lanes decide otherwise than one).
"""

from __future__ import annotations

from typing import Any

from tritune.model.key import DecisionKey
from tritune.model.launch import LaunchSpec
from tritune.model.variant import Variant
from tritune.search import space
from tritune.search.proposers import config_of
from tritune.store.priors import size_class

LIMIT = 4  # seeds from the store per kernel: a first round's worth, the rest of the round spans the space
CATEGORY_LIMIT = 3  # of those, from other kernels of the category and size
LOCAL_ROLES = ("maxnreg",)  # roles that never move between kernel sources


def knob_roles(spec: LaunchSpec) -> dict[str, str]:
    """Knob name -> its role (module docstring)."""
    rule = spec.grid_rule or {}
    dims = (rule.get("dims") or []) if rule.get("kind") == "cdiv" else []
    by_dim = {}
    for index, dim in enumerate(dims):
        if isinstance(dim, dict) and dim.get("block"):
            by_dim.setdefault(dim["block"], f"grid{index}")
    roles = {}
    for knob in space.knobs(spec):
        if knob.kind == "option" or knob.name == "R0_BLOCK" or spec.kind == "inductor":
            roles[knob.name] = knob.name
        else:
            roles[knob.name] = by_dim.get(knob.name, knob.name)
    return roles


def traits(spec: LaunchSpec, key: DecisionKey, category: str, variant: Variant) -> dict:
    """What ``set_decision`` records beside a decision, for ``decided_like``: the kernel's
    category and size class and the decided config by role."""
    roles = knob_roles(spec)
    return {"category": category, "size_class": size_class(key),
            "config": {roles[name]: value for name, value in config_of(spec, variant).items() if name in roles}}


def prior_configs(store: Any, key: DecisionKey, spec: LaunchSpec, category: str, *, limit: int = LIMIT,
                  run_id: int | None = None) -> list[dict]:
    """The store's configs for this launch, best first (module docstring); none decided in
    ``run_id``, the run asking (``store.priors``: N lanes decide what one lane decides)."""
    roles = knob_roles(spec)
    by_role = {role: name for name, role in roles.items()}
    start = config_of(spec, Variant())
    found: list[dict] = []
    for decision in store.decided_for_source(key, except_run=run_id):
        if decision.traits:
            found.append(_over(spec, start, _named(decision.traits.get("config"), by_role)))
        else:
            body = decision.variant_json
            found.append(_over(spec, start, {**(body.get("options") or {}), **(body.get("constexprs") or {})}))
    found += _most_decided(store, key, spec, category, start, by_role, run_id)
    out: list[dict] = []
    for config in found:
        if config is not None and config != start and config not in out:
            out.append(config)
    return out[:limit]


def from_prior(spec: LaunchSpec, prior: tuple[dict, ...] | list[dict], variant: Variant) -> bool:
    """Whether ``variant`` sets one of the prior's configs (for the candidate's record)."""
    return bool(prior) and not variant.passes and config_of(spec, variant) in prior


def _most_decided(store: Any, key: DecisionKey, spec: LaunchSpec, category: str, start: dict,
                  by_role: dict[str, str], run_id: int | None) -> list[dict]:
    """The configs decided most often on other kernels of this category and size: count first,
    then the nearest size class, then the best confirmed speedup."""
    size = size_class(key)
    if not category or category == "other" or size is None:
        return []
    tally: dict[tuple, list] = {}
    for decision in store.decided_like(key, category, size, except_run=run_id):
        moved = {role: value for role, value in (decision.traits.get("config") or {}).items()
                 if role not in LOCAL_ROLES}
        config = _over(spec, start, _named(moved, by_role))
        if config is None or config == start:
            continue
        entry = tally.setdefault(_key(config), [config, 0, 1 << 30, 0.0])
        entry[1] += 1
        entry[2] = min(entry[2], abs(decision.traits["size_class"] - size))
        entry[3] = max(entry[3], decision.speedup)
    ranked = sorted(tally.values(), key=lambda e: (-e[1], e[2], -e[3]))
    return [entry[0] for entry in ranked[:CATEGORY_LIMIT]]


def _named(config: Any, by_role: dict[str, str]) -> dict:
    """A config by role as this spec's knob names; roles this spec lacks are left out."""
    if not isinstance(config, dict):
        return {}
    return {by_role[role]: value for role, value in config.items() if role in by_role}


def _over(spec: LaunchSpec, start: dict, changes: dict) -> dict | None:
    """``changes`` (knob names of this spec; other names left out) over the captured config, or
    None when a value is illegal for its knob here."""
    knobs = {knob.name: knob for knob in space.knobs(spec)}
    config = dict(start)
    for name, value in changes.items():
        knob = knobs.get(name)
        if knob is None:
            continue
        if not _legal(spec, knob, value):
            return None
        config[name] = value
    return config


def _legal(spec: LaunchSpec, knob: space.Knob, value: Any) -> bool:
    if not isinstance(value, bool) and value in knob.values:
        return True
    if knob.name not in space.grid_blocks(spec):
        return False
    low = space.MIN_INDUCTOR_BLOCK if spec.kind == "inductor" else space.MIN_BLOCK
    return (isinstance(value, int) and not isinstance(value, bool) and value & (value - 1) == 0
            and low <= value <= space.MAX_BLOCK)


def _key(config: dict) -> tuple:
    return tuple(sorted(config.items(), key=lambda item: item[0]))
