"""Model-free generation, second half: ``kernel.py`` from the plans ``inductor`` captured.

The module a user copies into a project: the Triton kernels as plain ``@triton.jit`` functions
(Inductor's autotuning decorator dropped: the configuration is decided), one launcher per input
case (``_case_N``: allocations, launches with their grids, constexprs and options written out), and
``run(*inputs)``, which picks the case by the inputs' shapes, strides and dtypes and says in one line
when there is none. It imports torch, triton and Inductor's runtime helpers (``triton_helpers``,
``libdevice``), never ``torch.compile``.

Where the reference works in place, Inductor's kernels write into the input it changes: the case's
launcher then runs them on a copy of that input (``_case_N`` starts with it), so ``run`` never
changes its caller's tensors (what ``check`` requires of every generated module) and returns the
copy where the reference returns the input; ``emit`` says so in its notes.

A decision of the optimize loop is baked in where the module can hold it: new constexprs (the grid
recomputed by Inductor's own grid rule), launch options, and a rewritten kernel source. A decision
that needs tritune at run time (compiler passes, a persistent grid with an added argument, a guard
on aliasing) is left out, and ``emit`` says which (its ``notes``).
"""

from __future__ import annotations

import ast
import hashlib
import math
import textwrap
from pathlib import Path
from typing import Any

from tritune.generate.family import family_text, operator_text, specialized
from tritune.generate.spec import GenerateError
from tritune.model.launch import LaunchSpec

# Inductor-only names in a kernel module's imports: the autotuning decorator and its hints.
_DROP_MODULES = ("torch._inductor.runtime.hints",)
SPECIALIZE = 8  # kernel.py's: sizes per kernel compiled as constants beyond the cases' (``_dispatch``)
TUNING_OPTIONS = ("num_warps", "num_stages", "num_ctas", "maxnreg")  # the docstring's table shows these
_DROP_NAMES = {"triton_heuristics", "AutotuneHint", "ReductionHint", "TileHint", "DeviceProperties"}


def bakeable(variant: Any) -> str | None:
    """None when ``variant`` can be written into kernel.py, else why not."""
    if variant.passes:
        return f"compiler passes ({'+'.join(variant.passes)}) run inside tritune's compiler hook"
    if variant.grid is not None:
        return "a persistent grid adds an argument that tritune fills at run time"
    if variant.assumes:
        return f"it holds only under {'+'.join(variant.assumes)}, which tritune checks at each launch"
    return None


def emit(plans: list[dict], root: str | Path, decisions: dict[str, Any], *, name: str, origin: str,
         families: list[dict] = (), tuned: bool = True, pinned: dict | None = None,
         reference: str | None = None, facts: dict | None = None) -> tuple[str, list[str]]:
    """The text of kernel.py, and notes. ``root``: the capture directory the plans' specs name their
    sources in; ``decisions``: spec id -> decided ``Variant`` (bakeable ones are applied);
    ``origin``: one line for the docstring (where the kernels came from); ``families``: the
    symbolic-size compiles (``family.compile_family``), whose launchers ``run`` falls back to, in
    order, for inputs no case matches; ``tuned``: each family launch takes its case's configuration
    in that case's size bucket and is compiled for the cases' sizes where they recur (``tuning``),
    else Inductor's configuration for the family's example everywhere; ``pinned``: the spec's
    (argument position -> dims), which a family serves only at the sizes its cases give them;
    ``reference``: ``spec.reference_text``'s, for inputs no kernel serves (None: those raise);
    ``facts``, where given, gets ``"families"``: how many families kernel.py launches (some may be
    left out: the notes say why), and ``"tuned"``: whether any of their launches is tuned by size."""
    root = Path(root)
    functions: dict[str, str] = {}  # emitted name -> function text
    imports: list[str] = []
    notes: list[str] = []
    cases = []
    for number, plan in enumerate(plans):
        launches = []
        copies: set[int] = set()  # inputs a kernel writes into
        for step in plan["steps"]:
            spec = LaunchSpec.from_json(step["spec"])
            copies |= {arg["input"] for arg, launched in zip(step["args"], spec.args)
                       if "input" in arg and launched.written}
            variant = decisions.get(spec.id)
            why = bakeable(variant) if variant is not None else None
            if why is not None:
                notes.append(f"{spec.kernel} ({plan['label']}): decision {variant.describe()} not baked in: {why}")
                variant = None
            text = variant.source if variant is not None and variant.source is not None else \
                (root / spec.source).read_text()
            emitted, function, used, helpers = _emitted(text, spec.kernel)
            for line in used:
                if line not in imports:
                    imports.append(line)
            for helper, helper_text in {**helpers, emitted: function}.items():  # its helpers before it
                functions.setdefault(helper, helper_text)
            launches.append(_launch(emitted, spec, step, variant))
        if copies:
            note = (f"the reference writes into its input {', '.join(map(str, sorted(copies)))}: kernel.py writes "
                    "into a copy (it never changes its caller's tensors)")
            notes += [note] if note not in notes else []
        cases.append(_case(number, plan, launches, sorted(copies)))
    launchers, tables, dense = [], [], []  # dense: the family may run on contiguous copies of strided inputs
    keys: list[str] = []  # the family launches that time their configuration (``family_text``'s facts)
    configurations = 0  # the most configurations one of them chooses among
    branched = False  # a family launch tuned by size
    for family in families:
        label = f"_family_{len(launchers)}"
        try:
            made = tuning(family, plans, decisions) if tuned else []
            told: dict = {}
            launchers.append(_family(family, functions, imports, label, made, _pins(family, plans, pinned or {}),
                                     told))
            dense.append(not told.get("aliases", True))
            keys += told.get("timed", [])
            configurations = max(configurations, told.get("configurations", 0))
            branched = branched or told.get("tuned", False)
            tables.append(_bucket_table(family, made, label))
        except Exception as exc:  # noqa: BLE001 - a wrapper this translation does not know: the cases alone
            notes.append(f"no launcher for other sizes of {_key_text(_described_key(family))}: "
                         f"{exc if isinstance(exc, GenerateError) else f'{type(exc).__name__}: {exc}'}"[:300])
    body = [_docstring(name, origin, plans, bool(launchers), tables), "import torch", "import triton",
            "import triton.language as tl"]
    body += [line for line in imports if line not in body]
    body += [""] + [f"\n@triton.jit\n{text}\n" for text in functions.values()]
    timed = (configurations, keys) if keys else (0, [])
    body += [""] + cases + [launcher + "\n" for launcher in launchers] + [_dispatch(plans, name, len(launchers),
                                                                                  reference, dense, timed)]
    if launchers:
        try:
            body.append("\n\n" + operator_text(families[0], name))
        except GenerateError as exc:
            notes.append(str(exc))
    if facts is not None:
        facts.update(families=len(launchers), tuned=branched)
    return "\n".join(body).rstrip() + "\n", notes


def _described_key(family: dict) -> list:
    """A family's inputs as ``_key_text`` writes a case's (dtypes, ranks as ``?`` sizes)."""
    return [[["?"] * item["tensor"], [], item["dtype"]] if "tensor" in item else item.get("value")
            for item in family.get("inputs", [])]


def _pins(family: dict, plans: list[dict], pinned: dict) -> tuple[list[tuple[int, int]], list[tuple]]:
    """The family's pinned sizes: (input, dim) pairs, and the values they take together in the
    spec's own cases of the family's dtypes."""
    inputs = family["inputs"]
    pairs = sorted((position, d % inputs[position]["tensor"]) for position, dims in pinned.items()
                   if position < len(inputs) and inputs[position].get("tensor") for d in dims)
    if not pairs:
        return [], []
    values = set()
    for plan in plans:
        key = plan["key"]
        if plan.get("derived") or len(key) != len(inputs) or any(
                "tensor" in item and not (isinstance(given, list) and given[2] == item["dtype"])
                for item, given in zip(inputs, key)):
            continue
        values.add(tuple(key[position][0][d] for position, d in pairs))
    return pairs, sorted(values)


def _family(family: dict, functions: dict[str, str], imports: list[str], label: str, tuned: list[dict],
            pins: tuple = ([], []), facts: dict | None = None) -> str:
    """The family's launcher, named ``label``, with ``tuned`` (``tuning``) written in; its kernels
    (and their versions specialized on the cases' sizes) join ``functions``, their imports ``imports``."""
    names, found, used_all = {}, {}, []
    for index, step in enumerate(family["launches"]):
        if step.get("source") not in family.get("texts", {}):
            raise GenerateError(f"{step['kernel']}: its source was not recorded")
        emitted, function, used, helpers = _emitted(family["texts"][step["source"]], step["kernel"])
        used_all += used
        for helper, helper_text in {**helpers, emitted: function}.items():  # its helpers before it
            found.setdefault(helper, helper_text)
        names[step["kernel"]] = emitted
        if index < len(tuned) and tuned[index]["special"]:
            text = specialized(function, emitted, tuned[index]["special"]["params"])
            sized, text, _, _ = _emitted(text, emitted)  # its helpers: the general kernel's, named as there
            found.setdefault(sized, text)
            tuned[index]["special"]["kernel"] = sized
    launcher = family_text(family, names, label, tuned, pins, facts)  # may refuse: then nothing of the family is kept
    for emitted, text in found.items():
        functions.setdefault(emitted, text)
    imports += [line for line in dict.fromkeys(used_all) if line not in imports]
    return launcher


def _docstring(name: str, origin: str, plans: list[dict], family: bool = False, tables: list[str] = ()) -> str:
    shapes = "\n".join(f"    {plan['label']}: {_key_text(plan['key'])}" for plan in plans)
    other = ("\n\nFor other sizes of the same ranks, dtypes and layouts, run() launches the kernels Inductor\n"
             "compiled for symbolic sizes (_family); serves(*inputs) says whether run() takes the inputs.\n"
             "op (torch.ops.tritune_generated.<name>_<hash>) is run() as a torch operator, for torch.compile'd models."
             if family else "")
    tables = [table for table in tables if table]
    if tables:
        other += ("\n\nA family's launch takes a configuration by size bucket (each tensor input's sizes to the\n"
                  "power of two at or above, as tritune's decision keys bucket them), and its kernel compiled\n"
                  "with its size arguments as constants where the inputs repeat a case's, and for the first\n"
                  "SPECIALIZE other sizes it meets (Triton compiles it once for each: a model's hidden size\n"
                  "stays while its batch changes); TUNED = False turns both off.\n\n"
                  + "\n".join(tables))
    text = (f"{name}: fused Triton kernel(s), generated by `tritune generate`.\n\n{origin}\n\n"
            f"run(*inputs) returns what the spec's reference returns, for these inputs (shape, dtype):\n"
            f"{shapes}{other}\n")
    # the spec's name is the user's text: in a docstring it stays text (no quotes closed, no escapes)
    return '"""' + text.replace("\\", "\\\\").replace('"""', '\\"\\"\\"') + '"""' + "\n"


def tuning(family: dict, plans: list[dict], decisions: dict[str, Any]) -> list[dict]:
    """Per launch of ``family``, what kernel.py tunes it with: ``{"buckets": [(bucket, config,
    where it came from)], "special": {"params", "values"} or None, "timed": whether it times its
    configuration outside the cases' buckets (``family.timeable``)}``.

    - A bucket is a case's (``family._seen``): in it, the launch takes the configuration of the
      case's own kernel of the same name: the search's decision for it where one can be baked in
      (``bakeable``) and changes no source, else Inductor's autotuning for that case. A case whose
      kernels are not the family's, one by one, or whose configuration sets other constexprs, gives
      no bucket; of two cases in one bucket, the first (the spec's order) gives it.
    - ``special``: the launch's size arguments (``family.specializable``) and the values they took
      at the cases: kernel.py compiles the kernel with them as constants (``family.specialized``)
      when an input repeats all of them, as a static kernel has them (a hidden size's modulo by a
      constant, loads known to be contiguous), and for the first ``SPECIALIZE`` other values it meets;
      the general kernel for any value after those (kernel.py's ``_sized``)."""
    from tritune.generate.family import specializable, specializable_in, timeable

    launches = [LaunchSpec.from_json(step) for step in family["launches"]]
    by_label = {plan["label"]: plan for plan in plans if not plan.get("derived")}
    made = []
    for index, launch in enumerate(launches):
        buckets: list[tuple] = []
        for case in family.get("cases") or []:
            plan = by_label.get(case["label"])
            steps = [LaunchSpec.from_json(step["spec"]) for step in (plan or {}).get("steps", [])]
            if [s.kernel for s in steps] != [s.kernel for s in launches]:
                continue
            config = _case_config(steps[index], decisions.get(steps[index].id), launch, case["label"])
            where = tuple(tuple(sizes) for sizes in case["bucket"])
            if config is not None and all(where != seen for seen, _, _ in buckets):
                buckets.append((where, *config))
        text = family.get("texts", {}).get(launch.source) or ""
        params = specializable_in(text, launch.kernel, specializable(launch)) if text else []
        values = sorted({tuple(case["values"][index][p] for p in params) for case in family.get("cases") or []
                         if index < len(case["values"]) and all(p in case["values"][index] for p in params)})
        made.append({"buckets": buckets, "special": {"params": params, "values": values} if params and values else None,
                     "timed": bool(text) and timeable(launch, _function(text, launch.kernel)[0])})
    return made


def _case_config(static: LaunchSpec, variant: Any, launch: LaunchSpec, label: str) -> tuple[dict, str] | None:
    """A case's configuration for the family's ``launch`` (``tuning``), and where it came from; None
    where it sets other constexprs than the family's kernel takes (a persistent reduction's block
    stays the family's: its one pass must cover the row)."""
    constexprs, options = dict(static.constexprs), dict(static.options)
    where = f"Inductor's autotuning for {label}"
    if variant is not None and bakeable(variant) is None and variant.source is None and not variant.is_baseline:
        constexprs.update(variant.constexprs)
        options.update(variant.options)
        where = f"tritune's search on {label}: {variant.describe()}"
    elif variant is not None and variant.source is not None:
        where += " (the search's decision there rewrites that case's kernel source)"
    if launch.kernel.startswith("triton_per_"):
        constexprs.pop("R0_BLOCK", None)
    wanted = {k for k in launch.constexprs if not (launch.kernel.startswith("triton_per_") and k == "R0_BLOCK")}
    if set(constexprs) != wanted:
        return None
    return {**constexprs, **options}, where


def _bucket_table(family: dict, tuned: list[dict], label: str) -> str:
    """The docstring's lines for one family: its buckets, their configurations and where each came
    from, and the sizes its kernels are compiled for as constants."""
    if not any(t["buckets"] or t["special"] for t in tuned):
        return ""
    launches = [LaunchSpec.from_json(step) for step in family["launches"]]
    general = family.get("cases", [{}])[0].get("label", "its example") if family.get("cases") else "its example"
    lines = [f"{label} ({', '.join(_described_key_item(item) for item in family['inputs'])}):"]
    for launch, made in zip(launches, tuned):
        lines.append(f"    {launch.kernel}:")
        for where, config, came in made["buckets"]:
            lines.append(f"        bucket {', '.join(str(list(b)) for b in where)}: {_config_text(config)}  "
                         f"({' '.join(came.split())[:160]})")
        general_config = {**launch.constexprs, **launch.options}
        if launch.kernel.startswith("triton_per_") and "R0_BLOCK" in general_config:
            general_config["R0_BLOCK"] = "next_power_of_2(r0_numel)"
        lines.append(f"        any other size: {_config_text(general_config)}  "
                     f"(Inductor's autotuning for {general}, the symbolic-size compile's example)")
        if made["special"]:
            values = "; ".join(", ".join(f"{p}={v}" for p, v in zip(made["special"]["params"], vals))
                               for vals in made["special"]["values"])
            lines.append(f"        as constants where the inputs give: {values}; and for the first SPECIALIZE others")
    return "\n".join(lines)


def _described_key_item(item: dict) -> str:
    return f"{item['dtype']} rank {item['tensor']}" if "tensor" in item else f"{item['scalar']} {item.get('value')!r}"


def _config_text(config: dict) -> str:
    """A configuration's blocks and the launch options that tune (not Triton's debug switches)."""
    return " ".join(f"{k}={v}" for k, v in config.items() if k.isupper() or k in TUNING_OPTIONS)


def _key_text(key: list) -> str:
    parts = []
    for item in key:
        if isinstance(item, list) and len(item) == 3 and isinstance(item[0], list):
            parts.append(f"{item[2]}[{', '.join(map(str, item[0]))}]")
        else:
            parts.append(repr(item))
    return ", ".join(parts)


def _emitted(text: str, kernel: str) -> tuple[str, str, list[str], dict[str, str]]:
    """``kernel`` of the module source ``text`` as kernel.py emits it: its name there (the kernel's,
    and a hash of its text), its ``def`` under that name, the imports it may need, and the helpers
    it calls (``_function``): kernel.py holds them before it, each once under its own name."""
    function, used, helpers = _function(text, kernel)
    emitted = f"{kernel}_{hashlib.sha256(function.encode()).hexdigest()[:8]}"
    return emitted, _renamed(function, kernel, emitted), used, helpers


def _function(text: str, kernel: str) -> tuple[str, list[str], dict[str, str]]:
    """The kernel's ``def`` (without decorators), the imports of its module it may need, and the
    module-level ``@triton.jit`` helpers it names, those they name first (emitted name -> ``def``).

    Inductor names a helper per module (a scan's combine function, ``_triton_helper_fn_add0``,
    passed to ``tl.associative_scan``): two kernels' modules may each define one of that name with
    other bodies. So each helper is emitted as its name and a hash of its text (its own helpers'
    names in it already emitted ones), and the kernel's ``def`` names it so: one helper where the
    texts are the same, two names where they differ."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise GenerateError(f"{kernel}: its source does not parse: {exc.msg} (line {exc.lineno})") from None
    lines = text.splitlines()
    imports = []
    found = None
    defs = {}  # the module's functions by name
    for node in tree.body:
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            kept = _kept_import(node)
            if kept:
                imports.append(kept)
        elif isinstance(node, ast.FunctionDef):
            defs[node.name] = node
            if node.name == kernel:
                found = node
    if found is None:
        raise GenerateError(f"{kernel}: no function of that name in its source")
    helpers: dict[str, str] = {}
    return _helpers_named(found, defs, lines, helpers, {}, (kernel,)), imports, helpers


def _helpers_named(node: ast.FunctionDef, defs: dict[str, ast.FunctionDef], lines: list[str],
                   helpers: dict[str, str], names: dict[str, str], within: tuple[str, ...]) -> str:
    """``node``'s ``def`` with each module-level function it names (``defs``) named as kernel.py emits
    it (``names``: module name -> emitted), which joins ``helpers`` after the helpers it names in turn.
    ``within``: the functions whose text is being made (a helper naming one of them recurses)."""
    own = {arg.arg for arg in ast.walk(node.args) if isinstance(arg, ast.arg)}
    parts = [node.args, *node.body] + ([node.returns] if node.returns else [])  # its decorators are not copied
    used = [n for part in parts for n in ast.walk(part) if isinstance(n, ast.Name) and n.id in defs
            and n.id not in own]
    for name in dict.fromkeys(n.id for n in used):
        if name in names:
            continue
        if name in within:
            raise GenerateError(f"{within[0]}: {name} calls itself: kernel.py does not copy it")
        helper = defs[name]
        if not helper.decorator_list or not all(_is_jit(d) for d in helper.decorator_list):
            raise GenerateError(f"{within[0]} names {name}, which is no plain @triton.jit function of its "
                                "module: kernel.py does not copy it")
        function = _helpers_named(helper, defs, lines, helpers, names, within + (name,))
        names[name] = f"{name}_{hashlib.sha256(function.encode()).hexdigest()[:8]}"
        helpers.setdefault(names[name], _renamed(function, name, names[name]))
    spans = [(n.lineno, n.col_offset, n.end_col_offset, names[n.id]) for n in used]
    own_lines = [line.encode() for line in lines[node.lineno - 1:node.end_lineno]]
    for lineno, start, end, new in sorted(spans, reverse=True):  # ast's columns count UTF-8 bytes
        line = own_lines[lineno - node.lineno]
        own_lines[lineno - node.lineno] = line[:start] + new.encode() + line[end:]
    return "\n".join(line.decode() for line in own_lines)


def _is_jit(decorator: ast.expr) -> bool:
    """``@triton.jit`` (or ``@jit``), without arguments: the decorator kernel.py writes."""
    return (isinstance(decorator, ast.Attribute) and decorator.attr == "jit" and isinstance(decorator.value, ast.Name)
            and decorator.value.id == "triton") or (isinstance(decorator, ast.Name) and decorator.id == "jit")


def _kept_import(node: ast.Import | ast.ImportFrom) -> str | None:
    if isinstance(node, ast.ImportFrom) and node.module in _DROP_MODULES:
        return None
    names = [alias for alias in node.names if alias.name not in _DROP_NAMES]
    if not names:
        return None
    kept = ast.ImportFrom(module=node.module, names=names, level=node.level) if isinstance(node, ast.ImportFrom) \
        else ast.Import(names=names)
    text = ast.unparse(kept)
    return None if text in ("import triton", "import triton.language as tl", "import torch") else text


def _renamed(function: str, old: str, new: str) -> str:
    head, sep, rest = function.partition(f"def {old}(")
    if not sep:
        raise GenerateError(f"{old}: cannot find its def line")
    return f"{head}def {new}({rest}"


def _launch(emitted: str, spec: LaunchSpec, step: dict, variant: Any) -> dict:
    constexprs = dict(spec.constexprs)
    options = dict(spec.options)
    grid = tuple(spec.grid)
    if variant is not None:
        constexprs.update(variant.constexprs)
        options.update(variant.options)
        if variant.constexprs and spec.grid_rule is not None:
            from tritune.capture.inductor_grid import grid_for

            grid = tuple(grid_for(spec.grid_rule, constexprs, spec.args))
    return {"kernel": emitted, "args": step["args"], "constexprs": constexprs, "options": options, "grid": grid}


def _case(number: int, plan: dict, launches: list[dict], copies: list[int]) -> str:
    params = [f"in{i}" for i in range(len(plan["key"]))]
    tensor_params = [p for p, item in zip(params, plan["key"]) if isinstance(item, list)]
    lines = [f"def _case_{number}({', '.join(params)}):", f'    """{plan["label"]}: {_key_text(plan["key"])}"""']
    lines.append(f"    device = {tensor_params[0]}.device" if tensor_params else "    device = 'cuda'")
    for i in copies:  # the same strides, offset 0: the plan's views count their offsets from the input's own
        lines.append(f"    in{i} = torch.empty_strided(in{i}.size(), in{i}.stride(), dtype=in{i}.dtype, "
                     f"device=device).copy_(in{i})  # written in place")
    buffer_dtype: dict[int, str] = {}
    for launch in launches:
        for arg in launch["args"]:
            if "buffer" in arg:
                buffer_dtype.setdefault(arg["buffer"], arg["dtype"])
    for out in plan["outputs"]:
        if "buffer" in out:
            buffer_dtype.setdefault(out["buffer"], out["dtype"])
    for index, buffer in enumerate(plan["buffers"]):
        dtype = buffer_dtype.get(index, "uint8")
        size = _itemsize(dtype)
        if buffer["nbytes"] % size:
            dtype, size = "uint8", 1
        lines.append(f"    buf{index} = torch.empty({buffer['nbytes'] // size}, dtype=torch.{dtype}, device=device)")
    for launch in launches:
        args = [_tensor_expr(arg, buffer_dtype, plan) if ("input" in arg or "buffer" in arg) else _literal(arg["value"])
                for arg in launch["args"] if "constexpr" not in arg]
        keywords = [f"{k}={_literal(v)}" for k, v in {**launch["constexprs"], **launch["options"]}.items()]
        grid = ", ".join(map(str, launch["grid"]))
        call = f"    {launch['kernel']}[({grid})]({', '.join(args + keywords)})"
        lines.append(textwrap.fill(call, 116, subsequent_indent=" " * 8, break_long_words=False,
                                   break_on_hyphens=False))
    outs = [_tensor_expr(out, buffer_dtype, plan) for out in plan["outputs"]]
    if plan["single"]:
        lines.append(f"    return {outs[0]}")
    elif plan.get("sequence") == "list":
        lines.append(f"    return [{', '.join(outs)}]")
    else:
        lines.append(f"    return ({', '.join(outs)}{',' if len(outs) == 1 else ''})")
    return "\n".join(lines) + "\n\n"


def _tensor_expr(arg: dict, buffer_dtype: dict[int, str], plan: dict) -> str:
    """The expression for a tensor argument: the input itself, or a view of an input or buffer."""
    if "input" in arg:
        base, dtype = f"in{arg['input']}", None
        if arg["view"] is None:
            return base
    else:
        base, dtype = f"buf{arg['buffer']}", buffer_dtype.get(arg["buffer"])
    shape, stride, offset = arg["view"]
    if "input" in arg:  # the offset counts from the caller's view (``inductor._relative``)
        start = f"{base}.storage_offset()" + (f" + {offset}" if offset else "")
        if arg["dtype"] != plan["key"][arg["input"]][2]:
            raise GenerateError(f"Inductor reads input {arg['input']} as {arg['dtype']}: kernel.py does not "
                                "reinterpret a caller's tensor")
        return f"{base}.as_strided({tuple(shape)!r}, {tuple(stride)!r}, {start})"
    if dtype is not None and arg["dtype"] != dtype:
        base = f"{base}.view(torch.{arg['dtype']})"
    elif "buffer" in arg and offset == 0 and list(stride) == _contiguous(shape) \
            and math.prod(shape) * _itemsize(arg["dtype"]) == plan["buffers"][arg["buffer"]]["nbytes"]:
        return f"{base}.view({tuple(shape)!r})"
    return f"{base}.as_strided({tuple(shape)!r}, {tuple(stride)!r}, {offset})"


def _contiguous(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return strides[::-1]


def _itemsize(dtype: str) -> int:
    import torch

    return torch.empty((), dtype=getattr(torch, dtype)).element_size()


def _dispatch(plans: list[dict], name: str, families: int = 0, reference: str | None = None,
              dense: list[bool] = (), timed: tuple = (0, [])) -> str:
    """``run``, ``serves`` and what they dispatch with. ``reference``: ``spec.reference_text``'s function,
    which ``run`` falls back to (with a one-time warning) for inputs no kernel serves; None: those
    raise a one-line ``ValueError``. ``dense``: per family, whether it may serve strided inputs
    as contiguous copies (none of its outputs is an input or a view of one); ``timed``: the most
    configurations a family launch chooses among by timing (``family.timed_configs``; 0: none does), and
    the keys of those launches."""
    entries = "".join(f"    {_key_literal(plan['key'])}: _case_{i},\n" for i, plan in enumerate(plans))
    head = f"_NAME = {name!r}\nFAMILY = {bool(families)!r}\n_CASES = {{\n{entries}}}\n" + _sized_text()
    count, keys = timed
    head += (_timed_text(count, keys) if count else "") + _family_text(families, dense)
    if reference is not None:
        head += reference + "\n\n"
    head += f"_REFERENCE = {'_reference' if reference is not None else None}\n_WARNED = []\n\n\n"
    return head + _ENTRY_TEXT


def _sized_text() -> str:
    """kernel.py's ``TUNED``, ``SPECIALIZE`` and ``_sized``: whether a launch takes its kernel specialized on
    sizes or the general one."""
    return ("# the families' bucket table and their kernels specialized on the cases' sizes (the docstring's);\n"
            "# False: Inductor's configuration for each family's example, and its general kernels, everywhere\n"
            "TUNED = True\n"
            "# sizes per kernel compiled as constants beyond the cases' (torch.compile recompiles up to 8 times);\n"
            "# then its general kernel. 0: the cases' sizes only\n"
            f"SPECIALIZE = {SPECIALIZE}\n"
            "_SIZED = {}\n"
            "_FORCE_SIZED = None  # verification: True, every launch takes its specialized kernel; False, its general one\n\n\n"
            "def _sized(special, general, sizes, cases):\n"
            '    """``special`` (the kernel with its size arguments as constants) for ``sizes`` of a case, or for\n'
            '    the first SPECIALIZE other sizes it is called with (Triton compiles it once for each); else ``general``."""\n'
            "    if _FORCE_SIZED is not None:\n"
            "        return special if _FORCE_SIZED else general\n"
            "    if not TUNED:\n"
            "        return general\n"
            "    if sizes in cases:\n"
            "        return special\n"
            "    seen = _SIZED.setdefault(special, set())\n"
            "    if sizes not in seen and len(seen) < SPECIALIZE:\n"
            "        seen.add(sizes)\n"
            "    return special if sizes in seen else general\n\n\n")


def _timed_text(count: int, keys: list) -> str:
    """kernel.py's ``AUTOTUNE``, ``_choice`` and ``_tune``: the configuration a timed launch takes, among at
    most ``count``; ``keys``: the launches that choose so."""
    return textwrap.dedent(f'''\
            # a pointwise or reduction launch outside the cases' buckets: the configuration timed fastest, once per
            # launch and bucket of its element (and row) counts, on the GPU (the first, Inductor's for the family's
            # example, elsewhere: on the CPU, inside a CUDA graph capture, or with AUTOTUNE = False)
            AUTOTUNE = True
            CONFIGURATIONS = {count}  # the most configurations one launch chooses among (verification tries each)
            _TIMED = {tuple(keys)!r}  # the launches that choose so
            _CHOSEN = {{}}
            _FORCE = None  # verification: the configuration every timed launch takes
            _REACHED = set()  # verification: the timed launches a forced run went through


            def _bucket(sizes):
                return tuple(n if n <= 1 else 1 << (n - 1).bit_length() for n in sizes)  # 0 and 1 stay


            def _choice(key, sizes, count):
                """The configuration chosen for ``key`` in the bucket of ``sizes``: an index, None if not chosen yet."""
                if _FORCE is not None:
                    _REACHED.add(key)
                    return min(_FORCE, count - 1)
                if not (TUNED and AUTOTUNE):
                    return 0
                return _CHOSEN.get((key, _bucket(sizes)))


            def _tune(key, sizes, launches, gpu):
                """Each of ``launches`` (one per configuration) timed on the GPU, the fastest's index kept for
                ``key`` in the bucket of ``sizes``; 0 where it cannot be timed. Each launch computes the same values,
                or for a reduction the same within the tolerance (verification forced each, with the general
                and the specialized kernels, on a size of each dtype pattern)."""
                best = 0
                if gpu and torch.cuda.is_available() and torch.cuda.is_current_stream_capturing():
                    return best  # nothing can be timed inside a capture: chosen at the first call outside one
                if gpu and torch.cuda.is_available():
                    import triton.testing
                    from triton.compiler.errors import CompilationError
                    from triton.runtime.errors import OutOfResources, PTXASError

                    times = []
                    for launch in launches:
                        try:
                            times.append(triton.testing.do_bench(launch, warmup=2, rep=10, return_mode="median"))
                        except (CompilationError, OutOfResources, PTXASError):  # one this GPU cannot run: never chosen
                            times.append(float("inf"))
                    if min(times) == float("inf"):
                        return best  # none ran: nothing kept, Inductor's configuration this time
                    best = min(range(len(times)), key=times.__getitem__)
                _CHOSEN[(key, _bucket(sizes))] = best
                return best


            ''')


def _family_text(families: int, dense: list[bool]) -> str:
    """kernel.py's ``_family``: the first of the ``families`` launchers that serves the inputs."""
    copied = "".join(f"_family_{i}, " for i in range(families) if i < len(dense) and dense[i])
    return ("def _family(*inputs, _probe=False, _fake=False):\n"
            '    """The first family that serves ``inputs``, else the first that serves them made contiguous\n'
            '    (a copy of each strided tensor: the values are the same; ``_probe`` allocates without copying)\n'
            '    and has no output that is an input or a view of one: its result (``_probe``: True), else None."""\n'
            f"    for family in ({''.join(f'_family_{i}, ' for i in range(families))}):\n"
            "        found = family(*inputs, _probe=_probe, _fake=_fake)\n"
            "        if found is not None:\n"
            "            return found\n"
            "    if not any(isinstance(v, torch.Tensor) and not v.is_contiguous() for v in inputs):\n"
            "        return None\n"
            "    dense = tuple(v if not isinstance(v, torch.Tensor) else torch.empty(v.shape, dtype=v.dtype, device=v.device)\n"
            "                  if _probe else v.contiguous() for v in inputs)\n"
            f"    for family in ({copied}):\n"
            "        found = family(*dense, _probe=_probe, _fake=_fake)\n"
            "        if found is not None:\n"
            "            return found\n"
            "    return None\n\n\n")


# kernel.py's entry points: ``serves`` and ``run``, and what they share
_ENTRY_TEXT = textwrap.dedent('''\
        def _key(inputs):
            return tuple((tuple(v.shape), tuple(v.stride()), str(v.dtype).removeprefix("torch."))
                         if isinstance(v, torch.Tensor) else "nan" if v != v else v for v in inputs)


        def serves(*inputs):
            """Whether run()'s kernels serve ``inputs``: one of the cases in the module's docstring, or its
            family. Other inputs raise, or go to the spec's reference where the spec says so (_REFERENCE)."""
            return _key(inputs) in _CASES or _family(*inputs, _probe=True) is True


        def _unserved(inputs, fake=False):
            if _REFERENCE is None:
                raise ValueError(f"{_NAME}: no kernel for inputs {_key(inputs)}: generated for "
                                 f"{len(_CASES)} input cases" + (" and their family" if FAMILY else "")
                                 + " (see the module's docstring)")
            if not fake and not _WARNED:
                import warnings

                _WARNED.append(True)
                warnings.warn(f"{_NAME}: no kernel for inputs {_key(inputs)}: running the spec's reference "
                              "(this warning is shown once)", stacklevel=3)
            return _REFERENCE(*(v.clone() if isinstance(v, torch.Tensor) else v for v in inputs))  # never the caller's


        def run(*inputs):
            """What the reference returns for ``inputs`` (the module's docstring says which)."""
            case = _CASES.get(_key(inputs))
            if case is not None:
                return case(*inputs)
            found = _family(*inputs)
            return _unserved(inputs) if found is None else found
        ''')


def _key_literal(key: list) -> str:
    items = []
    for item in key:
        if isinstance(item, list) and len(item) == 3 and isinstance(item[0], list):
            items.append(f"({tuple(item[0])!r}, {tuple(item[1])!r}, {item[2]!r})")
        elif isinstance(item, float) and math.isnan(item):
            items.append(repr("nan"))  # NaN != NaN: run's _key spells it so
        else:
            items.append(_literal(item))
    return f"({', '.join(items)}{',' if len(items) == 1 else ''})"


def _literal(value: Any) -> str:
    """``value`` as Python source: ``repr``, but for the floats whose repr is no Python (inf, nan)."""
    if isinstance(value, float) and not math.isfinite(value):
        return f'float("{value}")'
    return repr(value)
