"""What one suite entry is (``Case``), the per-dtype tolerances, and the output comparison.

A case's output is a tensor or a tuple of tensors; its reference computes the same in float64
from the same inputs. An output matches when it has the reference's shape, NaN where (and only
where) the reference has NaN, and |out - ref| <= atol + rtol * |ref| everywhere, with (atol, rtol)
from the case or, by default, from ``TOLERANCE`` by the output's dtype: about one rounding of the
output type (fp16 half-ulp is 4.9e-4 relative, bf16 3.9e-3), so a wrong kernel cannot hide in them.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable, Sequence

import torch

CATEGORIES = ("elementwise", "activation", "softmax", "norm", "reduction", "scan", "matmul", "attention",
              "quantize", "other")


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """|out - ref| <= atol + rtol * |ref|; besides, up to ``slack_frac`` of the elements may be off
    by up to ``slack_atol`` (for rounding to integers after an approximate division)."""

    atol: float
    rtol: float
    slack_frac: float = 0.0
    slack_atol: float = 0.0


TOLERANCE = {
    torch.float32: Tolerance(1e-5, 1e-4),
    torch.float16: Tolerance(1e-3, 1e-3),
    torch.bfloat16: Tolerance(1e-2, 1e-2),
    # Quantized values: the GPU's fp32 division is approximate (div.full.f32, 2 ulp), so a value
    # within ~1e-5 of k + 0.5 may round the other way: off by one on ~1e-4 of the elements at most;
    # truncating instead of rounding is off by one on about half of them.
    torch.int8: Tolerance(0, 0, slack_frac=1e-3, slack_atol=1),
    torch.int32: Tolerance(0, 0),
    torch.int64: Tolerance(0, 0),
}

Inputs = dict[str, Any]


@dataclasses.dataclass(frozen=True)
class Case:
    """One kernel of the suite. ``make_inputs(size, device, seed)`` builds the inputs (a dict),
    ``run(inputs)`` launches the kernel through its wrapper, ``reference(inputs)`` computes the
    expected output with torch (float64) and must not modify the inputs."""

    name: str
    category: str                 # one of CATEGORIES
    family: str                   # what the kernel computes, in words
    dtype: str                    # the data type as written ("fp16", "int8 -> bf16", ...)
    gpu_size: tuple[int, ...]     # realistic problem size
    small_size: tuple[int, ...]   # odd and tiny, for the CPU interpreter
    block: str                    # block sizes as the wrapper hardcodes them
    make_inputs: Callable[[tuple[int, ...], str, int], Inputs]
    run: Callable[[Inputs], Any]
    reference: Callable[[Inputs], Any]
    tolerance: Tolerance | tuple[Tolerance, ...] | None = None
    kernel: str = ""              # the @triton.jit function's name

    def __post_init__(self):
        if self.category not in CATEGORIES:
            raise ValueError(f"case {self.name}: category {self.category!r} is not one of {', '.join(CATEGORIES)}")

    def size(self, small: bool) -> tuple[int, ...]:
        return self.small_size if small else self.gpu_size


@dataclasses.dataclass(frozen=True)
class Comparison:
    ok: bool
    max_abs_err: float   # over all outputs
    worst: float         # max of |err| / (atol + rtol * |ref|): <= 1 passes
    message: str         # "" when ok


def generator(device: str, seed: int) -> torch.Generator:
    return torch.Generator(device=device).manual_seed(seed)


def randn(shape, dtype: torch.dtype, gen: torch.Generator, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    """Normal values made in fp32 on ``gen``'s device and cast (the same on CPU and GPU torch)."""
    return (torch.randn(shape, generator=gen, device=gen.device) * scale + shift).to(dtype)


def outputs(value: Any) -> tuple[torch.Tensor, ...]:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def compare(output: Any, expected: Any, tolerance: Tolerance | Sequence[Tolerance] | None = None) -> Comparison:
    """Check every output tensor against its reference (see the module docstring)."""
    got, want = outputs(output), outputs(expected)
    if len(got) != len(want):
        return Comparison(False, math.inf, math.inf, f"{len(got)} outputs, reference has {len(want)}")
    tolerances = _tolerances(tolerance, got)
    max_abs, worst, problems = 0.0, 0.0, []
    for i, (out, ref, tol) in enumerate(zip(got, want, tolerances)):
        label = f"output {i}" if len(got) > 1 else "output"
        if tuple(out.shape) != tuple(ref.shape):
            problems.append(f"{label}: shape {tuple(out.shape)}, reference {tuple(ref.shape)}")
            max_abs, worst = math.inf, math.inf
            continue
        err_abs, err_worst, problem = _compare_one(out, ref, tol)
        max_abs, worst = max(max_abs, err_abs), max(worst, err_worst)
        if problem:
            problems.append(f"{label}: {problem}")
    return Comparison(not problems, max_abs, worst, "; ".join(problems))


def _tolerances(tolerance, got: Sequence[torch.Tensor]) -> list[Tolerance]:
    if tolerance is None:
        return [TOLERANCE.get(t.dtype, Tolerance(0, 0)) for t in got]
    if isinstance(tolerance, Tolerance):
        return [tolerance] * len(got)
    return list(tolerance)


def _compare_one(out: torch.Tensor, ref: torch.Tensor, tol: Tolerance) -> tuple[float, float, str]:
    out, ref = out.detach().to(torch.float64), ref.detach().to(out.device, torch.float64)  # on the GPU there
    out_nan, ref_nan = torch.isnan(out), torch.isnan(ref)
    if not torch.equal(out_nan, ref_nan):
        where = int((out_nan != ref_nan).sum())
        return math.inf, math.inf, f"NaN at {where} places where the reference differs"
    out, ref = out[~ref_nan], ref[~ref_nan]
    if out.numel() == 0:
        return 0.0, 0.0, ""
    err = (out - ref).abs()
    err = torch.where(torch.isinf(ref) & (out == ref), torch.zeros_like(err), err)  # inf == inf
    allowed = tol.atol + tol.rtol * ref.abs()
    ratio = torch.where(err == 0, torch.zeros_like(err), err / allowed)  # err > 0 with allowed 0: inf
    bad = ratio > 1
    slack = bad & (err <= tol.slack_atol)
    if int(slack.sum()) <= tol.slack_frac * out.numel():
        bad = bad & ~slack
        ratio = torch.where(slack, torch.zeros_like(ratio), ratio)
    max_abs, worst = float(err.max()), float(ratio.max())
    if not bool(bad.any()):
        return max_abs, worst, ""
    first = int(bad.nonzero()[0, 0])
    return max_abs, worst, (f"{int(bad.sum())}/{out.numel()} elements off (atol {tol.atol:g}, rtol {tol.rtol:g}); "
                            f"max |err| {max_abs:.3g}; e.g. got {float(out[first]):.6g}, want {float(ref[first]):.6g}")
