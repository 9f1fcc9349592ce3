"""The one table of tolerances: how far a candidate's output may stray from the baseline's, per
dtype and mode, with the reason for every entry.

Modes:
  ``tolerance``  the default for rewrites that may reorder arithmetic (launch configs, tiling,
                 LLM rewrites): ``|cand - base| <= atol + rtol * |base|``, NaN/Inf parity.
  ``bitwise``    exact rewrites (load/reduce merge, division by a power of two, DESIGN.md's
                 numerics policy): the bits must be identical, NaN payloads and signed zeros
                 included.
  ``fast_math``  opt-in fast-math rewrites: max relative error <= 1e-4 where both are finite
                 (seed 000's gate), NaN and +-Inf at the same positions.
  ``tf32``       opt-in (with fast-math) rewrites whose products take fp32 factors rounded to
                 tf32 (a 10-bit mantissa, ``tl.dot(..., input_precision="tf32")``): fp32 outputs
                 against their own entry (``TF32``), other outputs against the table.

Integer and bool outputs are exact in every mode: no legal rewrite changes an integer result.

Nondeterministic baselines (atomics: the order of floating-point additions changes from run to
run) cannot be held to the table or to bits. Their absolute tolerance is widened to
``NONDETERMINISM_FACTOR`` times the largest difference seen between ``NONDETERMINISM_RUNS``
baseline runs (``widen``); the relative part stays the table's.
"""

from __future__ import annotations

import dataclasses

MODES = ("tolerance", "bitwise", "fast_math", "tf32")

FAST_MATH_MAX_REL_ERR = 1e-4  # seed 000's accuracy gate for fast-math rewrites

# Two baseline runs show only part of the spread an atomic reduction can have: the candidate may
# land anywhere in a range we sampled twice. 4x the observed spread leaves room for that without
# accepting a wrong result, whose error is of the size of the values themselves.
NONDETERMINISM_FACTOR = 4.0
# Baseline runs per input set once two have differed. The spread of 2 runs is a poor estimate for
# a one-element output (a global sum): another run of the same kernel then falls outside 4x the
# spread 14% of the time; with 8 runs 0.02% (simulated with normal noise). Only nondeterministic
# kernels pay for the extra runs.
NONDETERMINISM_RUNS = 8


@dataclasses.dataclass(frozen=True)
class Tolerance:
    """Bad element: ``|cand - base| > atol + rtol * |base|``; ``exact``: any bit differs."""

    rtol: float
    atol: float
    reason: str
    exact: bool = False

    def to_json(self) -> dict:
        return dataclasses.asdict(self)

    def rule(self) -> str:
        """What an element must meet, as a person (or a model, in ``generate``'s prompt) reads it."""
        return "exact" if self.exact else f"|got - expected| <= {self.atol:g} + {self.rtol:g} * |expected|"


EXACT = Tolerance(0.0, 0.0, "integer and bool results are exact: no legal rewrite changes them", exact=True)
BITWISE = Tolerance(0.0, 0.0, "exact rewrites must leave every bit unchanged (DESIGN.md numerics policy)",
                    exact=True)

# dtype name (torch, without "torch.") -> tolerance in ``tolerance`` mode
TABLE: dict[str, Tolerance] = {
    "float64": Tolerance(1e-7, 1e-9,
                         "fp64 reductions reordered over ~1e6 terms move the result by ~1e-10 relative "
                         "(n * 1.1e-16); 1e-7 leaves room for FMA and reordering, and is 1000x tighter "
                         "than fp32"),
    "float32": Tolerance(1e-4, 1e-5, "seed 004's fp32 tolerance: reordered fp32 accumulation"),
    "float16": Tolerance(1e-2, 1e-3, "seed 004's fp16 tolerance: ~10 ulp (eps 9.8e-4), fp32 accumulation "
                                     "rounded to fp16 at a different point"),
    "bfloat16": Tolerance(1e-2, 1e-3, "seed 004's bf16 tolerance: ~2.5 ulp (eps 3.9e-3)"),
    "float8_e4m3fn": Tolerance(0.125, 1e-3, "one fp8 e4m3 rounding step (2^-3): the fp32 value before the "
                                            "cast may round either way"),
    "float8_e5m2": Tolerance(0.25, 1e-3, "one fp8 e5m2 rounding step (2^-2)"),
}

# dtype name -> max relative error in ``fast_math`` mode
FAST_MATH: dict[str, Tolerance] = {
    "float64": Tolerance(FAST_MATH_MAX_REL_ERR, 0.0, "seed 000's gate: max relative error <= 1e-4"),
    "float32": Tolerance(FAST_MATH_MAX_REL_ERR, 0.0, "seed 000's gate: max relative error <= 1e-4"),
    # A 16-bit output cannot be held below one rounding step: an fp32 result that moved by 1e-7
    # rounds to the neighbouring fp16/bf16 value. One step is the tightest gate that can pass.
    "float16": Tolerance(2.0**-10, 0.0, "one fp16 rounding step (2^-10): seed 000's 1e-4 is below fp16's "
                                        "resolution"),
    "bfloat16": Tolerance(2.0**-7, 0.0, "one bf16 rounding step (2^-7): seed 000's 1e-4 is below bf16's "
                                        "resolution"),
    "float8_e4m3fn": Tolerance(0.125, 0.0, "one fp8 e4m3 rounding step (2^-3)"),
    "float8_e5m2": Tolerance(0.25, 0.0, "one fp8 e5m2 rounding step (2^-2)"),
}


# dtype name -> tolerance in ``tf32`` mode (dtypes not here: the table's)
TF32: dict[str, Tolerance] = {
    "float32": Tolerance(5e-3, 5e-3, "tf32 keeps 10 mantissa bits of each fp32 factor (2^-11 relative per "
                                     "product); PyTorch's own tests hold tf32 matmuls to 5e-3 "
                                     "(tf32_on_and_off(0.005)); fp32 accumulation"),
}


def is_float(dtype: str) -> bool:
    return dtype in TABLE


def tolerance_for(dtype: str, mode: str = "tolerance") -> Tolerance:
    """The table's entry for ``dtype`` (a torch dtype name such as ``"float16"``) in ``mode``."""
    if mode not in MODES:
        raise ValueError(f"unknown verification mode {mode!r} (expected one of {MODES})")
    if mode == "bitwise":
        return BITWISE
    if not is_float(dtype):
        if dtype == "bool" or dtype.startswith(("int", "uint")):
            return EXACT
        raise ValueError(f"no tolerance for dtype {dtype!r}: verification supports {sorted(TABLE)}, "
                         "integers and bool")
    if mode == "tf32":
        return TF32.get(dtype, TABLE[dtype])
    return (TABLE if mode == "tolerance" else FAST_MATH)[dtype]


def scaled(tol: Tolerance, ratio: float, draw: str) -> Tolerance:
    """``tol`` on a transformed draw whose baseline outputs are ``ratio`` times as large as on the
    unscaled values (``verify.draws``): ``atol`` in the draw's units. An exact comparison, or a
    ratio not above 1, leaves it as it is."""
    if tol.exact or not ratio > 1.0 or ratio == float("inf"):
        return tol
    return Tolerance(tol.rtol, tol.atol * ratio, f"{tol.reason}; {draw}: atol x {ratio:.3g}, the baseline's "
                                                  "outputs that much larger than on the unscaled values")


def widen(tol: Tolerance, spread: float) -> Tolerance:
    """``tol`` for a nondeterministic baseline whose two runs differed by up to ``spread``."""
    if not spread > 0:  # 0 (deterministic) or NaN: nothing to widen by
        return tol
    atol = max(tol.atol, NONDETERMINISM_FACTOR * spread)
    return Tolerance(tol.rtol, atol, f"{tol.reason}; nondeterministic baseline: atol = "
                                     f"{NONDETERMINISM_FACTOR:g} x its run-to-run spread {spread:.3g}")
