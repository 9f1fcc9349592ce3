"""Capture a whole program: run a command with recording switched on in every Python process.

``run(command, out_dir)`` starts the command with tritune's boot folder (``tritune.boot``, whose
``sitecustomize.py`` calls ``boot``) and ``TRITUNE_CAPTURE_DIR`` set, so the program, its
subprocesses and Inductor's compile workers record into ``out_dir/parts/`` (see ``recorder``);
when the command ends, however it ends, the parts are merged into ``out_dir/launches.jsonl``.

The command is checked before anything is written (``boot.check``: its executable, and a
Python script's file). An ``out_dir`` that already holds a capture is refused (``mode="new"``)
unless ``mode`` is ``"replace"`` or ``"append"`` (the new launches are merged in; counts of equal
launches add up). ``"replace"`` records into a folder beside ``out_dir`` and puts that capture
in place of the old one (``install``) only once the command succeeded and launched something:
a command that fails or launches nothing leaves the old capture as it was (``Result.kept``).
The existing ``launches.jsonl`` is read before the command starts: one ``"append"`` cannot use
is refused without running anything.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import signal
import tempfile
from pathlib import Path

from tritune import boot as boot_folder
from tritune.capture import skipped
from tritune.capture.recorder import PARTS, finalize, start
from tritune.capture.spec import LAUNCHES, SOURCES, TENSORS, read_launches
from tritune.config import ENV_CAPTURE_DIR, ENV_CAPTURE_IMPORTS
from tritune.model.launch import LaunchSpec, SpecError

MODES = ("new", "replace", "append")
MODULES = "modules"  # a harvest's copies of Inductor's kernel modules (``inductor.harvest``)


class CaptureError(RuntimeError):
    """The capture could not run: the message is one line saying why."""

    def __init__(self, message: str, exit_code: int = 1):
        super().__init__(message)
        self.exit_code = exit_code


@dataclasses.dataclass
class Result:
    command: list[str]
    returncode: int  # the command's; a signal N is reported as 128 + N, like a shell
    out_dir: Path
    specs: list[LaunchSpec]
    skipped: list[skipped.Skipped] = dataclasses.field(default_factory=list)  # launches not recorded, why
    previous: int = 0  # launches out_dir held before (``"append"``): ``total`` counts them too
    kept: bool = False  # ``"replace"``: the command failed or launched nothing, out_dir's capture is the old one

    @property
    def recorded(self) -> int:
        """Launches this command made (``total`` less what an appended-to capture held)."""
        return self.total - self.previous

    @property
    def distinct(self) -> int:
        return len(self.specs)

    @property
    def total(self) -> int:
        return sum(spec.count for spec in self.specs)

    @property
    def kernels(self) -> list[str]:
        return sorted({spec.kernel for spec in self.specs})


def boot(out_dir: str) -> None:
    """Start recording this process into ``out_dir`` (called by ``_boot/sitecustomize.py``)."""
    start(out_dir)


def prepare(out_dir: Path, mode: str = "new") -> None:
    """Make ``out_dir`` ready to receive a capture, or raise ``CaptureError`` saying why not."""
    if mode not in MODES:
        raise CaptureError(f"unknown mode {mode!r} (expected one of {MODES})")
    if out_dir.exists() and not out_dir.is_dir():
        raise CaptureError(f"{out_dir} exists and is not a directory")
    if holds(out_dir) and mode == "new":
        raise CaptureError(f"{out_dir} already holds a capture: pass --force to replace it or --append to add to it",
                           exit_code=2)
    if mode == "append" and (out_dir / LAUNCHES).exists():
        _check_appendable(out_dir / LAUNCHES)
    out_dir.mkdir(parents=True, exist_ok=True)


def holds(out_dir: Path) -> bool:
    """Whether ``out_dir`` holds a capture (merged, or parts left by one that was cut short)."""
    return (out_dir / LAUNCHES).exists() or any((out_dir / PARTS).glob("*.jsonl"))


def _check_appendable(path: Path) -> int:
    """Read the capture to append to now, not after the whole program ran (its merge would fail);
    its launches."""
    try:
        return sum(spec.count for spec in read_launches(path))
    except SpecError as exc:  # unreadable and non-UTF-8 files too (read_launches names them)
        raise CaptureError(f"cannot append: {exc}", exit_code=2) from None


def install(stage: Path, out: Path) -> None:
    """Replace ``out``'s capture by the complete one in ``stage`` (other files in ``out`` stay).
    ``launches.jsonl`` goes first and comes last: stopped in between, ``out`` holds no file that
    claims a complete capture. ``stage`` lies beside ``out`` (same filesystem: moves are renames)."""
    out.mkdir(parents=True, exist_ok=True)
    discard(out)
    for name in (SOURCES, TENSORS, MODULES, skipped.SKIPPED, LAUNCHES):  # harvest: the modules that failed too
        if (stage / name).exists():
            os.replace(stage / name, out / name)


def discard(out: Path) -> None:
    """Remove the capture in ``out`` (other files stay): one a failed command left, which a later
    run must not take for a complete capture."""
    (out / LAUNCHES).unlink(missing_ok=True)
    for name in (SOURCES, TENSORS, MODULES, PARTS, skipped.SKIPPED):
        path = out / name
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def stage_beside(out: Path, purpose: str) -> Path:
    """A new empty folder beside ``out`` (``.NAME.PURPOSE-XXXX``) for a capture ``install`` moves in."""
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.{purpose}-", dir=out.parent))


def run(command: list[str], out_dir: str | Path, *, mode: str = "new", imports: Path | None = None) -> Result:
    """Run ``command`` under capture and merge what it recorded (also when it fails or is interrupted).
    ``imports``: a folder each of its processes lists the files it imported into at exit (what a
    capture's bytecode fill reads: ``worker.bytecode.filled_meanwhile``); none otherwise, also
    where this environment asked."""
    if not command:
        raise CaptureError("no command given: tritune capture --out DIR -- python your_script.py", exit_code=2)
    try:
        boot_folder.check(command)  # a typo fails here, before the capture in out_dir is touched
    except boot_folder.CommandError as exc:
        raise CaptureError(str(exc), exc.exit_code) from None
    out_dir = Path(out_dir)
    prepare(out_dir, mode)
    previous = _check_appendable(out_dir / LAUNCHES) if mode == "append" and (out_dir / LAUNCHES).exists() else 0
    try:
        stage = stage_beside(out_dir, "capture") if mode == "replace" and holds(out_dir) else None
    except OSError as exc:  # DIR writable, its folder not (a mount point): nowhere to capture beside it
        raise CaptureError(f"--force captures beside {out_dir} and replaces it at the end, and "
                           f"{out_dir.parent} takes no new folder: {exc.strerror or exc}", exit_code=2) from None
    into = stage or out_dir
    try:
        try:  # an interrupted command has finished writing when this returns: merge it too
            variables = {ENV_CAPTURE_DIR: str(into.resolve()), ENV_CAPTURE_IMPORTS: str(imports) if imports else None}
            returncode = boot_folder.run(command, variables)
        except boot_folder.CommandError as exc:
            raise CaptureError(str(exc), exc.exit_code) from None
        specs = finalize(into, command=command)
        result = Result(list(command), returncode, out_dir, specs, skipped.read(into), previous=previous)
        if stage is not None:
            result.kept = returncode != 0 or not specs
            if not result.kept:
                install(stage, out_dir)
        return result
    finally:
        if stage is not None:
            shutil.rmtree(stage, ignore_errors=True)


def describe_exit(code: int) -> str:
    if code > 128 and code - 128 in signal.valid_signals():
        return f"was killed by {signal.Signals(code - 128).name}"
    return f"exited with status {code}"
