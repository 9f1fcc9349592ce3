"""Fake source rewrite rules for the tests of the machinery around rules (``tritune rewrites``,
the ``source-rewrite`` family, the loop): registered with ``monkeypatch.setattr(tritune.rewrites,
"RULES", ...)``, never in the real registry. Each makes a change that computes the same thing."""

from __future__ import annotations

import dataclasses

from tritune.rewrites.base import EXACT, Edit, KernelSource, Knob, NotRewritable, Rewrite

STAGES = (1, 2, 3)


class CommentRule:
    """Puts ``# NAME S=<s>`` above the kernel's first statement (no operation changes, whatever the
    class it claims). Fires on the kernels named in ``only`` (every kernel when None); its
    parameter ``S`` is a knob over ``STAGES``, 2 by default."""

    def __init__(self, name: str = "comment", exact: str = EXACT, only: tuple[str, ...] | None = None,
                 assumes: tuple[str, ...] = ()) -> None:
        self.name, self.exact, self.only, self.assumes = name, exact, only, assumes
        self.seen: list[KernelSource] = []

    def rewrites(self, kernel: KernelSource) -> list[Rewrite]:
        self.seen.append(kernel)
        if self.only is not None and kernel.kernel not in self.only:
            raise NotRewritable(f"{kernel.kernel} has no pattern for {self.name}")
        return [self.apply(kernel, {"S": 2})]

    def apply(self, kernel: KernelSource, params: dict) -> Rewrite:
        stages = params.get("S", 2)
        if stages not in STAGES:
            raise NotRewritable(f"S={stages} is not one of {STAGES}")
        first = kernel.function.body[0]
        start = kernel.line_start(first.lineno)
        text = kernel.edit([Edit(start, start, f"{kernel.indent_of(first)}# {self.name} S={stages}\n")])
        return Rewrite(self.name, self.exact, f"{self.name} is legal here: a comment", text, params={"S": stages},
                       knobs=(Knob("S", 2, STAGES),), assumes=self.assumes)


class BrokenRule:
    """A rule with a bug: raises something other than NotRewritable."""

    name, exact = "broken", EXACT

    def rewrites(self, kernel: KernelSource) -> list[Rewrite]:
        raise KeyError("a bug in the rule")

    def apply(self, kernel: KernelSource, params: dict) -> Rewrite:
        raise KeyError("a bug in the rule")


class GridRule(CommentRule):
    """Like persistent-grid: one text for every ``k``, only the launch grid differs."""

    def rewrites(self, kernel: KernelSource) -> list[Rewrite]:
        return [self.apply(kernel, {"k": 4}), self.apply(kernel, {"k": 8})]

    def apply(self, kernel: KernelSource, params: dict) -> Rewrite:
        k = params.get("k", 4)
        same = super().apply(kernel, {"S": 2})
        return dataclasses.replace(same, params={"k": k}, knobs=(Knob("k", 4, (1, 2, 4, 8)),),
                                   grid={"persistent": {"k": k, "tiles": "_tiles"}})
