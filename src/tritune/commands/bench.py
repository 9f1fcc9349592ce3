"""``tritune bench DIR``: time every launch a capture recorded, and show where the time goes.

Each launch runs in an isolated worker process (``tritune.worker``) with a time limit, so a
kernel that faults (which leaves the CUDA context unusable), hangs or crashes becomes one row
with its failure kind and the run goes on. The copy bandwidth (the roofline) is measured once,
in the same worker, and handed to every launch's job.

Exit status: 0 when every launch was timed, 1 when one failed or none matched ``--kernel``, 2
when DIR is not a usable capture (a one-line error naming the file and line).
"""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Any, Callable

import click

from tritune.commands.checks import Finite, runs_kernels

BENCH_JOB = "tritune.bench.run:bench_job"
BANDWIDTH_JOB = "tritune.bench.run:bandwidth_job"
DEFAULT_TIMEOUT_S = 300.0  # per launch: compile + two do_bench runs + 200 events + a graph


def _methods(ctx: click.Context, param: click.Parameter, value: str) -> tuple[str, ...]:
    from tritune.bench.run import check_methods

    try:
        return check_methods([m.strip() for m in value.split(",") if m.strip()])
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


@click.command()
@click.argument("directory", metavar="DIR", type=click.Path(path_type=Path))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of per-launch results.")
@click.option("--kernel", "kernel_filter", default=None, metavar="NAME",
              help="Only launches of the kernel NAME (or the launch id NAME).")
@click.option("--methods", default="median,events,graph", show_default=True, callback=_methods,
              help="Comma-separated timing methods: median (do_bench, twice for the noise), "
                   "events (mean/p50/p95 of 200), graph (CUDA-graph replay).")
@click.option("--isolate/--no-isolate", default=True, show_default=True,
              help="Run each launch in a worker process, so a faulting kernel does not end the run.")
@click.option("--timeout", "timeout_s", type=Finite(min=1), default=DEFAULT_TIMEOUT_S,
              show_default=True, help="Seconds one launch may take (isolated runs only).")
@runs_kernels("bench")
def bench(directory: Path, as_json: bool, kernel_filter: str | None, methods: tuple[str, ...],
          isolate: bool, timeout_s: float) -> None:
    """Time every launch captured in DIR (a `tritune capture` directory).

    Shows per launch: count, grid, do_bench median, event p50/p95, CUDA-graph time, noise, bytes
    moved, GB/s, roofline fraction (of the measured copy bandwidth) and total time weighted by
    count. Under TRITON_INTERPRET=1 the launches run on the CPU and times are marked NOT meaningful.
    """
    from tritune.bench.render import render_table, to_json
    from tritune.capture.spec import read_launches
    from tritune.model.launch import SpecError

    try:
        specs = read_launches(directory)
    except SpecError as exc:
        click.echo(f"tritune bench: {exc}", err=True)
        sys.exit(2)
    if kernel_filter:
        specs = [s for s in specs if kernel_filter in (s.kernel, s.id)]
    if not specs:
        which = f"of kernel {kernel_filter!r} " if kernel_filter else ""
        click.echo(f"tritune bench: no launch {which}in {directory}", err=True)
        sys.exit(1)

    with contextlib.ExitStack() as stack:
        call = _isolated(timeout_s, stack, directory) if isolate else _in_process
        bandwidth = _bandwidth(specs, call)
        results = _bench_all(specs, directory, methods, bandwidth.get("copy_gbps"), call)
    if as_json:
        click.echo(to_json(results))
    else:
        from tritune.analyze.render import console_for

        render_table(results, console_for(sys.stdout), copy_gbps=bandwidth.get("copy_gbps"),
                     gpu=bandwidth.get("gpu"))
    if bandwidth.get("failure"):
        click.echo(f"tritune bench: copy bandwidth not measured ({bandwidth['failure']}); "
                   "no roofline fractions", err=True)
    sys.exit(1 if any(r["failure"] for r in results) else 0)


# A call runs one job: (target, payload) -> (ok, value or None, failure kind or None, message).
Call = Callable[[str, dict], tuple[bool, Any, str | None, str | None]]


def _bench_all(specs: list, directory: Path, methods: tuple[str, ...], copy_gbps: float | None,
               call: Call) -> list[dict]:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from tritune.bench.run import empty_result

    results = []
    columns = (TextColumn("bench"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TextColumn("{task.description}"))
    with Progress(*columns, console=Console(stderr=True), transient=True) as progress:
        task = progress.add_task("", total=len(specs))
        for spec in specs:
            progress.update(task, description=spec.id)
            payload = {"spec": spec.to_json(), "root": str(directory.resolve()), "methods": list(methods),
                       "copy_gbps": copy_gbps}
            ok, value, kind, message = call(BENCH_JOB, payload)
            if ok:
                results.append(value)
            else:
                results.append({**empty_result(spec, methods=methods), "failure": kind, "message": message})
            progress.advance(task)
    return results


def _bandwidth(specs: list, call: Call) -> dict:
    """The copy bandwidth of the GPU the launches run on; nothing to measure on the CPU."""
    from tritune.replay import device_of

    devices = sorted({device_of(s) for s in specs if str(device_of(s)).startswith("cuda")})
    if not devices:
        return {}
    ok, value, kind, message = call(BANDWIDTH_JOB, {"device": devices[0]})
    return value if ok else {"failure": f"{kind}: {message}"}


def _isolated(timeout_s: float, stack: contextlib.ExitStack, directory: Path) -> Call:
    """Jobs in one reused worker (closed with ``stack``); it restarts by itself after a fault,
    a timeout or a crash."""
    from tritune.worker.pool import Worker

    from tritune.worker import jail

    jail.protect_parent()
    # the capture's kernel files run their top level in the worker: jailed where this machine can
    policy = jail.for_workers(directory, untrusted=False)
    worker = stack.enter_context(Worker(timeout_s=timeout_s, preload=("torch", "triton"), jail=policy))

    def call(target: str, payload: dict) -> tuple[bool, Any, str | None, str | None]:
        outcome = worker.call(target, payload)
        if outcome.ok:
            return True, outcome.value, None, None
        return False, None, outcome.failure.kind, outcome.failure.message

    return call


def _in_process(target: str, payload: dict) -> tuple[bool, Any, str | None, str | None]:
    """Jobs in this process (``--no-isolate``): a fault here can end the run or spoil later rows."""
    from tritune import gpu
    from tritune.worker.child import resolve
    from tritune.worker.failures import from_exception

    gpu.announce()  # where the interpreter stands in for a GPU
    try:
        return True, resolve(target)(payload), None, None
    except Exception as exc:  # noqa: BLE001 - every failure becomes a row, classified as a worker would
        failure = from_exception(exc)
        return False, None, failure.kind, failure.message
