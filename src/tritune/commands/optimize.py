"""``tritune optimize``: find faster verified variants of a program's kernels and store them.

Three inputs, exactly one per run:

    tritune optimize --out DIR -- python script.py     capture the script's launches first
    tritune optimize --out DIR --launches CAPTURE      a `tritune capture` directory
    tritune optimize --out DIR --inductor-dir CACHE    Inductor kernel modules (TORCHINDUCTOR_BENCHMARK_KERNEL=1)

DIR gets ``decisions.db`` (unless ``--store``), ``optimize.json``, ``kernels.jsonl`` and the report
(``report.md``, ``report.html``, ``plots/``). Running the same command again resumes an
interrupted run. Apply the decisions with ``tritune run --store DIR/decisions.db -- python
script.py`` or ``tritune.enable("DIR/decisions.db")`` in the program.

``--workers N`` / ``--devices 0,2,3``: that many lanes, one GPU each, keys handed out costliest
first to whichever lane is free, all writing the one store (``tritune.loop.lanes``); the result
is the one a single lane finds, with a line per lane (kernels, busy and idle time).
``--ray ADDRESS``: the lanes are a Ray cluster's GPUs instead (``tritune.loop.ray_lanes``); this
host keeps the store and signs what the cluster returns.

Exit status: 0 when the run finished; 1 when no launch could be optimized; 2 for a usage error or
an unusable input (a one-line message); 130 when interrupted (resumable).
"""

from __future__ import annotations

import contextlib
import dataclasses
import shlex
import sys
from pathlib import Path
from typing import Callable, Sequence

import click

from tritune import config
from tritune.commands import RUNS_A_COMMAND
from tritune.commands.checks import Finite, runs_kernels, writable_dir
from tritune.commands.llm import endpoint_options, llm_settings
from tritune.errors import one_line
from tritune.model import families
from tritune.model.request import STORE_FILE


def _families(ctx: click.Context, param: click.Parameter, names: tuple[str, ...]) -> tuple[str, ...]:
    if not names:
        return names
    from tritune.loop.families import DEFAULT_ORDER  # imports triton: only when asked

    unknown = [name for name in names if name not in DEFAULT_ORDER]
    if unknown:
        raise click.BadParameter(f"{unknown[0]!r} is not a family ({', '.join(DEFAULT_ORDER)})")
    return names


def _family_order(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[str, ...] | None:
    if value is None:
        return None
    names = tuple(name.strip() for name in value.split(",") if name.strip())
    if not names:
        raise click.BadParameter("name at least one family")
    return _families(ctx, param, names)


def _devices(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[int, ...] | None:
    if value is None:
        return None
    try:
        devices = tuple(int(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not GPU indices separated by commas (e.g. 0,2,3)") from None
    if any(d < 0 for d in devices):
        raise click.BadParameter(f"{value!r}: a GPU index cannot be negative")
    return devices


@click.command(context_settings=RUNS_A_COMMAND)
@click.option("--out", "-o", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              callback=writable_dir, help="Results directory: store, optimize.json, report.")
@click.option("--launches", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
              help="Optimize the launches of a `tritune capture` directory.")
@click.option("--inductor-dir", type=click.Path(path_type=Path, exists=True, file_okay=False), default=None,
              help="Optimize the Inductor kernel modules found under this directory.")
@click.option("--store", "store_path", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Decision store (SQLite). Default: OUT/decisions.db.")
@click.option("--kernel", "kernels", multiple=True, metavar="NAME", help="Only this kernel (or launch id); repeatable.")
@click.option("--max-kernels", type=click.IntRange(min=1), default=None,
              help="At most N kernels, costliest first (launches x baseline time).")
@click.option("--sample", type=click.IntRange(min=1), default=None,
              help="A seeded random sample of N kernels (benchmarks over many kernels).")
@click.option("--deadline-s", type=Finite(min=1), default=None,
              help="Whole-run wall budget: kernels share it by their share of time; the run stays resumable.")
@click.option("--cover", type=Finite(0.0, 1.0, min_open=True), default=0.95, show_default=True,
              help="Stop once the kernels optimized hold this share of the program's kernel time.")
@click.option("--rounds", type=click.IntRange(1, 64), default=8, show_default=True, help="Round cap per kernel.")
@click.option("--per-round", type=click.IntRange(1, 32), default=4, show_default=True, help="Candidates per round.")
@click.option("--max-candidates", type=click.IntRange(min=1), default=24, show_default=True,
              help="Candidates per kernel.")
@click.option("--budget-s", type=Finite(min=1), default=900.0, show_default=True,
              help="Wall seconds per kernel at most (with --deadline-s, each kernel gets its share of it).")
@click.option("--threshold", type=Finite(min=1.0), default=1.05, show_default=True,
              help="Speedup a candidate must reach, confirmed by interleaved re-timing.")
@click.option("--fast-math", is_flag=True, help="Also try fast-math rewrites (max relative error 1e-4).")
@click.option("--ncu", "use_ncu", type=click.Choice(["auto", "never", "require"]), default="auto", show_default=True,
              help="Profile with Nsight Compute (auto: when available).")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Workers building and verifying candidates at once (one times them), per lane. "
                   "Default: the usable CPU cores shared by the lanes, at most 16 a lane. Never more than "
                   "the cores and memory hold (about 1 GiB a worker) or --max-candidates (said when lowered).")
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Lanes: GPUs optimizing keys at once, one worker set pinned to each (costliest keys first, "
                   "to whichever is free). Default: one per visible GPU; under TRITON_INTERPRET=1, N interpreter "
                   "lanes (default 1).")
@click.option("--devices", default=None, metavar="I,J,...", callback=_devices,
              help="The GPUs to use, by index (within CUDA_VISIBLE_DEVICES when set): one lane each.")
@click.option("--ray", "ray_address", default=None, metavar="ADDRESS",
              help="Lanes on a Ray cluster: one per GPU it offers (--workers N: N of them), the capture shipped "
                   "to them; this host keeps the store. ADDRESS: its head (host:6379, ray://host:10001), auto (the "
                   "cluster `ray start` runs here) or local (a Ray of this host's own). Needs "
                   "pip install 'tritune[ray]'.")
@click.option("--without", "without", multiple=True, metavar="FAMILY", callback=_families,
              help="Leave this proposer family out (e.g. source-rewrite: a run with knobs only); repeatable.")
@click.option("--families", "family_order", default=None, metavar="A,B,...", callback=_family_order,
              help="Only these proposer families, in this order (e.g. llm: the model alone).")
@endpoint_options("An OpenAI-compatible endpoint (e.g. http://127.0.0.1:8000/v1): its model proposes rewrites "
                  "after the model-free families. Key: TRITUNE_LLM_API_KEY, else OPENAI_API_KEY.",
                  "Write the prompts to OUT/llm-prompts/ instead of sending them.")
@click.option("--llm-rounds", type=click.IntRange(min=1), default=8, show_default=True,
              help="Proposals the model makes per kernel.")
@click.option("--llm-fixes", type=click.IntRange(min=0), default=2, show_default=True,
              help="Times a failed proposal goes back to the model with its failure.")
@click.option("--fresh", is_flag=True, help="Start a new run instead of resuming an interrupted one.")
@click.option("--unsafe-no-jail", is_flag=True,
              help="Run the workers unjailed (where this machine lacks Landlock or seccomp, --llm needs it): "
                   "a model's code then reaches everything you can.")
@click.option("--report/--no-report", default=True, show_default=True, help="Write report.md/html with plots.")
@click.argument("command", nargs=-1, type=click.UNPROCESSED, metavar="[-- COMMAND...]")
@runs_kernels("optimize")
def optimize(out_dir: Path, launches: Path | None, inductor_dir: Path | None, store_path: Path | None,
             kernels: tuple[str, ...], max_kernels: int | None, sample: int | None, deadline_s: float | None,
             cover: float, rounds: int, per_round: int, max_candidates: int,
             budget_s: float, threshold: float, fast_math: bool, use_ncu: str, jobs: int | None,
             workers: int | None, devices: tuple[int, ...] | None, ray_address: str | None, without: tuple[str, ...],
             family_order: tuple[str, ...], llm_url: str | None, llm_model: str | None,
             llm_rounds: int, llm_fixes: int, llm_max_tokens: int, llm_price: tuple[float, float] | None,
             llm_dry_run: bool, fresh: bool, unsafe_no_jail: bool, report: bool, command: tuple[str, ...]) -> None:
    """Find faster, verified variants of every Triton kernel a program launches.

    Every kernel's baseline is timed first; kernels are taken costliest first (launches x time)
    until --cover of the kernel time is covered. Each kernel: profiled (ncu when available), then up to --rounds rounds of
    candidates (launch configs, Inductor blocks, IR passes, cache hints), each built, verified on
    3 fresh input sets and timed in an isolated worker; a candidate is kept only when it verified
    and is >= --threshold faster, confirmed by interleaved re-timing.
    """
    from tritune.loop import OptimizeError, optimize as run_loop
    from tritune.loop.lanes import LaneError, lane_devices
    from tritune.model.launch import SpecError
    from tritune.model.request import RunRequest
    from tritune.model.settings import ArbiterSettings, LoopSettings
    from tritune.store import StoreError
    from tritune.worker import jail

    jail.protect_parent()  # this process holds the LLM key and signs: no worker reads it
    given = [name for name, value in (("-- COMMAND", command), ("--launches", launches),
                                      ("--inductor-dir", inductor_dir)) if value]
    if len(given) != 1:
        raise click.UsageError("give exactly one of -- COMMAND, --launches DIR, --inductor-dir DIR"
                               + (f" (got {', '.join(given)})" if given else ""))
    llm = llm_settings(llm_url, llm_model, llm_rounds, llm_fixes, llm_max_tokens, llm_price, llm_dry_run,
                        out_dir, family_order)
    try:
        jail.check(untrusted=llm is not None, unsafe_no_jail=unsafe_no_jail)
    except jail.JailUnavailable as exc:
        click.echo(f"tritune optimize: {exc}", err=True)
        sys.exit(2)
    _check_inputs(out_dir, launches, store_path, kernels)
    if command:
        _command_starts(command)  # a typo: one line before --out is made or any worker starts (lane_devices')
    try:
        if ray_address is not None:
            picked = None
            _ray_usable(devices, llm)
        else:
            picked = lane_devices(workers, devices)  # on a GPU host, a worker counts the GPUs
    except LaneError as exc:
        click.echo(f"tritune optimize: {exc}", err=True)
        sys.exit(2)
    try:
        settings = LoopSettings(arbiter=ArbiterSettings(threshold=threshold, max_rounds=rounds),
                                per_round=per_round, max_candidates=max_candidates, budget_s=budget_s,
                                fast_math=fast_math, use_ncu=use_ncu,
                                jobs=_jobs(jobs, picked, max_candidates),
                                without=tuple(without), families=family_order or (), llm=llm,
                                unsafe_no_jail=unsafe_no_jail)
        request = RunRequest(out_dir, settings=settings, store_path=store_path, kernels=kernels,
                             max_kernels=max_kernels, sample=sample, deadline_s=deadline_s, cover=cover, fresh=fresh)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    out_dir.mkdir(parents=True, exist_ok=True)
    if launches is not None:
        _not_captured(launches)
    # local lanes start while the program is captured (``HeadStart``)
    head = _HeadStart(settings, picked, command) if picked is not None and config.head_start() else None
    try:
        root = launches or _launches_from(command, inductor_dir, out_dir, unsafe_no_jail=unsafe_no_jail,
                                          starting=head.begin if head is not None else None)
        given = head.lanes(root) if head is not None else None
        text = shlex.join(command) if command else f"--launches {launches}" if launches else f"--inductor-dir {inductor_dir}"
        from tritune.analyze.render import console_for

        console = console_for(sys.stdout)
        request = dataclasses.replace(request, command=text)
        with _progress(console) as (progress, log):
            if ray_address is None:
                results = run_loop(root, request, devices=picked, lanes=given, progress=progress, log=log)
            else:
                from tritune.loop.ray_lanes import ray_run

                with ray_run(ray_address, root, settings, workers=workers, jobs=jobs) as lanes:
                    results = run_loop(root, request, lanes=lanes, progress=progress, log=log)
    except (OptimizeError, SpecError, StoreError, LaneError) as exc:
        click.echo(f"tritune optimize: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo(f"tritune optimize: interrupted; run the same command again to resume ({out_dir})", err=True)
        sys.exit(130)
    finally:
        if head is not None:
            head.close()
    _conclude(console, results, out_dir, report, family_order)


def _conclude(console, results, out_dir: Path, report: bool, family_order: tuple[str, ...]) -> None:
    """The summary, the report, and the exit status: 0 when a kernel was optimized, 1 when none
    could be, 2 when the model was the only family asked for and could not be asked."""
    _summary(console, results, out_dir)
    if results.stopped:
        click.echo(f"tritune optimize: stopped at the {results.stopped}", err=True)
    if report:
        _report(results, out_dir)
    unreached = _model_unreached(results, family_order)
    if unreached:
        click.echo(f"tritune optimize: {unreached}", err=True)
        sys.exit(2)
    sys.exit(0 if any(k.ran for k in results.kernels) else 1)


def _model_unreached(results, family_order: tuple[str, ...]) -> str | None:
    """Why nothing was tried where the model was the only family asked for (``--families llm``)
    and its endpoint could not be used, or None: the run did nothing (it exited 0)."""
    broken = (results.llm or {}).get("broken")
    if not broken or not family_order or set(family_order) != {families.LLM}:
        return None
    if any(k.candidates for k in results.kernels):
        return None
    return f"--families llm, and the model could not be asked: {broken}; nothing was tried"


def _jobs(asked: int | None, lanes: list | None, max_candidates: int) -> int:
    """``--jobs`` (default: ``default_jobs``) within what this host's cores and memory hold for its
    lanes and what a round can use (``resources.bound_jobs``; said in one line when that lowers
    the number asked). Ray's lanes run elsewhere: what was asked, or 1 there."""
    from tritune.loop.evaluate import default_jobs
    from tritune.resources import bound_jobs

    if lanes is None:
        return asked or 1
    bounded = bound_jobs(asked or default_jobs(len(lanes)), lanes=len(lanes), round_most=max_candidates)
    if asked is not None and bounded.lowered:
        _say(f"--jobs {asked} lowered to {bounded.jobs}: {bounded.lowered}")
    return bounded.jobs


def _ray_usable(devices: tuple[int, ...] | None, llm) -> None:
    """``--ray``'s usage errors (``LaneError``), before anything runs: what it cannot be combined
    with, then Ray itself (``pip install 'tritune[ray]'``)."""
    from tritune.loop.lanes import LaneError
    from tritune.loop.ray_lanes import import_ray

    if devices:
        raise LaneError("--ray takes the cluster's GPUs, and --devices picks GPUs of this host: "
                        "give --workers N for N of the cluster's")
    if llm is not None:
        raise LaneError("--ray cannot run --llm: the model's session and its key stay on this host "
                        "(run --llm without --ray)")
    import_ray()


def _check_inputs(out_dir: Path, launches: Path | None, store_path: Path | None, kernels: tuple[str, ...]) -> None:
    """Every input that can be checked without running anything, before anything is written
    (``--out`` is checked by its callback)."""
    from tritune.capture.spec import read_launches
    from tritune.commands.checks import store_problem
    from tritune.model.launch import SpecError

    problem = None
    if launches is not None:
        try:
            specs = read_launches(launches)
        except SpecError as exc:
            specs, problem = [], str(exc)
        if problem is None and not specs:
            problem = f"{launches}: the capture holds no launches"
        if problem is None and kernels and not any({s.kernel, s.id} & set(kernels) for s in specs):
            problem = (f"{launches}: no launch of kernel {', '.join(kernels)} "
                       "(--kernel takes a kernel name or launch id)")
    if problem is None:
        problem = store_problem(store_path or out_dir / STORE_FILE)
    if problem is not None:
        click.echo(f"tritune optimize: {problem}", err=True)
        sys.exit(2)


def _command_starts(command: Sequence[str]) -> None:
    """Exit with the shell's status and one line where ``command`` cannot start as written
    (``boot.check``: not found, or a Python script that does not exist)."""
    from tritune.boot import CommandError, check

    try:
        check(command)
    except CommandError as exc:
        click.echo(f"tritune optimize: {exc}", err=True)
        sys.exit(exc.exit_code)


class _HeadStart:
    """The run's local lanes started as its program's capture starts (``lanes.HeadStart``), and
    handed to the run after it, or closed."""

    def __init__(self, settings, devices, command: Sequence[str] = ()) -> None:
        from tritune.boot import script_folder

        self._settings, self._devices = settings, devices
        # the folder its workers may read from their start: the script's, where its kernels most
        # likely lie (the run's own jail reads the kernel files' folders, known after the capture)
        folder = script_folder(command) if command else None
        self._program_dirs = (folder,) if folder else ()
        self._head = None
        self._given: list = []

    def begin(self, capture_dir: Path) -> None:
        """Started, or said why not in one line (it only saves time: the run goes on without)."""
        from tritune.loop.lanes import HeadStart

        try:
            self._head = HeadStart(capture_dir, self._settings, self._devices, program_dirs=self._program_dirs)
        except Exception as exc:  # noqa: BLE001 - a folder it cannot make, a jail it cannot set: the run's own start says
            _say(f"the workers start after the capture, not beside it: {one_line(exc)}")

    def lanes(self, root: Path) -> list | None:
        """The lanes for the run on ``root``, or None: it makes its own (``HeadStart.lanes``)."""
        if self._head is None:
            return None
        self._given = self._head.lanes(root) or []
        return self._given or None

    def close(self) -> None:
        from tritune.loop.lanes import close_lanes

        if self._head is not None:
            self._head.close()
        close_lanes(self._given)
        self._given = []


def _launches_from(command: tuple[str, ...], inductor_dir: Path | None, out_dir: Path, *,
                   unsafe_no_jail: bool = False, starting: Callable[[Path], None] | None = None) -> Path:
    """Capture COMMAND (or load Inductor's modules) into OUT/capture, unless already there;
    ``starting(OUT/capture)`` just before the program runs."""
    from tritune.capture.spec import read_launches
    from tritune.model.launch import SpecError

    target = out_dir / "capture"
    try:
        if read_launches(target):
            click.echo(f"tritune optimize: using the capture already in {target} (delete it to capture again)")
            _not_captured(target)
            return target
    except SpecError:
        pass
    if inductor_dir is not None:
        return _inductor(inductor_dir, target, unsafe_no_jail=unsafe_no_jail)
    from tritune.capture.program import CaptureError, describe_exit, discard, run
    from tritune.worker import bytecode

    # the workers' bytecode compiled while the program runs (none for unjailed workers: never given it)
    meanwhile = bytecode.filled_meanwhile(_say, target / bytecode.COMPLETE) if not unsafe_no_jail else contextlib.nullcontext()
    try:
        with meanwhile as imports:
            if starting is not None:
                starting(target)
            captured = run(list(command), target, mode="replace", imports=imports)
    except CaptureError as exc:
        click.echo(f"tritune optimize: {exc}", err=True)
        sys.exit(exc.exit_code)
    _not_captured(target)
    if captured.returncode != 0 or not captured.specs:
        why = describe_exit(captured.returncode) if captured.returncode else (
            "launched no Triton kernel that could be captured" if captured.skipped else "launched no Triton kernel")
        discard(target)  # partial: the next run captures again rather than optimize it as complete
        click.echo(f"tritune optimize: the command {why}; nothing to optimize", err=True)
        sys.exit(2)
    click.echo(f"captured {captured.distinct} distinct launches of {len(captured.kernels)} kernels -> {target}")
    return target


def _say(line: str) -> None:
    click.echo(f"tritune optimize: {line}", err=True)


def _not_captured(root: Path) -> None:
    """The launches the capture saw and could not record (``DIR/skipped.jsonl``), each with why:
    they are not optimized, and the user is told so."""
    from tritune.capture import skipped
    from tritune.model.launch import SpecError

    try:
        records = skipped.read(root)
    except SpecError as exc:
        click.echo(f"tritune optimize: {exc}", err=True)
        return
    for line in skipped.lines(records):
        click.echo(f"tritune optimize: {line}" if not line.startswith(" ") else line, err=True)


def _inductor(modules: Path, target: Path, *, unsafe_no_jail: bool = False) -> Path:
    from tritune.loop.jobs import INDUCTOR_LAUNCHES_JOB
    from tritune.worker import Worker, jail

    # the modules' top level runs in the worker: jailed like every worker that imports kernel files,
    # reading the modules and writing only the capture it makes
    policy = jail.for_workers(None, untrusted=False, unsafe_no_jail=unsafe_no_jail, program_dirs=(),
                              extra_read=[modules.absolute()], extra_write=[target.absolute()])
    with Worker(1800.0, preload=("torch",), jail=policy) as worker:
        # absolute: the worker runs in a directory of its own
        paths = {"modules": str(modules.absolute()), "out": str(target.absolute())}
        outcome = worker.call(INDUCTOR_LAUNCHES_JOB, paths)
    if not outcome.ok:
        click.echo(f"tritune optimize: loading Inductor modules failed: {outcome.failure.message}", err=True)
        sys.exit(2)
    for error in outcome.value["errors"]:
        click.echo(f"tritune optimize: skipped {error}", err=True)
    if not outcome.value["launches"]:
        click.echo(f"tritune optimize: no Inductor kernel module under {modules}", err=True)
        sys.exit(2)
    click.echo(f"{outcome.value['launches']} launches from {outcome.value['modules']} Inductor modules -> {target}")
    return target


class _progress:
    """A rich progress bar over kernels, with the loop's log lines printed above it."""

    def __init__(self, console) -> None:
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

        self.bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                            TimeElapsedColumn(), console=console, transient=True)
        self.task = None

    def __enter__(self):
        self.bar.__enter__()
        return self.advance, self.log

    def __exit__(self, *exc) -> None:
        self.bar.__exit__(*exc)

    def advance(self, kernel: str, done: int, total: int) -> None:
        if self.task is None:
            self.task = self.bar.add_task("optimizing", total=total)
        self.bar.update(self.task, completed=done, description=f"optimizing {kernel}" if kernel else "done")

    def log(self, line: str) -> None:
        self.bar.console.print(line, highlight=False, markup=False)


def _summary(console, results, out_dir: Path) -> None:
    from rich.table import Table

    from tritune.report.document import fmt_pct

    table = Table(show_edge=False)
    for column, justify in (("kernel", "left"), ("category", "left"), ("launches", "right"), ("share", "right"),
                            ("baseline ms", "right"), ("best ms", "right"), ("speedup", "right"),
                            ("decision", "left"), ("finish", "left")):
        table.add_column(column, justify=justify)
    for k in results.kernels:
        table.add_row(k.kernel, k.category, str(k.launches), fmt_pct(k.time_share), _ms(k.baseline_ms),
                      _ms(k.best_ms), f"{k.speedup:.2f}x" if k.speedup else "-",
                      k.decision or (k.failure and f"failed: {k.failure}") or "-", k.finish or "-")
    console.print(table)
    for k in results.kernels:  # why, which report.md alone said ("failed: error" above)
        if k.failure:
            why = next((line.strip() for line in k.message.splitlines() if line.strip()), "no message")
            console.print(f"{k.kernel} failed ({k.failure}): {why}", highlight=False, markup=False, soft_wrap=True)
    ran = [k for k in results.kernels if k.ran]
    better = [k for k in ran if k.accepted]
    console.print(f"{len(better)} of {len(ran)} kernels improved; store {results.store}; results "
                  f"{out_dir / 'optimize.json'}", highlight=False)
    if results.coverage is not None:
        console.print(f"kernel time covered: {fmt_pct(results.coverage)} of {len(results.timed)} kernels' "
                      f"{_ms(results.program_ms)} ms; expected saving {fmt_pct(results.expected_gain)} of kernel time",
                      highlight=False)
    for line in llm_lines(results):
        console.print(line, highlight=False)
    waited, busy = sum(k.waited for k in results.kernels), sum(k.busy for k in results.kernels)
    if waited:
        console.print(f"{waited} candidates were being evaluated by another optimize run on this store: waited "
                      f"for them; {busy} still held when the budget ran out were not evaluated", highlight=False)
    for line in lane_lines(results):
        console.print(line, highlight=False)
    if not results.meaningful:
        console.print("NOT meaningful: no GPU (Triton interpreter); times measure the CPU, not a kernel, and "
                      "nothing is accepted on them", style="bold red")


def lane_lines(results) -> list[str]:
    """A line per lane when there was more than one: its GPU, kernels, busy and idle time."""
    if len(results.lanes) < 2:
        return []
    return [f"lane {lane.name} ({lane.gpu or 'did not start'}): {lane.kernels} kernel(s), {lane.busy_s:.0f} s busy, "
            f"{lane.idle_s:.0f} s idle" + (f"; died: {lane.died}" if lane.died else "") for lane in results.lanes]


def llm_lines(results) -> list[str]:
    """The LLM family's cost: a line per kernel it ran on, then the total (TritonForge reports
    time and dollars per kernel)."""
    if results.llm is None:
        return []
    lines = []
    for k in results.kernels:
        if not k.llm:
            continue
        cost = k.llm.get("cost") or {}
        failures = ", ".join(f"{n} {kind}" for kind, n in sorted((k.llm.get("failures") or {}).items()))
        dollars = cost.get("dollars")
        lines.append(f"llm: {k.kernel}: {k.llm.get('rounds', 0)} round(s), {k.llm.get('replies', 0)} replies"
                     + (f" ({failures})" if failures else "") + f"; {cost.get('requests', 0)} request(s), "
                     f"{cost.get('prompt_tokens', 0):,} tokens in / {cost.get('completion_tokens', 0):,} out, "
                     f"{cost.get('seconds', 0.0):.0f} s" + (f", ${dollars:.2f}" if dollars is not None else ""))
    lines.append(f"llm total ({results.llm.get('model')}): {results.llm.get('line')}"
                 + (f"; stopped asking: {results.llm['broken']}" if results.llm.get("broken") else ""))
    return lines


def _report(results, out_dir: Path) -> None:
    try:
        from tritune.report import write_report
    except ImportError as exc:
        click.echo(f"tritune optimize: no report ({exc})", err=True)
        return
    try:
        written = write_report(results, out_dir)
    except (ValueError, OSError) as exc:  # ReportError is a ValueError; the results are saved already
        click.echo(f"tritune optimize: no report ({exc})", err=True)
        return
    click.echo("report: " + ", ".join(str(p) for p in written.values() if Path(p).suffix in (".md", ".html")))


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"
