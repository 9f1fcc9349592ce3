"""Capture a whole program: run a command with recording switched on in every Python process.

``run(command, out_dir)`` starts the command with tritune's boot folder (``tritune.boot``, whose
``sitecustomize.py`` calls ``boot``) and ``TRITUNE_CAPTURE_DIR`` set, so the program, its
subprocesses and Inductor's compile workers record into ``out_dir/parts/`` (see ``recorder``);
when the command ends, however it ends, the parts are merged into ``out_dir/launches.jsonl``.

An ``out_dir`` that already holds a capture is refused (``mode="new"``) unless ``mode`` is
``"replace"`` (its launches, parts, sources and tensors are removed first) or ``"append"`` (the
new launches are merged in; counts of equal launches add up). The existing ``launches.jsonl``
is read before the command starts: one it cannot use is refused without running anything.
"""

from __future__ import annotations

import dataclasses
import shutil
import signal
from pathlib import Path

from tritune import boot as boot_folder
from tritune.capture import skipped
from tritune.capture.recorder import PARTS, finalize, start
from tritune.capture.spec import LAUNCHES, SOURCES, TENSORS, read_launches
from tritune.config import ENV_CAPTURE_DIR, ENV_CAPTURE_IMPORTS
from tritune.model.launch import LaunchSpec, SpecError

MODES = ("new", "replace", "append")


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
    holds = (out_dir / LAUNCHES).exists() or any((out_dir / PARTS).glob("*.jsonl"))
    if holds and mode == "new":
        raise CaptureError(f"{out_dir} already holds a capture: pass --force to replace it or --append to add to it",
                           exit_code=2)
    if mode == "append" and (out_dir / LAUNCHES).exists():
        _check_appendable(out_dir / LAUNCHES)
    if mode == "replace":
        (out_dir / LAUNCHES).unlink(missing_ok=True)
        (out_dir / skipped.SKIPPED).unlink(missing_ok=True)
        for name in (PARTS, SOURCES, TENSORS):
            shutil.rmtree(out_dir / name, ignore_errors=True)
    out_dir.mkdir(parents=True, exist_ok=True)


def _check_appendable(path: Path) -> None:
    """Read the capture to append to now, not after the whole program ran (its merge would fail)."""
    try:
        read_launches(path)
    except SpecError as exc:  # unreadable and non-UTF-8 files too (read_launches names them)
        raise CaptureError(f"cannot append: {exc}", exit_code=2) from None


def run(command: list[str], out_dir: str | Path, *, mode: str = "new", imports: Path | None = None) -> Result:
    """Run ``command`` under capture and merge what it recorded (also when it fails or is interrupted).
    ``imports``: a folder each of its processes lists the files it imported into at exit (what a
    capture's bytecode fill reads: ``worker.bytecode.filled_meanwhile``); none otherwise, also
    where this environment asked."""
    if not command:
        raise CaptureError("no command given: tritune capture --out DIR -- python your_script.py", exit_code=2)
    out_dir = Path(out_dir)
    prepare(out_dir, mode)
    try:  # an interrupted command has finished writing when this returns: merge it too
        variables = {ENV_CAPTURE_DIR: str(out_dir.resolve()), ENV_CAPTURE_IMPORTS: str(imports) if imports else None}
        returncode = boot_folder.run(command, variables)
    except boot_folder.CommandError as exc:
        raise CaptureError(str(exc), exc.exit_code) from None
    specs = finalize(out_dir, command=command)
    return Result(list(command), returncode, out_dir, specs, skipped.read(out_dir))


def describe_exit(code: int) -> str:
    if code > 128 and code - 128 in signal.valid_signals():
        return f"was killed by {signal.Signals(code - 128).name}"
    return f"exited with status {code}"
