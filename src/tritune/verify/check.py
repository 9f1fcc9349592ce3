"""Verify a variant against the baseline: every written argument, on fresh inputs, poisoned.

For each of ``input_sets`` fresh input sets (``make_args`` with seeds ``seed, seed + 1, ...``)
every run starts from a copy of the same arguments, so baseline and candidate see identical
inputs:

1. Which written tensors does the kernel also read (in-out)? Their contents are inputs and must
   not be poisoned. Found once, on the first input set, by running the baseline from two
   different starting contents of the written tensors (the random ones, and every element
   changed; never a sentinel, which could send a kernel that reads it out of bounds): an output
   that does not depend on them is pure. Tensors with saved or ranged values (indices) are
   never changed nor poisoned.
2. The baseline runs twice: pure outputs poisoned with sentinel 1, then with sentinel 2 (see
   ``compare``); in-out tensors start from the random contents both times. If the two runs
   differ the kernel is nondeterministic (atomics): the baseline runs up to
   ``NONDETERMINISM_RUNS`` times, the absolute tolerance of that output is widened to a multiple
   of the largest difference from the first run (pooled over the input sets), and the result
   says so.
3. The candidate runs poisoned like the first baseline run (and again like the second where a
   non-float output needs two sentinels to tell unwritten elements apart).
4. Every written tensor is compared in ``mode``; tensors the spec calls read-only must come out
   of the candidate as the baseline left them (bit for bit), so a stray write fails too.

Guard regions (``tritune.replay.guard``). Every tensor argument is made inside a larger buffer:
on each side a margin sized by ``guard.layout`` for the largest block constexpr of baseline and
candidate (one block along every dimension of the tensor, 64 KiB to 64 MiB, in 64 KiB steps, so
the data pointer's alignment is what the kernel saw), filled with a per-tensor pattern:
signalling NaNs for floats, ``0xD_`` bytes otherwise, unlike the output poison. Copies for each run take the whole buffer, so views,
storage offsets and margins travel together. After every run, baseline or candidate, both
margins of every tensor are checked:
- a changed margin in a candidate run fails it with ``wrong_result`` naming the tensor, the side
  and the changed element nearest the storage (``VerifyResult.out_of_bounds`` holds the same);
- a changed margin in a baseline run fails the verification with ``baseline_out_of_bounds``: the
  captured launch itself writes outside its tensors, so no candidate can be compared with it
  (``tritune optimize`` decides nothing for that launch);
- a read past a tensor gets NaN; where it reaches an output, the comparison catches it (NaN
  parity), deterministically, whatever memory lies next to the tensor on the machine.
What guards cannot see: an access that jumps past the margin (into another allocation, a
neighbouring tensor's memory or unmapped memory: on a GPU a fault, under the interpreter heap
corruption); a read whose value never reaches an output (a masked-off lane, a NaN that a max
drops); a write that stores exactly the pattern (a plain copy of a margin element into the same
tensor's margin); fp8 margins, which have one NaN and so no per-tensor tag. compute-sanitizer's
memcheck (``benchmarks/sanitize_store.py``) checks every access against its allocation.

Ghosts (``tritune.replay.launches``, KernelGenBench). Every candidate run must launch the
candidate's kernel at least once: launches of a kernel of its name are counted while it runs
(Triton's launch hook on a GPU, the interpreter's grid executor on the CPU). A run that launched
nothing fails the verification with ``ghost``: its outputs, right or wrong, came from somewhere
else (a ``run`` replaced by a torch fallback, a cached result). Required of every run, not once
overall: a candidate that launches on the first input set and falls back afterwards is a ghost
too, and counting costs nothing next to the run.

Limit: in an in-out tensor an element the candidate forgets to update is caught only where the
baseline changes it by more than the tolerance (its starting contents are random, so in practice
everywhere but where the update is tiny or the identity).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Callable, ContextManager

from tritune.capture.spec import LaunchSpec
from tritune.replay import Replay, Variant, make_args
from tritune.replay.guard import Breach, Guard, breach, largest_block, layout
from tritune.replay.launches import Launches
from tritune.verify.compare import (CompareResult, Spread, compare, depends_on_initial, one_run_sound, poison,
                                    spread)
from tritune.verify.tolerances import NONDETERMINISM_RUNS, tolerance_for, widen
from tritune.worker.failures import BASELINE_OUT_OF_BOUNDS, GHOST, WRONG_RESULT  # the one failure taxonomy


@dataclasses.dataclass
class VerifyResult:
    ok: bool
    mode: str
    kernel: str  # the spec's id
    variant: str  # what the variant changes
    checks: list[CompareResult]  # one per (input set, tensor argument)
    input_sets: list[int]  # the seeds given to make_args
    in_out: list[str]  # written tensors compared without poison: the kernel reads them (or its
    # output changed with their starting contents for another reason, e.g. nondeterminism)
    nondeterministic: bool = False
    spread: dict[str, float] = dataclasses.field(default_factory=dict)  # largest baseline run-to-run |diff|
    failure: str | None = None  # WRONG_RESULT or GHOST when it fails, BASELINE_OUT_OF_BOUNDS when the baseline does
    message: str = ""
    out_of_bounds: dict | None = None  # Breach JSON plus "run" (baseline/candidate) and "input_set"
    launches: int = 0  # the candidate kernel's launches counted over its runs (module docstring)

    @property
    def worst(self) -> CompareResult | None:
        """The check holding the worst element: of the failing checks if any, else of all."""
        pool = [c for c in self.checks if not c.ok] or self.checks
        pool = [c for c in pool if c.worst is not None]
        return max(pool, key=lambda c: c.worst.score, default=None)

    def to_json(self) -> dict:
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        body["checks"] = [c.to_json() for c in self.checks]
        worst = self.worst
        body["worst"] = {"output": worst.name, "input_set": worst.input_set, **worst.worst.to_json()} \
            if worst else None
        return body


def verify(spec: LaunchSpec, variant: Variant, root: str | Path, *, mode: str = "tolerance",
           input_sets: int = 3, device: str | None = None, seed: int = 0, baseline: Replay | None = None,
           on_gpu: Callable[[], ContextManager[Any]] = contextlib.nullcontext) -> VerifyResult:
    """Run the baseline and ``variant`` of ``spec`` on ``input_sets`` fresh input sets and compare
    every written tensor. Compile and launch errors propagate (the isolation worker classifies
    them); a wrong result is ``ok=False`` with ``failure="wrong_result"``, a candidate run that
    launched no kernel ``failure="ghost"``, a baseline that writes outside its tensors
    ``failure="baseline_out_of_bounds"``.

    ``baseline``: the captured launch's ``Replay``, kept built by a caller that verifies many
    candidates of one launch (default: built here). ``on_gpu()`` is entered around everything
    that launches on the device (inputs made, runs, comparisons) and left while the kernels
    compile: ``tritune optimize --jobs`` passes its GPU lock's shared mode."""
    if input_sets < 1:
        raise ValueError(f"input_sets must be at least 1, got {input_sets}")
    for arg in spec.written:
        tolerance_for(arg.dtype, mode)  # unknown mode or unsupported dtype: fail before running
    base = baseline if baseline is not None else Replay(spec, Variant(), root=root, device=device)
    cand = Replay(spec, variant, root=root, device=device)
    block = largest_block(base.constexprs, cand.constexprs)  # margins of one block of either
    guards = layout(spec, block)
    written = [a.name for a in spec.written]
    seeds = [seed + k for k in range(input_sets)]
    with on_gpu():
        initial = make_args(spec, root, seed=seeds[0], device=base.device, block=block)
    base.compile(initial)  # both built before anything runs, on the first input set
    cand.compile(initial)
    result = VerifyResult(True, mode, spec.id, variant.describe(), [], seeds, [])
    launches = Launches(spec.kernel, interpreted=not cand.compiles)
    pure: dict[str, bool] | None = None
    with on_gpu():
        for k, s in enumerate(seeds):
            try:
                if k:
                    initial = make_args(spec, root, seed=s, device=base.device, block=block)
                if pure is None:
                    pure = _pure_outputs(spec, base, initial, written, guards)
                    result.in_out = [w for w in written if not pure[w]]
                result.checks += _one_set(spec, base, cand, initial, pure, mode, s, result, guards, launches)
            except OutOfBounds as exc:
                return _outside(result, exc, baseline=exc.replay is base, seed=s)
            except Ghost:
                return _ghost(result, launches, seed=s)
            finally:
                result.launches = launches.count
    return _conclude(result, written)


# ------------------------------------------------------------------------------------ guards

class OutOfBounds(Exception):
    """A run changed a guard margin (see ``guard``)."""

    def __init__(self, replay: Replay, found: Breach) -> None:
        super().__init__(found.describe())
        self.replay, self.breach = replay, found


def _check_guards(replay: Replay, args: dict[str, Any], guards: dict[str, Guard]) -> None:
    for name, guard in guards.items():
        found = breach(name, args[name], guard)
        if found is not None:
            raise OutOfBounds(replay, found)


def _outside(result: VerifyResult, exc: OutOfBounds, *, baseline: bool, seed: int) -> VerifyResult:
    result.ok = False
    result.out_of_bounds = {**exc.breach.to_json(), "run": "baseline" if baseline else "candidate",
                            "input_set": seed}
    if baseline:
        result.failure = BASELINE_OUT_OF_BOUNDS
        result.message = (f"{BASELINE_OUT_OF_BOUNDS} on input set {seed}: the baseline itself writes outside "
                          f"{exc.breach.describe()}; no candidate can be compared safely")
    else:
        result.failure = WRONG_RESULT
        result.message = f"{WRONG_RESULT} on input set {seed}: the candidate writes outside {exc.breach.describe()}"
    return result


class Ghost(Exception):
    """A candidate run launched no kernel of the candidate's name."""


def _ghost(result: VerifyResult, launches: Launches, *, seed: int) -> VerifyResult:
    result.ok = False
    result.failure = GHOST
    result.message = (f"{GHOST} on input set {seed}: the candidate's kernel {launches.name} never launched "
                      "(its outputs came from somewhere else: a fallback or a cached result)")
    return result


# ---------------------------------------------------------------------------------- one set

def _one_set(spec: LaunchSpec, base: Replay, cand: Replay, initial: dict, pure: dict[str, bool],
             mode: str, seed: int, result: VerifyResult, guards: dict[str, Guard],
             launches: Launches) -> list[CompareResult]:
    written = list(pure)
    first = {w: 1 for w in written if pure[w]}
    second = {w: 2 for w in written if pure[w]}
    ref = _run(base, initial, first, guards)
    again = _only(_run(base, initial, second, guards), written)
    two_sentinels = [w for w in first if not one_run_sound(initial[w])]
    seen = {w: spread(ref[w], again[w], poisoned=pure[w]) for w in written}
    if not all(s.deterministic for s in seen.values()):  # sample the spread properly
        for _ in range(NONDETERMINISM_RUNS - 2):
            more = _only(_run(base, initial, second, guards), written)
            seen = {w: _wider(seen[w], spread(ref[w], more[w], poisoned=pure[w])) for w in written}
    tolerances = {}
    for w in written:
        tol = tolerance_for(_dtype(initial[w]), mode)
        if not seen[w].deterministic or w in result.spread:  # pooled over the input sets so far
            result.nondeterministic = True
            result.spread[w] = max(result.spread.get(w, 0.0), seen[w].max_abs)
            tol = widen(tol, result.spread[w])
        tolerances[w] = tol
    out = _run(cand, initial, first, guards, launches)
    out_again = _only(_run(cand, initial, second, guards, launches), written) if two_sentinels else {}
    checks = []
    for w in written:
        alt = w in two_sentinels
        checks.append(compare(w, ref[w], out[w], mode, tolerances[w], poisoned=pure[w],
                              base_alt=again[w] if alt else None, cand_alt=out_again[w] if alt else None))
    for arg in spec.tensors:  # read-only arguments: a candidate must not write them
        if not arg.written:
            checks.append(compare(arg.name, ref[arg.name], out[arg.name], "bitwise", poisoned=False))
    for c in checks:
        c.input_set = seed
    return checks


def _wider(a: Spread, b: Spread) -> Spread:
    return Spread(max(a.differing, b.differing), max(a.max_abs, b.max_abs), max(a.parity_flips, b.parity_flips))


def _pure_outputs(spec: LaunchSpec, base: Replay, initial: dict, written: list[str],
                  guards: dict[str, Guard]) -> dict[str, bool]:
    """Written tensor -> True if the kernel does not read it (so poisoning it is safe)."""
    # Saved or ranged values carry meaning (indices): never changed, never poisoned.
    probed = [w for w in written if spec.arg(w).values == "random" and initial[w].numel() > 0]
    if not probed:
        return {w: False for w in written}
    changed = {w: _perturbed(initial[w]) for w in probed}
    natural = _run(base, initial, {}, guards)
    moved = _run(base, {**initial, **changed}, {}, guards)
    return {w: w in changed and not depends_on_initial(natural[w], initial[w], moved[w], changed[w])
            for w in written}


# -------------------------------------------------------------------------------------- runs

def _run(replay: Replay, initial: dict, poison_with: dict[str, int], guards: dict[str, Guard],
         launches: Launches | None = None) -> dict[str, Any]:
    """Launch once on copies of ``initial`` (guard margins included); tensors named in
    ``poison_with`` are poisoned with that sentinel first. The copies after the launch;
    ``OutOfBounds`` if a margin changed; with ``launches`` (the candidate's runs), ``Ghost`` if
    the run launched no kernel of its name."""
    args = {name: _clone(value) for name, value in initial.items()}
    for name, which in poison_with.items():
        poison([args[name]], which)
    if launches is None:
        replay(args)
    else:
        before = launches.count
        with launches.counting():
            replay(args)
        if launches.count == before:
            raise Ghost(launches.name)
    _synchronize(args)
    _check_guards(replay, args, guards)
    return args


def _only(args: dict, names: list[str]) -> dict:
    return {name: args[name] for name in names}


def _clone(value: Any) -> Any:
    """A copy of a tensor's whole storage, viewed like the original (strides, offset, overlaps)."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    size = value.untyped_storage().nbytes() // value.element_size()
    storage = value.as_strided((size,), (1,), 0).clone()
    return storage.as_strided(value.shape, value.stride(), value.storage_offset())


def _perturbed(t):
    """A copy of ``t`` with every element changed: floats -x - 1, bools flipped, integers with
    the lowest bit flipped (random integers stay in make_args's small range)."""
    copy = _clone(t)
    if t.dtype.is_floating_point:
        copy.copy_(-t.float() - 1)  # through fp32: fp8 has no arithmetic of its own
    elif _dtype(t) == "bool":
        copy.logical_not_()
    else:
        copy.bitwise_xor_(1)
    return copy


def _synchronize(args: dict) -> None:
    import torch

    if any(isinstance(v, torch.Tensor) and v.is_cuda for v in args.values()):
        torch.cuda.synchronize()


def _dtype(t) -> str:
    return str(t.dtype).removeprefix("torch.")


# ---------------------------------------------------------------------------------- verdict

def _conclude(result: VerifyResult, written: list[str]) -> VerifyResult:
    result.ok = all(c.ok for c in result.checks)
    worst = result.worst
    sets = f"{len(result.input_sets)} input sets"
    if not written:
        result.message = f"nothing to compare: {result.kernel} writes no tensor ({sets})"
    if result.ok:
        note = "; nondeterministic baseline, tolerance widened" if result.nondeterministic else ""
        detail = f"worst {worst.message()}" if worst and worst.worst else "every output identical"
        result.message = result.message or f"ok ({result.mode}, {sets}{note}): {detail}"
        return result
    result.failure = WRONG_RESULT
    result.message = f"{WRONG_RESULT} on input set {worst.input_set}: {worst.message()}"
    return result


# ------------------------------------------------------------------------------ isolation job

def verify_job(payload: dict) -> dict:
    """``verify`` for the isolation worker: ``{"spec": LaunchSpec JSON, "variant": Variant JSON,
    "root": DIR, "mode", "input_sets", "device", "seed"}`` -> ``VerifyResult.to_json()``."""
    spec = LaunchSpec.from_json(payload["spec"])
    variant = Variant.from_json(payload.get("variant") or {})
    result = verify(spec, variant, payload["root"], mode=payload.get("mode", "tolerance"),
                    input_sets=int(payload.get("input_sets", 3)), device=payload.get("device"),
                    seed=int(payload.get("seed", 0)))
    return result.to_json()
