"""Config-only decisions launched by Inductor's own launcher: no hook on the kernel's launches.

Inductor's ``CachingAutotuner`` ends tuning with one launcher in ``tuner.launchers`` and runs
``launchers[0]`` on every launch (torch 2.13 also keeps it in ``_cached_launcher``, its fast
path). Coordinate descent makes the launcher of each config it tries with
``tuner._precompile_config(config).make_launcher()`` and keeps the winner by putting it in
``launchers`` (torch 2.11 and 2.13 alike). A decision that changes only Inductor's config knobs
(the conditions are ``inductor_cache.not_config_only``'s: XBLOCK/YBLOCK/R0_BLOCK, num_warps,
num_stages; static sizes, so every launch of the tuner is the decision's key; the kernel's only
decision) is served the same way: its launcher is built once, put in ``launchers``, and the
tuner's later launches go straight to Inductor (``capture.inductor.straight_through``). The
launcher computes its grid from its own config, so new block sizes launch the right grid, and
it compiles with Inductor's options for the tuner, the options the decision was verified with
(``inductor_spec.launch_spec`` records them).

Measured on the H100 (benchmarks/apply_overhead.py, 2026-11-23): the launch-time path added
~20 us per launch of an Inductor kernel with a decision, enough to make a CPU-bound training
step slower than without tritune; served this way a launch costs what Inductor's own costs.

``Swaps`` remembers each tuner's own launchers and puts them back (``restore``) when the applier
is uninstalled or refreshed, or a decision is rolled back: ``tritune.disable()`` runs Inductor's
choice again at once. The applier puts the decided launcher back at the tuner's next launch
after it is enabled again (bypasses are taken out whenever a hook comes or goes).
"""

from __future__ import annotations

import contextlib
import threading
from typing import Any

from tritune.apply.inductor_cache import decided_config


def build(tuner: Any, config: Any, variant: Any) -> Any:
    """The launcher of ``config`` with the decision's knobs, made as coordinate descent makes one."""
    with getattr(tuner, "lock", None) or contextlib.nullcontext():
        return tuner._precompile_config(decided_config(config, variant)).make_launcher()


class Swaps:
    """Tuners whose launcher is a decision's, with the launchers they had before."""

    def __init__(self) -> None:
        self._held: dict[int, tuple[Any, list]] = {}
        self._lock = threading.Lock()

    def put(self, tuner: Any, launcher: Any) -> None:
        """Make ``launcher`` the one ``tuner`` launches (a no-op when it already is)."""
        launchers = tuner.launchers
        if len(launchers) == 1 and launchers[0] is launcher:
            return
        with self._lock:
            held = self._held.get(id(tuner))
            if held is None or held[0] is not tuner:
                self._held[id(tuner)] = (tuner, list(launchers))
            tuner.launchers = [launcher]
            _forget_cached(tuner)

    def restore(self) -> int:
        """Every tuner launches what it did before; returns how many were put back."""
        with self._lock:
            held, self._held = self._held, {}
        for tuner, launchers in held.values():
            tuner.launchers = launchers
            _forget_cached(tuner)
        return len(held)

    def __len__(self) -> int:
        return len(self._held)


def _forget_cached(tuner: Any) -> None:
    """torch 2.13's fast path keeps the launcher it ran last; it is found again on the next launch."""
    if getattr(tuner, "_cached_launcher", None) is not None:
        tuner._cached_launcher = None
