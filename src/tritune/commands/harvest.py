"""``tritune harvest --model NAME --out DIR``: a model's Inductor kernels as launch specs (GPU).

Exit status: 0 when every kernel module became a spec; 1 when some failed (the others are in
DIR) or none did; 2 when harvest cannot run: no CUDA GPU here, an unknown model or a bad
``module:callable``, a model that fails to build or compile, or DIR already holding a capture.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tritune.commands.checks import writable_dir
from tritune.inductor.models import BUILTIN


def _model(ctx: click.Context, param: click.Parameter, value: str) -> str:
    from tritune.inductor.models import ModelError, parse_reference

    if value in BUILTIN:
        return value
    try:
        parse_reference(value)
    except ModelError as exc:
        raise click.BadParameter(str(exc)) from None
    return value


@click.command()
@click.option("--model", required=True, callback=_model, metavar="NAME",
              help=f"One of {', '.join(BUILTIN)}, or MODULE:CALLABLE returning (model, inputs[, loss_fn]).")
@click.option("--out", "-o", "out_dir", required=True, type=click.Path(path_type=Path), callback=writable_dir,
              help="Directory for launches.jsonl, sources/, tensors/ and modules/.")
@click.option("--mode", type=click.Choice(["train", "infer"]), default="train", show_default=True,
              help="train: forward + backward; infer: forward without grad.")
@click.option("--batch", type=click.IntRange(min=1), default=8, show_default=True)
@click.option("--dtype", type=click.Choice(["float32", "float16", "bfloat16"]), default=None,
              help="Model and input dtype (default: float32 for train, float16 for infer).")
@click.option("--force", is_flag=True, help="Replace a capture already in DIR (once the new one is complete).")
@click.option("--keep-cache", is_flag=True, help="Keep the fresh Inductor/Triton caches (path printed).")
def harvest(model: str, out_dir: Path, mode: str, batch: int, dtype: str | None, force: bool,
            keep_cache: bool) -> None:
    """Compile MODEL with torch.compile on the GPU, run one step, and record every Inductor
    kernel it generated as a launch spec in DIR (with the config Inductor's autotuner chose).

    Built-in models use random weights and download nothing. Then `tritune bench DIR` times them.
    """
    from tritune.inductor.harvest import HarvestError, harvest as run

    if (out_dir / "launches.jsonl").exists() and not force:
        _fail(f"{out_dir} already holds a capture (launches.jsonl); pass --force to replace it", 2)
    try:  # the capture in DIR is replaced only by a complete new one (inductor/harvest.py)
        result = run(model, out_dir, mode=mode, batch=batch, dtype=dtype, log=_log, keep_cache=keep_cache)
    except HarvestError as exc:
        _fail(str(exc), 2)
    except Exception as exc:  # noqa: BLE001 - the model's own code failed: one line, not a traceback
        from tritune.errors import one_line

        _fail(f"{model} ({mode}) failed: {one_line(exc)}", 2)
    for error in result.errors:
        click.echo(f"tritune harvest: {Path(error.file).name}: {error.error}", err=True)
    click.echo(f"{len(result.specs)} launch specs from {len(result.modules)} kernel modules "
               f"({len(result.errors)} failed) -> {out_dir / 'launches.jsonl'}")
    if result.errors or not result.specs:
        sys.exit(1)


def _log(line: str) -> None:
    click.echo(f"tritune harvest: {line}", err=True)


def _fail(message: str, code: int) -> None:
    click.echo(f"tritune harvest: {message}", err=True)
    sys.exit(code)
