"""Apply: a decision store's verified decisions take effect at launch time, in the user's
unmodified program.

    import tritune
    tritune.enable("runs/decisions.db")      # or tritune.apply.enable(store, device="cuda:0")
    model(x)                                  # launches with a decision run the decided variant
    tritune.apply.rollback("softmax_kernel")  # stop using one kernel's decisions, now and in the store
    tritune.disable()                         # Triton and Inductor exactly as before

or, for a program one cannot edit: ``tritune run --store runs/decisions.db -- python train.py``
(which sets ``TRITUNE_STORE``; see ``tritune.config``).

Which launches: plain ``@triton.jit``, ``@triton.autotune`` (the config the autotuner chose is
what the key sees, as capture records it), ``@triton.heuristics`` (``apply.jit``), and Inductor's
kernels (``apply.inductor``). Which decisions: verified and enabled ones (``decision_for``) whose
key (kernel source, specialization and shape bucket, GPU, capability, Triton version) is the live
launch's, on this machine's target (``store.keys.current_target``). A kernel without one runs
exactly as before: the same function is called with the same arguments. What a decision may
change and how the launch is rebuilt: options, constexprs (the grid follows: ``apply.grid``),
passes and source (``apply.kernels``). Costs, refresh and stats: ``apply.applier``.

Nothing here imports torch or Triton until the program launches a kernel.
"""

from __future__ import annotations

import atexit
import sys
import threading
from typing import Any

from tritune.apply.applier import Applier
from tritune.apply.jit import ApplyError

__all__ = ["Applier", "ApplyError", "active", "boot", "disable", "enable", "refresh", "rollback", "summary"]

_lock = threading.Lock()
_active: Applier | None = None
_last: Applier | None = None  # the last one enabled, kept after disable: enabling it again is cheap


def enable(store: Any, *, device: str | None = None, inductor_cache: bool = False) -> Applier:
    """Apply ``store``'s decisions (a path to an existing store, or a ``DecisionStore``) from now
    on; replaces an applier enabled before. ``device`` picks the GPU the keys are made for.

    Toggling is cheap (an end-to-end benchmark switches between blocks of steps): enabling the
    store of the last applier again, for the same device, re-reads its decisions (one query) and
    the new applier takes over everything the last one prepared while they are unchanged
    (``Applier.successor``); each applier's ``stats()`` count the launches made while it was on.

    ``inductor_cache``: also write each Inductor decision that only changes config knobs into
    Inductor's own autotune cache, so that later processes get it from Inductor with no hook at
    all (``apply.inductor_cache``; ``tritune run`` does, unless ``--no-inductor-cache``)."""
    global _active, _last
    with _lock:
        last = _last
    if last is not None and last.reusable(store, device):
        applier = last.successor(inductor_cache)
    else:
        applier = Applier(store, device=device, inductor_cache=inductor_cache)
    with _lock:
        previous, _active, _last = _active, applier, applier
        if previous is not None and previous is not applier:
            previous.uninstall()
        applier.install()
    return applier


def disable() -> Applier | None:
    """Stop applying decisions: Triton's and Inductor's launch functions are restored (unless
    capture still uses them). Returns the applier that was active, for its ``stats()``."""
    global _active
    with _lock:
        previous, _active = _active, None
        if previous is not None:
            previous.uninstall()
    return previous


def active() -> Applier | None:
    return _active


def _require() -> Applier:
    applier = _active
    if applier is None:
        raise ApplyError("tritune apply is not enabled: call tritune.apply.enable(store) first")
    return applier


def refresh() -> int:
    """Re-read the active applier's store (see ``Applier.refresh``)."""
    return _require().refresh()


def rollback(kernel: str) -> int:
    """Roll back every decision of ``kernel`` in the store and stop applying them at once;
    returns how many were rolled back."""
    return _require().rollback(kernel)


def summary(stats: dict[str, dict[str, int]]) -> str | None:
    """One line on what was applied, for kernels that have decisions here; None if none ran."""
    ran = {name: s for name, s in stats.items() if s["decisions"] and s["launches"]}
    if not ran:
        return None
    applied = sum(s["applied"] for s in ran.values())
    launches = sum(s["launches"] for s in ran.values())
    parts = ", ".join(f"{name} {s['applied']}/{s['launches']}" for name, s in sorted(ran.items()))
    fallbacks = sum(s.get("noalias_fallbacks", 0) for s in ran.values())
    overlapped = f"; {fallbacks} ran as written: their tensor arguments overlapped" if fallbacks else ""
    return f"decisions applied to {applied} of {launches} launches of kernels with decisions ({parts}){overlapped}"


def boot(path: str) -> None:
    """``TRITUNE_STORE`` set (``capture/_boot/sitecustomize.py``): enable once the program imports
    Triton (processes that never do pay nothing), and say at exit what was applied. Never breaks
    the program: a failure is one line on stderr."""
    from tritune import config
    from tritune.capture import _after_import

    def start(_module: Any) -> None:
        try:
            applier = enable(path, inductor_cache=config.serve_through_inductor())
        except Exception as exc:  # noqa: BLE001
            print(f"tritune apply: decisions not applied in this process: {type(exc).__name__}: {exc}",
                  file=sys.stderr)
            return
        atexit.register(_say_summary, applier)

    _after_import.when_imported("triton", start)


def _say_summary(applier: Applier) -> None:
    if not applier.launches:
        return  # nothing launched: not even worth naming the GPU
    try:
        line = summary(applier.stats())
    except Exception:  # noqa: BLE001 - at exit: say nothing rather than fail
        return
    if line:
        print(f"tritune apply: {line}", file=sys.stderr)
