"""``Applier``: a store's decisions taking effect at launch time, in an unmodified program.

Hooks: the JIT shim's around hook (``capture._jit_shim.install_around``, put in once ``triton``
is imported) and Inductor's (``capture.inductor.install_apply``, once Inductor's runtime is):
the one module per patch rule, shared with capture, so capture and apply run together (capture
records the launch the program made; apply decides what runs).

Cost of a launch (``benchmarks/apply_overhead.py`` measures it on the GPU; ``tests/apply/test_apply.py``
prints the CPU figures with Triton's run replaced by a no-op):
  a kernel with no decision on this target   nothing after its first launch: the hook asks the
                                             shim to send the object's launches straight to
                                             Triton (``straight_through``; Inductor: the tuner,
                                             and a tuner settled on a config no decision has);
  a jit kernel with decisions                its own ``run`` (``_direct``, while apply is alone
                                             on the shim): the arguments' signature and one dict
                                             lookup to the prepared launch (``apply.jit``), whose
                                             compiled binary is launched past Triton's run
                                             (``apply.fast``: cheaper than Triton's own launch);
                                             a new signature goes through ``jit_hook``, its next
                                             launch through Triton's run (keeping the binary);
  an Inductor kernel with decisions          ``inductor_hook``: the settled launcher (an identity
                                             check), the signature, the prepared launch.

What is read when: the store's usable decisions at ``enable`` and ``refresh`` (the target, GPU
name, capability and Triton version, on the first launch: ``current_target`` would initialise
CUDA); a key's decision is re-checked in the store (``decision_for``) the first time a launch
has that key, and kept. ``refresh()`` re-reads everything (decisions rolled back or added since
take effect from the next launch); ``rollback(kernel)`` rolls the kernel's decisions back in the
store and refreshes at once. Only decisions signed by this user (``store.signing``) are read:
a store made elsewhere runs no code here, and each kernel it has decisions for is named once. A decision that fails (its source does not load, its launch
raises) is reported once on stderr and that key runs as written from then on.

``stats()`` per kernel: ``launches`` seen, ``applied`` (launched with a decision), ``skipped``
(a decision matched but was not applied: its grid could not be recomputed safely, or it failed,
or it assumes no overlap and the arguments overlapped), ``noalias_fallbacks`` (of those skipped,
the launches whose tensor arguments overlapped where the decision assumes they do not: the
program's own kernel ran; said once on stderr per kernel), ``decisions`` (usable decisions for
this target in the store).

No-alias decisions (``tritune.aliasing``): the check runs before every launch with such a
decision, on each path (``_direct``'s binary through ``GuardedDirect`` and its other launches,
``jit_hook``, ``inductor_hook``); such a decision is never handed to Inductor's own launcher or
autotune cache (``inductor_cache.not_config_only``), which would launch it unchecked.
"""

from __future__ import annotations

import sys
import threading
from pathlib import Path
from typing import Any, Callable

from tritune.apply import index as decision_index, inductor_swap
from tritune.apply.fast import REFUSED
from tritune.apply.jit import JitEntry, JitPlan, Prepared, signature
from tritune.capture import _jit_shim, inductor as inductor_shim
from tritune.model.target import Target

_MISSING = object()


class Applier:
    """Applies one store's decisions; ``tritune.apply.enable`` makes and installs one."""

    def __init__(self, store: Any, *, device: str | None = None, inductor_cache: bool = False):
        from tritune.store import DecisionStore, StoreError
        from tritune.store.connection import empty_store

        if isinstance(store, (str, Path)):
            if not Path(store).is_file():
                raise StoreError(f"no decision store at {store}")
            if (empty := empty_store(Path(store))) is not None:  # read, never made: no schema written into it
                raise StoreError(empty)
            store = DecisionStore(store)
        self.store, self.path, self.device = store, Path(store.path), device
        self.inductor_cache = inductor_cache  # also write Inductor's autotune cache (``apply.inductor_cache``)
        self._owner_thread = threading.get_ident()
        self._local = threading.local()
        self._reported: set[tuple[str, str]] = set()
        self._decisions = self._read()
        self._forget_stale()
        self._target: Target | None = None
        self._index: decision_index.Index | None = None
        self._jit: dict[int, JitEntry] = {}
        self._tuners: dict[int, Any] = {}
        self._swaps = inductor_swap.Swaps()  # tuners launching a decision's launcher (shared by successors)
        self._counts: dict[str, list[int]] = {}  # kernel -> [launches, applied, skipped, noalias fallbacks]
        self._pending: Callable | None = None
        self._hooks = (self.jit_hook, self.inductor_hook)  # one bound method each: the shims compare them
        self.installed = False

    # ------------------------------------------------------------------------ public

    @property
    def target(self) -> dict:
        """``{"gpu", "capability", "triton_version"}`` the live keys are made for."""
        if self._target is None:
            from tritune.store import current_target

            self._target = current_target(self.device)
        return self._target

    @property
    def launches(self) -> int:
        """Launches seen so far, of every kernel."""
        return sum(counts[0] for counts in self._counts.values())

    def refresh(self) -> int:
        """Re-read the store's usable decisions; returns how many are for this target."""
        self._decisions = self._read()
        self._forget_stale()
        self._index = None
        self._jit, self._tuners = {}, {}
        self._swaps.restore()  # a rolled-back decision stops now; the others come back at their next launch
        _jit_shim.restore_straight()  # a function without decisions may have some now
        inductor_shim.restore_straight()
        return len(self._get_index().by_sha)

    def reusable(self, store: Any, device: str | None) -> bool:
        """For ``enable`` again: True if this applier is for ``store`` and ``device`` (re-reading
        the store; a changed set of decisions starts its prepared state afresh)."""
        if not isinstance(store, (str, Path)):
            if store is not self.store:  # another DecisionStore object: its own connection
                return False
            store = store.path
        if device != self.device or not Path(store).is_file() or Path(store).resolve() != self.path.resolve():
            return False
        decisions = self._read()
        if _identity(decisions) != _identity(self._decisions):
            self._decisions = decisions
            self._forget_stale()
            self._index = None
            self._jit, self._tuners = {}, {}
            self._swaps.restore()
        return True

    def successor(self, inductor_cache: bool = False) -> "Applier":
        """A new applier for the same store that takes over everything this one prepared (its
        entries, plans, prepared launches) with counters of its own: ``stats()`` of each applier
        ``enable`` returned count the launches made while it was the one enabled."""
        new = object.__new__(Applier)
        new.__dict__.update(self.__dict__)
        new.inductor_cache, new.installed, new._pending, new._counts = inductor_cache, False, None, {}
        new._hooks = (new.jit_hook, new.inductor_hook)
        for entry in (*self._jit.values(), *self._tuners.values()):
            entry.counts = new._counter(entry.name)
            if isinstance(entry, JitEntry):
                entry.direct = None  # made again by the new applier's hook
        return new

    def rollback(self, kernel: str) -> int:
        """Roll back every decision of ``kernel`` in the store and stop applying them now."""
        count = self._store().rollback_all(kernel)
        self.refresh()
        return count

    def stats(self) -> dict[str, dict[str, int]]:
        """Per kernel: launches seen, launches applied and skipped, decisions for this target."""
        per_kernel = self._get_index().per_kernel
        stats = {}
        for name in sorted(set(self._counts) | set(per_kernel)):
            launches, applied, skipped, fallbacks = self._counts.get(name, (0, 0, 0, 0))
            stats[name] = {"launches": launches, "applied": applied, "skipped": skipped,
                           "noalias_fallbacks": fallbacks, "decisions": per_kernel.get(name, 0)}
        return stats

    def install(self) -> None:
        from tritune.capture import _after_import

        if self.installed:
            return
        self.installed = True
        self._pending = _after_import.when_imported("triton", self._install_jit)
        inductor_shim.install_apply(self._hooks[1])

    def uninstall(self) -> None:
        from tritune.capture import _after_import

        if not self.installed:
            return
        self.installed = False
        if self._pending is not None:
            _after_import.cancel("triton", self._pending)
            self._pending = None
        _jit_shim.uninstall_around(self._hooks[0])
        inductor_shim.uninstall_apply()
        self._swaps.restore()  # Inductor's own launchers again, at once

    # ------------------------------------------------------------------- the hooks

    def jit_hook(self, launch: Any, run: Callable[[Any], Any]) -> Any:
        """The JIT shim's around hook: one launch of ``kernel[grid](...)`` (see ``apply.jit``)."""
        fn = launch.fn
        entry = self._jit.get(id(fn))
        if entry is None or entry.fn is not fn:
            entry = self._jit_entry(fn)
        entry.counts[0] += 1
        if entry.keyer is None:  # no decision for this function: its next launches skip the shim
            _jit_shim.straight_through(launch, self._hooks[0])
            return run(launch)
        if entry.direct is None or vars(fn).get("run") is not entry.direct:  # next launches: to ``_direct``
            _jit_shim.direct(launch, self._hooks[0], lambda original: self._direct(entry, original))
        sig = entry.signatures(launch.args, launch.kwargs)
        try:
            prepared = entry.fast.get(sig, _MISSING)
        except TypeError:  # an unhashable argument: the slow way, every time
            prepared = self._jit_prepare(entry, launch)
        if prepared is _MISSING:
            prepared = self._jit_prepare(entry, launch)
            entry.remember(sig, prepared)
        if prepared is None:
            return run(launch)
        if prepared.guard is not None and not prepared.guard(launch.args, launch.kwargs):
            self._overlapped(entry)
            return run(launch)
        chosen = prepared.rewrite(launch)
        if chosen is None:
            entry.counts[2] += 1
            return run(launch)
        try:
            result = prepared.launch(chosen, run)
        except Exception as exc:  # noqa: BLE001 - the decision failed: the program's launch still runs
            plan = prepared.plan
            self._failed(entry, entry.plans, plan.decision.key.sha, plan, exc)
            entry.fast.clear()
            return run(launch)
        entry.counts[1] += 1
        return result

    def _direct(self, entry: JitEntry, original: Callable) -> Callable:
        """``fn.run`` for a function with decisions while apply is alone on the JIT shim: the
        hot path of ``jit_hook`` without the shim's ``Launch`` and guard (same rules: a failure of
        ours launches as written, a failing decision falls back and is reported once). A prepared
        launch that has its binary (``Prepared.direct``) launches it past Triton's run
        (``apply.fast``); the first launch of each goes through Triton's run and keeps what it
        returned."""
        fn, counts, fast, signatures = entry.fn, entry.counts, entry.fast, entry.signatures

        def as_written(args: tuple, kwargs: dict, grid: Any) -> Any:
            return original(fn, *args, grid=grid, warmup=False, **kwargs)

        def failed(prepared: Prepared, exc: Exception, args: tuple, kwargs: dict, grid: Any) -> Any:
            plan = prepared.plan
            self._failed(entry, entry.plans, plan.decision.key.sha, plan, exc)
            fast.clear()
            return as_written(args, kwargs, grid)

        def run(*args: Any, grid: Any, warmup: bool, **kwargs: Any) -> Any:
            if warmup:
                return original(fn, *args, grid=grid, warmup=warmup, **kwargs)
            try:
                sig = signatures.first(args, kwargs)
                prepared = fast.get(signatures(args, kwargs) if sig is None else sig, _MISSING)
                direct = None if prepared is None or prepared is _MISSING else prepared.direct
            except Exception as exc:  # noqa: BLE001 - a tritune bug must not break the user's program
                self._report(entry.name, f"launched as written: {_one_line(exc)}")
                prepared = direct = None
            if direct is not None:
                try:
                    result = direct.launch(args, kwargs, grid)
                except Exception as exc:  # noqa: BLE001 - the decision failed: the program's launch still runs
                    return failed(prepared, exc, args, kwargs, grid)
                if result is not REFUSED:
                    counts[0] += 1
                    counts[1] += 1
                    return result
            try:
                if (prepared is not None and prepared is not _MISSING and prepared.guard is not None
                        and not prepared.guard(args, kwargs)):  # overlapping arguments: the program's kernel
                    counts[0] += 1
                    self._overlapped(entry)
                    return as_written(args, kwargs, grid)
                found = (prepared.arguments(args, kwargs, grid)
                         if prepared is not None and prepared is not _MISSING and prepared.ready else None)
            except Exception as exc:  # noqa: BLE001
                self._report(entry.name, f"launched as written: {_one_line(exc)}")
                prepared = found = None
            if found is not None:
                counts[0] += 1
                chosen_args, chosen_kwargs, chosen_grid = found
                try:
                    result = original(prepared.fn, *chosen_args, grid=chosen_grid, warmup=False, **chosen_kwargs)
                except Exception as exc:  # noqa: BLE001
                    return failed(prepared, exc, args, kwargs, grid)
                counts[1] += 1
                if not prepared.recorded:
                    self._record(entry, prepared, result, args, kwargs)
                return result
            if prepared is None:  # no decision for these arguments
                counts[0] += 1
                return as_written(args, kwargs, grid)
            # a new signature, passes still to build, a grid left as written: the hook's own way
            return _jit_shim.guarded(self._hooks[0], (_jit_shim.Launch(fn, args, kwargs, grid, ()),),
                                     lambda chosen: original(chosen.fn, *chosen.args, grid=chosen.grid, warmup=False,
                                                             **chosen.kwargs), None, entry.name)

        entry.direct = run
        return run

    def _record(self, entry: JitEntry, prepared: Prepared, result: Any, args: tuple, kwargs: dict) -> None:
        try:
            prepared.record(result, args, kwargs)
        except Exception as exc:  # noqa: BLE001 - the launches stay on Triton's run
            self._report(entry.name, f"decision launched through Triton's run: {_one_line(exc)}")

    def inductor_hook(self, tuner: Any, args: tuple, kwargs: dict, run: Callable[[], Any]) -> Any:
        """Inductor's launch hook: one ``CachingAutotuner.run(*args, stream=...)`` (see ``apply.inductor``)."""
        entry = self._tuners.get(id(tuner))
        if entry is None or entry.tuner is not tuner:
            entry = self._inductor_entry(tuner)
        entry.counts[0] += 1
        if entry.keyer is None:
            inductor_shim.straight_through(tuner, self._hooks[1])
            return run()
        config = entry.settled_config(kwargs)
        if config is None:
            result = run()
            entry.ran = True
            return result
        if config is not entry.config:
            entry.settle(config, self._get_index())
        if entry.unmatched:  # no decision of this kernel has this config's constexprs, which stay
            inductor_shim.straight_through(tuner, self._hooks[1])  # as they are: skip the patch
            return run()
        sig = signature(args, {}, entry.tensor)
        try:
            prepared = entry.fast.get(sig, _MISSING)
        except TypeError:
            prepared = self._inductor_prepare(entry, config, args)
        if prepared is _MISSING:
            prepared = self._inductor_prepare(entry, config, args)
            entry.remember(sig, prepared)
        if prepared is None:
            return run()
        launcher = prepared.plan.launcher
        if launcher is not None:  # served by Inductor's own launcher (apply.inductor_swap)
            self._swaps.put(tuner, launcher)
            inductor_shim.straight_through(tuner, self._hooks[1])
            entry.counts[1] += 1
            return run()
        if prepared.guard is not None and not prepared.guard(args, kwargs):
            self._overlapped(entry)
            return run()
        try:
            result = prepared.launch(args, kwargs.get("stream"))
        except Exception as exc:  # noqa: BLE001 - the decision failed: Inductor's launch still runs
            self._failed(entry, entry.plans, prepared.plan_key, prepared.plan, exc)
            entry.fast.clear()
            return run()
        entry.counts[1] += 1
        return result

    # ------------------------------------------------------------------------ inside

    def _install_jit(self, _module: Any) -> None:
        self._pending = None
        if self.installed:
            _jit_shim.install_around(self._hooks[0])

    def _store(self) -> Any:
        """The store, usable in this thread (sqlite connections belong to their thread)."""
        if threading.get_ident() == self._owner_thread:
            return self.store
        store = getattr(self._local, "store", None)
        if store is None:
            from tritune.store import DecisionStore

            store = self._local.store = DecisionStore(self.path)
        return store

    def _read(self) -> list:
        """The usable decisions; a decision this user's tritune did not sign (another store's, or
        edited since) is never applied, and each kernel with one is named once on stderr."""
        found = self._store().decisions()
        for name in sorted({d.key.kernel for d in found if d.verified and d.enabled and not d.signed}):
            self._report("*", f"decision for {name} not signed by this user: skipped; "
                              "`tritune store import` re-verifies it")
        return [d for d in found if d.usable]

    def _get_index(self) -> decision_index.Index:
        index = self._index
        if index is None:
            try:
                index = decision_index.build(self._decisions, self.target)
            except Exception as exc:  # noqa: BLE001 - e.g. no GPU to name: nothing applies
                self._report("*", f"no decision applies in this process: {_one_line(exc)}")
                index = decision_index.Index.empty()
            self._index = index
        return index

    def _counter(self, name: str) -> list[int]:
        counts = self._counts.get(name)
        if counts is None:
            counts = self._counts[name] = [0, 0, 0, 0]
        return counts

    def _jit_entry(self, fn: Any) -> JitEntry:
        name = getattr(getattr(fn, "fn", None), "__name__", None) or getattr(fn, "__name__", "?")
        entry = JitEntry(fn, name, self._counter(name))
        index = self._get_index()
        if name in index.sources:
            try:
                from tritune.capture.jit_launch import Kernel
                from tritune.store import LiveKeyer

                kernel = Kernel(fn)
                if kernel.source_hash in index.sources[name]:
                    import torch

                    keyer = LiveKeyer(kernel.name, kernel.source_hash, kernel.names, sorted(kernel.constexpr),
                                      self.target)
                    entry.learn(kernel, keyer, torch.Tensor)
            except Exception as exc:  # noqa: BLE001
                self._report(name, f"decisions not applied: {_one_line(exc)}")
        self._jit[id(fn)] = entry
        return entry

    def _inductor_entry(self, tuner: Any) -> Any:
        from tritune.apply.inductor import InductorEntry

        name = getattr(tuner.fn, "__name__", "?")
        entry = InductorEntry(tuner, name, self._counter(name))
        launchers = getattr(tuner, "launchers", None) or ()  # the configs Inductor tunes among, while it does
        entry.candidates = ([launcher.config for launcher in launchers] if len(launchers) > 1
                            else list(getattr(tuner, "configs", None) or ()))
        index = self._get_index()
        if name in index.sources:
            try:
                from tritune.store import LiveKeyer

                source_hash = entry.prepare()
                if source_hash in index.sources[name]:
                    import torch

                    entry.tensor = torch.Tensor
                    entry.keyer = LiveKeyer(name, source_hash, entry.names, entry.constexprs, self.target)
            except Exception as exc:  # noqa: BLE001
                self._report(name, f"decisions not applied: {_one_line(exc)}")
        self._tuners[id(tuner)] = entry
        return entry

    def _jit_prepare(self, entry: JitEntry, launch: Any) -> Any:
        """A new signature: bind, key, plan (each once per key), and the prepared launch or None."""
        bound = entry.kernel.bind(launch.args, launch.kwargs)
        key = entry.keyer(bound)
        if key is None:
            return None
        plan = entry.plans.get(key.sha, _MISSING)
        if plan is _MISSING:
            plan = entry.plans[key.sha] = self._plan(entry.name, key, lambda decision: JitPlan(entry.kernel, decision))
        return None if plan is None else plan.prepare(launch, bound)

    def _inductor_prepare(self, entry: Any, config: Any, args: tuple) -> Any:
        constexprs = entry.constexpr_values(config)
        kernel_args, extra_args = entry.split(args)
        bound = dict(zip(entry.positional, kernel_args))
        bound.update(constexprs)
        key = entry.keyer(bound)
        if key is None:
            return None
        plan_key = (key.sha, id(config))
        plan = entry.plans.get(plan_key, _MISSING)
        if plan is _MISSING:
            from tritune.apply.inductor import InductorPlan

            plan = entry.plans[plan_key] = self._plan(entry.name, key,
                                                      lambda decision: InductorPlan(entry, config, args, decision))
            if plan is not None and self.inductor_cache:
                self._serve_through_inductor(entry, config, plan.decision)
            if plan is not None and not plan.interpreted:
                plan.launcher = self._swap_launcher(entry, config, plan.decision)
        return None if plan is None else plan.prepare(plan_key, kernel_args, extra_args, constexprs)

    def _serve_through_inductor(self, entry: Any, config: Any, decision: Any) -> None:
        """Write the decision into Inductor's autotune cache where Inductor can serve it itself
        (``apply.inductor_cache``); this process goes on applying it at launch time."""
        from tritune.apply import inductor_cache

        try:
            why = inductor_cache.reason_not(entry.tuner, config, decision, self._decisions_of(entry))
            if why is None:
                why = inductor_cache.write(entry.tuner, config, decision, self._store(), entry.candidates)
        except Exception as exc:  # noqa: BLE001 - the launch-time path still applies it
            why = _one_line(exc)
        if why is None:
            self._report(entry.name, "decision written to Inductor's autotune cache: Inductor launches it itself "
                                     f"from the next compile on (undo: tritune store inductor-cache {self.path} --remove)")

    def _decisions_of(self, entry: Any) -> int:
        """How many decisions this store holds for the tuner's kernel (one config serves every
        launch only when it holds one)."""
        return len(self._get_index().constexprs.get((entry.name, entry.source_hash), ()))

    def _swap_launcher(self, entry: Any, config: Any, decision: Any) -> Any | None:
        """The decision as a launcher of the tuner's own kind, when it is one config for every
        launch (``apply.inductor_swap``); None: applied at launch time."""
        from tritune.apply import inductor_cache

        if inductor_cache.not_config_only(entry.tuner, config, decision, self._decisions_of(entry)) is not None:
            return None
        try:
            return inductor_swap.build(entry.tuner, config, decision.variant)
        except Exception as exc:  # noqa: BLE001 - the launch-time path still applies it
            self._report(entry.name, f"decision not served by Inductor's launcher ({_one_line(exc)}): "
                                     "applied at launch time")
            return None

    def _forget_stale(self) -> None:
        """Entries of Inductor's cache written for decisions no longer usable come out."""
        from tritune.apply import inductor_cache

        usable = {d.key.sha for d in self._decisions}
        try:
            inductor_cache.remove(self._store(), keep=lambda entry: entry.key in usable)
        except Exception as exc:  # noqa: BLE001
            self._report("*", f"entries in Inductor's autotune cache not checked: {_one_line(exc)}")

    def _plan(self, name: str, key: Any, make: Callable[[Any], Any]) -> Any:
        """The plan for ``key``, or None: no usable decision (checked again in the store now), or
        one that cannot be applied (reported)."""
        if key.sha not in self._get_index().by_sha:
            return None
        try:
            decision = self._store().decision_for(key)
            return None if decision is None else make(decision)
        except Exception as exc:  # noqa: BLE001
            self._report(name, f"decision for {key.describe()} not applied: {_one_line(exc)}")
            return None

    def _failed(self, entry: Any, plans: dict, plan_key: Any, plan: Any, exc: Exception) -> None:
        plans[plan_key] = None
        entry.counts[2] += 1
        self._report(entry.name, f"decision {plan.variant.describe()} failed, this key runs as written from now on: "
                                 f"{_one_line(exc)}")

    def _overlapped(self, entry: Any) -> None:
        """A launch whose tensor arguments overlap, where its decision assumes they do not."""
        entry.counts[2] += 1
        entry.counts[3] += 1
        self._report(entry.name, "its decision assumes tensor arguments that do not overlap; launches where "
                                 "they overlap run the kernel as written (counted in noalias_fallbacks)")

    def _report(self, name: str, message: str) -> None:
        if (name, message) in self._reported:
            return
        self._reported.add((name, message))
        prefix = "tritune apply: " if name == "*" else f"tritune apply: kernel {name}: "
        print(prefix + message, file=sys.stderr)


def _identity(decisions: list) -> list:
    return [(d.key.sha, d.variant_hash, d.signature) for d in decisions]


def _one_line(exc: BaseException) -> str:
    from tritune.errors import one_line

    return one_line(exc)
