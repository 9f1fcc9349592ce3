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

Transformed draws (``tritune.verify.draws``). After the fresh input sets, the first one's
values run again scaled by 1e3, by 1e-3 and negated (floating inputs drawn at random only), for
baseline and candidate alike, compared with the same table: a kernel that special-cases the values
of N(0, 1) draws fails there. A scaled draw on which the baseline overflows more than on the
unscaled values is skipped with its reason (``VerifyResult.draws``). Cost: a baseline and a
candidate run per draw (more only for a nondeterministic baseline, whose spread is sampled on the
draw itself, and for outputs that need two sentinels); none for a candidate the fresh sets already
failed (``draws`` then stays empty). ``draws=()`` turns them off.

Streams and time (``tritune.replay.launches``). After every run verification waits for the whole
device (``torch.cuda.synchronize``: every stream, not only the current one) before it reads an
output or a margin, so work a candidate left running on another stream has finished, or is seen
unwritten; and on a GPU every counted launch must be on the stream the replay launches on (the
stream the timer measures): a launch elsewhere fails the verification as a ``ghost`` whatever its
outputs, since its time would escape the timer. Outputs written later by the host (a thread) are
not waited for: they are read as the run left them.

Peak memory (``tritune.verify.memory``): each side's largest per-run peak of device memory; a
large increase is a note in ``notes`` and the message, not a rejection.

Limit: in an in-out tensor an element the candidate forgets to update is caught only where the
baseline changes it by more than the tolerance (its starting contents are random, so in practice
everywhere but where the update is tiny or the identity).
"""

from __future__ import annotations

import contextlib
import dataclasses
from pathlib import Path
from typing import Any, Callable, ContextManager, Sequence

from tritune.model.launch import LaunchSpec
from tritune.model.variant import Variant
from tritune.replay import Replay, make_args
from tritune.replay.guard import Breach, Guard, breach, largest_block, layout, storage_elements
from tritune.replay.launches import Launches
from tritune.model.failures import BASELINE_OUT_OF_BOUNDS, GHOST, WRONG_RESULT  # the one failure taxonomy
from tritune.verify.compare import (CompareResult, Spread, compare, depends_on_initial, dtype_name, one_run_sound,
                                    poison, spread, worst_of)
from tritune.verify.draws import DRAWS, Draw, magnitude, nonfinite, transform
from tritune.verify.memory import Peaks
from tritune.verify.tolerances import NONDETERMINISM_RUNS, scaled, tolerance_for, widen


@dataclasses.dataclass
class VerifyResult:
    ok: bool
    mode: str
    kernel: str  # the spec's id
    variant: str  # what the variant changes
    checks: list[CompareResult]  # one per (input set or transformed draw, tensor argument)
    input_sets: list[int]  # the seeds given to make_args
    in_out: list[str]  # written tensors compared without poison: the kernel reads them (or its
    # output changed with their starting contents for another reason, e.g. nondeterminism)
    nondeterministic: bool = False
    spread: dict[str, float] = dataclasses.field(default_factory=dict)  # largest baseline run-to-run |diff|
    failure: str | None = None  # WRONG_RESULT or GHOST when it fails, BASELINE_OUT_OF_BOUNDS when the baseline does
    message: str = ""
    out_of_bounds: dict | None = None  # Breach JSON plus "run" (baseline/candidate) and "input_set"
    launches: int = 0  # the candidate kernel's launches counted over its runs (module docstring)
    draws: list[dict] = dataclasses.field(default_factory=list)  # Draw JSON: the transformed draws
    memory: dict = dataclasses.field(default_factory=dict)  # Peaks JSON: bytes, None off CUDA
    notes: list[str] = dataclasses.field(default_factory=list)  # reported, not rejections (memory)

    @property
    def worst(self) -> CompareResult | None:
        """The check holding the worst element: of the failing checks if any, else of all."""
        return worst_of([c for c in self.checks if not c.ok] or self.checks)

    def to_json(self) -> dict:
        body = {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}
        body["checks"] = [c.to_json() for c in self.checks]
        worst = self.worst
        body["worst"] = {"output": worst.name, "input_set": worst.input_set, **worst.worst.to_json()} \
            if worst else None
        return body


def verify(spec: LaunchSpec, variant: Variant, root: str | Path, *, mode: str = "tolerance",
           input_sets: int = 3, device: str | None = None, seed: int = 0, baseline: Replay | None = None,
           on_gpu: Callable[[], ContextManager[Any]] = contextlib.nullcontext,
           draws: Sequence[tuple[str, float]] = DRAWS) -> VerifyResult:
    """Run the baseline and ``variant`` of ``spec`` on ``input_sets`` fresh input sets, then on
    the first one's values transformed by each of ``draws`` (name, factor), and compare every
    written tensor. Compile and launch errors propagate (the isolation worker classifies them); a
    wrong result is ``ok=False`` with ``failure="wrong_result"``, a candidate run that launched no
    kernel (or launched it on another stream) ``failure="ghost"``, a baseline that writes outside
    its tensors ``failure="baseline_out_of_bounds"``.

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
    runs = _Runs(guards, Launches(spec.kernel, interpreted=not cand.compiles), Peaks())
    pure: dict[str, bool] | None = None
    unscaled: dict[str, int] = {}  # output -> the baseline's non-finite elements on the first set
    sizes: dict[str, float] = {}  # output -> the baseline's largest finite element on the first set
    with on_gpu():
        at = seeds[0]
        try:
            for k, s in enumerate(seeds):
                at = s
                if k:
                    initial = make_args(spec, root, seed=s, device=base.device, block=block)
                if pure is None:
                    pure = _pure_outputs(spec, base, initial, written, runs)
                    result.in_out = [w for w in written if not pure[w]]
                result.checks += _one_set(spec, base, cand, initial, pure, mode, s, result, runs,
                                          nonfinite_out=unscaled if k == 0 else None,
                                          magnitude_out=sizes if k == 0 and draws else None)
            del initial
            failed = not all(c.ok for c in result.checks)  # already wrong: the draws would add nothing
            for name, factor in () if failed else draws:
                at = f"{seeds[0]} {name}"
                drawn = make_args(spec, root, seed=seeds[0], device=base.device, block=block)
                draw = transform(spec, drawn, guards, name, factor, outputs=[w for w in written if pure[w]])
                result.draws.append(draw.to_json())
                if draw.skipped is None:
                    result.checks += _one_set(spec, base, cand, drawn, pure, mode, seeds[0], result, runs,
                                              draw=draw, unscaled=unscaled, sizes=sizes)
                    result.draws[-1] = draw.to_json()  # a skip found on the baseline's outputs
                del drawn
        except OutOfBounds as exc:
            return _outside(result, exc, baseline=exc.replay is base, seed=at)
        except Ghost as exc:
            return _ghost(result, runs.launches, seed=at, reason=str(exc))
        finally:
            result.launches = runs.launches.count
            result.memory = runs.peaks.to_json()
            note = runs.peaks.note()
            if note:
                result.notes.append(note)
    return _conclude(result, written)


@dataclasses.dataclass
class _Runs:
    """What every run of one verification shares: the guards checked after it, the candidate's
    launch count, the peak memory of each side."""

    guards: dict[str, Guard]
    launches: Launches
    peaks: Peaks


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


def _outside(result: VerifyResult, exc: OutOfBounds, *, baseline: bool, seed: int | str) -> VerifyResult:
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
    """A candidate run launched no kernel of the candidate's name (no message), or launched it on
    another stream than the replay's (the message says which)."""


def _ghost(result: VerifyResult, launches: Launches, *, seed: int | str, reason: str = "") -> VerifyResult:
    result.ok = False
    result.failure = GHOST
    result.message = (f"{GHOST} on input set {seed}: " + (reason or (
        f"the candidate's kernel {launches.name} never launched (its outputs came from somewhere else: a "
        "fallback or a cached result)")))
    return result


# ---------------------------------------------------------------------------------- one set

def _one_set(spec: LaunchSpec, base: Replay, cand: Replay, initial: dict, pure: dict[str, bool],
             mode: str, seed: int, result: VerifyResult, runs: _Runs, *, draw: Draw | None = None,
             unscaled: dict[str, int] | None = None, nonfinite_out: dict[str, int] | None = None,
             sizes: dict[str, float] | None = None, magnitude_out: dict[str, float] | None = None
             ) -> list[CompareResult]:
    """The checks of one input set, or of one transformed ``draw`` of the first set's values.

    A fresh set runs the baseline twice (nondeterminism, two sentinels) and pools the spread it
    finds into ``result.spread``. A draw runs it twice only where needed (a baseline already found
    nondeterministic, an output that needs two sentinels); a nondeterministic baseline's spread is
    sampled on the draw and kept to it (a scaled draw scales the spread), at least the pooled
    spread times the draw's factor. A scaled draw on which the baseline has more non-finite
    elements than on the unscaled values (``unscaled``) is skipped: ``draw.skipped`` says so and
    no check is returned. ``nonfinite_out``: filled with the baseline's non-finite counts;
    ``magnitude_out``: with its outputs' largest finite elements, which a scaled draw's ``sizes``
    compares its own with (``tolerances.scaled``: atol in the draw's units)."""
    written = list(pure)
    first = {w: 1 for w in written if pure[w]}
    second = {w: 2 for w in written if pure[w]}
    two_sentinels = [w for w in first if not one_run_sound(initial[w])]
    ref = _run(base, initial, first, runs)
    counts = {w: nonfinite(ref[w], pure[w]) for w in written}
    if nonfinite_out is not None:
        nonfinite_out.update(counts)
    if magnitude_out is not None:
        magnitude_out.update({w: magnitude(ref[w], pure[w]) for w in written})
    if draw is not None and draw.scales and unscaled is not None:
        grown = [w for w in written if counts[w] > unscaled.get(w, 0)]
        if grown:
            draw.skipped = (f"the baseline overflows on it: {grown[0]} has {counts[grown[0]]} non-finite elements, "
                            f"{unscaled.get(grown[0], 0)} on the unscaled values")
            return []
    sample = draw is None or result.nondeterministic or bool(two_sentinels)
    again = _only(_run(base, initial, second, runs), written) if sample else {}
    seen = {w: spread(ref[w], again[w], poisoned=pure[w]) if sample else Spread() for w in written}
    if not all(s.deterministic for s in seen.values()) or (draw is not None and result.nondeterministic):
        for _ in range(NONDETERMINISM_RUNS - 2):  # sample the spread properly
            more = _only(_run(base, initial, second, runs), written)
            seen = {w: _wider(seen[w], spread(ref[w], more[w], poisoned=pure[w])) for w in written}
    tolerances = {}
    for w in written:
        tol = tolerance_for(dtype_name(initial[w]), mode)
        if draw is not None:
            if draw.scales and sizes and sizes.get(w):
                tol = scaled(tol, magnitude(ref[w], pure[w]) / sizes[w], draw.name)
            if w in result.spread or not seen[w].deterministic:
                result.nondeterministic = True
                tol = widen(tol, max(seen[w].max_abs, result.spread.get(w, 0.0) * abs(draw.factor)))
        elif not seen[w].deterministic or w in result.spread:  # pooled over the input sets so far
            result.nondeterministic = True
            result.spread[w] = max(result.spread.get(w, 0.0), seen[w].max_abs)
            tol = widen(tol, result.spread[w])
        tolerances[w] = tol
    out = _run(cand, initial, first, runs, candidate=True)
    out_again = _only(_run(cand, initial, second, runs, candidate=True), written) if two_sentinels else {}
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
        c.draw = draw.name if draw is not None else None
    return checks


def _wider(a: Spread, b: Spread) -> Spread:
    return Spread(max(a.differing, b.differing), max(a.max_abs, b.max_abs), max(a.parity_flips, b.parity_flips))


def _pure_outputs(spec: LaunchSpec, base: Replay, initial: dict, written: list[str],
                  runs: _Runs) -> dict[str, bool]:
    """Written tensor -> True if the kernel does not read it (so poisoning it is safe)."""
    # Saved or ranged values carry meaning (indices): never changed, never poisoned.
    probed = [w for w in written if spec.arg(w).values == "random" and initial[w].numel() > 0]
    if not probed:
        return {w: False for w in written}
    changed = {w: _perturbed(initial[w]) for w in probed}
    natural = _run(base, initial, {}, runs)
    moved = _run(base, {**initial, **changed}, {}, runs)
    return {w: w in changed and not depends_on_initial(natural[w], initial[w], moved[w], changed[w])
            for w in written}


# -------------------------------------------------------------------------------------- runs

def _run(replay: Replay, initial: dict, poison_with: dict[str, int], runs: _Runs, *,
         candidate: bool = False) -> dict[str, Any]:
    """Launch once on copies of ``initial`` (guard margins included); tensors named in
    ``poison_with`` are poisoned with that sentinel first. The copies after the launch and a
    device-wide synchronization; ``OutOfBounds`` if a margin changed; for a ``candidate`` run,
    ``Ghost`` if it launched no kernel of its name, or launched one on another stream."""
    args = {name: _clone(value) for name, value in initial.items()}
    for name, which in poison_with.items():
        poison([args[name]], which)
    with runs.peaks.run(replay.device, candidate):
        if not candidate:
            replay(args)
        else:
            launches = runs.launches
            before, stray = launches.count, launches.off_stream
            with launches.counting():
                replay(args)
            if launches.off_stream > stray:
                raise Ghost(f"the candidate's kernel {launches.name} launched on another stream than the "
                            f"replay's ({launches.off_stream - stray} launch(es)): its work would escape the timer")
            if launches.count == before:
                raise Ghost()
        _synchronize(replay.device)
    _check_guards(replay, args, runs.guards)
    return args


def _only(args: dict, names: list[str]) -> dict:
    return {name: args[name] for name in names}


def _clone(value: Any) -> Any:
    """A copy of a tensor's whole storage, viewed like the original (strides, offset, overlaps)."""
    import torch

    if not isinstance(value, torch.Tensor):
        return value
    size = storage_elements(value)
    storage = value.as_strided((size,), (1,), 0).clone()
    return storage.as_strided(value.shape, value.stride(), value.storage_offset())


def _perturbed(t):
    """A copy of ``t`` with every element changed: floats -x - 1, bools flipped, integers with
    the lowest bit flipped (random integers stay in make_args's small range)."""
    copy = _clone(t)
    if t.dtype.is_floating_point:
        copy.copy_(-t.float() - 1)  # through fp32: fp8 has no arithmetic of its own
    elif dtype_name(t) == "bool":
        copy.logical_not_()
    else:
        copy.bitwise_xor_(1)
    return copy


def _synchronize(device: str) -> None:
    """Wait for every stream of ``device`` (``torch.cuda.synchronize``, not the current stream's
    ``synchronize``): a kernel a candidate left running on a side stream has finished before any
    output or margin is read. Nothing to wait for off CUDA."""
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


# ---------------------------------------------------------------------------------- verdict

def _conclude(result: VerifyResult, written: list[str]) -> VerifyResult:
    result.ok = all(c.ok for c in result.checks)
    worst = result.worst
    compared = [d["name"] for d in result.draws if d["skipped"] is None]
    sets = f"{len(result.input_sets)} input sets" + (f" + {'/'.join(compared)}" if compared else "")
    skipped = [f"{d['name']} skipped: {d['skipped']}" for d in result.draws if d["skipped"] is not None]
    notes = "".join(f"; {line}" for line in [*skipped, *result.notes])
    if not written:
        result.message = f"nothing to compare: {result.kernel} writes no tensor ({sets})"
    if result.ok:
        note = "; nondeterministic baseline, tolerance widened" if result.nondeterministic else ""
        detail = f"worst {worst.message()}" if worst and worst.worst else "every output identical"
        result.message = (result.message or f"ok ({result.mode}, {sets}{note}): {detail}") + notes
        return result
    result.failure = WRONG_RESULT
    where = f"{worst.input_set}" + (f" {worst.draw}" if worst.draw else "")
    result.message = f"{WRONG_RESULT} on input set {where}: {worst.message()}" + notes
    return result


# ------------------------------------------------------------------------------ isolation job

def verify_job(payload: dict) -> dict:
    """``verify`` for the isolation worker: ``{"spec": LaunchSpec JSON, "variant": Variant JSON,
    "root": DIR, "mode", "input_sets", "device", "seed", "draws"?}`` -> ``VerifyResult.to_json()``
    (``draws``: ``[[name, factor]]``, default ``DRAWS``)."""
    spec = LaunchSpec.from_json(payload["spec"])
    variant = Variant.from_json(payload.get("variant") or {})
    result = verify(spec, variant, payload["root"], mode=payload.get("mode", "tolerance"),
                    input_sets=int(payload.get("input_sets", 3)), device=payload.get("device"),
                    seed=int(payload.get("seed", 0)),
                    draws=[(str(n), float(f)) for n, f in payload.get("draws", DRAWS)])
    return result.to_json()
