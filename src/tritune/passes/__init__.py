"""tritune's IR passes and the pipeline that runs them.

The pipeline is a flat, named list that reads top to bottom, like Triton's ``make_ttir``:

1. ``merge-redundant-loads``   (exact)     loads differing only in cache hints -> one load
2. ``merge-redundant-reduces`` (exact)     identical reductions -> one (CSE, after step 1)
3. ``reassociate-division``    (fast-math) (a / b) / c -> a / (b * c), c / (a / b) -> (b * c) / a
4. ``constant-division``       (exact for powers of two; other constants only under fast-math)

``resolve`` turns user names (``exact``, ``fast``, or pass names) into pipeline order.

Assumptions are not passes, but travel with them: ``noalias`` (``model.variant.NOALIAS``) in a
pass list tells the passes that can use it (``ASSUMPTIONS`` of their module) that distinct pointer
arguments do not overlap; a variant built so also says it in ``Variant.assumes``, which the
applier checks per launch. (``assumes`` alone, as on an imported decision, is a guard only: the
binary is built from ``passes`` as it was verified.)
It travels with the pass names (``TRITUNE_PASSES``, the cache salt), so a binary built under it
never shares a cache key with one built without; the applier checks it per launch
(``tritune.aliasing``).
"""

from __future__ import annotations

import dataclasses
from types import ModuleType
from typing import Iterable

from triton._C.libtriton import ir

from tritune.ir import parse_module
from tritune.model.variant import NOALIAS
from tritune.passes import constant_division, merge_redundant_loads, merge_redundant_reduces, reassociate_division

PIPELINE: tuple[ModuleType, ...] = (
    merge_redundant_loads,
    merge_redundant_reduces,
    reassociate_division,
    constant_division,
)
BY_NAME = {p.NAME: p for p in PIPELINE}
EXACT_SET = tuple(p.NAME for p in PIPELINE if p.EXACT)
FAST_SET = tuple(BY_NAME)
ASSUMPTIONS = (NOALIAS,)
# "exact-noalias": the pseudo-pass stored variants of older runs name; tritune now says
# ("exact", "noalias"): the assumption by its one name (model.variant.NOALIAS)
ALIASES = {"exact": EXACT_SET, "fast": FAST_SET, "all": FAST_SET, "exact-noalias": (*EXACT_SET, NOALIAS)}


class UnknownPassError(ValueError):
    pass


class InvalidModuleError(RuntimeError):
    """A pass left the module invalid (caught by the debug-mode verifier)."""


def resolve(names: Iterable[str]) -> tuple[str, ...]:
    """Expand aliases and validate names; the result follows pipeline order, then assumptions."""
    wanted: set[str] = set()
    for name in names:
        if name in ALIASES:
            wanted.update(ALIASES[name])
        elif name in BY_NAME or name in ASSUMPTIONS:
            wanted.add(name)
        else:
            known = ", ".join([*ALIASES, *BY_NAME, *ASSUMPTIONS])
            raise UnknownPassError(f"unknown pass {name!r}; known: {known}")
    return tuple(name for name in (*BY_NAME, *ASSUMPTIONS) if name in wanted)


@dataclasses.dataclass(frozen=True)
class PipelineResult:
    counts: dict[str, int]  # pass name -> ops removed or rewritten

    @property
    def changed(self) -> bool:
        return any(self.counts.values())


def run_pipeline(module: ir.module, names: Iterable[str], *, fast_math: bool = False,
                 verify: bool = False) -> PipelineResult:
    """Run the named passes on ``module`` in pipeline order, in place (with the assumptions
    among ``names`` given to the passes that can use them)."""
    resolved = resolve(names)
    assumed = {name for name in resolved if name in ASSUMPTIONS}
    counts = {}
    for name in resolved:
        if name in assumed:
            continue
        module_of = BY_NAME[name]
        told = {a: True for a in assumed if a in getattr(module_of, "ASSUMPTIONS", ())}
        counts[name] = module_of.run(module, fast_math=fast_math, **told)
        if verify and not module.verify():
            raise InvalidModuleError(f"module invalid after pass {name}")
    return PipelineResult(counts)


def preview(ttir: str, *, fast_math: bool = False) -> dict[str, int]:
    """What each pass would change in a TTIR module, each run alone on a fresh copy.

    Alone, except that ``merge-redundant-reduces`` runs after ``merge-redundant-loads`` as in the
    pipeline (Table I's reduces only become identical once their loads are one), and counts only
    its own merges.

    ``name[noalias]``, for each pass whose run (or the pass run before it) can use the no-alias
    assumption: how many more it changes under it (``("exact", "noalias")``), what becomes possible when
    the applier's per-launch check holds.
    """
    counts = {}
    for name in FAST_SET:
        before = ("merge-redundant-loads",) if name == "merge-redundant-reduces" else ()
        counts[name] = _count(ttir, (*before, name), name, fast_math)
        if any(NOALIAS in getattr(BY_NAME[n], "ASSUMPTIONS", ()) for n in (*before, name)):
            counts[f"{name}[{NOALIAS}]"] = _count(ttir, (*before, name, NOALIAS), name, fast_math) - counts[name]
    return counts


def _count(ttir: str, names: tuple[str, ...], name: str, fast_math: bool) -> int:
    return run_pipeline(parse_module(ttir), names, fast_math=fast_math).counts[name]
