"""Model-free generation, first half: Inductor's kernels for a spec, with how to feed them.

For each case (the spec's inputs, and the odd shapes ``derive`` makes from them) the reference is
compiled with ``torch.compile(dynamic=False)`` and run once while capture records Inductor's
launches (``tritune.capture.inductor``). Arguments that share memory (one tensor passed twice,
two views of one storage) are each given memory of their own first: compiled on them, Inductor
would read one for both (``x * x`` for ``reference(x, y)``), and ``kernel.py`` serves any caller
whose arguments have those shapes, most of whom pass two tensors. Each launch is kept twice:

- as a ``LaunchSpec`` in a capture directory (``Recorder``), which the optimize loop works on;
- as a step of the case's *plan*: the kernel, and for each argument where its tensor comes from:
  an input of ``run``, an output, or a scratch buffer of Inductor's. Tensors are told apart by
  their storage (data pointer), so a view keeps its shape, strides and offset. Scalars,
  constexprs, launch options and the grid are the ones Inductor launched with.

``emit`` turns the plans into ``kernel.py``. What a plan cannot reproduce is refused, in one line
(``GenerateError``): a value Inductor computes outside Triton (a library matmul, a fallback op),
seen as a scratch buffer read before any Triton kernel wrote it, or as an output that no Triton
kernel wrote and that is no view of an input. An argument is read unless Inductor names it
``out_ptr``, or names it ``in_out_ptr`` and the kernel's source only ever stores through it (a
reduction's result written into a buffer Inductor reuses; a matmul's output that a kernel updates
in place is loaded, and refused).

Recording Inductor's launches as ``LaunchSpec``s is capture's (``tritune.capture.inductor``, its
``Recorder``), as for any program; ``tritune.inductor`` harvests a whole model's kernels from
Inductor's cache, for ``optimize``, and has no plans. What is generation's own here: compiling the
spec's reference once per case, the plans that replay a case's launches without Inductor, and
refusing what they cannot hold.

``capture_job`` runs in a tritune worker: compiling and running the reference may fault, and the
optimize loop then needs the process's GPU. ``on_interpreter()`` makes Inductor emit Triton
kernels for CPU tensors and launch them on Triton's interpreter; the CLI never uses it (the
model-free path needs a GPU), the tests do, so that this path is covered without one. Under it,
``libdevice`` calls (tanh, erf, rsqrt, ...) do not run: test specs avoid them.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

from tritune.generate.interpreter import on_interpreter
from tritune.generate.spec import GenerateError
from tritune.verify.compare import dtype_name


def capture_job(payload: dict) -> dict:
    """``{"spec", "device", "capture", "derived": bool, "interpret": bool, "family": bool}`` -> plans
    and facts.

    Returns ``{"plans": [...], "target": current_target(device).key_json(), "kernels": [...],
    "fused": bool, "notes": [...], "families": the symbolic-size compiles (``family.compile_family``),
    one per pattern of input dtypes of the spec's cases (a refused one's one-line reason in the notes)}``; every plan is ``{"label", "key", "inputs", "buffers",
    "steps", "outputs", "single"}`` (see ``_plan``). A spec this path cannot plan returns
    ``{"refused": one line}`` instead (a raised error's message would come back cut short)."""
    from tritune.generate.derive import derived_cases
    from tritune.generate.spec import load_spec, shapes_text
    from tritune.store.keys import current_target

    device = payload["device"]
    spec = load_spec(payload["spec"], device=device, check=False)
    cases = spec.cases(device)
    if payload.get("derived", True):
        cases += derived_cases(spec, device)
    with (on_interpreter() if payload.get("interpret") else contextlib.nullcontext()):
        try:
            plans = _capture(spec, cases, Path(payload["capture"]))
        except GenerateError as exc:
            return {"refused": str(exc)}
    kernels = sorted({step["kernel"] for plan in plans for step in plan["steps"]})
    notes = []
    families = []
    if payload.get("family", True):
        from tritune.generate.family import compile_family, dtypes, patterns

        own = spec.cases(device)
        for case in patterns(own):
            others = [(c.label, _apart(c.tensors)) for c in own if c is not case and dtypes(c) == dtypes(case)]
            try:
                families.append(compile_family(spec.reference, _apart(case.tensors), label=case.label, others=others,
                                               interpret=bool(payload.get("interpret"))))
            except Exception as exc:  # noqa: BLE001 - the cases' kernel.py stands without it, whatever failed
                why = exc if isinstance(exc, GenerateError) else f"{type(exc).__name__}: {' '.join(str(exc).split())}"
                notes.append(f"kernel.py serves only the sizes it was generated for ({shapes_text(case.tensors)} "
                             f"and its dtypes): {why}"[:400])
    unfused = [plan["label"] for plan in plans if len(plan["steps"]) != 1]
    if unfused:
        counts = sorted({len(plan["steps"]) for plan in plans})
        notes.append(f"Inductor did not fuse {spec.name} into one kernel ({' or '.join(map(str, counts))} "
                     f"launches for {', '.join(unfused[:3])}{'...' if len(unfused) > 3 else ''}): "
                     "kernel.py launches what it produced")
    return {"plans": plans, "target": current_target(device).key_json(), "kernels": kernels, "fused": not unfused,
            "notes": notes, "families": families}


def _capture(spec: Any, cases: list, root: Path) -> list[dict]:
    import torch

    from tritune.capture import inductor
    from tritune.capture.recorder import Recorder, finalize

    recorder = Recorder(root)
    plans = []
    try:
        for case in cases:
            torch._dynamo.reset()
            compiled = torch.compile(spec.reference, dynamic=False)
            launches: list[tuple[Any, dict]] = []

            def add(launch: Any, values: dict, fast_key: Any = None) -> None:
                launches.append((recorder.add(launch, values), _live(values)))

            inputs = _apart(case.tensors)
            with inductor.recording(add), torch.no_grad():  # kernel.py computes the forward only
                result = compiled(*inputs)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
            plans.append({**_plan(spec.name, case.label, inputs, result, launches, root), "derived": case.derived})
    finally:
        recorder.close()
    finalize(root)
    return plans


def _apart(args: tuple) -> tuple:
    """``args`` with each tensor whose memory an earlier one shares copied into a storage of its own
    (same shape, strides and values; storage offset 0; overlapping strides kept)."""
    import torch

    seen: set[int] = set()
    out = []
    for t in args:
        if isinstance(t, torch.Tensor) and t.numel():
            ptr = t.untyped_storage().data_ptr()
            if ptr in seen:
                extent = 1 + sum((size - 1) * stride for size, stride in zip(t.shape, t.stride()))
                t = t.as_strided((extent,), (1,), t.storage_offset()).clone().as_strided(t.shape, t.stride(), 0)
            seen.add(t.untyped_storage().data_ptr())
        out.append(t)
    return tuple(out)


def _live(values: dict) -> dict:
    """What a plan needs of a launch's live values: each tensor's storage and view."""
    live = {}
    for name, value in values.items():
        if hasattr(value, "untyped_storage") and hasattr(value, "stride"):
            storage = value.untyped_storage()
            live[name] = {"ptr": storage.data_ptr(), "nbytes": storage.nbytes(), "view": _view(value),
                          "dtype": dtype_name(value)}
    return live


def _view(t: Any) -> list:
    return [list(t.shape), list(t.stride()), int(t.storage_offset())]


def input_key(inputs: tuple) -> list:
    """What ``run`` dispatches on: each tensor's shape, strides and dtype; other values as they are."""
    key = []
    for value in inputs:
        if hasattr(value, "stride") and hasattr(value, "dtype"):
            key.append([list(value.shape), list(value.stride()), dtype_name(value)])
        else:
            key.append(value)
    return key


def _plan(name: str, label: str, inputs: tuple, result: Any, launches: list[tuple[Any, dict]], root: Path) -> dict:
    """The case's plan: buffers to allocate, launches in order, what ``run`` returns (``root``:
    the capture directory, where the launches' sources are).

    An argument is ``{"input": i, "view": ...}`` (None: the input itself; else its offset counts
    from the input's own), ``{"buffer": b, "view": ..., "dtype": ...}``,
    ``{"value": v}`` (a scalar or None) or ``{"constexpr": name}``."""
    outputs_seq = list(result) if isinstance(result, (tuple, list)) else [result]
    by_ptr = {}
    for i, value in enumerate(inputs):
        if hasattr(value, "untyped_storage"):
            by_ptr.setdefault(value.untyped_storage().data_ptr(), ("input", i))
    buffers: list[dict] = []
    written: set[int] = set()
    steps = []
    for launch, live in launches:
        stored_only = _stored_only((root / launch.source).read_text(), launch.kernel) if launch.source else set()
        args = []
        for arg in launch.args:
            if arg.kind == "constexpr":
                args.append({"constexpr": arg.name})
            elif arg.kind != "tensor":
                args.append({"value": arg.value})
            else:
                seen = live[arg.name]
                where = by_ptr.get(seen["ptr"])
                # Inductor's names: in_ptr, in_out_ptr, out_ptr (module doc)
                reads = not arg.name.startswith("out_ptr") and arg.name not in stored_only
                if where is None:
                    if reads:
                        raise GenerateError(
                            f"{name}: {label}: Inductor's kernel {launch.kernel} reads {arg.name}, which no Triton "
                            "kernel wrote: part of this spec runs outside Triton (a library call or a fallback "
                            "op), which the model-free path cannot put in kernel.py")
                    where = ("buffer", len(buffers))
                    by_ptr[seen["ptr"]] = where
                    buffers.append({"nbytes": seen["nbytes"]})
                if where[0] == "buffer":
                    buffers[where[1]]["nbytes"] = max(buffers[where[1]]["nbytes"], seen["nbytes"])
                    if reads and where[1] not in written:
                        raise GenerateError(
                            f"{name}: {label}: Inductor's kernel {launch.kernel} reads {arg.name} before any Triton "
                            "kernel wrote it: part of this spec runs outside Triton")
                    if arg.written:
                        written.add(where[1])
                args.append({where[0]: where[1], "view": _relative(seen["view"], seen["dtype"], where, inputs),
                             "dtype": seen["dtype"]})
        steps.append({"kernel": launch.kernel, "spec": launch.to_json(), "args": args})
    outputs = []
    for k, out in enumerate(outputs_seq):
        if not hasattr(out, "untyped_storage"):
            raise GenerateError(f"{name}: reference output {k} is a {type(out).__name__}, not a tensor")
        where = by_ptr.get(out.untyped_storage().data_ptr())
        if where is None or (where[0] == "buffer" and where[1] not in written):
            raise GenerateError(f"{name}: {label}: output {k} was not written by a Triton kernel: Inductor computes it "
                                "outside Triton, which the model-free path cannot put in kernel.py")
        outputs.append({where[0]: where[1], "view": _relative(_view(out), dtype_name(out), where, inputs),
                        "dtype": dtype_name(out)})
    return {"label": label, "key": input_key(inputs), "buffers": buffers, "steps": steps, "outputs": outputs,
            "single": not isinstance(result, (tuple, list)), "sequence": type(result).__name__}


def _stored_only(text: str, kernel: str) -> set[str]:
    """Parameters of ``kernel`` (in the module source ``text``) used only inside the pointer argument
    of ``tl.store`` calls: the kernel writes through them and never reads. Any other use, or a
    source that does not parse, counts as a read."""
    import ast

    try:
        tree = ast.parse(text)
    except SyntaxError:
        return set()
    found = [node for node in tree.body if isinstance(node, ast.FunctionDef) and node.name == kernel]
    if not found:
        return set()
    params = {a.arg for a in found[0].args.args}
    stored: set[int] = set()  # ids of the Name nodes inside a store's pointer
    for node in ast.walk(found[0]):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "store" \
                and isinstance(node.func.value, ast.Name) and node.func.value.id == "tl" and node.args:
            stored |= {id(n) for n in ast.walk(node.args[0]) if isinstance(n, ast.Name)}
    uses: dict[str, list[bool]] = {}
    for node in ast.walk(found[0]):
        if isinstance(node, ast.Name) and node.id in params:
            uses.setdefault(node.id, []).append(id(node) in stored)
    return {name for name, inside in uses.items() if all(inside)}


def _relative(view: list, dtype: str, where: tuple, inputs: tuple) -> list | None:
    """A view of an input with its offset counted from the input's own (a caller's input may itself
    be a view into a larger storage); None when it is the input itself."""
    if where[0] != "input":
        return view
    own = inputs[where[1]]
    if view == _view(own) and dtype == dtype_name(own):
        return None
    return [view[0], view[1], view[2] - int(own.storage_offset())]
