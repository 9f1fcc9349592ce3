"""Seed 004's loop: a model writes a fused Triton module for a spec; tritune checks it and feeds back.

The first request holds the spec's source, its cases' shapes and dtypes, the GPU's facts (or that
the module runs under Triton's interpreter), what the module must define (``@triton.jit``
kernels and ``run(*inputs)`` returning what ``reference`` returns), the tolerance, the kernel
allowlist's rules and the launcher's (``prompts/generate.md``). The model writes kernels and a
launcher of launch arithmetic only; tritune writes the module itself from those parts once each
passed its allowlist (``generate.assemble``), so nothing else of a reply reaches the worker or the
``kernel.py`` the user ships. Each reply goes through the same gates, in order:

==================  ===============================================================================
``no_code``         the reply has no ```python block (``llm.reply.first_python_block``)
``syntax``          the block does not compile (compiled here, never run)
``unsafe``          a part is refused (``generate.assemble``: module-level statements other than
                    imports, constants, kernels and ``run``; the kernels by ``allowlist.sandbox.check``;
                    ``run`` by ``generate.launcher.check_launcher``): never written as a .py, never run
(check's classes)   the assembled module is written to ``OUT/llm/attempt-NN.py`` and verified in the
                    worker, under the sandbox's CPU and memory limits, on the spec's cases, the
                    derived ones and a seeded sample of other sizes of its family (the prompt asks
                    for any size; ``generate.check.check_job``): ``compile``, ``runtime``, ``timeout``,
                    ``wrong_result`` (with the worst element), ``no_kernel``, ``syntax``
``slower``          verified, and with ``time_module`` (a GPU) slower than the eager reference:
                    still a verified candidate, the best if the fastest so far
==================  ===============================================================================

Each reply is kept as ``OUT/llm/attempt-NN.md`` as it came (a text file: nothing imports it).
The next request is the first one, then the last two attempts as the conversation went: the
model's reply and the feedback (``prompts/generate_fix.md``: the class and the message cut to 300
characters). The loop stops at the first verified module that is not slower, after
``max_iterations`` requests, or when the endpoint fails (one line; the best so far is kept). The
best verified module (tritune's assembly, never the reply's text) is copied to ``OUT/llm/kernel.py``.

The session, asking the model, the client, the cost and the dry run's prompt file are the LLM
proposer's (``llm.family``): the key is read by the client alone, sent as a Bearer token and
redacted from its errors; nothing here holds it. ``settings.dry_run``: the first prompt is written
to that folder (secrets scrubbed) and nothing is sent. What is generation's own: the prompts (a
spec to write, not a captured kernel to improve), the module assembled from the reply's checked
parts, seed 004's classes and the words the model is told, and ``slower`` against eager PyTorch.
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any, Callable

from tritune.llm import prompts
from tritune.llm.family import ATTEMPTS_SHOWN, MESSAGE_CHARS, LLMSession, gpu_facts, prompt_key, write_prompt
from tritune.model.failures import UNSAFE
from tritune.model.settings import LLMSettings
from tritune.model.target import Target

FOLDER = "llm"  # under the run's OUT
KERNEL = "kernel.py"  # the best verified module, copied

# a failure class -> what the model is told
WORDS = {
    "syntax": "syntax error", "compile": "compile error", "runtime": "runtime error", "timeout": "timeout",
    "wrong_result": "wrong result", "slower": "slower than the PyTorch reference (eager)",
    "unsafe": "unsafe code (refused before running)", "no_code": "no ```python block in the reply",
    "no_kernel": "the outputs do not come from a Triton kernel (none launched, or they were right without one)",
}
# seed 004's "minimal targeted guidance", for the classes where a line helps
GUIDANCE = {
    "wrong_result": "Common causes: a missing mask, wrong offsets or strides, a smaller input broadcast the "
                    "wrong way, a reduction over the wrong axis, accumulating in fp16 instead of fp32.",
    "no_kernel": "run() must compute the outputs with your @triton.jit kernel(s); torch only allocates them.",
    "slower": "It is correct: keep it correct and make it faster (one pass over memory, one fused kernel, "
              "a block size and num_warps that fit the sizes).",
    "unsafe": "Follow the rules of the first message exactly.",
    "timeout": "Look for a loop that never ends or a grid far larger than the data.",
}


def generate_with_llm(spec: Any, out_dir: Path, settings: LLMSettings, *, device: str, worker: Any,
                      max_iterations: int = 15, reference_ms: dict | None = None,
                      time_module: Callable[[Path], dict] | None = None,
                      log: Callable[[str], None] = print) -> dict:
    """The loop of the module doc. ``time_module(path)`` -> ``{case label: ms or {"mean": ms, ...}}``
    and ``reference_ms`` (the same for eager PyTorch) decide ``slower``; without them the first
    verified module ends the loop. Returns ``{"best": OUT/llm/kernel.py or None, "best_attempt",
    "attempts": [{"iteration", "failure", "message", "module", ...}], "cost", "requests"}``, and
    for a dry run ``"prompt"``: the file the first prompt went to."""
    session = LLMSession(settings, gpu=_gpu(worker, device), log=log)
    first = [{"role": "user", "content": first_prompt(spec, session.gpu, device)}]
    if settings.dry_run:
        key = prompt_key(settings.model, first, prompts.version(prompts.GENERATE))
        path = write_prompt(settings.dry_run, f"generate-{spec.name}-{key[:10]}", first)
        log(f"{spec.name}: llm dry run: prompt written to {path}")
        return {**_result(None, None, [], session), "prompt": str(path)}
    folder = Path(out_dir).resolve() / FOLDER
    _clear(folder)
    loop = _Loop(spec, folder, device, worker, reference_ms, time_module)
    conversation: list[tuple[str, str]] = []  # (reply, feedback) of each attempt
    for iteration in range(1, max_iterations + 1):
        messages = first + [m for reply, feedback in conversation[-ATTEMPTS_SHOWN:]
                            for m in ({"role": "assistant", "content": reply}, {"role": "user", "content": feedback})]
        asked = session.ask(messages, failed="tritune generate: llm: {error}")
        if asked is None:  # the endpoint cannot be used: said in one line, the best so far kept
            break
        text = asked[0].text
        attempt = loop.attempt(iteration, text)
        log(f"{spec.name}: llm attempt {iteration}/{max_iterations}: {_said(attempt)}")
        if attempt["verified"] and attempt["failure"] is None:
            break
        conversation.append((text, prompts.render(
            "generate_fix", iteration=iteration, failure=WORDS.get(attempt["failure"], attempt["failure"]),
            message=attempt["message"][:MESSAGE_CHARS], guidance=GUIDANCE.get(attempt["failure"], ""))))
    best = None
    if loop.best is not None:
        best = folder / KERNEL
        shutil.copyfile(loop.best["module"], best)
        log(f"{spec.name}: llm: attempt {loop.best['iteration']} verified, copied to {best}")
    elif session.broken is None:
        log(f"{spec.name}: llm: no verified module after {len(loop.attempts)} attempt(s)")
    if session.total.requests:
        log(f"{spec.name}: llm: {session.total.line(settings.price)}")
    return _result(best, loop.best, loop.attempts, session)


def first_prompt(spec: Any, gpu: Target | None, device: str) -> str:
    from tritune.allowlist.sandbox import RULES
    from tritune.generate.launcher import LAUNCHER_RULES
    from tritune.generate.spec import shapes_text

    cases = spec.cases("cpu")  # shapes and dtypes only: the parent never touches the GPU
    shapes = "\n".join(f"- {case.label}: {shapes_text(case.tensors)}" for case in cases)
    facts = gpu_facts(gpu) if gpu or device != "cuda" else "- a CUDA GPU (its facts could not be read)"
    return prompts.render("generate", spec_name=spec.name, file=Path(spec.path).name, source=spec.text.rstrip(),
                          shapes=shapes, gpu=facts, tolerance=tolerance_text(spec, cases), rules=RULES.rstrip(),
                          launcher_rules=LAUNCHER_RULES.rstrip())


def tolerance_text(spec: Any, cases: list) -> str:
    """One line per dtype of the cases' tensors (and of the spec's override): the rule an element
    must meet, from the one table (``verify.tolerances``) unless the spec overrides it."""
    from tritune.verify.compare import dtype_name

    override = spec.tolerance or {}
    dtypes = {dtype_name(t) for case in cases for t in case.tensors if hasattr(t, "dtype")} | set(override)
    lines = []
    for dtype in sorted(dtypes):
        try:
            tol = spec.tolerance_for(dtype)  # the spec's override, else the table's
        except ValueError:  # a dtype the table has no entry for (complex): nothing to say
            continue
        lines.append(f"- {dtype}: {tol.rule()}" + (" (the spec's tolerance)" if dtype in override else ""))
    return "\n".join(lines + ["- NaN and Inf where the reference has them, and nowhere else; every output "
                              "element written"])


class _Loop:
    """The checks of the module doc, and the best verified module so far."""

    def __init__(self, spec: Any, folder: Path, device: str, worker: Any, reference_ms: dict | None,
                 time_module: Callable[[Path], dict] | None) -> None:
        from tritune.generate.assemble import input_kinds

        self.spec, self.folder, self.device, self.worker = spec, folder, device, worker
        self.inputs = input_kinds(spec.cases("cpu"))  # the kinds of run()'s parameters
        self.reference_ms, self.time_module = reference_ms, time_module
        self.attempts: list[dict] = []
        self.best: dict | None = None

    def attempt(self, iteration: int, text: str) -> dict:
        attempt = {"iteration": iteration, "failure": None, "message": "", "module": None, "verified": False}
        self.attempts.append(attempt)
        stem = f"attempt-{iteration:02d}"
        (self.folder / f"{stem}.md").write_text(text)  # the reply as it came
        refusal, code = _refusal(text, f"{stem}.py", self.inputs, self.spec.name)
        if refusal is not None:
            attempt["failure"], attempt["message"] = refusal
            return attempt
        module = self.folder / f"{stem}.py"  # only the module tritune assembled from checked parts
        module.write_text(code)
        attempt["module"] = str(module)
        failure = self._check(module)
        if failure is not None:
            attempt["failure"], attempt["message"] = failure
            return attempt
        attempt["verified"] = True
        if self.time_module is not None:
            self._time(attempt, module)
        if self.best is None or (attempt.get("speedup") or 0.0) > (self.best.get("speedup") or 0.0):
            self.best = attempt
        return attempt

    def _check(self, module: Path) -> tuple[str, str] | None:
        from tritune.generate.check import check_in_worker
        from tritune.loop.evaluate import SANDBOX_CPU_S, SANDBOX_MEMORY_MB

        # any size of the spec's family, as the prompt asks; the model's code under the sandbox's limits
        result = check_in_worker(self.worker, module, self.spec.path, self.device, family=True, cpu_s=SANDBOX_CPU_S,
                                 memory_mb=SANDBOX_MEMORY_MB)
        if result.get("ok"):
            return None
        return result.get("failure") or "wrong_result", (result.get("message") or "")[:MESSAGE_CHARS]

    def _time(self, attempt: dict, module: Path) -> None:
        from tritune.errors import one_line

        try:
            times = {label: _ms(value) for label, value in (self.time_module(module) or {}).items()}
        except Exception as exc:  # a verified module that fails when timed (a larger launch) is no candidate
            attempt.update(verified=False, failure="runtime", message=f"timing failed: {one_line(exc)}"[:MESSAGE_CHARS])
            return
        attempt["times_ms"] = times
        reference = {label: _ms(value) for label, value in (self.reference_ms or {}).items()}
        ratios = {label: reference[label] / ms for label, ms in times.items() if ms and reference.get(label)}
        if not ratios:
            return
        attempt["speedup"] = speedup = math.exp(sum(map(math.log, ratios.values())) / len(ratios))
        if speedup < 1.0:
            label = min(ratios, key=ratios.get)
            attempt["failure"] = "slower"
            attempt["message"] = (f"{1 / speedup:.2f}x the eager reference's time (geometric mean over "
                                  f"{len(ratios)} case(s)); worst {label}: {times[label]:.4f} ms against "
                                  f"{reference[label]:.4f} ms")[:MESSAGE_CHARS]


def _refusal(text: str, filename: str, inputs: list[str], name: str) -> tuple[tuple[str, str] | None, str]:
    """Why a reply cannot be checked (no code, a syntax error, unsafe), else None and the module
    tritune assembles from its checked parts (``generate.assemble``); nothing of it runs here."""
    from tritune.allowlist.sandbox import Unsafe
    from tritune.generate.assemble import assemble
    from tritune.llm.reply import ReplyError, first_python_block

    try:
        code = first_python_block(text)
    except ReplyError as exc:
        return (exc.kind, str(exc)), ""
    try:
        compile(code, filename, "exec", dont_inherit=True)  # compiled, never run
    except SyntaxError as exc:
        return ("syntax", f"{filename} line {exc.lineno}: {exc.msg}"), ""
    except ValueError as exc:  # a null byte
        return ("syntax", f"{filename}: {exc}"), ""
    except RecursionError:
        return ("syntax", f"{filename}: nested too deeply to compile"), ""
    try:
        return None, assemble(code, inputs, name=name).text
    except Unsafe as exc:
        return (UNSAFE, str(exc)[:MESSAGE_CHARS]), ""


def _gpu(worker: Any, device: str) -> Target | None:
    """The GPU and its facts for the prompt, from the worker (the parent never touches the GPU);
    None on the CPU, under the interpreter, or when the worker cannot tell."""
    if device != "cuda":
        return None
    from tritune.loop.jobs import TargetUnknown, ask_target

    try:
        target = ask_target(worker.call)
    except TargetUnknown:
        return None
    return target if target.meaningful else None


def _ms(value: Any) -> float | None:
    if isinstance(value, dict):
        value = value.get("mean")
    return float(value) if isinstance(value, (int, float)) and value > 0 else None


def _said(attempt: dict) -> str:
    if attempt["failure"] is None:
        speed = f", {attempt['speedup']:.2f}x eager" if attempt.get("speedup") else ""
        return f"verified{speed}"
    return f"{attempt['failure']}: {attempt['message'][:160]}"


def _clear(folder: Path) -> None:
    """A new run's folder: an earlier run's attempts and kernel are not this run's."""
    folder.mkdir(parents=True, exist_ok=True)
    for path in [*folder.glob("attempt-*.py"), *folder.glob("attempt-*.md"), folder / KERNEL]:
        path.unlink(missing_ok=True)


def _result(best: Path | None, attempt: dict | None, attempts: list[dict], session: LLMSession) -> dict:
    return {"best": str(best) if best is not None else None,
            "best_attempt": attempt["iteration"] if attempt is not None else None,
            "attempts": attempts, "cost": session.total.to_json(session.settings.price),
            "requests": session.total.requests, "broken": session.broken}
