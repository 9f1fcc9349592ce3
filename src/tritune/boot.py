"""Run a command with tritune's boot folder: how ``tritune capture`` and ``tritune run`` start a program.

Python imports ``sitecustomize`` at start-up. ``capture/_boot/`` holds tritune's, which starts
what the variables of this environment ask for (``TRITUNE_CAPTURE_DIR``: record launches;
``TRITUNE_STORE``: apply decisions; see ``tritune.config``) and then runs the ``sitecustomize``
it hides, if any. ``run(command, variables)`` puts the folder first on the command's
``PYTHONPATH`` and sets ``variables``, so every Python process of the command (its subprocesses
and Inductor's compile workers too) inherits both. Standard library and ``tritune.config`` only:
the commands import this before anything heavy.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from tritune import config

BOOT_DIR = Path(__file__).resolve().parent / "capture" / "_boot"


class CommandError(RuntimeError):
    """The command could not be started: one line, and the shell's status for it (126 / 127)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def boot_env(variables: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment (or ``environ``) with ``variables`` set and the boot folder first on
    ``PYTHONPATH`` (once: a ``tritune run`` inside ``tritune capture`` keeps both)."""
    path = config.python_path_first(str(BOOT_DIR), environ)
    return config.environment({**variables, config.ENV_PYTHONPATH: path}, environ=environ)


def run(command: Sequence[str], variables: Mapping[str, str] | None) -> int:
    """Run ``command`` to its end with the boot folder and ``variables`` (``None``: as written,
    in this environment); its exit status, a signal N as 128 + N like a shell. ``CommandError``
    if it is not found or cannot be run."""
    if not command:
        raise ValueError("no command")
    if shutil.which(command[0]) is None and not Path(command[0]).is_file():
        raise CommandError(f"command not found: {command[0]}", 127)
    try:
        process = subprocess.Popen(list(command), env=None if variables is None else boot_env(variables))
    except OSError as exc:  # not executable, bad interpreter line, ...
        raise CommandError(f"cannot run {command[0]}: {exc.strerror or exc}", 126) from None
    try:
        returncode = process.wait()
    except KeyboardInterrupt:  # the child got the SIGINT too: let it finish (and write what it has)
        returncode = process.wait()
    return 128 - returncode if returncode < 0 else returncode
