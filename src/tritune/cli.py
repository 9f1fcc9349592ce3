"""Command line: ``tritune analyze PATH``. Thin: parsing and exit codes here, work in analyze/."""

from __future__ import annotations

import contextlib
import sys
from pathlib import Path
from typing import Iterator

import click

from tritune.commands.checks import Finite
from tritune.version import __version__


class OneLineUsageError(click.UsageError):
    """A usage error shown as one line naming the problem; click's own shows the usage, a hint
    and the error on four lines, and a user reads the first."""

    def show(self, file=None) -> None:
        where = self.ctx.command_path if self.ctx is not None else "tritune"
        message = self.format_message().rstrip(".")
        click.echo(f"{where}: {message} (try '{where} --help')", file=file, err=file is None)


@contextlib.contextmanager
def _one_line() -> Iterator[None]:
    try:
        yield
    except (click.exceptions.NoArgsIsHelpError, OneLineUsageError):  # the help itself; done already
        raise
    except click.exceptions.NoSuchOption as exc:
        close = f", did you mean {' or '.join(exc.possibilities)}?" if exc.possibilities else ""
        raise OneLineUsageError(f"no such option: {exc.option_name}{close}", exc.ctx) from None
    except click.UsageError as exc:
        raise OneLineUsageError(exc.format_message(), exc.ctx) from None


class _Group(click.Group):
    """Every usage error of the group and its subcommands (their options, and the ones they
    raise themselves) becomes a ``OneLineUsageError``."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        with _one_line():
            return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context):
        with _one_line():
            return super().invoke(ctx)


@click.group(name="tritune", cls=_Group)
@click.version_option(__version__, prog_name="tritune")
def main() -> None:
    """tritune: makes Triton GPU kernels faster automatically, and proves every change correct."""


def _target(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from tritune.analyze.targets import parse_target

    try:
        return parse_target(value).name
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _constexprs(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict:
    from tritune.analyze.launch import parse_assignment, parse_value

    parsed = {}
    for text in values:
        try:
            name, value = parse_assignment(text)
            parsed[name] = parse_value(value)
        except ValueError as exc:
            raise click.BadParameter(str(exc)) from None
    return parsed


def _signature(ctx: click.Context, param: click.Parameter, values: tuple[str, ...]) -> dict:
    from tritune.analyze.launch import parse_assignment, parse_type

    parsed = {}
    try:
        for text in values:
            name, value = parse_assignment(text)
            parsed[name] = parse_type(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None
    return parsed


@main.command()
@click.argument("path", type=click.Path(exists=True, path_type=Path))
@click.option("--target", default="sm_90", show_default=True, callback=_target,
              help="GPU to compile for: sm_80, sm_86, sm_89, sm_90, sm_100 (or 80, 90, ...).")
@click.option("--constexpr", "constexprs", multiple=True, callback=_constexprs, metavar="NAME=VALUE",
              help="Value of a constexpr (int, float, true/false); repeatable. Wins over inferred values.")
@click.option("--signature", "signature", multiple=True, callback=_signature, metavar="NAME=TYPE",
              help="Type of a runtime parameter, e.g. x_ptr=*fp16 or n=i64; repeatable.")
@click.option("--num-warps", type=click.IntRange(1, 32), default=None,
              help="Warps per program (default: the kernel's first config, else 4).")
@click.option("--fast-math", is_flag=True, help="Count fast-math rewrites too (division reassociation).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list of per-kernel objects.")
@click.option("--wide", is_flag=True,
              help="Every column (constexprs, op counts, load widths, divisions, occupancy limiter), however wide; "
                   "by default the table fits the terminal.")
@click.option("--kernel", "kernel_filter", default=None, metavar="NAME", help="Only the kernel named NAME.")
@click.option("--timeout", "timeout_s", type=Finite(0, min_open=True), default=60, show_default=True,
              metavar="S", help="Seconds each file's import may take; a file that takes longer is skipped.")
def analyze(path: Path, target: str, constexprs: dict, signature: dict, num_warps: int | None,
            fast_math: bool, as_json: bool, wide: bool, kernel_filter: str | None, timeout_s: float) -> None:
    """Static analysis of every @triton.jit kernel in PATH (a .py file or a directory); no GPU needed.

    Reports per kernel TTIR op counts, what each tritune pass would rewrite, PTX statistics,
    registers, spills, shared memory and theoretical occupancy. Exits 1 if nothing was analysed.
    """
    from tritune.analyze import analyze_path
    from tritune.analyze.render import console_for, error_lines, render_table, to_json
    from tritune.analyze.report import analysed

    records = analyze_path(
        path, target=target, constexprs=constexprs, signature=signature, num_warps=num_warps,
        fast_math=fast_math, kernel_filter=kernel_filter, progress=path.is_dir(), timeout_s=timeout_s,
    )
    if as_json:
        click.echo(to_json(records))
    else:
        render_table(records, console_for(sys.stdout), wide=wide)
        for line in error_lines(records):  # on stderr, as rewrites says its own
            click.echo(f"tritune analyze: {line}", err=True)
    if not any(r["kernel"] for r in records) and not any(r["error"] for r in records):  # errors say why
        which = f"named {kernel_filter!r} " if kernel_filter else ""
        click.echo(f"tritune analyze: no @triton.jit kernel {which}found in {path}", err=True)
    sys.exit(0 if analysed(records) else 1)


def _register() -> None:
    """Subcommands live one per module under ``tritune.commands``; each imports its heavy parts lazily."""
    from tritune.commands.bench import bench
    from tritune.commands.capture import capture
    from tritune.commands.generate import generate
    from tritune.commands.harvest import harvest
    from tritune.commands.optimize import optimize
    from tritune.commands.report import report
    from tritune.commands.rewrites import rewrites
    from tritune.commands.run import run
    from tritune.commands.store import store

    for command in (capture, bench, generate, harvest, optimize, report, rewrites, run, store):
        main.add_command(command)


_register()
