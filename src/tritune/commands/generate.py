"""``tritune generate SPEC --out DIR``: a fused Triton kernel from a PyTorch spec (``tritune.generate``)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from tritune.commands.checks import Finite, runs_kernels, writable_dir
from tritune.commands.llm import endpoint_options, llm_settings


@click.command()
@click.argument("spec_path", metavar="SPEC", type=click.Path(path_type=Path, exists=True, dir_okay=False))
@click.option("--out", "-o", "out_dir", required=True, type=click.Path(path_type=Path, file_okay=False),
              callback=writable_dir, help="Where kernel.py, generate.json and report.md/html go.")
@click.option("--budget-s", type=Finite(min=0), default=120.0, show_default=True,
              help="Seconds the optimize loop may spend on each verified module's kernels (0: none).")
@click.option("--per-kernel-s", type=Finite(min=1), default=60.0, show_default=True,
              help="Seconds per kernel at most within --budget-s.")
@click.option("--jobs", "-j", type=click.IntRange(min=1), default=None,
              help="Workers building and verifying candidates at once. Default: the usable CPU cores, at most 16. "
                   "Never more than the cores and memory hold (about 1 GiB a worker; said when lowered).")
@endpoint_options("An OpenAI-compatible endpoint: a model also writes a kernel, with compiler and runtime "
                  "feedback; the faster verified one wins. Key: TRITUNE_LLM_API_KEY, else OPENAI_API_KEY.",
                  "Write the first prompt to OUT/llm-prompts/ instead of sending it.")
@click.option("--max-iterations", type=click.IntRange(min=1), default=15, show_default=True,
              help="Replies the model may give (each verified; failures go back to it).")
@click.option("--bench/--no-bench", default=True, show_default=True,
              help="Benchmark against eager, torch.compile and max-autotune (GPU only).")
@click.option("--interpret-inductor", is_flag=True, hidden=True,
              help="Tests: Inductor's kernels on Triton's interpreter, no GPU.")
@click.option("--unsafe-no-jail", is_flag=True,
              help="Run the workers unjailed (where this machine lacks Landlock or seccomp, --llm needs it): "
                   "a model's code then reaches everything you can.")
@runs_kernels("generate")
def generate(spec_path: Path, out_dir: Path, budget_s: float, per_kernel_s: float, jobs: int | None,
             llm_url: str | None, llm_model: str | None, max_iterations: int, llm_max_tokens: int,
             llm_price: tuple[float, float] | None, llm_dry_run: bool, bench: bool, interpret_inductor: bool,
             unsafe_no_jail: bool) -> None:
    """Generate a fused Triton kernel for SPEC: a Python file with reference(*tensors) (the unfused
    PyTorch computation), inputs(device) (a list of input tuples) and optionally name and tolerance.

    Model-free (default, GPU): Inductor's kernels for every input shape, optimized by tritune and
    written with the decisions baked in to OUT/kernel.py, a module with run(*inputs) that needs
    torch and triton but not torch.compile. With --llm, a model also writes one, with compiler and
    runtime feedback; the faster verified kernel wins. Every kernel is verified against the reference on the spec's inputs and on odd
    shapes derived from them, and benchmarked against eager, torch.compile and max-autotune.
    """
    from tritune.generate.run import GenerateSettings, generate as run_generate
    from tritune.generate.spec import GenerateError, SpecError
    from tritune.loop.evaluate import default_jobs
    from tritune.model.settings import LoopSettings
    from tritune.resources import bound_jobs
    from tritune.worker import jail

    jail.protect_parent()  # this process holds the LLM key: no worker reads it
    llm = llm_settings(llm_url, llm_model, 1, 0, llm_max_tokens, llm_price, llm_dry_run, out_dir, None)
    bounded = bound_jobs(jobs or default_jobs(), round_most=LoopSettings.max_candidates)  # the loop's default
    if jobs is not None and bounded.lowered:
        click.echo(f"tritune generate: --jobs {jobs} lowered to {bounded.jobs}: {bounded.lowered}", err=True)
    settings = GenerateSettings(budget_s=budget_s, per_kernel_s=per_kernel_s, jobs=bounded.jobs, llm=llm,
                                max_iterations=max_iterations, bench=bench, interpret=interpret_inductor,
                                unsafe_no_jail=unsafe_no_jail)
    try:
        jail.check(untrusted=llm is not None, unsafe_no_jail=unsafe_no_jail)
    except jail.JailUnavailable as exc:
        click.echo(f"tritune generate: {exc}", err=True)
        sys.exit(2)
    try:
        result = run_generate(spec_path, out_dir, settings, log=lambda line: click.echo(line, err=True))
    except (GenerateError, SpecError) as exc:
        click.echo(f"tritune generate: {exc}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        click.echo("tritune generate: interrupted", err=True)
        sys.exit(130)
    for note in result["notes"]:
        click.echo(f"note: {note}")
    if result["winner"] is None:  # an LLM dry run (run.generate raises when anything else verifies nothing)
        click.echo(f"{result['name']}: llm dry run: no kernel.py (the prompt: {result['llm']['prompt']})")
        return
    check = result["check"] or {}
    cases = check.get("cases") or []
    click.echo(f"{result['name']}: {out_dir / 'kernel.py'} ({result['winner']} path; verified on {len(cases)} case(s); "
               f"report: {out_dir / 'report.md'})")
