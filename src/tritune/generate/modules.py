"""A generated module (the model's, from ``llm``) through the model-free optimization.

``capture_module_job`` (a worker job) imports the module and calls its ``run`` on every case while
capture records its ``@triton.jit`` launches, into a capture directory the optimize loop reads,
and says which launches the spec's own cases made (``own``: the loop tunes those,
``run.own_launches``), and for each own case its label, its inputs' sizes and the launches it made
(``cases``: a launch's bucket). ``bake`` writes the decisions back into the module's text, where
the text can hold them:

- a rewritten kernel (cache hints, pipelined loops, ...): its ``def`` spliced in by name, every byte
  outside it kept (``llm.reply.splice``);
- launch options (``num_warps``, ``num_stages``, ``maxnreg``): keywords of the module's one launch of
  that kernel (``kernel[grid](..., num_warps=8)``), set or added;
- constexprs: keywords of that launch too, but only where the grid is a function of the launch's
  meta-parameters (``kernel[lambda meta: ...]``): a grid computed from a block size written
  elsewhere would not follow the new one.

Where a kernel's launches (one per case) got different decisions, the launch dispatches by size
bucket as tritune's kernel.py does (``emit.tuning``, ``family._in_bucket``): a bucket is each of
run()'s tensor inputs' sizes to the power of two at or above it (``store.keys.size_bucket``; 0 and
1 stay); in a case's bucket the launch takes that case's decision, everywhere else the module's own
configuration. The launch becomes ``if``/``elif`` copies of the call with the bucket's keywords and
an ``else`` holding the module's own call; the tests of the buckets are computed at the top of
run(), from the inputs as given (``_bucket_N = 2 < x.size(0) <= 4 and ...``: run() may rebind
``x`` to a view before its launch), beside a comment that tables each bucket's configuration and
where it came from. Of two cases in one bucket with different decisions the first (the spec's
order) gives it; buckets that take one configuration share a branch. A rewritten source cannot be
per bucket: it is baked only where every decision of the kernel has it.

Anything else (a kernel launched from more than one place, compiler passes, a persistent grid, a
no-alias guard, a constexpr under a fixed grid) stays as the module wrote it, and ``bake`` says
so. The caller assembles the baked module anew (both allowlists: the branches are ``if`` on
comparisons of sizes, which the launcher allowlist already takes), verifies it like any other and
keeps the unbaked one if either fails.
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

from tritune.generate.emit import bakeable

OPTIONS = ("num_warps", "num_stages", "maxnreg")
FLAG = "_bucket_"  # run()'s names for the bucket tests, numbered (``_fresh_name``)


def capture_module_job(payload: dict) -> dict:
    """``{"module", "spec", "device", "capture"}`` -> ``{"kernels": [...], "launches": n, "own":
    [launch ids], "cases": [{"label", "sizes", "launches"}]}``: every case of the spec (derived ones
    included) run through the module while capture records. ``own``: the ids of the launches the
    spec's own cases made, in order, each once; they run first, so a derived case's launch equal to
    one of theirs is among them. ``cases``: each own case, in the spec's order, with the sizes of
    run()'s arguments (a tensor's shape, None for any other value) and the ids of the launches it
    made (new or repeated): a launch's case, and so its bucket (``bake``)."""
    import torch

    from tritune.capture.recorder import capture
    from tritune.generate.derive import derived_cases
    from tritune.generate.spec import load_spec
    from tritune.imports import import_file

    device = payload["device"]
    spec = load_spec(payload["spec"], device=device, check=False)
    cases = []
    with capture(payload["capture"]) as recorder:
        module = import_file(payload["module"], fresh=True)
        before = set(recorder.specs)  # launches made on import are no case's
        with torch.no_grad():
            for case in spec.cases(device):
                counted = dict(recorder.counts)
                module.run(*case.tensors)
                made = [launch.id for key, launch in recorder.specs.items()
                        if recorder.counts.get(key, 0) > counted.get(key, 0)]
                cases.append({"label": case.label, "launches": made,
                              "sizes": [[int(d) for d in t.shape] if isinstance(t, torch.Tensor) else None
                                        for t in case.tensors]})
            own = [launch.id for key, launch in recorder.specs.items() if key not in before]
            for case in derived_cases(spec, device):
                module.run(*case.tensors)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        kernels = sorted({spec.kernel for spec in recorder.specs.values()})
        launches = len(recorder.specs)
    return {"kernels": kernels, "launches": launches, "own": own, "cases": cases}


def bake(text: str, decisions: list[tuple[Any, Any]], cases: list[dict] | None = None) -> tuple[str, list[str]]:
    """``text`` with the decisions written in (module docstring); ``decisions``: (LaunchSpec,
    Variant) pairs; ``cases``: ``capture_module_job``'s, which put a kernel's different decisions
    in their cases' buckets (None: such a kernel keeps the module's own launch). Returns the new
    text and a note for each decision, or part of one, left out."""
    from tritune.llm.reply import kernel_text, splice

    notes: list[str] = []
    by_kernel: dict[str, list[tuple[Any, Any]]] = {}
    for spec, variant in decisions:
        by_kernel.setdefault(spec.kernel, []).append((spec, variant))
    for kernel, pairs in sorted(by_kernel.items()):
        variants = [variant for _, variant in pairs]
        if len({v.key() for v in variants}) > 1:
            if cases is None:
                notes.append(f"{kernel}: {len(variants)} different decisions for its launches, and no cases to "
                             "bucket them by; the module keeps its own launch")
            else:
                text = _bake_buckets(text, kernel, pairs, cases, notes)
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
        call = _launch_site(text, kernel)
        if call is None:
            if set(variant.options) & set(OPTIONS) or variant.constexprs:
                notes.append(f"{kernel}: launched from more or fewer than one place; options and constexprs "
                             f"{variant.describe()} not baked in")
            continue
        keywords, left = _keywords(variant, call)
        if left:
            notes.append(f"{kernel}: {', '.join(left)} not baked in (the launch's grid does not follow them, "
                         "or the option is not a launch keyword)")
        text = _set_keywords(text, kernel, call, keywords)
    return text, notes


# ------------------------------------------------------------------------ decisions by bucket

def _bake_buckets(text: str, kernel: str, pairs: list[tuple[Any, Any]], cases: list[dict],
                  notes: list[str]) -> str:
    """``text`` with ``kernel``'s one launch dispatching by bucket (module docstring): each own
    case's bucket takes the decision of the launch that case made, where it can be baked in; of
    two cases in one bucket, the first (the spec's order) whose decision can be gives it."""
    from tritune.llm.reply import kernel_text, splice

    names = _run_params(text) or []
    tensors = []  # the positions of run()'s parameters that are tensors in every case: what buckets test
    if all(len(case["sizes"]) == len(names) for case in cases):
        tensors = [p for p in range(len(names)) if all(case["sizes"][p] is not None for case in cases)]
    if _launch_site(text, kernel) is None or not tensors:
        where = "it is launched from more or fewer than one place" if tensors else "run() has no tensor to bucket by"
        notes.append(f"{kernel}: {len(pairs)} different decisions for its launches, and {where}; the module keeps "
                     "its own launch")
        return text
    made = sorted(((number, spec, variant) for spec, variant in pairs
                   for number, case in enumerate(cases) if spec.id in case["launches"]), key=lambda item: item[0])
    for spec, variant in pairs:
        if not any(spec is s for _, s, _ in made):
            notes.append(f"{kernel}: no own case made launch {spec.id}; its decision {variant.describe()} not baked in")
    # a source every own case's decision rewrites alike, each of them one that can be baked in: spliced once
    sources = {variant.source for _, _, variant in made}
    shared = sources.pop() if len(sources) == 1 and all(bakeable(v) is None for _, _, v in made) else None
    if shared is not None:
        function = kernel_text(shared, kernel)
        if function is None:
            notes.append(f"{kernel}: the decided source has no def {kernel}; not baked in")
            return text
        text = splice(text, kernel, function)
    call = _launch_site(text, kernel)
    chosen: dict[tuple, tuple[dict, str]] = {}  # bucket -> keywords, where they came from (the spec's order)
    for number, spec, variant in made:
        label = cases[number]["label"]
        where = tuple(tuple(_size_bucket(d) for d in cases[number]["sizes"][p]) for p in tensors)
        why = bakeable(variant)
        if why is None and variant.source != shared:
            why = "a rewritten source cannot be per size bucket, and the other cases' decisions do not rewrite it alike"
        if why is not None:
            notes.append(f"{kernel} ({label}): decision {variant.describe()} not baked in: {why}")
            continue
        keywords, left = _keywords(variant, call)
        if left:
            notes.append(f"{kernel} ({label}): {', '.join(left)} not baked in (the launch's grid does not follow "
                         "them, or the option is not a launch keyword)")
        if not keywords and left:
            continue  # nothing of it reaches the launch: a later case of its bucket may give one
        if where in chosen:
            if chosen[where][0] != keywords:
                notes.append(f"{kernel} ({label}): its bucket takes an earlier case's decision; "
                             f"{variant.describe()} not baked in")
            continue
        chosen[where] = (keywords, f"tritune's search on {label}: {variant.describe()}")
    own = _own_keywords(call)
    branches: dict[str, tuple[dict, list[tuple[tuple, str]]]] = {}  # keywords (as text) -> them, their buckets
    for where, (keywords, came) in chosen.items():
        if all(k in own and own[k] == v for k, v in keywords.items()):
            continue  # what the module's own launch does already
        branches.setdefault(repr(sorted(keywords.items())), (keywords, []))[1].append((where, came))
    if not branches:
        return text
    return _dispatch(text, kernel, call, list(branches.values()), [names[p] for p in tensors], own, notes)


def _dispatch(text: str, kernel: str, call: ast.Call, branches: list[tuple[dict, list[tuple[tuple, str]]]],
              tested: list[str], own: dict, notes: list[str]) -> str:
    """The edits: the bucket tests and their table at the top of run(), and the launch statement
    replaced by ``if``/``elif`` copies of the call, each with its branch's keywords, ``else`` the call."""
    from tritune.rewrites.base import Edit, KernelSource, NotRewritable

    try:
        source = KernelSource.parse(text, "run")
    except NotRewritable as exc:
        notes.append(f"{kernel}: run() cannot be read ({exc}); its per-bucket decisions not baked in")
        return text
    run = source.function
    body = run.body[1:] if run.body and _is_docstring(run.body[0]) else run.body
    statement = next((node for node in ast.walk(run) if isinstance(node, ast.Expr)  # the call's, in this parse
                      and (node.value.lineno, node.value.col_offset) == (call.lineno, call.col_offset)), None)
    if statement is None or not body or not _own_lines(source, statement) or not _own_lines(source, body[0]):
        notes.append(f"{kernel}: its launch is not a statement on lines of its own in run(); its per-bucket "
                     "decisions not baked in")
        return text
    taken = {node.id for node in ast.walk(source.tree) if isinstance(node, ast.Name)} \
        | {node.arg for node in ast.walk(source.tree) if isinstance(node, ast.arg)} \
        | {node.name for node in ast.walk(source.tree) if isinstance(node, ast.FunctionDef)}
    indent, inner = source.indent_of(body[0]), source.indent_of(statement)
    data = text.encode()
    start, end = source.span(call)
    lines = [f"# tritune: {kernel}'s configuration by size bucket of run()'s tensor inputs (each size",
             "# to the power of two at or above it; 0 and 1 stay), as tritune's kernel.py dispatches:"]
    tests, chain = [], []
    for number, (keywords, buckets) in enumerate(branches):
        flag = _fresh_name(taken)
        taken.add(flag)
        conditions = [_in_bucket(where, tested) for where, _ in buckets]
        tests.append(f"{flag} = " + " or ".join(f"({c})" if len(conditions) > 1 else c for c in conditions))
        for where, came in buckets:
            lines.append(f"#   bucket {_bucket_text(where, tested)}: {_config_text(keywords)}  ({_one_line(came)})")
        changed = _set_keywords(text, kernel, call, keywords).encode()
        copy = changed[start:end + len(changed) - len(data)].decode()
        chain += [f"{'if' if number == 0 else 'elif'} {flag}:", "    " + _indented(copy)]
    lines.append(f"#   any other size: {_config_text(own) or 'as launched'}  (the module's own launch)")
    chain += ["else:", "    " + _indented(data[start:end].decode())]
    head = "".join(f"{indent}{line}\n" for line in lines + tests)
    first, last = source.span(statement)
    replaced = f"\n{inner}".join(chain)
    return source.edit([Edit(source.line_start(body[0].lineno), source.line_start(body[0].lineno), head),
                        Edit(first, last, replaced)])


def _keywords(variant: Any, call: ast.Call) -> tuple[dict, list[str]]:
    """The launch keywords ``variant`` sets on ``call`` (``bake``'s rules), and what it cannot."""
    keywords = {k: v for k, v in variant.options.items() if k in OPTIONS}
    left = sorted(set(variant.options) - set(OPTIONS))
    if variant.constexprs:
        if _grid_follows_meta(call):
            keywords.update(variant.constexprs)
        else:
            left += sorted(variant.constexprs)
    return keywords, left


def _in_bucket(where: tuple, tested: list[str]) -> str:
    """Whether run()'s inputs are in the bucket ``where``, as comparisons of their sizes
    (``family.size_tests``, as kernel.py's), each input's rank first: the tests run before anything of run() checks
    the inputs, so a size no case had reads no dim it lacks."""
    from tritune.generate.family import size_tests

    parts = [test for name, sizes in zip(tested, where)
             for test in [f"{name}.dim() == {len(sizes)}", *size_tests(name, sizes)]]
    return " and ".join(parts) or "True"


def _bucket_text(where: tuple, tested: list[str]) -> str:
    return ", ".join(f"{name}{list(sizes)}" for name, sizes in zip(tested, where))


def _config_text(keywords: dict) -> str:
    return " ".join(f"{k}={v}" for k, v in keywords.items())


def _one_line(text: str) -> str:
    return " ".join(str(text).split())[:160]


def _indented(call: str) -> str:
    """A call's text one level deeper: its continuation lines indented four more spaces."""
    return call.replace("\n", "\n    ")


def _own_keywords(call: ast.Call) -> dict:
    """The module's launch keywords with literal values."""
    own = {}
    for keyword in call.keywords:
        if keyword.arg is not None:
            try:
                own[keyword.arg] = ast.literal_eval(keyword.value)
            except (ValueError, TypeError, SyntaxError):  # a name, an expression: not a literal
                continue
    return own


def _run_params(text: str) -> list[str] | None:
    runs = [node for node in ast.parse(text).body if isinstance(node, ast.FunctionDef) and node.name == "run"]
    if len(runs) != 1:
        return None
    args = runs[0].args
    return [a.arg for a in args.posonlyargs + args.args]


def _own_lines(source: Any, statement: ast.stmt) -> bool:
    """Whether ``statement`` starts its first line and ends its last (a comment may follow)."""
    data = source.text.encode()
    start = source.line_start(statement.lineno)
    if data[start:start + statement.col_offset].strip():
        return False
    end = source.span(statement)[1]
    rest = data[end:].split(b"\n", 1)[0].strip()
    return not rest or rest.startswith(b"#")


def _fresh_name(taken: set[str]) -> str:
    number = 0
    while f"{FLAG}{number}" in taken:
        number += 1
    return f"{FLAG}{number}"


def _size_bucket(n: int) -> int:
    from tritune.store.keys import size_bucket

    return size_bucket(int(n))


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


# ------------------------------------------------------------------------------------ the text

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
    """(LaunchSpec, Variant) of every usable decision the store holds for the capture's launches,
    on ``target`` (an optimize run's, ``RunResults.target``)."""
    from tritune.capture.spec import read_launches
    from tritune.model.target import Target
    from tritune.store import DecisionStore, key_for

    found = []
    with DecisionStore(store_path) as store:
        for spec in read_launches(capture):
            decision = store.decision_for(key_for(spec, Target.from_json(target)))
            if decision is not None and decision.usable:
                found.append((spec, decision.variant))
    return found
