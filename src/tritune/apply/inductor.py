"""Decisions at Inductor's launch: ``CachingAutotuner.run`` (torch 2.11 and 2.13).

Inductor launches its kernels through its own launchers, never ``JITFunction.run``; the hook
``tritune.capture.inductor.install_apply`` (the one module that patches ``CachingAutotuner.run``)
lets the applier run each launch, and tells the JIT shim the launch is in hand (under the
interpreter Inductor launches through ``InterpretedFunction.run``: not handled twice).

When a decision applies: once the tuner's config is settled. Under the interpreter that is
``configs[0]`` (what Inductor launches there). On a GPU it is after Inductor's own first ``run``
(it autotunes, saves the kernel, leaves one launcher: ``launchers[0].config``), unless a
coordinate-descent or combo tuning of that launcher is still to come or a plugin intercepts
launches. A benchmark run (``benchmark_run=True``, other keyword arguments) runs as Inductor
wrote it. So on a GPU the first launch of each Inductor kernel is Inductor's own.

Key: ``LiveKeyer`` over what ``inductor_spec.launch_spec`` records: ``fn.arg_names``, the
launcher's non-constexpr arguments in order, constexprs from the config's kwargs and
``triton_meta["constants"]``. Hot path: the settled launcher is remembered (one identity check),
a config whose constexprs no decision of the kernel has sends the tuner's launches past the
patch for good (``capture.inductor.straight_through``), and otherwise the launch's ``signature``
(``apply.jit``) finds its prepared launch (``InductorLaunch``: grid, compiled kernel and the
constexpr values, computed once) in one dict lookup.

Launch: the variant's jit function (``kernels.variant_kernel(tuner.fn, ...)``) with every
parameter by name and the spec's options (Inductor's compile options that the JIT accepts, from
``launch_spec``) updated with the decision's: what replay, verify and bench ran. The grid is
Inductor's own grid code for the new block sizes (``inductor_grid.grid_for``), cached per scalar
arguments. On a GPU the kernel is compiled once per plan (``run(warmup=True)``; the key fixes
every specialization Triton makes) and then launched as Inductor's launcher does, straight into
the compiled kernel on Inductor's stream, without the JIT's dispatch. Under the interpreter it
runs through ``run``. cpp-wrapper code and CUDA-graph replays do not call ``run``: not covered.

A persistent-grid decision (``Variant.grid``) launches on ``min(tiles, k x SMs)`` programs with
the tile count of Inductor's grid as its added argument(s) (``replay.persistent``); a grid it
does not cover leaves the launch to Inductor. Such a decision has a source, so it is never
served by Inductor's own launcher (``inductor_cache.not_config_only``).
"""

from __future__ import annotations

from typing import Any

from tritune import aliasing
from tritune.apply.kernels import Passes, variant_kernel
from tritune.apply.jit import ApplyError, JitEntry, decoded, persistent_grid
from tritune.store.keys import constexpr_value

_GRID_CACHE_LIMIT = 4096


class InductorEntry:
    """One ``CachingAutotuner`` as the applier sees it (see ``JitEntry``)."""

    __slots__ = ("tuner", "name", "counts", "keyer", "names", "constexprs", "constants", "positional", "extra",
                 "ran", "plans", "values", "fast", "tensor", "config", "launcher", "source_hash", "unmatched",
                 "candidates")

    remember = JitEntry.remember

    def __init__(self, tuner: Any, name: str, counts: list[int]):
        self.tuner, self.name, self.counts = tuner, name, counts
        self.keyer = None
        self.ran = False  # Inductor's own run went first (GPU: autotuned, saved, one launcher)
        self.plans: dict[tuple, InductorPlan | None] = {}
        self.values: dict[int, tuple[Any, dict]] = {}  # id(config) -> (config, constexpr values)
        self.fast: dict[tuple, InductorLaunch | None] = {}  # signature -> prepared launch (this config)
        self.tensor = None
        self.config = self.launcher = None  # the settled config, and the launcher that holds it
        self.unmatched = False  # no decision has the settled config's constexprs
        self.candidates: list = []  # the configs Inductor tunes among (apply.inductor_cache)
        self.source_hash = ""

    def settle(self, config: Any, index: Any) -> None:
        """A newly settled ``config``: ``unmatched`` if no decision of this kernel has its constexprs."""
        self.config, self.fast = config, {}
        try:
            values = {n: constexpr_value(v) for n, v in self.constexpr_values(config).items()}
        except ValueError:  # a value capture cannot record (UnsupportedConstexpr): no decision has it
            self.unmatched = True
            return
        self.unmatched = not any(values == decided
                                 for decided in index.constexprs.get((self.name, self.source_hash), ()))

    def prepare(self) -> str:
        """What every launch of this tuner shares (as ``inductor_spec`` computes it); returns the
        kernel's source hash."""
        from tritune.capture.inductor_spec import constexpr_names, kernel_source_text
        from tritune.capture.spec import source_hash

        fn, tuner = self.tuner.fn, self.tuner
        self.names = list(fn.arg_names)
        self.constexprs = constexpr_names(fn)
        constants = dict(tuner.triton_meta.get("constants") or {})
        self.constants = {k: v for k, v in constants.items() if k in self.constexprs}
        self.positional = [n for n in self.names if n not in self.constexprs]
        self.extra = list(tuner.inductor_meta.get("extra_launcher_args") or ())
        self.source_hash = source_hash(kernel_source_text(fn))
        return self.source_hash

    def settled_config(self, kwargs: dict) -> Any | None:
        """The config Inductor launches now, or None while it is not settled (see the docstring)."""
        if len(kwargs) != 1 or "stream" not in kwargs:
            if kwargs.get("benchmark_run") or any(k not in ("stream", "benchmark_run") for k in kwargs):
                return None
        tuner = self.tuner
        launchers = getattr(tuner, "launchers", None) or ()
        launcher = self.launcher
        if launcher is not None and len(launchers) == 1 and launchers[0] is launcher and launcher.config is self.config:
            return self.config  # settled before, on this very launcher and config
        if getattr(tuner, "triton_interpret", False):
            return tuner.configs[0]
        if not self.ran or getattr(tuner, "_plugins", None):
            return None
        if len(launchers) != 1:
            return None
        config = launchers[0].config
        meta = tuner.inductor_meta
        if meta.get("coordinate_descent_tuning") and not getattr(config, "found_by_coordesc", False):
            return None
        if meta.get("combo_tuning_groups") and not getattr(config, "found_by_combo_autotune", False):
            return None
        self.launcher = launchers[0]
        return config

    def constexpr_values(self, config: Any) -> dict:
        """The constexprs a launch with ``config`` gets (``launch_spec``'s rule), cached per config."""
        found = self.values.get(id(config))
        if found is not None and found[0] is config:
            return found[1]
        chosen = dict(getattr(config, "kwargs", {}) or {})
        for name in ("num_warps", "num_stages"):  # a kernel may take these as constexprs
            if name in self.constexprs and name not in chosen and name not in self.constants:
                chosen[name] = getattr(config, name)
        values = {n: chosen[n] if n in chosen else self.constants[n] for n in self.constexprs
                  if n in chosen or n in self.constants}
        self.values[id(config)] = (config, values)
        return values

    def split(self, args: tuple) -> tuple[tuple, tuple]:
        """The launcher's arguments: the kernel's, then ``extra_launcher_args`` (grid only)."""
        if not self.extra:
            return args, ()
        return args[:len(args) - len(self.extra)], args[len(args) - len(self.extra):]


class InductorPlan:
    """One decision for one tuner, key and config."""

    def __init__(self, entry: InductorEntry, config: Any, args: tuple, decision: Any):
        from tritune.capture.inductor_spec import launch_spec

        variant = decision.variant
        unknown = sorted(set(variant.constexprs) - set(entry.constexprs))
        if unknown:
            raise ApplyError(f"decision sets {unknown}, which are not constexprs of {entry.name} "
                             f"(its constexprs: {sorted(entry.constexprs)})")
        spec, _ = launch_spec(entry.tuner, args, config, config_from="first")
        self.entry, self.variant, self.decision = entry, variant, decision
        self.rule = spec.grid_rule
        self.options = {**spec.options, **variant.options}
        self.overrides = decoded(variant.constexprs, entry.tuner.fn)
        self.fn = variant_kernel(live_kernel(entry.tuner), variant)
        self.order = list(self.fn.arg_names)
        self.interpreted = getattr(entry.tuner, "triton_interpret", False)
        self.persistent = persistent_grid(self.fn, variant)
        self.passes = Passes(variant)
        self.noalias = aliasing.assumes_noalias(variant)  # each launch checks its tensors (``InductorLaunch.guard``)
        self.compiled = None
        self.launcher = None  # the decision as Inductor's own launcher (``apply.inductor_swap``), when it is one
        self._grids: dict[tuple, tuple] = {}

    def params(self, kernel_args: tuple, constexprs: dict) -> dict:
        params = dict(zip(self.entry.positional, kernel_args))
        params.update(constexprs)
        params.update(self.overrides)
        return params

    def grid(self, params: dict, extra_args: tuple) -> tuple:
        from tritune.capture.inductor_grid import grid_for

        scalars = {n: params[n] for n in self.entry.positional if _is_int(params[n])}
        scalars.update((n, v) for n, v in zip(self.entry.extra, extra_args) if _is_int(v))
        cache_key = tuple(scalars.values())
        found = self._grids.get(cache_key)
        if found is None:
            found = grid_for(self.rule, {n: params[n] for n in self.entry.constexprs if n in params}, scalars)
            if len(self._grids) >= _GRID_CACHE_LIMIT:
                self._grids.clear()
            self._grids[cache_key] = found
        return found

    def prepare(self, plan_key: tuple, kernel_args: tuple, extra_args: tuple,
                constexprs: dict) -> "InductorLaunch | None":
        """The launch of every call with these arguments' signature (fixed: grid, constexprs);
        None: a persistent-grid decision that does not cover its grid (Inductor launches it)."""
        launch = InductorLaunch(self, plan_key, kernel_args, extra_args, constexprs)
        return None if launch.grid is None else launch

    def compile(self, params: dict, grid: tuple) -> Any:
        """On a GPU, once per plan: the variant's compiled kernel (the key fixes every
        specialization Triton makes)."""
        if self.compiled is None:
            fn = self.fn
            compiled = self.passes.run(fn, None, lambda: fn.run(grid=grid, warmup=True, **params, **self.options))
            self.compiled = compiled.result() if hasattr(compiled, "result") else compiled  # an async compile
        return self.compiled


class InductorLaunch:
    """A plan's launch for one signature of the launcher's arguments."""

    __slots__ = ("plan", "plan_key", "count", "grid", "params", "tail", "runner", "guard")

    def __init__(self, plan: InductorPlan, plan_key: tuple, kernel_args: tuple, extra_args: tuple,
                 constexprs: dict):
        self.plan, self.plan_key = plan, plan_key
        self.count = len(kernel_args)
        params = plan.params(kernel_args, constexprs)
        self.grid = plan.grid(params, extra_args)
        if plan.persistent is not None:
            launched = plan.persistent.launch(self.grid)
            self.grid = None if launched is None else launched[0]
            params.update(launched[1] if launched else {})
        self.params = {n: v for n, v in params.items() if n not in plan.entry.positional}  # the constexprs
        # the compiled kernel takes fn.arg_names in order: Inductor puts the constexprs last, so
        # each call is the launcher's own arguments followed by these values
        count, order = self.count, plan.order
        positional_first = order[:count] == plan.entry.positional and all(n in self.params for n in order[count:])
        self.tail = tuple(self.params[n] for n in order[count:]) if positional_first else None
        self.runner = None
        self.guard = None
        if plan.noalias:
            import torch

            self.guard = aliasing.Guard(kernel_args, {}, torch.Tensor)

    def launch(self, args: tuple, stream: Any) -> Any:
        plan = self.plan
        kernel_args = args[:self.count] if len(args) != self.count else args
        runner = self.runner
        if runner is not None and self.tail is not None:
            return runner(*kernel_args, *self.tail, stream=stream)
        params = dict(zip(plan.entry.positional, kernel_args))
        params.update(self.params)
        if plan.interpreted:
            fn = plan.fn
            return plan.passes.run(fn, None, lambda: fn.run(grid=self.grid, warmup=False, **params, **plan.options))
        if runner is None:
            runner = self.runner = plan.compile(params, self.grid)[self.grid]
        return runner(*[params[n] for n in plan.order], stream=stream)


def live_kernel(tuner: Any) -> Any:
    """``tuner.fn`` with its Python function. A tuner compiled in one of Inductor's worker
    processes reaches the program without it (``prepare_for_pickle`` sets ``fn.fn = None``);
    Inductor reloads it the same way when it needs to compile in the parent (coordinate descent)."""
    if getattr(tuner.fn, "fn", None) is not None:
        return tuner.fn
    ensure = getattr(tuner, "_ensure_kernel_loaded", None)  # torch 2.13
    reload = getattr(tuner, "_reload_kernel", None)
    if callable(ensure):
        ensure()
    elif callable(reload):
        tuner.fn = reload().fn
    if getattr(tuner.fn, "fn", None) is None:
        raise ApplyError("the kernel was compiled in a worker process and Inductor cannot reload it here")
    return tuner.fn


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
