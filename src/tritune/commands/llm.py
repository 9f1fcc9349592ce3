"""The ``--llm*`` options that ``tritune optimize`` and ``tritune generate`` share, and the
``LLMSettings`` they make."""

from __future__ import annotations

from pathlib import Path
from typing import Callable

import click

from tritune.model import families


def endpoint_options(url_help: str, dry_run_help: str) -> Callable:
    """``--llm URL``, ``--llm-model``, ``--llm-max-tokens``, ``--llm-price`` and ``--llm-dry-run``,
    in that order; the command's own help for the endpoint and the dry run."""
    options = [
        click.option("--llm", "llm_url", default=None, metavar="URL", help=url_help),
        click.option("--llm-model", default=None, metavar="NAME", help="The model to ask (required with --llm)."),
        click.option("--llm-max-tokens", type=click.IntRange(min=1), default=4096, show_default=True,
                     help="Most tokens a reply may have."),
        click.option("--llm-price", default=None, metavar="IN,OUT", callback=parse_price,
                     help="Dollars per million tokens in and out: the cost lines then say dollars."),
        click.option("--llm-dry-run", is_flag=True, help=dry_run_help),
    ]

    def wrap(command: Callable) -> Callable:
        for option in reversed(options):
            command = option(command)
        return command

    return wrap


def parse_price(ctx: click.Context, param: click.Parameter, value: str | None) -> tuple[float, float] | None:
    if value is None:
        return None
    from tritune.commands.checks import finite

    try:
        price_in, price_out = (finite(part) for part in value.split(","))
    except ValueError:
        raise click.BadParameter(f"{value!r} is not IN,OUT (dollars per million tokens, e.g. 2.5,10)") from None
    if price_in < 0 or price_out < 0:
        raise click.BadParameter(f"{value!r}: prices cannot be negative")
    return price_in, price_out


def llm_settings(url: str | None, model: str | None, rounds: int, fixes: int, max_tokens: int,
                 price: tuple[float, float] | None, dry_run: bool, out_dir: Path,
                 family_order: tuple[str, ...] | None):
    """``LLMSettings`` from the options, or None without --llm; a usage error for options that
    need --llm, or an endpoint URL that cannot be one."""
    if url is None:
        given = [name for name, value in (("--llm-model", model), ("--llm-price", price),
                                          ("--llm-dry-run", dry_run)) if value]
        if given:
            raise click.UsageError(f"{given[0]} needs --llm URL")
        if family_order and families.LLM in family_order:
            raise click.UsageError("--families names llm, which needs --llm URL and --llm-model NAME")
        return None
    if not model:
        raise click.UsageError("--llm needs --llm-model NAME (the model the endpoint serves)")
    from tritune.llm.client import LLMError, check_base_url
    from tritune.model.settings import LLMSettings

    try:
        url = check_base_url(url)
    except LLMError as exc:
        raise click.UsageError(str(exc)) from None
    return LLMSettings(url=url, model=model, rounds=rounds, max_tokens=max_tokens, fixes=fixes, price=price,
                       dry_run=str(out_dir / "llm-prompts") if dry_run else None)
