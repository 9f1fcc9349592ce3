"""Python imports ``sitecustomize`` at start-up: ``tritune capture`` and ``tritune run`` put this
folder first on the command's PYTHONPATH (``tritune.boot``), so every Python process it starts
records its Triton launches into ``$TRITUNE_CAPTURE_DIR`` (``tritune.capture.program.boot``)
and/or applies the decisions of the store at ``$TRITUNE_STORE`` (``tritune.apply.boot``).
Whatever sitecustomize the environment had is run afterwards. Nothing here may break the
program: failures are one line on stderr.

The variables are read through ``tritune.config`` (standard library only, no torch or Triton),
so their names live in one place; it costs nothing extra in practice, since every process here
has one of them set and then imports ``tritune.apply`` (which imports what config does) or
capture (torch). What a boot module starts waits for Triton's import where it can.
"""

import os
import sys


def _tritune_import(name: str):
    """``tritune.<name>``, from the copy this file is in if this Python has no tritune installed."""
    import importlib

    try:
        return importlib.import_module(f"tritune.{name}")
    except ImportError:
        here = os.path.abspath(__file__)  # src/tritune/capture/_boot/sitecustomize.py
        sys.path.append(os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(here)))))
        return importlib.import_module(f"tritune.{name}")


# (tritune.config's reader of the variable, module whose boot(value) starts it, what a failure
# means), in the order they start
_TRITUNE_BOOTS = (
    ("capture_dir", "capture.program", "tritune capture: not recording in this process"),
    ("store_path", "apply", "tritune apply: decisions not applied in this process"),
)


def _tritune_start() -> None:
    try:
        config = _tritune_import("config")
        values = [getattr(config, read)() for read, _, _ in _TRITUNE_BOOTS]
    except Exception as exc:  # noqa: BLE001
        print(f"tritune: nothing started in this process: {type(exc).__name__}: {exc}", file=sys.stderr)
        return
    for value, (_, module, failed) in zip(values, _TRITUNE_BOOTS):
        if not value:
            continue
        try:
            _tritune_import(module).boot(value)
        except Exception as exc:  # noqa: BLE001
            print(f"{failed}: {type(exc).__name__}: {exc}", file=sys.stderr)


def _tritune_chain() -> None:
    """Run the sitecustomize this one hides, if any (the next one on sys.path)."""
    import importlib.machinery
    import importlib.util

    here = os.path.dirname(os.path.abspath(__file__))
    path = [p for p in sys.path if os.path.abspath(p or os.curdir) != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", path)
    if spec is None or spec.loader is None:
        return
    try:
        module = importlib.util.module_from_spec(spec)
        sys.modules["_tritune_chained_sitecustomize"] = module
        spec.loader.exec_module(module)
    except Exception as exc:  # noqa: BLE001 - as Python itself does for a failing sitecustomize
        print(f"Error in sitecustomize ({spec.origin}); set PYTHONVERBOSE for traceback:\n"
              f"{type(exc).__name__}: {exc}", file=sys.stderr)


_tritune_start()
_tritune_chain()
