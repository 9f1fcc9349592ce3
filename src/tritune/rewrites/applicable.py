"""Every registered rule on one kernel: the rewrites that apply, and why each other rule does not.

``tritune rewrites`` lists them and the loop's ``source-rewrite`` family proposes them. The
registry is read when called (``tritune.rewrites.RULES``), so a rule registered later, or a test's
fake one, is seen. A rule that raises anything but ``NotRewritable`` has a bug: it is reported
as its reason (one line) and the other rules go on; it never stops a listing or an optimize run.
"""

from __future__ import annotations

import dataclasses

import tritune.rewrites
from tritune.errors import one_line
from tritune.rewrites.base import KernelSource, NotRewritable, Rewrite, Rule


@dataclasses.dataclass(frozen=True)
class Found:
    """What the rules make of one kernel."""

    rewrites: tuple[Rewrite, ...]  # registry order, each rule's own order within
    reasons: dict[str, str]  # rule name -> why it does not apply ("source": the kernel did not parse)


def rules() -> dict[str, Rule]:
    return dict(tritune.rewrites.RULES)


def applicable(text: str, kernel: str, *, launch: dict | None = None, noalias: bool = False) -> Found:
    """Run every rule on function ``kernel`` of the source ``text`` (``noalias``: the rules may
    assume distinct pointer arguments do not overlap; ``KernelSource``)."""
    try:
        source = KernelSource.parse(text, kernel, launch=launch, noalias=noalias)
    except NotRewritable as exc:
        return Found((), {"source": str(exc)})
    found: list[Rewrite] = []
    reasons: dict[str, str] = {}
    for name, rule in rules().items():
        try:
            made = [r for r in rule.rewrites(source) if r.source != text or r.grid is not None]
        except NotRewritable as exc:
            reasons[name] = str(exc)
            continue
        except Exception as exc:  # noqa: BLE001 - a rule's bug: its reason, not the end of the run
            reasons[name] = f"the rule failed: {one_line(exc)}"
            continue
        if made:
            found.extend(made)
        else:
            reasons[name] = "no rewrite proposed"
    return Found(tuple(found), reasons)


def apply(rule_name: str, text: str, kernel: str, params: dict, *, launch: dict | None = None,
          noalias: bool = False) -> Rewrite:
    """Rule ``rule_name`` with these parameters (``Rule.apply``); ``NotRewritable`` when it is not
    registered, not legal here, or fails."""
    rule = rules().get(rule_name)
    if rule is None:
        raise NotRewritable(f"no rule named {rule_name!r} is registered")
    source = KernelSource.parse(text, kernel, launch=launch, noalias=noalias)
    try:
        return rule.apply(source, params)
    except NotRewritable:
        raise
    except Exception as exc:  # noqa: BLE001 - as in applicable()
        raise NotRewritable(f"the rule failed: {one_line(exc)}") from None
