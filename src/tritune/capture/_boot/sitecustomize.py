"""Python imports ``sitecustomize`` at start-up: ``tritune capture`` and ``tritune run`` put this
folder first on the command's PYTHONPATH, so every Python process it starts records its Triton
launches into ``$TRITUNE_CAPTURE_DIR`` (``tritune.capture.program.boot``) and/or applies the
decisions of the store at ``$TRITUNE_STORE`` (``tritune.apply.boot``). Whatever sitecustomize
the environment had is run afterwards. Nothing here may break the program: failures are one line
on stderr. The variables are read here, before tritune is imported, so that processes outside a
capture or a run pay nothing (their names: ``tritune.capture.program.ENV_CAPTURE_DIR``,
``tritune.config.ENV_STORE``).
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


# (variable, module whose boot(value) starts it, what a failure means), in the order they start
_TRITUNE_BOOTS = (
    ("TRITUNE_CAPTURE_DIR", "capture.program", "tritune capture: not recording in this process"),
    ("TRITUNE_STORE", "apply", "tritune apply: decisions not applied in this process"),
)


def _tritune_start() -> None:
    for variable, module, failed in _TRITUNE_BOOTS:
        value = os.environ.get(variable)
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
