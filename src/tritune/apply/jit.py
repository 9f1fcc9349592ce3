"""Decisions at the JIT launch: ``kernel[grid](...)`` of ``@triton.jit``, ``@triton.autotune``
and ``@triton.heuristics`` kernels, on the GPU and under the interpreter.

This is the level capture records at: the autotuner and heuristics hand the chosen config to
``JITFunction.run`` as keyword arguments, so the key of a launch (``LiveKeyer`` over the bound
arguments, constexprs included) is the key of the spec capture wrote for it. An autotuner's
timing trials are not launches of the program (the shim keeps them quiet): it chooses among its
configs as before, and the decision replaces the launch of the config it chose.

Per launch, for a kernel with decisions on this target: bind the arguments (``Kernel.bind``),
key them (``LiveKeyer``, cached per raw argument tuple), look the plan up by key. A ``JitPlan``
rewrites the launch: the decision's constexprs replace the program's (positionally or by name,
where the program passed them), its options are added to the keyword arguments, the jit function
is the variant's (``kernels.variant_kernel``), and a fixed grid is recomputed (``grid``; a
callable one is called by Triton with the new constexprs). A source variant gets every parameter
by name, as replay passes them (its text may order parameters differently).
"""

from __future__ import annotations

from typing import Any, Callable

from tritune.apply import grid as grids
from tritune.apply.kernels import Passes, options_key, variant_kernel
from tritune.capture._jit_shim import Launch

_GRID_CACHE_LIMIT = 4096


class ApplyError(ValueError):
    """A decision that cannot be applied to this kernel (one line saying why)."""


class JitEntry:
    """One jit function as the applier sees it: its counters and, if it has decisions here, its
    keyer and plans (``None`` in ``plans``: the key has no usable decision)."""

    __slots__ = ("fn", "name", "counts", "kernel", "keyer", "plans")

    def __init__(self, fn: Any, name: str, counts: list[int], kernel: Any = None, keyer: Any = None):
        self.fn, self.name, self.counts = fn, name, counts
        self.kernel, self.keyer = kernel, keyer
        self.plans: dict[str, JitPlan | None] = {}


class JitPlan:
    """One decision, ready to rewrite launches of one kernel on one key."""

    def __init__(self, kernel: Any, decision: Any):
        variant = decision.variant
        unknown = sorted(set(variant.constexprs) - kernel.constexpr)
        if unknown:
            raise ApplyError(f"decision sets {unknown}, which are not constexprs of {kernel.name} "
                             f"(its constexprs: {sorted(kernel.constexpr)})")
        self.kernel, self.decision, self.variant = kernel, decision, variant
        self.fn = variant_kernel(kernel.fn, variant)
        self.by_name = variant.source is not None
        self.constexprs = dict(variant.constexprs)
        self.options = dict(variant.options)
        self.passes = Passes(variant)
        self.positions = {name: i for i, name in enumerate(kernel.names)}
        self.params = frozenset(kernel.names)
        self._grids: dict[Any, tuple | None] = {}

    def rewrite(self, launch: Launch, bound: dict) -> Launch | None:
        """The launch to make instead, or None when its grid cannot be recomputed safely."""
        grid = launch.grid
        if self.constexprs and not callable(grid):
            grid = self._fixed_grid(grid, bound)
            if grid is None:
                return None
        if self.by_name:
            kwargs = {name: bound[name] for name in self.kernel.names if name in bound}
            kwargs.update(self.constexprs)
            kwargs.update((k, v) for k, v in launch.kwargs.items() if k not in self.params)
            kwargs.update(self.options)
            return Launch(self.fn, (), kwargs, grid, launch.wrappers)
        args, kwargs = list(launch.args), dict(launch.kwargs)
        for name, value in self.constexprs.items():
            position = self.positions[name]
            if position < len(args):
                args[position] = value
            else:
                kwargs[name] = value
        kwargs.update(self.options)
        return Launch(self.fn, tuple(args), kwargs, grid, launch.wrappers)

    def launch(self, chosen: Launch, run: Callable[[Launch], Any]) -> Any:
        options = options_key(chosen.kwargs, self.params) if self.passes.names else None
        return self.passes.run(chosen.fn, options, lambda: run(chosen))

    def _fixed_grid(self, grid: Any, bound: dict) -> tuple | None:
        kernel = self.kernel
        scalars = {n: bound[n] for n in kernel.names if n not in kernel.constexpr and _is_int(bound.get(n))}
        cache_key = (tuple(grid), tuple(scalars.values()))
        found = self._grids.get(cache_key, False)
        if found is False:
            before = {n: _plain(bound[n]) for n in kernel.names if n in kernel.constexpr and n in bound}
            found = grids.recompute(grid, before, self.constexprs, scalars)
            if len(self._grids) >= _GRID_CACHE_LIMIT:
                self._grids.clear()
            self._grids[cache_key] = found
        return found


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)  # a tl.constexpr


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
