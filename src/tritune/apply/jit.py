"""Decisions at ``JITFunction.run``: jit, autotune and heuristics launches (the JIT shim's hook).

A launch's hot path (``Applier._direct``; ``Applier.jit_hook`` while other hooks or listeners
are on the shim): the entry of its jit function (one dict lookup by ``id``; a function with no
decision here never gets that far: the shim sends its launches straight to Triton), then the
launch's signature (``JitEntry.signatures``, see ``apply.fast``: per tensor its dtype, shape and
16-byte alignment, per int, constexpr and option its value, each argument's class; no binding,
no ``inspect``) and one dict lookup in ``JitEntry.fast``, which maps it to a ``Prepared`` launch
or None (no usable decision). Only a new signature binds the arguments (``Kernel.bind``), builds
the ``DecisionKey`` (``LiveKeyer``) and the plan. A signature fixes everything the key, the
rewrite, Triton's specialization and the grid rule depend on, so the ``Prepared`` launch is
computed once and each launch only puts the live arguments in: the decision's constexprs replace
the program's (positionally or by name, where the program passed them), its options are added to
the keyword arguments, the jit function is the variant's (``kernels.variant_kernel``), and a
fixed grid is recomputed (``grid``, once per grid tuple; a callable one is called with the new
constexprs). A source variant gets every parameter by name, as replay passes them (its text may
order parameters differently).

A persistent-grid decision (``Variant.grid``, ``replay.persistent``) launches on the grid the
program gave, resolved as above (a callable one called with the arguments by name, as Triton
calls it): its tile count becomes the added argument(s) and the launch gets min(tiles, k x SMs)
programs, the SMs of the device current when the plan is made. A grid it does not cover (a
dimension its kernel does not read) is launched as written.

Once a prepared launch went through Triton's ``run`` (``Prepared.record``), its compiled binary
is kept and later launches go to it straight (``apply.fast.Direct``), unless a launch hook or
anything else Triton honours per launch is set.

A decision that assumes its tensor arguments do not overlap (``aliasing.assumes_noalias``) gives
its prepared launches a ``guard`` (``aliasing.Guard``; None for every other decision): the
applier checks it before each launch with the decision and launches the program's kernel as
written where the arguments overlap; its binary is a ``GuardedDirect``.

``signature`` (Inductor's launches, and the general form of a jit launch's signature): per
argument a tensor's dtype, shape and alignment, a float's or bool's class, anything else itself.
"""

from __future__ import annotations

from typing import Any, Callable

from tritune import aliasing
from tritune.apply import grid as grids
from tritune.apply.fast import Direct, GuardedDirect, Recipe, Signatures, compiled_kernel
from tritune.apply.kernels import Passes, options_key, variant_kernel
from tritune.capture._jit_shim import Launch, is_interpreted

_GRID_CACHE_LIMIT = 4096
_MISSING = object()


class ApplyError(ValueError):
    """A decision that cannot be applied to this kernel (one line saying why)."""


_FAST_LIMIT = 4096  # signatures kept per function; cleared when full (e.g. an int that changes every launch)
_FLOAT, _BOOL = ("float",), ("bool",)  # a float's or bool's value is not in the key (see keys.scalar_desc)


def signature(args: tuple, kwargs: dict, tensor: type) -> tuple:
    """What tells two launches of one function apart for the key and the rewrite, cheaply."""
    sig = [(a.dtype, a.shape, a.data_ptr() & 15) if isinstance(a, tensor)
           else _FLOAT if a.__class__ is float else _BOOL if a.__class__ is bool else a for a in args]
    if kwargs:
        for name, a in kwargs.items():
            sig.append(name)
            sig.append((a.dtype, a.shape, a.data_ptr() & 15) if isinstance(a, tensor)
                       else _FLOAT if a.__class__ is float else (_BOOL, a) if a.__class__ is bool else a)
    return tuple(sig)


class JitEntry:
    """One jit function as the applier sees it: its counters and, if it has decisions here, its
    keyer, plans by key (``None``: the key has no usable decision) and prepared launches by
    signature (``None``: no decision applies to that signature; ``signatures`` makes them)."""

    __slots__ = ("fn", "name", "counts", "kernel", "keyer", "plans", "fast", "tensor", "direct", "signatures")

    def __init__(self, fn: Any, name: str, counts: list[int], kernel: Any = None, keyer: Any = None):
        self.fn, self.name, self.counts = fn, name, counts
        self.kernel, self.keyer = kernel, keyer
        self.plans: dict[str, JitPlan | None] = {}
        self.fast: dict[tuple, Prepared | None] = {}
        self.tensor: type | None = None
        self.direct = None  # the fn.run that sends its launches to Applier._direct, past the shim
        self.signatures: Signatures | None = None

    def learn(self, kernel: Any, keyer: Any, tensor: type) -> None:
        """Decisions here: the kernel (``capture.jit_launch.Kernel``), its keyer, its signatures."""
        self.kernel, self.keyer, self.tensor = kernel, keyer, tensor
        self.signatures = Signatures(kernel.names, kernel.constexpr, tensor, signature)

    def remember(self, sig: tuple, prepared: "Prepared | None") -> None:
        if len(self.fast) >= _FAST_LIMIT:
            self.fast.clear()
        self.fast[sig] = prepared


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
        self.constexprs = decoded(variant.constexprs, kernel.fn)
        self.options = dict(variant.options)
        self.passes = Passes(variant)
        self.positions = {name: i for i, name in enumerate(kernel.names)}
        self.params = frozenset(kernel.names)
        self.persistent = persistent_grid(kernel.fn, variant)
        self.noalias = aliasing.assumes_noalias(variant)
        # the rule its fixed grid was verified on: read from the source, or arithmetic alone (apply.grid)
        self.tiles = kernel.tiles if variant.tiled else None

    def prepare(self, launch: Launch, bound: dict) -> "Prepared":
        """The rewrite of every launch with ``launch``'s signature (``bound``: its arguments by name)."""
        kernel, nargs = self.kernel, len(launch.args)
        guard = None
        if self.noalias:
            import torch

            guard = aliasing.Guard(launch.args, launch.kwargs, torch.Tensor)
        if self.by_name:
            given = set(kernel.names[:nargs]) | set(launch.kwargs)
            defaults = {n: bound[n] for n in kernel.names if n in bound and n not in given}
            return Prepared(self, bound, (), {**self.constexprs, **self.options}, kernel.names[:nargs], defaults,
                            guard)
        positions = tuple((self.positions[n], v) for n, v in self.constexprs.items() if self.positions[n] < nargs)
        overrides = {n: v for n, v in self.constexprs.items() if self.positions[n] >= nargs}
        overrides.update(self.options)
        return Prepared(self, bound, positions, overrides, None, None, guard)


class Prepared:
    """A decision's launch for one signature: what every launch with it gets, computed once."""

    __slots__ = ("plan", "fn", "positions", "overrides", "names", "defaults", "before", "scalars", "grids",
                 "fixed_grid", "ready", "options", "grids3", "direct", "recorded", "guard")

    def __init__(self, plan: JitPlan, bound: dict, positions: tuple, overrides: dict, names: list | None,
                 defaults: dict | None, guard: aliasing.Guard | None = None):
        kernel = plan.kernel
        self.plan, self.fn = plan, plan.fn
        self.positions, self.overrides, self.names, self.defaults = positions, overrides, names, defaults
        # a fixed grid follows changed constexprs; the scalars and constexprs it is computed from
        # are in the signature, so one recomputation per grid tuple serves every launch
        self.fixed_grid = bool(plan.constexprs)
        self.before = {n: _plain(bound[n]) for n in kernel.names if n in kernel.constexpr and n in bound}
        self.scalars = {n: bound[n] for n in kernel.names if n not in kernel.constexpr and _is_int(bound.get(n))}
        self.grids: dict[Any, tuple | None] = {}
        self.ready = not plan.passes.names  # passes: the first launch builds inside their scope
        self.options = None
        self.grids3: dict[Any, tuple | None] = {}  # a fixed grid as given -> the grid launched, padded to 3
        self.direct: Direct | None = None  # the binary, launched past Triton's run (``apply.fast``)
        self.recorded = False  # ``record`` ran (a binary is looked for once)
        self.guard = guard  # the decision assumes no overlap: True when a launch's tensors allow it

    def rewrite(self, launch: Launch) -> Launch | None:
        """The launch to make instead, or None when its grid cannot be recomputed safely."""
        found = self.arguments(launch.args, launch.kwargs, launch.grid)
        return None if found is None else Launch(self.fn, found[0], found[1], found[2], launch.wrappers)

    def arguments(self, args: tuple, kwargs: dict, grid: Any) -> tuple[tuple, dict, Any] | None:
        """``rewrite``'s arguments, keyword arguments and grid (the function is ``self.fn``)."""
        if self.fixed_grid and not callable(grid):
            grid = self._fixed(grid)
            if grid is None:
                return None
        if self.names is not None:  # by name
            named = dict(self.defaults)
            named.update(zip(self.names, args))
            named.update(kwargs)
            named.update(self.overrides)
            if self.plan.persistent is not None:
                return self._persistent(named, grid)
            return (), named, grid
        if self.positions:
            args = list(args)
            for position, value in self.positions:
                args[position] = value
            args = tuple(args)
        if self.overrides:
            kwargs = {**kwargs, **self.overrides} if kwargs else self.overrides
        return args, kwargs, grid

    def launch(self, chosen: Launch, run: Callable[[Launch], Any]) -> Any:
        if self.ready:
            return run(chosen)
        passes = self.plan.passes
        if self.options is None:
            self.options = options_key(chosen.kwargs, self.plan.params)
        result = passes.run(chosen.fn, self.options, lambda: run(chosen))
        self.ready = self.options in passes.built
        return result

    def grid3(self, grid: Any) -> tuple | None:
        """The grid to launch for a fixed ``grid`` as the program gave it, as three dimensions
        (None: it cannot be recomputed safely). The signature fixes what it depends on."""
        try:
            found = self.grids3.get(grid, _MISSING)
        except TypeError:  # a list: each time
            return _pad(self._fixed(grid) if self.fixed_grid else grid)
        if found is _MISSING:
            found = _remember(self.grids3, grid, _pad(self._fixed(grid) if self.fixed_grid else grid))
        return found

    def record(self, result: Any, args: tuple, kwargs: dict) -> None:
        """After a launch with the decision made through Triton's ``run`` (``result``: what it
        returned): keep the binary for ``Direct`` launches, when there is one to keep."""
        self.recorded = True
        kernel = compiled_kernel(result)
        if kernel is None or is_interpreted(self.fn):
            return
        from triton.runtime import driver

        active = driver.active
        recipe = Recipe(self.fn.arg_names, self._sources(len(args), kwargs), len(args))
        persistent = self.plan.persistent
        made = (kernel, active.get_current_device(), self.fn, recipe, self.grid3, active.get_current_device,
                active.get_current_stream, None if persistent is None else persistent.adapter(self.fn.arg_names))
        self.direct = Direct(*made) if self.guard is None else GuardedDirect(*made, guard=self.guard)

    def _sources(self, nargs: int, kwargs: dict) -> dict[str, tuple]:
        """Where each argument ``arguments`` hands Triton comes from (a ``Recipe``'s sources),
        in the order ``arguments`` lets them override each other."""
        names = self.plan.kernel.names
        sources = {name: ("fixed", value) for name, value in _defaults(self.fn).items()}
        if self.names is not None:
            sources.update((name, ("fixed", value)) for name, value in self.defaults.items())
        sources.update((names[i], ("arg", i)) for i in range(nargs))
        sources.update((names[i], ("fixed", value)) for i, value in self.positions)
        sources.update((name, ("kw", name)) for name in kwargs)
        sources.update((name, ("fixed", value)) for name, value in self.overrides.items())
        if self.plan.persistent is not None:  # placeholders: each launch puts its tile count in
            sources.update((name, ("fixed", 0)) for name in self.plan.persistent.extras)
        return sources

    def _persistent(self, named: dict, grid: Any) -> tuple[tuple, dict, tuple] | None:
        """A persistent-grid launch: the tile count of the program's grid, and fewer programs."""
        if callable(grid):
            grid = grid({name: named[name] for name in self.fn.arg_names if name in named})
        launched = self.plan.persistent.launch(grid)
        if launched is None:
            return None
        named.update(launched[1])
        return (), named, launched[0]

    def _fixed(self, grid: Any) -> tuple | None:
        try:
            found = self.grids.get(grid, _MISSING)
        except TypeError:  # a list: recomputed each time
            return grids.recompute(grid, self.before, self.plan.constexprs, self.scalars, self.plan.tiles)
        if found is _MISSING:
            found = _remember(self.grids, grid, grids.recompute(grid, self.before, self.plan.constexprs,
                                                                self.scalars, self.plan.tiles))
        return found


def decoded(constexprs: dict, fn: Any) -> dict:
    """A decision's constexprs as values to launch with (``model.constexprs.decode``: a dtype tag
    is a ``tl.dtype``, a jit function is found in ``fn``'s module); ``ApplyError`` if one cannot be."""
    from tritune.model import constexprs as codec

    if not codec.needs_decoding(constexprs):
        return dict(constexprs)
    scope = getattr(getattr(fn, "fn", None), "__globals__", None)
    try:
        return codec.decode_all(constexprs, scope)
    except codec.ConstexprError as error:
        raise ApplyError(str(error)) from None


def persistent_grid(fn: Any, variant: Any) -> Any:
    """The launch of ``variant``'s own grid rule (``replay.persistent.PersistentGrid``) on the
    current device, or None for a variant launched on the program's grid."""
    if variant.grid is None:
        return None
    if variant.source is None:
        raise ApplyError("a decision with a grid rule of its own but no source")
    from tritune.replay.persistent import PersistentGrid, sm_count

    interpreted = is_interpreted(fn)
    if interpreted:
        device = None
    else:
        from triton.runtime import driver

        device = driver.active.get_current_device()
    try:
        return PersistentGrid.of(variant.grid, sm_count(device, interpreted))
    except ValueError as error:
        raise ApplyError(str(error)) from None


def _remember(cache: dict, key: Any, value: Any) -> Any:
    if len(cache) >= _GRID_CACHE_LIMIT:
        cache.clear()
    cache[key] = value
    return value


def _pad(grid: Any) -> tuple | None:
    if grid is None:
        return None
    size = len(grid)
    return (grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1)


def _defaults(fn: Any) -> dict[str, Any]:
    """A jit function's parameter defaults (what Triton's binder fills in)."""
    return {name: p.default for name, p in fn.signature.parameters.items() if p.default is not p.empty}


def _plain(value: Any) -> Any:
    return getattr(value, "value", value)  # a tl.constexpr


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
