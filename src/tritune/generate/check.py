"""Verify a generated module against its spec, as a worker job: ``check_job``.

A generated module defines ``run(*inputs)``: it launches its Triton kernel(s) and returns what the
spec's ``reference`` returns (a tensor or a tuple of tensors). ``check_job`` runs inside a tritune
worker (``Worker.call("tritune.generate.check:check_job", payload)``; the module is the candidate's
code, imported there under a unique name) on the spec's cases and, with ``payload["derived"]``, on
the odd shapes ``derive`` makes from the first one. Per case:

1. The reference runs on copies of the case's tensors: the expected outputs.
2. Each input tensor is copied into a guarded buffer (``tritune.replay.guard``: margins of a known
   pattern on both sides, ``GUARD_ROWS`` rows of the tensor or 64 KiB, whichever is more) and
   ``run`` gets those copies.
3. While ``run`` runs, the allocators it may call (``torch.empty``, ``torch.empty_like``,
   ``torch.empty_strided``, ``Tensor.new_empty``, and module names bound to any of them or to
   Inductor's ``empty_strided_cuda``-style allocators) hand out memory inside guarded buffers,
   poisoned with ``tritune.verify.compare``'s sentinel: an output element the kernel never writes
   still holds it, a write past an allocation's end changes its margin. Those that fill what they
   allocate (``torch.zeros``, ``ones``, ``full``, their ``_like`` and ``Tensor.new_`` forms,
   ``clone``: an output a kernel accumulates into) hand out guarded memory too, holding the values
   they made. Triton launches are counted meanwhile (``tritune.replay.launches``, every kernel
   name counts).
   Inputs and allocations alike look plain to ``run``: each is a storage of its own between its
   margins (storage offset and size as without the guard), so code that views a tensor with an
   absolute storage offset, as generated launchers do, lands where it would without the guard.
4. The first of these that fails is the case's failure:
   - no launch: ``no_kernel`` (run computed with torch, or returned a result made elsewhere);
   - a changed margin of an input or of an allocation: ``wrong_result`` (a write outside a tensor);
   - a changed input, or a change elsewhere in its storage (a slice's other columns):
     ``wrong_result`` (a kernel must not write into its inputs);
   - outputs whose number, shape or dtype differ from the reference's, or that come in another
     container (a tuple where the reference returns one tensor): ``wrong_result``;
   - an output against the reference (``compare``: unwritten elements, NaN/Inf parity, values
     under the table's tolerance for its dtype or the spec's override): ``wrong_result``, the
     worst element (case, output, index, both values) in the message.
   Integer and bool outputs need a second run, poisoned with the other sentinel: one run cannot
   tell an unwritten integer from one written with the sentinel's value (``compare``'s doc).
5. A case that passes runs once more with every Triton launch skipped (``launches.skipping``):
   an output still right then did not come from a kernel (torch computed it beside a kernel that
   ran for show, or run() kept it from an earlier call of the same shape): ``no_kernel``. Not for
   an output with no elements, nor one that is an input (or a view of one) where the reference's
   output is that input too.

What is verification's, and what is generation's own. ``tritune.verify`` checks a variant of one
captured launch against that launch (the baseline), on inputs made from its ``LaunchSpec``; here a
whole module's ``run`` is checked against a PyTorch function over a spec's cases, with no baseline
launch: the spec's cases and family, ``run``'s own allocations guarded and poisoned, the launches
skipped (step 5), kernel.py's forced configurations and seed 004's classes (below) are this
module's. Its building blocks are verification's: the guards (``replay.guard``), the launch counter
(``replay.launches``), the poison, the comparison and its worst element (``verify.compare``), the
tolerance table (``verify.tolerances``, through ``GenSpec.tolerance_for``) and the failure kinds
(``worker.failures.classify``).

Failures of the module itself, classified by ``tritune.worker.failures.classify`` (which knows
Triton's errors by type): a ``SyntaxError`` importing it is ``syntax``; anything else that stops
it importing, and a compile error at its first launch (``CompilationError``; under
``TRITON_INTERPRET=1`` the ``InterpreterError`` of a type error), is ``compile``; any other
exception from ``run`` is ``runtime``. A device fault is re-raised instead: on a GPU the CUDA
context is lost for good, and a raised fault makes the worker end its child (``Worker.call`` gives
a failed ``Outcome``). ``failure_class`` maps such an Outcome, a timeout or a crash to these classes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
from pathlib import Path
from typing import Any, Callable, Iterator

from tritune.errors import one_line
from tritune.generate.derive import beyond, derived_cases, family_cases
from tritune.generate.spec import Case, GenSpec, container, load_spec, shapes_text, tensors_of
from tritune.imports import import_file, jit_interprets
from tritune.llm.family import MESSAGE_CHARS  # seed 004 feeds a failure back cut to this many characters
from tritune.replay.guard import Guard, allocate, breach, guarded, margin_elements, storage_elements
from tritune.replay.launches import Launches, skipping
from tritune.verify.compare import CompareResult, compare, dtype_name, one_run_sound, poison, worst_of
from tritune.model.failures import (BASELINE_OUT_OF_BOUNDS, COMPILE_ERROR, CRASH, ERROR, GHOST, RUNTIME_FAULT, TIMEOUT,
                                    WRONG_RESULT)
from tritune.worker.failures import RESTART_KINDS, classify, shorten

CLASSES = ("syntax", "compile", "runtime", "timeout", "wrong_result", "slower", "unsafe", "no_code", "no_kernel")
SYNTAX, COMPILE, RUNTIME, TIMED_OUT, WRONG, SLOWER, UNSAFE, NO_CODE, NO_KERNEL = CLASSES
JOB = "tritune.generate.check:check_job"
TIMEOUT_S = 600.0  # wall time of one check (the sandbox's CPU limit ends a model's busy loop sooner)

# Margin rows: a 2-D tile whose row mask is missing overruns by up to BLOCK_M rows; 128 covers the
# usual BLOCK_M (Inductor's YBLOCK and seed 004's kernels stay at or below it). Below 64 KiB the
# guard's own minimum holds: a 1-D block of up to 16K fp32 elements overruns into the margin.
GUARD_ROWS = 128

_BY_KIND = {COMPILE_ERROR: COMPILE, RUNTIME_FAULT: RUNTIME, TIMEOUT: TIMED_OUT, CRASH: RUNTIME, ERROR: RUNTIME,
            WRONG_RESULT: WRONG, GHOST: NO_KERNEL, BASELINE_OUT_OF_BOUNDS: RUNTIME}
_SYNTAX_ERRORS = ("SyntaxError", "IndentationError", "TabError")  # one_line's "Type: ..." of a SyntaxError


def failure_class(outcome) -> tuple[str, str]:
    """A failed worker ``Outcome`` (or its ``Failure``) -> (class, message of at most 300 chars)."""
    failure = getattr(outcome, "failure", outcome)
    if failure is None:
        raise ValueError("the outcome did not fail: check_job's result is its value")
    if failure.kind == COMPILE_ERROR and failure.message.startswith(_SYNTAX_ERRORS):
        return SYNTAX, shorten(failure.message, MESSAGE_CHARS)
    return _BY_KIND.get(failure.kind, RUNTIME), shorten(failure.message, MESSAGE_CHARS)


def check_in_worker(worker: Any, module: Path, spec_path: Path, device: str, *, family: Any = "module",
                    **limits: Any) -> dict:
    """``check_job`` of ``module`` in ``worker`` (``limits``: ``Worker.call``'s, e.g. the sandbox's
    for a model's code), on the spec's cases, the derived ones and the family's sampled sizes;
    ``family``: True for a model's module (every sampled size must pass), "module" for tritune's
    kernel.py (its FAMILY and serves() say which it serves). A failed Outcome (a timeout, a crash,
    a device fault) comes back as a failed result of its class (``failure_class``)."""
    outcome = worker.call(JOB, {"module": str(module), "spec": str(spec_path), "device": device, "seed": 0,
                                "derived": True, "family": family}, timeout_s=TIMEOUT_S, **limits)
    if outcome.ok:
        return outcome.value
    kind, message = failure_class(outcome)
    return {"ok": False, "failure": kind, "message": message, "cases": [], "launches": 0}


def check_job(payload: dict) -> dict:
    """Verify ``payload["module"]`` against ``payload["spec"]`` (see the module doc).

    payload: ``{"module": path of a .py defining run(*tensors), "spec": path of the spec,
    "device": "cuda"|"cpu", "seed": int, "derived": bool, "family": bool}``. With ``derived``, sampled
    sizes of the spec's family (``derive.family_cases``) are checked too: for tritune's kernel.py
    where its ``FAMILY`` is true (a size its ``serves`` refuses is "not served"), and for a module
    without ``FAMILY`` (a model's) where ``family`` asks for it (every size must pass). A kernel.py
    whose launches choose a configuration by timing (``CONFIGURATIONS``) has each forced in turn on
    a size past every case's bucket (``_each_configuration``). Returns ``{"ok", "failure": None or
    a class of CLASSES, "message": one line <= 300 chars, "cases": [{"label", "shapes", "ok",
    "message", "outputs": [CompareResult JSON]}], "launches": Triton launches seen in run()}``.
    """
    import torch

    device = payload.get("device", "cpu")
    seed = int(payload.get("seed", 0))
    spec = load_spec(payload["spec"], device=device, check=False)
    torch.manual_seed(seed)  # a spec whose inputs() draws unseeded numbers draws the same ones
    cases = spec.cases(device)
    if payload.get("derived"):
        cases += derived_cases(spec, device, seed=seed)
    report = _Report()
    try:
        module = import_file(payload["module"], fresh=True)
    except Exception as exc:  # noqa: BLE001 - the candidate's code: whatever it raises is its failure
        return report.failed(_class_of(exc, importing=True), one_line(exc))
    run = getattr(module, "run", None)
    if not callable(run):
        return report.failed(RUNTIME, f"{Path(payload['module']).name} defines no run(*inputs) function")
    # a model's module must serve every size (payload "family": True), whatever it says of itself;
    # tritune's kernel.py says which sizes it serves ("module", the default: FAMILY and serves())
    every = payload.get("family") is True
    serves = None if every else getattr(module, "serves", None)
    fallback = None if every else getattr(module, "_REFERENCE", None)  # kernel.py's unserved = "reference"
    # with the spec's reference behind run(), the family's sizes go through run() even without kernels for them
    family = every or callable(serves) and (getattr(module, "FAMILY", False) is True or callable(fallback))
    if payload.get("derived") and family:
        cases += family_cases(spec, cases, seed=seed)  # sizes no case shows: the family's own
    for case in cases:
        unserved = case.label.startswith("family ") and callable(serves) and not _serves(serves, case)
        if unserved and not callable(fallback):
            report.unserved(case)
            continue
        expected, sources, kind = spec.outputs_sources_kind(case)
        # an unserved size with the spec's reference behind it: run() must return it right, no kernel needed
        verdict = _verdict(spec, module, run, case, expected, sources, kind, kernels=not unserved)
        if unserved and verdict.failure is None:
            report.unserved(case, "not served by a kernel: run() returns the spec's reference, verified")
            continue
        report.add(case, verdict)
        if verdict.failure in (SYNTAX, COMPILE, RUNTIME):  # the module does not run: no point going on
            break
    else:
        _each_configuration(spec, module, run, cases, report, device)
    return report.result()


FORCED_ELEMENTS = 1 << 15  # a forced size's least elements on the GPU: a block of 2048 runs 16 programs and more
INTERPRETED_ELEMENTS = 1 << 12  # under Triton's interpreter, 2 and more: its programs run one by one in Python


def _each_configuration(spec: GenSpec, module: Any, run: Callable, known: list[Case], report: Any,
                        device: str = "cuda") -> None:
    """kernel.py's timed launches (``CONFIGURATIONS``: the most configurations a launch chooses
    among by timing, on the GPU, at run time; ``_TIMED``: those launches): each configuration
    forced in turn (``_FORCE``) on a size past every case's bucket for each dtype pattern of the
    spec's cases (``derive.beyond``: of each pattern's sizes, the first its family serves),
    large enough for the largest block to run many programs (``FORCED_ELEMENTS``; under Triton's
    interpreter, on the CPU, a few: ``INTERPRETED_ELEMENTS``), its dims odd where it can, each
    size once with the launches' general kernels and once with their specialized ones
    (``_FORCE_SIZED``: at run time a launch outside the buckets takes either), so that whichever
    the timing picks on a user's GPU was verified here, within the tolerance (a reduction's
    configurations sum in different orders). A configuration whose forced runs did not go through
    every timed launch between them, or no such size, fails: what the timing may pick would go
    unverified."""
    count = getattr(module, "CONFIGURATIONS", 0)
    if not (isinstance(count, int) and count > 0):
        return
    timed, reached = set(getattr(module, "_TIMED", ())), getattr(module, "_REACHED", None)
    serves = getattr(module, "serves", None)
    least = FORCED_ELEMENTS if device == "cuda" else INTERPRETED_ELEMENTS
    cases = [case for group in beyond(spec, known, least=least)
             for case in [next((c for c in group if not callable(serves) or _serves(serves, c)), None)]
             if case is not None]
    if not cases or not isinstance(reached, set) or not hasattr(module, "_FORCE"):
        report.forced(None, _Verdict(RUNTIME, "kernel.py times configurations, and no size reaches its timed launches "
                                              "for verification"))
        return
    kernels = (False, True) if hasattr(module, "_FORCE_SIZED") and _specializes(module) else (None,)
    report.forced_runs = len(cases) * len(kernels)
    outputs = [spec.outputs_sources_kind(case) for case in cases]
    try:
        for k in range(count):
            module._FORCE = k
            for sized in kernels:
                if sized is not None:
                    module._FORCE_SIZED = sized
                reached.clear()
                for number, (case, (expected, sources, kind)) in enumerate(zip(cases, outputs)):
                    verdict = _verdict(spec, module, run, case, expected, sources, kind)
                    if verdict.failure is None and number == len(cases) - 1 and not timed <= reached:
                        verdict = _Verdict(RUNTIME, f"configuration {k}: the timed launches {sorted(timed - reached)} "
                                                    "did not run at these sizes, so it was not verified")
                    label = f"configuration {k}{' specialized' if sized else ''} ({case.label})"
                    report.forced(Case(label, case.tensors, derived=True), verdict)
                    if verdict.failure is not None:
                        return
    finally:
        module._FORCE = None
        if kernels != (None,):
            module._FORCE_SIZED = None


def _specializes(module: Any) -> bool:
    """Whether kernel.py launches a kernel specialized on sizes anywhere (``_sized``): then each
    forced configuration runs with the general kernels and again with the specialized ones."""
    try:
        return " = _sized(" in Path(module.__file__).read_text()
    except (OSError, TypeError, AttributeError):
        return True  # not readable: both passes, as if it did


def _verdict(spec: GenSpec, module: Any, run: Callable, case: Case, expected: tuple, sources: tuple, kind: str,
             kernels: bool = True) -> _Verdict:
    """``_check_case``, with whatever the candidate's code raises as the case's verdict."""
    try:
        return _check_case(spec, module, run, case, expected, sources, kind, kernels)
    except Exception as exc:  # noqa: BLE001 - the candidate's code: whatever it raises is its failure
        return _Verdict(_class_of(exc, importing=False), f"run() raised {one_line(exc)}")


def _serves(serves: Callable, case: Case) -> bool:
    """The module's ``serves`` for a case; one that raises counts as served, so that ``run``'s own
    failure there is the case's verdict."""
    try:
        return bool(serves(*case.tensors))
    except Exception:  # noqa: BLE001 - the candidate's code
        return True


# ------------------------------------------------------------------------------------ one case

@dataclasses.dataclass
class _Verdict:
    failure: str | None  # a class of CLASSES
    message: str
    checks: list[CompareResult] = dataclasses.field(default_factory=list)
    launches: int = 0


@dataclasses.dataclass
class _Run:
    result: Any  # what run() returned
    inputs: tuple  # what run() was given: guarded copies of the case's tensors, its scalars
    guarded: list  # _Guarded: the inputs', then run()'s allocations
    launches: int


def _check_case(spec: GenSpec, module: Any, run: Callable, case: Case, expected: tuple, sources: tuple,
                kind: str = "", kernels: bool = True) -> _Verdict:
    """``sources``: per output, the argument the reference's output is a view of, else None;
    ``kind``: what the reference returns them in (``GenSpec.outputs_sources_kind``); ``kernels``:
    the outputs must come from a Triton kernel (False: the spec's reference in kernel.py may give them)."""
    import torch

    names = _input_names(spec.reference, len(case.tensors))
    outputs = ["out"] if len(expected) == 1 else [f"out{k}" for k in range(len(expected))]
    first = _run(module, run, case, names, which=1)
    launches = first.launches
    problem = _problem(first, case, names, expected, outputs, kernels)
    second = None
    if problem is None and not all(one_run_sound(t) for t in expected):
        second = _run(module, run, case, names, which=2)
        launches += second.launches
        problem = _problem(second, case, names, expected, outputs, kernels)
    if problem is not None:
        return _Verdict(*problem, launches=launches)
    returned = container(first.result)  # a tensor or a sequence of them: ``_problem`` checked
    if kind and returned != kind:
        return _Verdict(WRONG, f"run() returns a {returned}, the reference a {kind}", launches=launches)
    got = tensors_of(first.result)
    checks = []
    for k, (name, want, have) in enumerate(zip(outputs, expected, got)):
        alt = tensors_of(second.result)[k] if second is not None and not one_run_sound(want) else None
        # The reference was never poisoned: an alternative "run" that never holds sentinel 2 says
        # none of its elements is unwritten, whatever value it holds.
        checks.append(compare(name, want, have, "tolerance", spec.tolerance_for(dtype_name(want)),
                              base_alt=torch.zeros_like(want), cand_alt=alt))
    failing = [c for c in checks if not c.ok]
    if failing:
        return _Verdict(WRONG, worst_of(failing).message(), checks, launches)
    kept = _right_without_kernels(module, run, case, names, expected, outputs, spec, sources) if kernels else None
    if kept is not None:
        return _Verdict(NO_KERNEL, f"{kept} is right with every Triton launch of run() skipped: run() computes it "
                                   "with torch, returns an input, or keeps it from an earlier call, instead of "
                                   "writing it with its kernel(s)", checks, launches)
    worst = worst_of(checks)
    message = f"ok: worst {worst.message()}" if worst else "ok: every output identical to the reference"
    return _Verdict(None, message, checks, launches)


def _right_without_kernels(module: Any, run: Callable, case: Case, names: list[str], expected: tuple,
                           outputs: list[str], spec: GenSpec, sources: tuple) -> str | None:
    """The name of the first output that is right when ``run`` runs with its launches skipped
    (module doc, step 5), else None."""
    import torch

    try:
        done = _run(module, run, case, names, which=1, skip=True)
    except Exception as exc:  # noqa: BLE001 - run() needs what its kernels did: what step 5 wants
        if classify(exc) in RESTART_KINDS:
            raise
        return None
    got = tensors_of(done.result)
    if got is None or len(got) != len(expected):
        return None
    inputs = {t.untyped_storage().data_ptr() for t in done.inputs if isinstance(t, torch.Tensor)}
    for name, want, have, source in zip(outputs, expected, got, sources):
        if want.shape != have.shape or want.dtype != have.dtype or not want.numel():
            continue
        if source is not None and have.untyped_storage().data_ptr() in inputs:
            continue  # the reference returns an input too
        if compare(name, want, have, "tolerance", spec.tolerance_for(dtype_name(want))).ok:
            return name
    return None


def _run(module: Any, run: Callable, case: Case, names: list[str], *, which: int, skip: bool = False) -> _Run:
    """One call of ``run`` on guarded copies of the case's tensors, its allocations guarded and
    poisoned with sentinel ``which``, its launches counted (``skip``: not run, module doc step 5)."""
    import torch

    inputs, guards = [], []
    for tag, (name, value) in enumerate(zip(names, case.tensors)):
        if isinstance(value, torch.Tensor):
            guard = Guard(_margin(value), storage_elements(value), tag)
            buffer = guarded(value, guard.margin, tag)
            value = _between_margins(buffer, guard, value)
            guards.append(_Guarded(name, buffer, guard, value.untyped_storage().data_ptr()))
        inputs.append(value)
    allocations = _Allocations(which, first_tag=len(guards))
    launches = _AnyKernel(interpreted=jit_interprets())
    watching = skipping(interpreted=launches.interpreted) if skip else launches.counting()
    with torch.no_grad(), allocations.installed(module), watching:
        result = run(*inputs)
        if any(isinstance(t, torch.Tensor) and t.is_cuda for t in inputs):
            torch.cuda.synchronize()  # a fault of the launch surfaces here, inside the job
    return _Run(result, tuple(inputs), guards + allocations.made, launches.count)


def _problem(done: _Run, case: Case, names: list[str], expected: tuple,
             outputs: list[str], kernels: bool = True) -> tuple[str, str] | None:
    """(class, message) of the first check of step 4 (module doc) that fails before the values
    (``kernels``: as ``_check_case``'s)."""
    import torch

    if done.launches == 0 and kernels:
        return NO_KERNEL, ("run() launched no Triton kernel: it computed with torch (or returned a result "
                           "made elsewhere), not with a kernel")
    got = tensors_of(done.result)
    owner = {t.untyped_storage().data_ptr(): name for name, t in zip(outputs, got or ())}
    for g in done.guarded:
        found = breach(owner.get(g.storage, g.name), g.buffer, g.guard)
        if found is not None:
            return WRONG, f"run() writes outside {found.describe()}"
    for name, given, copy in zip(names, case.tensors, done.inputs):
        if isinstance(given, torch.Tensor):
            same = compare(name, given, copy, "bitwise", poisoned=False)
            if not same.ok:
                return WRONG, (f"run() writes into its input {name} (a kernel must not; baseline: before, "
                               f"candidate: after): {same.message()}")
            # the rest of its storage (a slice's other columns) is the caller's too
            size = storage_elements(given)
            if given.is_contiguous() and given.storage_offset() == 0 and given.numel() == size:
                continue  # x is its whole storage: compared above
            whole = compare(name, given.as_strided((size,), (1,), 0), copy.as_strided((size,), (1,), 0),
                            "bitwise", poisoned=False)
            if not whole.ok:
                return WRONG, (f"run() writes into the memory of its input {name} outside {name} (the rest of "
                               f"its storage, the caller's): element {whole.worst.index[0]} of the storage, "
                               f"{whole.bad} element(s) changed")
    if got is None:
        return WRONG, f"run() returns a {type(done.result).__name__}, not a tensor or a tuple of tensors"
    if len(got) != len(expected):
        return WRONG, f"run() returns {len(got)} tensor(s), the reference {len(expected)}"
    for name, want, have in zip(outputs, expected, got):
        if want.shape != have.shape or want.dtype != have.dtype:
            return WRONG, f"{name} is {shapes_text([have])}, the reference's {shapes_text([want])}"
    return None


# ------------------------------------------------------------------------------ allocations

class _Allocations:
    """Guarded, poisoned memory for the tensors ``run`` allocates (module doc, step 3)."""

    def __init__(self, which: int, first_tag: int) -> None:
        self.which, self.tag = which, first_tag
        self.made: list[_Guarded] = []
        self._inside = False  # our own allocations (guard.allocate calls torch.empty) pass through

    @contextlib.contextmanager
    def installed(self, module: Any) -> Iterator[None]:
        import torch

        places = [(torch, name) for name in _EMPTY + _FILLED] + [(torch.Tensor, name) for name in _TENSOR_EMPTY
                                                                 + _TENSOR_FILLED]
        allocators = [getattr(owner, name) for owner, name in places] + _inductor_allocators()
        places += [(module, name) for name, value in vars(module).items()
                   if any(value is allocator for allocator in allocators)]
        filled = {id(getattr(owner, name)) for owner, name in places if name in _FILLED + _TENSOR_FILLED}
        # (owner, name, original, whether the owner held it itself: Tensor.new_empty is TensorBase's)
        saved = [(owner, name, getattr(owner, name), name in vars(owner)) for owner, name in places]
        for owner, name, original, _ in saved:
            setattr(owner, name, self._wrap(original, keep=id(original) in filled))
        try:
            yield
        finally:
            for owner, name, original, own in reversed(saved):
                if own:
                    setattr(owner, name, original)
                else:
                    delattr(owner, name)

    def _wrap(self, original: Callable, *, keep: bool) -> Callable:
        @functools.wraps(original)
        def allocating(*args: Any, **kwargs: Any) -> Any:
            if self._inside:
                return original(*args, **kwargs)
            self._inside = True
            try:
                plain = original(*args, **kwargs)
                return self._guarded(plain, keep=keep) if _guardable(plain, kwargs) else plain
            finally:
                self._inside = False

        return allocating

    def _guarded(self, plain: Any, *, keep: bool) -> Any:
        """A tensor laid out as ``plain`` inside a guarded buffer: ``plain``'s values (``keep``), else poison."""
        guard = Guard(_margin(plain), storage_elements(plain), self.tag)
        buffer = allocate(plain.dtype, plain.device, guard)
        tensor = _between_margins(buffer, guard, plain)
        if keep:
            tensor.copy_(plain)
        else:
            poison([tensor], self.which)
        name = f"allocation {len(self.made)} {shapes_text([tensor])}"
        self.made.append(_Guarded(name, buffer, guard, tensor.untyped_storage().data_ptr()))
        self.tag += 1
        return tensor


# what run() may allocate its outputs with: poisoned (empty), or holding the values they make (filled)
_EMPTY = ("empty", "empty_like", "empty_strided")
_FILLED = ("zeros", "zeros_like", "ones", "ones_like", "full", "full_like", "clone")
_TENSOR_EMPTY = ("new_empty",)
_TENSOR_FILLED = ("new_zeros", "new_ones", "new_full", "clone")


def _guardable(t: Any, kwargs: dict) -> bool:
    """A plain strided tensor whose memory we may swap (not an ``out=``, pinned, autograd or complex
    one; none of zero elements: Triton's interpreter makes those to wrap its own storages)."""
    import torch

    return (isinstance(t, torch.Tensor) and t.numel() > 0 and t.layout == torch.strided
            and t.device.type != "meta" and not t.requires_grad and not t.dtype.is_complex
            and kwargs.get("out") is None and not kwargs.get("pin_memory"))


def _inductor_allocators() -> list:
    """Inductor's generated code allocates through these C functions (``empty_strided_cuda = ...``)."""
    try:
        from torch._C._dynamo import guards
    except ImportError:
        return []
    names = ("_empty_strided_cuda", "_empty_strided_cpu", "_empty_strided_xpu")
    return [getattr(guards, name) for name in names if hasattr(guards, name)]


@dataclasses.dataclass(frozen=True)
class _Guarded:
    name: str
    buffer: Any  # a tensor whose storage is the whole guarded buffer, margins included (for ``breach``)
    guard: Guard
    storage: int  # data_ptr of the storage run() sees (to name an output by it)


def _between_margins(buffer: Any, guard: Guard, like: Any) -> Any:
    """``like``'s layout over the memory between ``buffer``'s margins, in a storage of its own that
    starts there: ``run`` sees what a plain tensor would show (storage offset and size), so generated
    code that views it with an absolute offset (``as_strided(size, stride, 0)``) lands where it would
    on a plain tensor, not in a margin. A slice of a storage shares its memory and keeps it alive."""
    import torch

    size = buffer.element_size()
    own = buffer.untyped_storage()[guard.margin * size:(guard.margin + guard.size) * size]
    return torch.empty(0, dtype=like.dtype, device=like.device).set_(own, like.storage_offset(), like.shape,
                                                                      like.stride())


# ------------------------------------------------------------------------------------ helpers

class _AnyKernel(Launches):
    """Launches of every Triton kernel: a generated module's kernels may have any names."""

    def __init__(self, *, interpreted: bool) -> None:
        super().__init__("*", interpreted=interpreted)

    def matches(self, name: str | None) -> bool:
        return True  # every launch counts, whatever its name (``Launches.seen`` counts them)


def _margin(t: Any) -> int:
    return margin_elements(t.element_size(), GUARD_ROWS, t.stride(-2) if t.dim() >= 2 else 1)


def _input_names(reference: Callable, count: int) -> list[str]:
    """The reference's parameter names for its positional arguments (``in0``... past them)."""
    try:
        params = [p.name for p in inspect.signature(reference).parameters.values()
                  if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    except (TypeError, ValueError):
        params = []
    return [params[k] if k < len(params) else f"in{k}" for k in range(count)]


def _class_of(exc: BaseException, *, importing: bool) -> str:
    """The class of an exception the module raised (module doc). A failure after which the worker
    must not be trusted (a device fault) is raised again instead: the worker then ends its child,
    and ``failure_class`` names the Outcome."""
    kind = classify(exc)
    if kind in RESTART_KINDS:
        raise exc
    if isinstance(exc, SyntaxError):
        return SYNTAX
    return COMPILE if importing or kind == COMPILE_ERROR else RUNTIME


class _Report:
    """check_job's result, case by case."""

    def __init__(self) -> None:
        self.cases: list[dict] = []
        self.failure: str | None = None
        self.message = ""
        self.launches = 0
        self.derived = 0
        self.checks: list[CompareResult] = []
        self.family = {"sampled": 0, "served": 0}  # derive.family_cases, and of those the module serves
        self.configurations = 0  # kernel.py's forced runs of its timed configurations that passed
        self.forced_runs = 0  # the runs of each configuration: a size per dtype pattern, general and specialized

    def unserved(self, case: Case, message: str = "not served: run() raises for these inputs") -> None:
        """A sampled size of the family the module says it does not serve (``serves``): no verdict
        (where the spec's reference stands behind it, ``message`` says it was verified)."""
        self.family["sampled"] += 1
        self.cases.append({"label": case.label, "shapes": shapes_text(case.tensors), "ok": None,
                           "message": message, "outputs": []})

    def add(self, case: Case, verdict: _Verdict) -> None:
        shapes = shapes_text(case.tensors)
        if case.label.startswith("family "):
            self.family["sampled"] += 1
            self.family["served"] += 1
        self.launches += verdict.launches
        self.derived += case.derived
        self.checks += verdict.checks
        message = verdict.message
        if verdict.failure is not None:
            message = f"case {case.label!r} ({shapes}): {message}"
            if self.failure is None:
                self.failure, self.message = verdict.failure, message
        self.cases.append({"label": case.label, "shapes": shapes, "ok": verdict.failure is None,
                           "message": shorten(message, MESSAGE_CHARS),
                           "outputs": [c.to_json() for c in verdict.checks]})

    def forced(self, case: Case | None, verdict: _Verdict) -> None:
        """One forced configuration (``_each_configuration``): a failure is the module's, a pass is
        counted apart from the cases (the message's "configurations forced")."""
        if verdict.failure is not None and self.failure is None:
            where = f"case {case.label!r} ({shapes_text(case.tensors)}): " if case is not None else ""
            self.failure, self.message = verdict.failure, where + verdict.message
        if case is not None:
            self.configurations += verdict.failure is None
            self.cases.append({"label": case.label, "shapes": shapes_text(case.tensors), "ok": verdict.failure is None,
                               "message": shorten(verdict.message, MESSAGE_CHARS),
                               "outputs": [c.to_json() for c in verdict.checks]})

    def failed(self, failure: str, message: str) -> dict:
        self.failure, self.message = failure, message
        return self.result()

    def result(self) -> dict:
        if self.failure is None:
            worst = worst_of(self.checks)
            served = self.family["served"]
            self.message = (f"verified on {len(self.cases) - (self.family['sampled'] - served) - self.configurations} "
                            f"cases ({self.derived} derived"
                            + (f", {served} of {self.family['sampled']} sampled sizes of the family"
                               if self.family["sampled"] else "")
                            + (f", {self.configurations // max(1, self.forced_runs)} timed configurations forced "
                               f"({self.configurations} runs)" if self.configurations else "")
                            + ")"
                            + (f"; worst {worst.message()}" if worst else ""))
        return {"ok": self.failure is None, "failure": self.failure, "message": shorten(self.message, MESSAGE_CHARS),
                "cases": self.cases, "launches": self.launches, "family": dict(self.family)}
