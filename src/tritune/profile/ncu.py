"""Run Nsight Compute (``ncu``) on exactly one launch of one kernel, and say why when it cannot.

Finding ncu: ``TRITUNE_NCU`` (``tritune.config``), else ``ncu`` on ``PATH``, else
``/usr/local/cuda/bin/ncu``. The command (``command``)::

    ncu --target-processes all --kernel-name-base function --kernel-name regex:^add_kernel$
        --launch-skip 1 --launch-count 1 --clock-control none --csv --page raw --print-units base
        --metrics gpu__time_duration.sum,...  python -m tritune.profile.target PAYLOAD.json

- ``--kernel-name regex:^NAME$``: a Triton kernel's CUDA name is its Python name (C linkage, no
  mangling), anchored so ``add_kernel`` does not also match ``add_kernel_2``; torch's own kernels
  (the random fills that make the inputs) never match.
- ``--launch-skip`` counts only launches that pass the filter (``--launch-skip-before-match`` is
  the one that counts all): the target launches the kernel ``skip`` times as warm-up, then once
  more; compiling (``warmup=True`` in Triton's JIT) launches nothing. So the profiled launch is a
  warm one, whatever the input fills did.
- ``--clock-control none``: the GPU keeps its boost clocks, so ncu's duration is comparable with
  ``do_bench`` times (ncu's default locks base clocks: ~1.6 GHz vs 1.98 GHz boost on H100 SXM).
- ``--print-units base``: ns and bytes in every column, whatever their size.

Failures become ``NcuUnavailable`` with a ``kind`` and one line: ``missing``, ``permission``
(``ERR_NVGPUCTRPERM``: counters restricted to admin users), ``timeout``, ``failed`` (ncu or the
program exited non-zero), ``no-kernel``, ``unparsable``. A metric this ncu does not know
(``Failed to find metric``) is dropped and the profile run again, at most ``MAX_DROPS`` times.
Stdlib only: the profiled program is another process.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path
from typing import Mapping, Sequence

from tritune import config
from tritune.config import ENV_NCU
from tritune.profile import ncu_csv

DEFAULT_NCU = "/usr/local/cuda/bin/ncu"
WARMUP_LAUNCHES = 1  # launches of the kernel before the profiled one (``--launch-skip``): module
#                      loading, first touch of the inputs' pages and instruction cache paid there
PERMISSION_ERROR = "ERR_NVGPUCTRPERM"
MAX_DROPS = 3  # unknown metrics dropped one per retry; each retry is a full program run (~5 s)
_STOP_WAIT_S = 5.0
_UNKNOWN_METRIC = re.compile(r"Failed to find metric\s+(?:regex:)?\^?([A-Za-z0-9_]+(?:\.[A-Za-z0-9_]+)*)")


class NcuUnavailable(RuntimeError):
    """No ncu numbers for this launch; ``kind`` says why, the message says it in one line."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind

    def __reduce__(self):  # picklable across a worker's pipe, kind included
        return type(self), (self.kind, str(self))


@dataclasses.dataclass(frozen=True)
class NcuRun:
    row: ncu_csv.Row
    command: list[str]
    dropped: tuple[str, ...]  # metrics this ncu did not know


def find_ncu(environ: Mapping[str, str] | None = None) -> str:
    """The ncu executable to use; ``NcuUnavailable("missing")`` when there is none."""
    given = config.ncu_path(environ)
    if given:
        if _executable(given):
            return given
        raise NcuUnavailable("missing", f"{ENV_NCU}={given} is not an executable file")
    found = shutil.which("ncu", path=config.search_path(environ))
    if found:
        return found
    if _executable(DEFAULT_NCU):
        return DEFAULT_NCU
    raise NcuUnavailable("missing", f"ncu not found ({ENV_NCU} unset, no ncu on PATH, no {DEFAULT_NCU})")


def kernel_filter(kernel: str) -> str:
    return f"regex:^{re.escape(kernel)}$"


def command(ncu: str, kernel: str, target: Sequence[str], *, skip: int,
            metrics: Sequence[str] = ncu_csv.METRICS) -> list[str]:
    """The ncu command line that profiles launch ``skip`` (0-based) of ``kernel`` in ``target``."""
    return [
        ncu, "--target-processes", "all",
        "--kernel-name-base", "function", "--kernel-name", kernel_filter(kernel),
        "--launch-skip", str(skip), "--launch-count", "1",
        "--clock-control", "none",
        "--csv", "--page", "raw", "--print-units", "base",
        "--metrics", ",".join(metrics),
        *target,
    ]


def profile(ncu: str, kernel: str, target: Sequence[str], *, skip: int, timeout_s: float,
            env: Mapping[str, str] | None = None, metrics: Sequence[str] = ncu_csv.METRICS) -> NcuRun:
    """Profile one launch; the launch's row, or ``NcuUnavailable`` saying why not."""
    metrics, dropped = list(metrics), []
    while True:
        argv = command(ncu, kernel, target, skip=skip, metrics=metrics)
        stdout, stderr, code = run(argv, timeout_s=timeout_s, env=env)
        unknown = unknown_metric(stdout + "\n" + stderr)
        if unknown is not None and len(dropped) < MAX_DROPS:
            kept = [m for m in metrics if not (m == unknown or m.startswith(unknown + "."))]
            if kept and len(kept) < len(metrics):
                dropped += [m for m in metrics if m not in kept]
                metrics = kept
                continue
        return NcuRun(check(stdout, stderr, code, kernel=kernel, skip=skip), argv, tuple(dropped))


def run(argv: Sequence[str], *, timeout_s: float, env: Mapping[str, str] | None = None) -> tuple[str, str, int]:
    """Run ``argv`` in its own process group; on timeout kill the whole group (ncu and the program)."""
    try:
        proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL,
                                text=True, errors="replace", env=None if env is None else dict(env),
                                start_new_session=True)
    except OSError as exc:
        raise NcuUnavailable("failed", f"ncu could not start: {exc.strerror or exc}") from None
    try:
        stdout, stderr = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        raise NcuUnavailable("timeout", f"ncu ran past its {timeout_s:g} s limit and was killed") from None
    except BaseException:
        _kill_group(proc)
        raise
    return stdout, stderr, proc.returncode


def check(stdout: str, stderr: str, code: int, *, kernel: str, skip: int) -> ncu_csv.Row:
    """The one profiled launch in ncu's output, or why there is none (checks in this order)."""
    both = stdout + "\n" + stderr
    if PERMISSION_ERROR in both:
        raise NcuUnavailable("permission", f"ncu may not read the GPU performance counters ({PERMISSION_ERROR}: "
                             "run as root or load nvidia with NVreg_RestrictProfilingToAdminUsers=0)")
    try:
        rows = ncu_csv.parse_raw(stdout)
    except ncu_csv.CsvError as exc:
        rows, parse_error = [], str(exc)
    else:
        parse_error = None
    if code != 0:
        raise NcuUnavailable("failed", f"ncu exited with code {code}: {last_error(both)}")
    if parse_error is not None and "no ncu raw-page table" not in parse_error:
        raise NcuUnavailable("unparsable", parse_error)
    if not rows:
        raise NcuUnavailable("no-kernel", f"ncu profiled no launch of {kernel} (filter {kernel_filter(kernel)}, "
                             f"--launch-skip {skip}): {last_error(both)}")
    if len(rows) != 1:
        raise NcuUnavailable("unparsable", f"ncu profiled {len(rows)} launches, expected exactly one")
    return rows[0]


def unknown_metric(text: str) -> str | None:
    """The metric named by ncu's ``Failed to find metric ...`` error, without its regex dress."""
    match = _UNKNOWN_METRIC.search(text)
    return match.group(1) if match else None


def last_error(text: str) -> str:
    """The line that best says what went wrong: the last ``==ERROR==``, else the last line."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("==ERROR==")]
    line = (errors or lines or ["no output"])[-1]
    return line[:300]


def _executable(path: str) -> bool:
    return Path(path).is_file() and os.access(path, os.X_OK)


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    try:
        proc.communicate(timeout=_STOP_WAIT_S)
    except subprocess.TimeoutExpired:
        pass
