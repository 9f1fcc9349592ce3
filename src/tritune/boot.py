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

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from tritune import config

BOOT_DIR = Path(__file__).resolve().parent / "capture" / "_boot"
_PYTHON = re.compile(r"python[0-9.]*")  # python, python3, python3.11: a command whose script is checked
_TAKES_VALUE = "WXQ"  # Python's one-letter options that take a value (attached, or the next word)


class CommandError(RuntimeError):
    """The command could not be started: one line, and the shell's status for it (126 / 127; 2
    for a Python script that does not exist, as Python's own)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def boot_env(variables: Mapping[str, str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """This environment (or ``environ``) with ``variables`` set and the boot folder first on
    ``PYTHONPATH`` (once: a ``tritune run`` inside ``tritune capture`` keeps both)."""
    path = config.python_path_first(str(BOOT_DIR), environ)
    return config.environment({**variables, config.ENV_PYTHONPATH: path}, environ=environ)


def check(command: Sequence[str]) -> None:
    """``CommandError`` if ``command`` cannot start as written: its executable is not found
    (127), or it is a Python interpreter given a script file that does not exist (2, Python's
    own status for it); one that cannot be run is found by ``run`` (126). A command checked before anything is written
    (``tritune capture --force`` replaces a capture) fails on a typo without touching it."""
    executable = command[0]
    if shutil.which(executable) is None and not Path(executable).is_file():
        raise CommandError(f"command not found: {executable}", 127)
    script = _script(command)
    if script is not None and script != "-" and not Path(script).is_file():
        why = "is a folder" if Path(script).is_dir() else "no such file"
        raise CommandError(f"{executable} cannot open the script {script}: {why}", 2)


def script_folder(command: Sequence[str]) -> str | None:
    """The folder of the script a Python command line runs, where the script exists (absolute):
    where its own kernels most likely lie. None for anything else (``-m``, ``-c``, not Python)."""
    script = _script(command)
    if script is None or script == "-" or not Path(script).is_file():
        return None
    return str(Path(script).absolute().parent)


def _script(command: Sequence[str]) -> str | None:
    """The script a Python interpreter's command line runs, or None (not Python, ``-m``, ``-c``,
    nothing): Python's options are skipped, with the value of those that take one."""
    if not _PYTHON.fullmatch(os.path.basename(command[0])):
        return None
    words = iter(command[1:])
    for word in words:
        if word == "--":
            return next(words, None)
        if word == "-" or not word.startswith("-"):
            return word
        if word.startswith("--"):
            if word == "--check-hash-based-pycs":
                next(words, None)
            continue
        for i, letter in enumerate(word[1:]):  # -u, -uc CODE, -Werror, -W error: combined letters
            if letter in "cm":
                return None
            if letter in _TAKES_VALUE:
                if i == len(word) - 2:
                    next(words, None)
                break
    return None


def run(command: Sequence[str], variables: Mapping[str, str] | None) -> int:
    """Run ``command`` to its end with the boot folder and ``variables`` (``None``: as written,
    in this environment); its exit status, a signal N as 128 + N like a shell. ``CommandError``
    if it is not found or cannot be run."""
    if not command:
        raise ValueError("no command")
    check(command)
    from tritune import gpu

    gpu.announce()  # "no GPU found: running under Triton's interpreter", where a command set it
    try:
        process = subprocess.Popen(list(command), env=None if variables is None else boot_env(variables))
    except OSError as exc:  # not executable, bad interpreter line, ...
        raise CommandError(f"cannot run {command[0]}: {exc.strerror or exc}", 126) from None
    try:
        returncode = process.wait()
    except KeyboardInterrupt:  # the child got the SIGINT too: let it finish (and write what it has)
        returncode = process.wait()
    return 128 - returncode if returncode < 0 else returncode
