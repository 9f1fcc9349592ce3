"""A generated module (the model's, from ``llm``) through the model-free optimization.

``capture_module_job`` (a worker job) imports the module and calls its ``run`` on every case while
capture records its ``@triton.jit`` launches, into a capture directory the optimize loop reads,
and says which launches the spec's own cases made: the loop tunes those (``run.own_launches``).
``bake`` writes the decisions back into the module's text, where the text can hold them:

- a rewritten kernel (cache hints, pipelined loops, ...): its ``def`` spliced in by name, every byte
  outside it kept (``llm.reply.splice``);
- launch options (``num_warps``, ``num_stages``, ``maxnreg``): keywords of the module's one launch of
  that kernel (``kernel[grid](..., num_warps=8)``), set or added;
- constexprs: keywords of that launch too, but only where the grid is a function of the launch's
  meta-parameters (``kernel[lambda meta: ...]``): a grid computed from a block size written
  elsewhere would not follow the new one.

Anything else (a kernel launched from more than one place, compiler passes, a persistent grid, a
no-alias guard, a constexpr under a fixed grid) stays as the module wrote it, and ``bake`` says
so. The caller verifies the baked module like any other and keeps the unbaked one if it fails.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from tritune.generate.emit import bakeable

OPTIONS = ("num_warps", "num_stages", "maxnreg")


def capture_module_job(payload: dict) -> dict:
    """``{"module", "spec", "device", "capture"}`` -> ``{"kernels": [...], "launches": n, "own":
    [launch ids]}``: every case of the spec (derived ones included) run through the module while
    capture records. ``own``: the ids of the launches the spec's own cases made, in order, each
    once; they run first, so a derived case's launch equal to one of theirs is among them."""
    import torch

    from tritune.capture.recorder import capture
    from tritune.generate.derive import derived_cases
    from tritune.generate.spec import load_spec
    from tritune.imports import import_file

    device = payload["device"]
    spec = load_spec(payload["spec"], device=device, check=False)
    with capture(payload["capture"]) as recorder:
        module = import_file(payload["module"], fresh=True)
        before = set(recorder.specs)  # launches made on import are no case's
        with torch.no_grad():
            for case in spec.cases(device):
                module.run(*case.tensors)
            own = [launch.id for key, launch in recorder.specs.items() if key not in before]
            for case in derived_cases(spec, device):
                module.run(*case.tensors)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        kernels = sorted({spec.kernel for spec in recorder.specs.values()})
        launches = len(recorder.specs)
    return {"kernels": kernels, "launches": launches, "own": own}


def bake(text: str, decisions: list[tuple[Any, Any]]) -> tuple[str, list[str]]:
    """``text`` with the decisions written in (module docstring); ``decisions``: (LaunchSpec,
    Variant) pairs. Returns the new text and a note for each decision, or part of one, left out."""
    from tritune.llm.reply import kernel_text, splice

    notes: list[str] = []
    by_kernel: dict[str, list[Any]] = {}
    for spec, variant in decisions:
        by_kernel.setdefault(spec.kernel, []).append(variant)
    for kernel, variants in sorted(by_kernel.items()):
        if len({v.key() for v in variants}) > 1:
            notes.append(f"{kernel}: {len(variants)} different decisions for its launches; kernel.py keeps the "
                         "module's own (it has one launch site)")
            continue
        variant = variants[0]
        why = bakeable(variant)
        if why is not None:
            notes.append(f"{kernel}: decision {variant.describe()} not baked in: {why}")
            continue
        if variant.source is not None:
            function = kernel_text(variant.source, kernel)
            if function is None:
                notes.append(f"{kernel}: the decided source has no def {kernel}; not baked in")
                continue
            text = splice(text, kernel, function)
        keywords = {k: v for k, v in variant.options.items() if k in OPTIONS}
        left = sorted(set(variant.options) - set(OPTIONS))
        call = _launch_site(text, kernel)
        if call is None:
            if keywords or variant.constexprs:
                notes.append(f"{kernel}: launched from more or fewer than one place; options and constexprs "
                             f"{variant.describe()} not baked in")
            continue
        if variant.constexprs:
            if _grid_follows_meta(call):
                keywords.update(variant.constexprs)
            else:
                left += sorted(variant.constexprs)
        if left:
            notes.append(f"{kernel}: {', '.join(left)} not baked in (the launch's grid does not follow them, "
                         "or the option is not a launch keyword)")
        text = _set_keywords(text, kernel, call, keywords)
    return text, notes


def _launch_site(text: str, kernel: str) -> ast.Call | None:
    """The one ``kernel[grid](...)`` call of the module, or None when there is not exactly one."""
    calls = [node for node in ast.walk(ast.parse(text)) if isinstance(node, ast.Call)
             and isinstance(node.func, ast.Subscript) and isinstance(node.func.value, ast.Name)
             and node.func.value.id == kernel]
    return calls[0] if len(calls) == 1 else None


def _grid_follows_meta(call: ast.Call) -> bool:
    return isinstance(call.func.slice, ast.Lambda)


def _set_keywords(text: str, kernel: str, call: ast.Call, values: dict[str, Any]) -> str:
    """``call``'s keywords set to ``values`` (existing ones replaced in place, new ones appended),
    as byte-exact edits (``rewrites.base``): the rest of the text unchanged."""
    from tritune.rewrites.base import Edit, KernelSource

    if not values:
        return text
    source = KernelSource.parse(text, kernel)
    present = {kw.arg: kw for kw in call.keywords if kw.arg is not None}
    edits = [Edit(*source.span(present[name].value), repr(value)) for name, value in values.items() if name in present]
    added = [f"{name}={value!r}" for name, value in values.items() if name not in present]
    if added:
        end = source.span(call)[1] - 1  # the closing parenthesis
        edits.append(Edit(end, end, (", " if call.args or call.keywords else "") + ", ".join(added)))
    return source.edit(edits)


def decisions_for(capture: Path, store_path: Path, target: dict) -> list[tuple[Any, Any]]:
    """(LaunchSpec, Variant) of every usable decision the store holds for the capture's launches."""
    from tritune.capture.spec import read_launches
    from tritune.store import DecisionStore, key_for

    found = []
    with DecisionStore(store_path) as store:
        for spec in read_launches(capture):
            decision = store.decision_for(key_for(spec, **target))
            if decision is not None and decision.usable:
                found.append((spec, decision.variant))
    return found
