"""``tritune generate SPEC --out DIR``: the flow, from a spec to ``DIR/kernel.py`` and a report.

1. The spec is loaded here (the user's own file: the user named it) and its reference run on its
   own inputs, so a bad spec is one line before anything else starts (``spec``).
2. Model-free (needs a GPU): Inductor's kernels for every case are captured in a worker
   (``inductor.capture_job``), optimized by the normal loop (configs, cache hints, source rewrites;
   compiler passes are left out: they cannot be written into a file), and written into
   ``DIR/inductor/kernel.py`` with the decisions baked in (``emit``), and, for other sizes, the
   launcher of the kernels compiled for symbolic sizes (``family``). That module is verified
   against the reference on the spec's cases, the derived odd shapes and sampled sizes of the
   family (``check.check_job``); should it fail, it is made again without the decisions, then
   without the family, and the notes say so.
3. With ``--llm``: seed 004's loop (``llm.generate_with_llm``) writes ``DIR/llm/kernel.py``; where
   the loop can run (a GPU), that module goes through it too and its decisions are baked into
   ``DIR/llm/optimized.py`` (``modules``), kept only if it passes both allowlists again
   (``assemble``) and verifies. On both paths the search
   tunes the launches of the spec's own cases (``own_launches``); the derived ones only verify.
4. The faster verified module becomes ``DIR/kernel.py`` (on a GPU, by the benchmark's p50 summed
   over the spec's cases; without one the only verified module, the model-free one first), then the
   benchmark against eager, torch.compile and max-autotune (``bench.bench_job``, GPU only), and
   ``DIR/generate.json`` plus ``DIR/report.md``/``.html`` (``report``).

Every step that runs generated or compiled code runs in a tritune worker process. A ``DIR`` of an
earlier run loses its ``kernel.py`` files first: after a run that verifies nothing there is none,
and ``generate.json`` says why. A model-free failure (a one-line ``GenerateError``) is a note when
``--llm`` is given, whose loop still runs.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
from pathlib import Path
from typing import Any, Callable

from tritune.generate.spec import GenerateError
from tritune.model import families
from tritune.model.settings import LLMSettings

CAPTURE_TIMEOUT_S = 1800.0  # torch.compile of every case, max-autotune not included
CHECK_TIMEOUT_S = 600.0  # the worker's default call, capturing a model's module, timing a candidate
BENCH_TIMEOUT_S = 3600.0  # three torch.compile modes per case, max-autotune among them
# Of the search's budget (its deadline), what the run's fixed costs may take before the first key:
# the lane's workers starting (torch, Triton, the jail) and every baseline built and timed; the
# run reports what they took (``optimize.json``'s ``fixed``).
RESERVE_S = 20.0
OVERRUN = 0.15  # a key may run past its budget by the round it is in: about this share of it


@dataclasses.dataclass(frozen=True)
class GenerateSettings:
    budget_s: float = 120.0  # the optimize loop's deadline for the model-free kernels (0: no search)
    per_kernel_s: float = 60.0
    jobs: int = 1
    llm: LLMSettings | None = None  # --llm: the model writes the kernels
    max_iterations: int = 15
    bench: bool = True
    interpret: bool = False  # tests: Inductor's kernels on Triton's interpreter (interpreter.on_interpreter)
    family: bool = True  # kernel.py also serves other sizes of the spec's family (``family``; tests turn it off)
    unsafe_no_jail: bool = False  # the workers run unjailed (``worker.jail``; ``--unsafe-no-jail``)


def generate(spec_path: str | Path, out: str | Path, settings: GenerateSettings = GenerateSettings(), *,
             log: Callable[[str], None] = print) -> dict:
    """Run the flow (module docstring); returns the summary written to ``DIR/generate.json``."""
    from tritune.generate.spec import load_spec
    from tritune.worker import Worker

    out = Path(out).resolve()
    on_gpu = _gpu()
    device = "cuda" if on_gpu else "cpu"
    spec = load_spec(spec_path, device=device)
    out.mkdir(parents=True, exist_ok=True)  # once the spec is good: a bad one leaves no empty folder
    result: dict[str, Any] = {"spec": str(spec.path), "name": spec.name, "device": device, "winner": None,
                              "paths": {}, "check": None, "bench": None, "optimize": None, "llm": None,
                              "fused": None, "kernels": [], "notes": []}
    modelfree = on_gpu or settings.interpret
    if not modelfree:
        line = "the model-free path needs a GPU (Inductor generates Triton kernels only for one)"
        if settings.llm is None:
            raise GenerateError(f"{line}; without one, give --llm URL --llm-model NAME")
        result["notes"].append(line + ": only the LLM path ran")
    for stale in (out / "kernel.py", out / "inductor" / "kernel.py"):  # an earlier run's: not verified by this one
        stale.unlink(missing_ok=True)
    env = {"TRITON_INTERPRET": "1"} if not on_gpu else {}
    with Worker(CHECK_TIMEOUT_S, env=env, preload=("torch", "triton"), jail=_jail(spec, out, settings)) as worker:
        checks: dict[str, dict] = {}
        if modelfree:
            try:
                path, check = _modelfree(spec, out, settings, worker, device, result, log)
            except GenerateError as exc:
                result["notes"].append(f"the model-free path failed: {exc}")
                if settings.llm is None:
                    _write(out, result)
                    raise
                # the LLM path may still succeed
                log(f"tritune generate: the model-free path failed: {exc}")
                path = None
            if path is not None:
                result["paths"]["inductor"] = str(path)
                checks["inductor"] = check
        if settings.llm is not None:
            from tritune.generate.llm import generate_with_llm

            reference_ms, time_module = _llm_timer(worker, spec.path) if on_gpu else (None, None)
            result["llm"] = generate_with_llm(spec, out, settings.llm, device=device, worker=worker,
                                              max_iterations=settings.max_iterations, reference_ms=reference_ms,
                                              time_module=time_module, log=log)
            if result["llm"].get("best"):
                best = Path(result["llm"]["best"])
                if modelfree and settings.budget_s > 0:
                    best = _llm_optimized(spec, best, out, settings, worker, device, result, log)
                result["paths"]["llm"] = str(best)
                checks["llm"] = _check(worker, best, spec.path, device, family=True)
        verified = {name: Path(result["paths"][name]) for name, check in checks.items() if check.get("ok")}
        if not verified and not checks and (result["llm"] or {}).get("prompt"):
            # an LLM dry run, and nothing else to verify: what was asked is done
            result["notes"].append(f"llm dry run: the first prompt is in {result['llm']['prompt']}; nothing was "
                                   "sent, so no kernel was generated")
            _write(out, result)
            return result
        if not verified:
            _write(out, result)
            raise GenerateError(f"{spec.name}: no verified kernel" + (f" ({result['notes'][-1]})" if result["notes"] else ""))
        bench = None
        if on_gpu and settings.bench:
            bench = _bench(worker, verified, spec.path, result, log)
        winner = _winner(verified, bench)
        for case in (bench or {}).get("cases", []):  # the report's "generated" is the module kernel.py holds
            for field in ("times", "roofline_fraction"):
                if winner in case.get(field, {}):
                    case[field]["generated"] = case[field][winner]
        result["winner"], result["check"], result["bench"] = winner, checks[winner], bench
        shutil.copyfile(verified[winner], out / "kernel.py")
        result["paths"]["kernel"] = str(out / "kernel.py")
        if len(verified) > 1:
            result["notes"].append(f"{winner} won: " + _why(bench))
    _write(out, result)
    return result


def _gpu() -> bool:
    try:
        import torch
    except ImportError:
        return False
    from tritune.replay.inputs import interpreting

    return torch.cuda.is_available() and not interpreting()


def _jail(spec: Any, out: Path, settings: GenerateSettings) -> Any:
    """The check worker's jail (``worker.jail``): it reads the spec's folder and ``out`` (the
    modules written there), and writes only the two capture folders (made now, and emptied
    rather than removed later: the jail holds on to the folders it was given)."""
    from tritune.worker import jail

    captures = [out / "inductor" / "capture", out / "llm" / "capture"]
    return jail.for_workers(None, untrusted=settings.llm is not None, unsafe_no_jail=settings.unsafe_no_jail,
                            program_dirs=[spec.path.parent], extra_read=[out], extra_write=captures)


def _empty(folder: Path) -> None:
    """``folder``'s contents removed, the folder kept (``_jail``)."""
    for entry in folder.iterdir():
        if entry.is_dir() and not entry.is_symlink():
            shutil.rmtree(entry)
        else:
            entry.unlink()


def _modelfree(spec: Any, out: Path, settings: GenerateSettings, worker: Any, device: str, result: dict,
               log: Callable[[str], None]) -> tuple[Path | None, dict]:
    from tritune.generate.emit import emit
    from tritune.generate.spec import reference_text

    folder = out / "inductor"
    capture = folder / "capture"
    if capture.exists():
        _empty(capture)  # a capture is cheap next to its kernels' compile, and must match this spec
    log(f"{spec.name}: compiling the reference with torch.compile for each case (model-free path)")
    captured = worker.call("tritune.generate.inductor:capture_job",
                           {"spec": str(spec.path), "device": device, "capture": str(capture), "derived": True,
                            "interpret": settings.interpret, "family": settings.family}, timeout_s=CAPTURE_TIMEOUT_S)
    if not captured.ok:
        raise GenerateError(f"{spec.name}: torch.compile of the reference failed: {captured.failure.message}")
    body = captured.value
    if body.get("refused"):  # capture_job's own one-line refusal (work outside Triton), whole
        raise GenerateError(body["refused"])
    result["fused"], result["kernels"] = body["fused"], body["kernels"]
    result["notes"] += body["notes"]
    decisions = _optimize(capture, folder, body, settings, result, log) if settings.budget_s > 0 else {}
    origin = ("Model-free: Inductor's kernels for the spec's reference (torch.compile, static shapes), "
              + ("optimized by tritune's search" if decisions else "as Inductor configured them") + ".")
    path = folder / "kernel.py"
    families = body.get("families") or []
    reference = reference_text(spec.text) if spec.unserved == "reference" else None  # load_spec checked it
    # the module as made, then without the search's decisions, then without the families' tuning (their
    # bucket table and specialized kernels), then without the launchers for other sizes: the first that
    # verifies is kept, and the notes say what was left out and why
    tries = [(decisions, families, True, "")] + ([({}, families, True, "the search's decisions")] if decisions else [])
    tries += [({}, families, False, "the tuning of the launchers for other sizes"),
              ({}, [], False, "the launchers for other sizes")] if families else []
    check: dict = {}
    for number, (decided, sizes, tuned, _) in enumerate(tries):
        made = origin if decided else origin.replace("optimized by tritune's search", "as Inductor configured them")
        facts: dict = {}
        text, notes = emit(body["plans"], capture, decided, name=spec.name, origin=made, families=sizes, tuned=tuned,
                           pinned=spec.pinned, reference=reference, facts=facts)
        if number == 0:
            result["notes"] += notes
        path.write_text(text)
        check = _check(worker, path, spec.path, device)
        if check.get("ok"):
            break
        if number + 1 < len(tries):
            result["notes"].append(f"kernel.py failed verification ({check.get('failure')}: {check.get('message')}): "
                                   f"made again without {tries[number + 1][3]}")
    # tuned: a bucket's configuration, a kernel specialized on sizes or a timed configuration somewhere
    result["family"] = {"emitted": facts.get("families", 0) > 0, "tuned": facts.get("tuned", False),
                        **(check.get("family") or {})}
    if not check.get("ok"):
        result["notes"].append(f"model-free kernel.py failed verification ({check.get('failure')}): {check.get('message')}")
    return path, check


def _optimize(capture: Path, folder: Path, body: dict, settings: GenerateSettings, result: dict,
              log: Callable[[str], None]) -> dict:
    """The loop on Inductor's captured kernels; spec id -> the decided Variant."""
    own = own_launches(body["plans"])
    decided = _loop_on(capture, folder, settings, len(body["kernels"]), result, "optimize", log, only=own)
    return {spec.id: variant for spec, variant in decided}


def own_launches(plans: list[dict]) -> list[str]:
    """The launch ids of the spec's own cases (``capture_job``'s plans), in order, each once: what
    the search spends its budget on. The derived cases (odd shapes, one row, a larger size) are
    there to verify ``kernel.py``, not to tune it; they keep Inductor's configuration unless a
    launch of theirs is one of the spec's own (the capture keeps one id per distinct launch).
    Measured 2026-11-26 on the H100: with the derived cases in the ranking, 45 s reached 2 of 9
    keys and decided none. The model's module gets the same ids from its capture
    (``modules.capture_module_job``'s ``own``)."""
    return list(dict.fromkeys(step["spec"]["id"] for plan in plans if not plan.get("derived")
                              for step in plan["steps"]))


def _loop_on(capture: Path, folder: Path, settings: GenerateSettings, kernels: int, result: dict, field: str,
             log: Callable[[str], None], *, only: list[str]) -> list[tuple[Any, Any]]:
    """tritune's loop on a capture (compiler passes left out: kernel.py cannot hold them), for at
    most ``settings.budget_s``; the usable decisions as (LaunchSpec, Variant), summed up in
    ``result[field]``. ``only``: the launch ids to optimize, those of the spec's own cases
    (``own_launches``; none: no search). Every launch gets an equal part of the budget at most
    (``per_key_s``): the user listed each shape because it matters, whatever its share of the time."""
    from tritune.generate.modules import decisions_for
    from tritune.loop.lanes import lane_devices
    from tritune.loop.session import optimize
    from tritune.model.request import STORE_FILE, RunRequest
    from tritune.model.settings import LoopSettings

    if not only:  # the loop, given no kernels, would take every launch
        result[field] = {"kernels": 0, "decided": 0, "decisions": {}, "stopped": "no launch of the spec's own cases"}
        return []
    store_path = folder / STORE_FILE
    launches = len(only)
    loop = LoopSettings(budget_s=per_key_s(settings, launches), jobs=settings.jobs, without=(families.PASSES,),
                        unsafe_no_jail=settings.unsafe_no_jail)
    log(f"optimizing {kernels} kernel(s) ({launches} launch(es)) for up to {settings.budget_s:g} s")
    if settings.budget_s < least_budget_s(launches):
        log(f"a budget of {settings.budget_s:g} s may not reach all {launches} launches: "
            f"{least_budget_s(launches):g} s would (--budget-s)")
    # one lane: a spec has a few kernels, and a lane per GPU would each take --jobs verify workers
    request = RunRequest(folder / "optimize", settings=loop, store_path=store_path, kernels=tuple(only),
                         deadline_s=settings.budget_s, cover=1.0, command="tritune generate")
    runs = optimize(capture, request, devices=lane_devices(workers=1))
    decided = decisions_for(capture, store_path, runs.target)
    result[field] = {"kernels": len(runs.kernels), "decided": len(decided),
                     "decisions": {spec.id: variant.describe() for spec, variant in decided}, "stopped": runs.stopped}
    return decided


def per_key_s(settings: GenerateSettings, launches: int) -> float:
    """Each launch's budget: ``per_kernel_s``, but no more than an equal part of what ``budget_s``
    (the run's deadline) leaves after the run's fixed costs (``RESERVE_S``) and each key's last
    round (``OVERRUN``: a key finishes the round it is in), so that every launch is reached; never
    under the loop's floor (``model.request.FLOOR_S``): ``least_budget_s`` says what that needs."""
    from tritune.model.request import FLOOR_S

    if launches < 1:
        return settings.per_kernel_s
    room = max(0.0, settings.budget_s - RESERVE_S) / launches / (1 + OVERRUN)
    return max(FLOOR_S, min(settings.per_kernel_s, room))


def least_budget_s(launches: int) -> float:
    """The least ``budget_s`` that reaches ``launches`` launches at the loop's floor each."""
    from tritune.model.request import FLOOR_S

    return RESERVE_S + launches * FLOOR_S * (1 + OVERRUN)


def _llm_optimized(spec: Any, best: Path, out: Path, settings: GenerateSettings, worker: Any, device: str,
                   result: dict, log: Callable[[str], None]) -> Path:
    """The model's verified module through the same loop, its decisions baked into
    ``DIR/llm/optimized.py`` (``modules.bake``: different decisions per case dispatch by the cases'
    size buckets, as kernel.py's do); the module itself when nothing was decided, the capture
    failed, or the baked module does not verify."""
    from tritune.allowlist.sandbox import Unsafe
    from tritune.generate.assemble import assemble, input_kinds
    from tritune.generate.modules import bake
    from tritune.loop.evaluate import SANDBOX_CPU_S, SANDBOX_MEMORY_MB

    folder = out / "llm"
    capture = folder / "capture"
    if capture.exists():
        _empty(capture)
    captured = worker.call("tritune.generate.modules:capture_module_job",
                           {"module": str(best), "spec": str(spec.path), "device": device, "capture": str(capture)},
                           timeout_s=CHECK_TIMEOUT_S, cpu_s=SANDBOX_CPU_S, memory_mb=SANDBOX_MEMORY_MB)
    if not captured.ok:
        result["notes"].append(f"the model's module was not optimized: its launches could not be captured "
                               f"({captured.failure.message})")
        return best
    decided = _loop_on(capture, folder, settings, len(captured.value["kernels"]), result, "llm_optimize", log,
                       only=captured.value["own"])
    if not decided:
        return best
    text, notes = bake(best.read_text(), decided, captured.value.get("cases"))  # cases: the launches' buckets
    result["notes"] += notes
    try:  # the baked module is the model's still: it passes both allowlists again, and is assembled anew
        text = assemble(text, input_kinds(spec.cases("cpu")), name=spec.name).text
    except Unsafe as exc:
        result["notes"].append(f"the model's module with its decisions baked in fails the allowlists ({exc}): "
                               "kept without them")
        return best
    path = folder / "optimized.py"
    path.write_text(text)
    check = _check(worker, path, spec.path, device, family=True)
    if not check.get("ok"):
        result["notes"].append(f"the model's module with its decisions baked in failed verification "
                               f"({check.get('failure')}: {check.get('message')}): kept without them")
        return best
    return path


def _check(worker: Any, module: Path, spec_path: Path, device: str, family: Any = "module") -> dict:
    """``check.check_in_worker``: tritune's kernel.py ("module"), or a model's module (True)."""
    from tritune.generate.check import check_in_worker

    return check_in_worker(worker, module, spec_path, device, family=family)


def _bench(worker: Any, modules: dict[str, Path], spec_path: Path, result: dict,
           log: Callable[[str], None]) -> dict | None:
    log("benchmarking against eager, torch.compile and max-autotune-no-cudagraphs (CUDA events, 10 + 200 runs)")
    outcome = worker.call("tritune.generate.bench:bench_job",
                          {"modules": {name: str(path) for name, path in modules.items()}, "spec": str(spec_path),
                           "device": "cuda", "modes": ["eager", "compile", "max-autotune-no-cudagraphs"],
                           "warmup": 10, "runs": 200}, timeout_s=BENCH_TIMEOUT_S)
    if not outcome.ok:
        result["bench_error"] = outcome.failure.message
        log(f"benchmark failed: {outcome.failure.message}")
        return None
    return outcome.value


def _llm_timer(worker: Any, spec_path: Path) -> tuple[dict, Callable[[Path], dict]]:
    """For the LLM loop's "slower" (GPU only): eager's p50 per case, and a function timing a
    verified candidate's p50 per case (50 timed runs; the model's code keeps its sandbox limits)."""
    from tritune.loop.evaluate import SANDBOX_CPU_S, SANDBOX_MEMORY_MB

    def p50(modules: dict[str, str], name: str) -> dict:
        outcome = worker.call("tritune.generate.bench:bench_job",
                              {"modules": modules, "spec": str(spec_path), "device": "cuda", "modes": ["eager"],
                               "warmup": 10, "runs": 50},
                              timeout_s=CHECK_TIMEOUT_S, cpu_s=SANDBOX_CPU_S, memory_mb=SANDBOX_MEMORY_MB)
        if not outcome.ok:
            raise RuntimeError(outcome.failure.message)
        return {case["label"]: case["times"][name]["p50"] for case in outcome.value["cases"] if name in case["times"]}

    return p50({}, "eager"), lambda path: p50({"candidate": str(path)}, "candidate")


def _p50_total(bench: dict, name: str) -> float:
    """``name``'s p50 summed over the benchmark's cases (the cases it was timed on)."""
    return sum(case["times"][name]["p50"] for case in bench["cases"] if name in case["times"])


def _winner(verified: dict[str, Path], bench: dict | None) -> str:
    """The faster verified module by the benchmark's p50 summed over the cases; without timings,
    the model-free one (it is Inductor's own code), else the LLM's."""
    if bench and len(verified) > 1:
        return min(verified, key=lambda name: _p50_total(bench, name))
    return "inductor" if "inductor" in verified else next(iter(verified))


def _why(bench: dict | None) -> str:
    if not bench:
        return "no timings (no GPU): the model-free module is preferred when both verify"
    return (f"p50 summed over the cases: inductor {_p50_total(bench, 'inductor'):.4f} ms, "
            f"llm {_p50_total(bench, 'llm'):.4f} ms")


def _write(out: Path, result: dict) -> None:
    from tritune.generate.report import write_report
    from tritune.secrets import scrub

    # no secret in a message (a model's, a candidate's), as in optimize.json and the report
    (out / "generate.json").write_text(scrub(json.dumps(result, indent=2, default=str) + "\n"))
    write_report(out, result)
