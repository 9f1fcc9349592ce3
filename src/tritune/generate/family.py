"""Model-free generation for any size: one launcher for the spec's whole family of shapes.

The per-case launchers (``inductor``, ``emit``) run Inductor's kernels compiled for static shapes:
they serve the exact shapes they were generated for. Here the reference is compiled once more per
pattern of input dtypes, on its largest case (``patterns``), for symbolic sizes
(``torch.compile(dynamic=True)``, no two dims tied by an equal example size, floats baked in), so
its kernels take their sizes as arguments and mask their tails. Sizes 0 and 1 stay Dynamo's
special cases: the code is made for sizes of 2 and more, and Dynamo's ranges say so (a size-
oblivious 1 would be wrong for ``squeeze``).
Inductor's wrapper module (``torch._inductor.utils.run_and_get_code``) says, in its ``call``
function, how those arguments follow from the inputs: symbols bound to the graph's arguments, each
tensor's asserted sizes and strides, the buffers it allocates, each kernel's scalar arguments as
expressions of the symbols, what it returns. Dynamo's graph says which input each graph argument
is (``grapharg.source``: ``L['x']``, ``L['x'].size()[0]``, an int argument ``L['n']``).

``family_text`` translates that ``call`` into ``_family_N(in0, in1, ...)``, a plain Python function
of kernel.py: the same statements, after checks of what the code was made for (each input's rank,
dtype and device, all tensors on one device, a scalar's exact type and a float's value; Dynamo's
shape guards and ranges over the sizes, each symbol spelt from the input it came from), with

- each graph argument spelt from ``run``'s inputs (``in0.size(2)``);
- ``assert_size_stride`` as a check that returns ``None`` (the family does not serve these inputs:
  another layout, another rank) instead of raising;
- allocations as ``torch.empty_strided`` on the first tensor input's device (its GPU made current);
- each kernel launch ``name.run(...)`` as ``name[grid](..., XBLOCK=..., num_warps=...)``: the
  configuration Inductor chose for the example case (recorded by ``capture.inductor`` as the
  compiled graph ran), its grid written out from Inductor's own grid expression
  (``GridExpr.from_meta``) over the launch's scalar arguments; a persistent reduction
  (``triton_per_``) takes ``R0_BLOCK = next_power_of_2(r0_numel)``, as its single pass must cover
  the row whatever its length;
- with ``tuned`` (``emit.tuning``), the launch by size bucket: in a case's bucket, that case's
  configuration (comparisons of the inputs' sizes with the bucket's bounds), and the kernel
  ``specialized`` on its size arguments where kernel.py's ``_sized`` says so (a case's sizes, and
  the first ``SPECIALIZE`` others); outside the cases' buckets, a launch of a 1-D pointwise kernel
  or of a one-axis reduction (``timeable``) takes the configuration kernel.py's ``_tune`` timed
  fastest among Inductor's and those of ``timed_configs``, once per bucket of its element and row
  counts (``_choice``); all of it only while kernel.py's ``TUNED`` is true;
- with the spec's pinned dims (``pins``), a check that they take one of the cases' values.

``_probe`` returns True where every check passes, before any work (``serves``); ``_fake`` allocates
and returns the outputs without launching (the fake implementation of ``operator_text``'s op).
Only those statement forms, arithmetic over names and numbers, and ``reinterpret_tensor`` are
translated, names assigned are Inductor's own (never one the translation reads for itself) and none
is read before it is bound; anything else (a library call, an op Inductor left to ATen, a mutated input, a dynamic
output size, a graph argument that is not an input or one of its sizes) is a one-line
``GenerateError``, and kernel.py keeps its per-case launchers alone.

Nothing here runs the translated text: ``emit`` writes it into kernel.py, which ``check`` verifies
on the spec's cases, the derived ones and a seeded family of other sizes (``derive.family_cases``).
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import re
from typing import Any, Sequence

from tritune.generate.spec import GenerateError, container

ALLOCATORS = ("empty_strided_cuda", "empty_strided_cpu", "empty_strided_xpu", "empty_strided")
DROPPED_CALLS = ("get_raw_stream", "assert_alignment", "set_device")
SAFE_FUNCTIONS = {"max", "min", "abs", "int"}  # arithmetic Inductor's printer may write over sizes
SCALAR_TYPES = {bool: "bool", int: "int", float: "float"}
# names the translation binds itself, or reads: never an assignment's target in the wrapper
RESERVED = {"torch", "triton", "tl", "device", "run", "reinterpret_tensor", "_probe", "_fake", "_kernel", "_sized",
            "_i", "_choice", "_tune", "TUNED", *SAFE_FUNCTIONS}
SOURCE = re.compile(r"^L\['(?P<name>\w+)'\](?:\.(?P<what>size|stride)\(\)\[(?P<dim>\d+)\]|"
                    r"\.(?P<offset>storage_offset)\(\))?$")


def patterns(cases: list) -> list:
    """The largest case (most elements in all) of each pattern of input dtypes: a family is compiled
    for one (``_family`` checks each tensor's dtype), and its kernels keep the configuration
    Inductor chose for that case, which suits the large sizes, where it matters (a small one is
    bound by its launch; measured 2026-11-29, ``benchmarks/results/generate-family/``)."""
    largest: dict[tuple, Any] = {}
    for case in cases:
        key = dtypes(case)
        if key not in largest or _elements(case) > _elements(largest[key]):
            largest[key] = case
    return list(largest.values())


def dtypes(case: Any) -> tuple:
    """A case's pattern of input dtypes (a scalar's by its type): one family serves one."""
    import torch

    return tuple(str(t.dtype) if isinstance(t, torch.Tensor) else type(t).__name__ for t in case.tensors)


def _elements(case: Any) -> int:
    return sum(t.numel() for t in case.tensors if hasattr(t, "numel"))


def compile_family(reference: Any, inputs: tuple, *, label: str = "", others: Sequence[tuple[str, tuple]] = (),
                   interpret: bool = False) -> dict:
    """Compile ``reference`` for symbolic sizes on ``inputs`` (the case ``label``) and run it once,
    recording what a family needs: ``{"code": Inductor's wrapper module, "sources": each graph
    argument's Dynamo source, "params": the reference's parameter names, "launches": [LaunchSpec
    JSON, in order], "texts": the kernels' module sources, "guards": Dynamo's shape guards and
    ranges as Python, "symbols": each size symbol's source, "inputs": what each input was
    (``_described``), "returns": ``container``, "cases": ``_seen``'s record of ``inputs`` and of
    each of ``others`` (``(label, inputs)``: the spec's other cases of the same dtypes) that the
    compiled code serves without a recompile}``. A one-line ``GenerateError`` when it cannot."""
    import tempfile
    from pathlib import Path

    import torch
    import torch.fx.experimental._config as fx_config
    from torch._inductor.compile_fx import compile_fx
    from torch._inductor.utils import run_and_get_code

    from tritune.capture import inductor
    from tritune.capture.recorder import Recorder
    from tritune.generate.interpreter import on_interpreter

    graphs: list[list[str]] = []
    envs: list[Any] = []

    def backend(gm: Any, example_inputs: list) -> Any:
        graphs.append([_source_name(node) for node in gm.graph.nodes if node.op == "placeholder"])
        envs.extend(v.fake_mode.shape_env for v in (n.meta.get("example_value") for n in gm.graph.nodes)
                    if getattr(getattr(v, "fake_mode", None), "shape_env", None) is not None)
        return compile_fx(gm, example_inputs)

    launches: list[Any] = []
    sink = [launches]  # where add() records: the compile's own run, then each other case's
    seen: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="tritune-family-") as folder:
        recorder = Recorder(Path(folder))

        def add(launch: Any, values: dict, fast_key: Any = None) -> None:
            sink[0].append(recorder.add(launch, values))

        # no two dims tied by an equal example size; sizes 0 and 1 stay Dynamo's special cases (the code is
        # made for sizes >= 2, and the family checks that: ``squeeze`` of a size-oblivious 1 keeps the dim)
        sizes = fx_config.patch(use_duck_shape=False)
        floats = torch._dynamo.config.patch(specialize_float=True)  # a float input is baked in, and checked
        with (on_interpreter() if interpret else contextlib.nullcontext()), sizes, floats, torch.no_grad():
            torch._dynamo.reset()
            compiled = torch.compile(reference, dynamic=True, backend=backend)
            try:
                with inductor.recording(add):
                    result, codes = run_and_get_code(compiled, *inputs)
            except Exception as exc:  # noqa: BLE001 - Dynamo/Inductor on the user's reference
                raise GenerateError(f"no symbolic-size compile: {type(exc).__name__}: "
                                    f"{' '.join(str(exc).split())[:200]}") from None
            else:
                seen += _seen(compiled, [(label, inputs)], launches, sink, add, first=True)
                seen += _seen(compiled, others, launches, sink, add)
            finally:
                recorder.close()
                torch._dynamo.reset()
            texts = {spec.source: (Path(folder) / spec.source).read_text() for spec in launches if spec.source}
    if len(graphs) != 1 or len(codes) != 1:
        raise GenerateError(f"the symbolic-size compile made {len(graphs)} graphs ({len(codes)} modules): "
                            "a family needs one")
    from torch.utils._sympy.printers import PythonPrinter

    printer = PythonPrinter()
    env = envs[0] if envs else None
    guards = [printer.doprint(g.expr) for g in (env.guards if env is not None else [])]
    for symbol, bounds in (getattr(env, "var_to_range", None) or {}).items():  # Dynamo's guards include them
        for bound, compare in ((bounds.lower, ">="), (bounds.upper, "<=")):
            try:
                value = int(bound)  # an infinite bound (sympy's or torch's int_oo) is no guard
            except (TypeError, ValueError, AttributeError, OverflowError):
                continue
            if abs(value) < 1 << 62:
                guards.append(f"{symbol} {compare} {value}")
    symbols = {}
    for symbol, found in (getattr(env, "var_to_sources", None) or {}).items():
        if found:
            name = found[0].name
            symbols[str(symbol)] = str(name() if callable(name) else name)
    return {"code": codes[0], "sources": graphs[0], "params": list(inspect.signature(reference).parameters),
            "launches": [spec.to_json() for spec in launches], "texts": texts, "guards": list(dict.fromkeys(guards)),
            "symbols": symbols,
            "inputs": [_described(value) for value in inputs],
            "returns": container(result), "cases": seen}


def _seen(compiled: Any, cases: Sequence[tuple[str, tuple]], launches: list, sink: list, add: Any, *,
          first: bool = False) -> list[dict]:
    """What the family's kernels were launched with at each case: ``{"label", "bucket": each tensor
    input's sizes as decision keys bucket them (``bucket``), "values": per launch, its int arguments
    (``specializable``) by name}``. ``first``: the case the compile ran on, whose launches are
    ``launches`` already; any other is run once more on the compiled code, and left out where that
    code does not serve it (a guard fails: Dynamo would compile again) or launches other kernels."""
    import torch

    from tritune.capture import inductor

    found = []
    for label, inputs in cases:
        if first:
            ran = launches
        else:
            ran = sink[0] = []
            try:
                with torch.compiler.set_stance("fail_on_recompile"), inductor.recording(add):
                    compiled(*inputs)
            except Exception:  # noqa: BLE001 - a case the family's code does not serve: no bucket of its own
                continue
            finally:
                sink[0] = launches
        if [spec.kernel for spec in ran] != [spec.kernel for spec in launches]:
            continue
        found.append({"label": label, "bucket": bucket(inputs),
                      "values": [{a.name: a.value for a in spec.args if a.name in specializable(spec)} for spec in ran]})
    return found


def bucket(inputs: Sequence) -> list[list[int]]:
    """Each tensor input's sizes, each to the power of two at or above it (0 and 1 stay): the
    buckets of tritune's decision keys (``store.keys.size_bucket``), whose bounds kernel.py's branches compare
    the inputs' sizes with (``_Translator._in_bucket``)."""
    from tritune.store.keys import size_bucket

    return [[size_bucket(int(d)) for d in t.shape] for t in inputs if hasattr(t, "shape") and hasattr(t, "stride")]


def specializable(spec: Any) -> list[str]:
    """A family launch's int arguments that kernel.py may compile as constants (``specialized``):
    every size argument but the grid's own (``xnumel``, ``ynumel``, ``znumel``), which grow with
    the batch. A hidden size, a row length, a stride: a model runs few of those."""
    return [a.name for a in spec.args if a.kind == "scalar" and type(a.value) is int
            and a.name not in ("xnumel", "ynumel", "znumel")]


def _described(value: Any) -> dict:
    """What the family was compiled for, of one input: a tensor's rank, dtype and device type; a
    scalar's type and value (one that is no graph argument was baked into the code)."""
    import torch

    if isinstance(value, torch.Tensor):
        return {"tensor": value.dim(), "dtype": str(value.dtype).removeprefix("torch."), "device": value.device.type}
    kind = SCALAR_TYPES.get(type(value))  # the exact type: a subclass's name would be written into kernel.py
    if kind is None:
        raise GenerateError(f"an input is a {type(value).__qualname__[:40]}, not exactly a bool, int or float: no family")
    return {"scalar": kind, "value": value}


def _source_name(node: Any) -> str:
    """Dynamo's name of where a graph argument comes from (``L['x'].size()[0]``), "" when unknown."""
    source = getattr(node.meta.get("grapharg"), "source", None)
    name = getattr(source, "name", "")
    return str(name() if callable(name) else name)


def family_text(family: dict, kernel_names: dict[str, str], function: str = "_family",
                tuned: Sequence[dict] = (), pins: tuple = ([], []), facts: dict | None = None) -> str:
    """``_family(in0, ...)``'s source (module docstring), under the name ``function``.
    ``kernel_names``: Inductor's kernel name -> the name kernel.py emits it under; ``tuned``: per
    launch, its bucket configurations and its specialized kernel (``emit.tuning``, ``"special"``
    holding the specialized kernel's emitted name as ``"kernel"``), used while kernel.py's
    ``TUNED`` is true; ``pins``: the spec's pinned (input, dim) pairs and the values they may take
    together (``emit._pins``), checked before anything else; ``facts``, where given, gets
    ``"aliases"``: whether an output is an input or a view of one (kernel.py then never runs the
    family on contiguous copies of strided inputs: the output would alias the copy), ``"timed"``:
    the keys of the launches that time their configuration (``_Translator._timed``),
    ``"configurations"``: the most one of them chooses among, and ``"tuned"``: whether any launch
    is tuned by size (a bucket's configuration, a specialized kernel, a timed configuration)."""
    from tritune.model.launch import LaunchSpec

    call = _call_of(family)
    translator = _Translator(family["sources"], family["params"], kernel_names,
                             [LaunchSpec.from_json(s) for s in family["launches"]], family.get("returns", "tuple"),
                             family["inputs"], list(tuned), function)
    body = translator.body(call.body)
    if facts is not None:
        facts["aliases"], facts["timed"] = translator.aliases, translator.timed
        facts["configurations"] = translator.configurations
        facts["tuned"] = translator.branched or bool(translator.timed)
    if translator.launched != len(translator.launches):
        raise GenerateError(f"the wrapper launches {translator.launched} kernels, the compile recorded "
                            f"{len(translator.launches)}: no family")
    params = ", ".join(f"in{i}" for i in range(len(family["params"])))
    lines = [f"def {function}({params}, _probe=False, _fake=False):",
             '    """Any size of the spec\'s family (Inductor\'s kernels for symbolic sizes); None where it does not',
             '    serve the inputs. ``_probe``: True once the inputs pass every check, before any work;',
             '    ``_fake``: the outputs allocated and returned, no kernel launched (fake tensors)."""']
    lines += ["    " + line for line in _input_checks(family)]
    pairs, values = pins
    if pairs:
        sizes = ", ".join(f"in{position}.size({dim})" for position, dim in pairs)
        lines += [f"    if not _fake and ({sizes},) not in {{{', '.join(repr(tuple(v)) for v in values)}}}:",
                  "        return None  # sizes the spec pins, at none of its cases' values (fake sizes: any)"]
    lines += ["    " + line for line in translator.guards(family.get("guards") or [], family.get("symbols") or {})]
    lines += [f"    device = {translator.device}",
              "    if device.type == 'cuda' and device.index is not None and device.index != torch.cuda.current_device():",
              "        with torch.cuda.device(device):  # its kernels launch on the inputs' GPU",
              f"            return {function}({params}, _probe=_probe, _fake=_fake)"]
    lines += ["    " + line for line in body]
    return "\n".join(lines) + "\n"


def _call_of(family: dict) -> ast.FunctionDef:
    """The ``call`` function of the family's Inductor wrapper."""
    call = next((n for n in ast.walk(ast.parse(family["code"])) if isinstance(n, ast.FunctionDef) and n.name == "call"),
                None)
    if call is None:
        raise GenerateError("Inductor's wrapper has no call(): no family")
    return call


def operator_text(family: dict, name: str) -> str:
    """``op``: ``run`` as the torch operator ``tritune_generated::<name>_<hash of Inductor's wrapper>``
    (``torch.library.custom_op``),
    its fake implementation the family's allocations without launches, so that a ``torch.compile``d
    model calls it without a graph break. Typed from the inputs the family was compiled for."""
    returned = next((n.value for n in ast.walk(_call_of(family)) if isinstance(n, ast.Return)), None)
    count = len(returned.elts) if isinstance(returned, (ast.Tuple, ast.List)) else 0
    kind = family.get("returns", "tuple")
    if count < 1 or (kind == "Tensor" and count != 1):
        raise GenerateError("no operator: the wrapper's outputs do not match the reference's")
    result = {"Tensor": "torch.Tensor", "list": "list[torch.Tensor]"}.get(kind, f"tuple[{', '.join(['torch.Tensor'] * count)}]")
    params = [f"in{i}: {'torch.Tensor' if 'tensor' in item else item['scalar']}" for i, item in enumerate(family["inputs"])]
    names = ", ".join(f"in{i}" for i in range(len(family["inputs"])))
    op = re.sub(r"\W", "_", name)
    # the name says which kernels: another spec of the same name, imported in the same process, is another op
    op = f"{op if op[:1].isalpha() else f'k_{op}'}_{hashlib.sha256(family['code'].encode()).hexdigest()[:8]}"
    return f'''def _operator():
    """``run`` as the torch operator ``torch.ops.tritune_generated.{op}`` (a torch.compile'd model calls it
    without a graph break); its fake implementation allocates the family's outputs and launches nothing."""
    try:
        return getattr(torch.ops.tritune_generated, {op!r})  # registered by an earlier import of this module
    except (AttributeError, RuntimeError):
        pass

    @torch.library.custom_op("tritune_generated::{op}", mutates_args=())
    def {op}({", ".join(params)}) -> {result}:
        return run({names})

    @{op}.register_fake
    def _({names}):
        found = _family({names}, _fake=True)
        return _unserved(({names},), fake=True) if found is None else found

    return {op}


op = _operator()
'''


def _input_checks(family: dict) -> list[str]:
    """The inputs the family was compiled for: each tensor's rank, dtype and device type; a scalar
    that is a graph argument by its type, any other by its value (Dynamo baked it in)."""
    matched = [SOURCE.match(source or "") for source in family["sources"]]
    spelt = {m["name"] for m in matched if m and not m["what"] and not m["offset"]}  # the inputs themselves
    checks = []
    first = next(i for i, item in enumerate(family["inputs"]) if "tensor" in item)
    for i, (param, found) in enumerate(zip(family["params"], family["inputs"])):
        if "tensor" in found:
            checks.append(f"isinstance(in{i}, torch.Tensor) and in{i}.dim() == {found['tensor']} and "
                          f"in{i}.dtype == torch.{found['dtype']} and in{i}.device.type == {found['device']!r}"
                          + (f" and in{i}.device == in{first}.device" if i != first else ""))
        elif param in spelt:
            checks.append(f"type(in{i}) is {found['scalar']}")
        else:
            value = found["value"]
            if isinstance(value, float) and value != value:
                checks.append(f"type(in{i}) is float and in{i} != in{i}")
            else:
                checks.append(f"type(in{i}) is {found['scalar']} and in{i} == {value!r}")
    return [f"if not ({check}):", "    return None"] if (check := " and ".join(f"({c})" for c in checks)) else []


def specialized(function: str, name: str, params: Sequence[str]) -> str:
    """The kernel ``function`` (a ``def`` named ``name``) with its arguments ``params`` made
    ``tl.constexpr``: Triton compiles it for each value given, as Inductor's static kernels have
    their sizes written in. A call passes them where it passed them before. A constexpr is a plain
    int, no tensor: the body's ``p.to(dtype)`` (Inductor's ``(ks0).to(tl.float32)`` of a mean)
    becomes ``tl.cast(p, dtype)``, which takes either; any other attribute of one of ``params``
    (``specializable_in``) is a one-line ``GenerateError``."""
    tree = ast.parse(function)
    found = _def(tree, name)
    if found is None:
        raise GenerateError(f"{name}: no function of that name to specialize")
    wanted = set(params)
    unfit = sorted(wanted - set(_specializable(found, params)))
    if unfit:
        raise GenerateError(f"{name} reads an attribute of {unfit[0]!r}: not specialized")
    for arg in found.args.args:
        if arg.arg in wanted:
            arg.annotation = ast.parse("tl.constexpr", mode="eval").body
            wanted.discard(arg.arg)
    if wanted:
        raise GenerateError(f"{name} takes no argument {sorted(wanted)[0]!r}: not specialized")
    return ast.unparse(_Cast(set(params)).visit(tree))


def specializable_in(function: str, name: str, params: Sequence[str]) -> list[str]:
    """Of ``params``, those the kernel ``name`` (in the source ``function``) reads as values only (or
    converts with ``.to``): ``specialized`` can make them constexprs."""
    found = _def(ast.parse(function), name)
    return [] if found is None else _specializable(found, params)


def _def(tree: ast.Module, name: str) -> ast.FunctionDef | None:
    """The module-level ``def name`` of ``tree``."""
    return next((n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == name), None)


def _specializable(found: ast.FunctionDef, params: Sequence[str]) -> list[str]:
    """``specializable_in`` on the kernel's ``def``: an argument read only as a value or by ``.to``."""
    converted = {id(n.func.value) for n in ast.walk(found) if isinstance(n, ast.Call) and _is_attribute(n.func, "to")
                 and isinstance(n.func.value, ast.Name)}
    unfit = {n.value.id for n in ast.walk(found) if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name)
             and id(n.value) not in converted}
    return [p for p in params if p not in unfit]


class _Cast(ast.NodeTransformer):
    """``p.to(...)`` of a specialized argument ``p`` as ``tl.cast(p, ...)``."""

    def __init__(self, params: set[str]):
        self.params = params

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if _is_attribute(node.func, "to") and isinstance(node.func.value, ast.Name) and node.func.value.id in self.params:
            cast = ast.parse("tl.cast", mode="eval").body
            return ast.Call(func=cast, args=[node.func.value, *node.args], keywords=node.keywords)
        return node


class _Translator:
    def __init__(self, sources: list[str], params: list[str], names: dict[str, str], launches: list[Any],
                 returns: str, inputs: list[dict], tuned: list[dict] = (), function: str = "_family"):
        self.params, self.names, self.launches, self.returns, self.inputs = params, names, launches, returns, inputs
        self.tuned, self.function = list(tuned), function
        self.timed: list[str] = []  # the keys of the launches that time their configuration
        self.configurations = 0  # the most configurations one of them chooses among
        self.branched = False  # a launch takes a bucket's configuration or a specialized kernel somewhere
        self.bound: dict[str, str] = {}  # a graph argument's name -> its spelling from the inputs
        self.sources = sources
        self.launched = 0
        first = next((i for i, item in enumerate(inputs) if "tensor" in item), None)
        if first is None:
            raise GenerateError("no tensor input: no family")
        self.device = f"in{first}.device"
        self.assigned: set[str] = {f"in{i}" for i in range(len(inputs))} | {"device"}  # names the text binds
        self.probed = False  # the probe's return is written (before the first allocation or launch)
        self.derived: set[str] = set()  # names bound to an input or to something computed from one
        self.aliases = False  # an output is one of those

    def body(self, statements: list[ast.stmt]) -> list[str]:
        lines: list[str] = []
        for statement in statements:
            lines += self.statement(statement)
        return lines

    def guards(self, guards: list[str], symbols: dict[str, str]) -> list[str]:
        """Dynamo's guards on the sizes (``s77 > 3``, equal sizes, int32 bounds), each symbol bound
        from the input it came from: where they fail, the code was not made for these sizes."""
        if not guards:
            return []
        names = sorted({n.id for g in guards for n in ast.walk(ast.parse(g, mode="eval")) if isinstance(n, ast.Name)}
                       - SAFE_FUNCTIONS)
        unknown = [n for n in names if n not in symbols]
        if unknown:
            raise GenerateError(f"a guard reads {', '.join(unknown)}, which no input's size gives: no family")
        lines = [f"{name} = {self._spell(symbols[name])}" for name in names]
        for name in names:
            self._bind(name)
        for guard in guards:
            self.expression(ast.parse(guard, mode="eval").body)  # arithmetic and comparisons only
        return lines + [f"if not ({' and '.join(f'({g})' for g in guards)}):", "    return None  # Dynamo's guards"]

    def statement(self, node: ast.stmt) -> list[str]:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Tuple) and _is_name(node.value, "args"):
            return self._arguments(node)
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
            return self._call(node.value)
        if isinstance(node, ast.Delete):
            return []
        if isinstance(node, ast.With):  # a device guard: its body, on the inputs' device
            return self.body(node.body)
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            lines = self._assign(node.targets[0].id, node.value)
            self._bind(node.targets[0].id)
            if _tensor_root(node.value) in self.derived:
                self.derived.add(node.targets[0].id)
            return lines
        if isinstance(node, ast.Return):
            return self._probe() + [f"return {self._returned(node.value)}"]
        raise GenerateError(f"Inductor's wrapper does {_short(node)}: no family")

    def _arguments(self, node: ast.Assign) -> list[str]:
        names = [e.id for e in node.targets[0].elts if isinstance(e, ast.Name)]
        if len(names) != len(self.sources):
            raise GenerateError(f"the wrapper takes {len(names)} arguments, the graph {len(self.sources)}: no family")
        lines = []
        for name, source in zip(names, self.sources):
            spelt = self._spell(source)
            self.bound[name] = spelt
            self._bind(name)
            if re.fullmatch(r"in\d+", spelt):
                self.derived.add(name)
            lines.append(f"{name} = {spelt}")
        return lines

    def _bind(self, name: str) -> None:
        """``name`` as an assignment's target: never one the translation reads for itself."""
        if name in RESERVED or name.startswith("__") or re.fullmatch(r"in\d+|_family\w*", name):
            raise GenerateError(f"Inductor's wrapper assigns {name!r}: no family")
        self.assigned.add(name)

    def _spell(self, source: str) -> str:
        found = SOURCE.match(source or "")
        if found is None or found["name"] not in self.params:
            raise GenerateError(f"a graph argument comes from {source!r}, not from an input or its sizes: no family")
        base = f"in{self.params.index(found['name'])}"
        if found["what"]:
            return f"{base}.{found['what']}({found['dim']})"
        if found["offset"]:
            return f"{base}.storage_offset()"
        return base

    def _call(self, call: ast.Call) -> list[str]:
        func = call.func
        name = _called(func)
        if _is_attribute(func, "clear") or name in DROPPED_CALLS:
            return []
        if name == "assert_size_stride":
            if len(call.args) < 3 or call.keywords:
                raise GenerateError(f"Inductor's wrapper calls {_short(call)}: no family")
            tensor, sizes, strides = (self.expression(a) for a in call.args[:3])
            return [f"if tuple({tensor}.size()) != {sizes} or tuple({tensor}.stride()) != {strides}:",
                    "    return None  # another layout or size pattern: not this family"]
        if isinstance(func, ast.Attribute) and func.attr == "run" and isinstance(func.value, ast.Name):
            return self._launch(func.value.id, call)
        raise GenerateError(f"Inductor's wrapper calls {ast.unparse(func)}: work outside Triton, no family")

    def _assign(self, target: str, value: ast.expr) -> list[str]:
        if isinstance(value, ast.Call):
            name = _called(value.func)
            if name in DROPPED_CALLS:
                return []
            if name in ALLOCATORS:
                if len(value.args) != 3 or value.keywords:
                    raise GenerateError(f"Inductor's wrapper allocates {_short(value)}: no family")
                sizes, strides, dtype = (self.expression(a) for a in value.args)
                return self._probe() + [f"{target} = torch.empty_strided({sizes}, {strides}, dtype={dtype}, "
                                        "device=device)"]
        return [f"{target} = {self.expression(value)}"]

    def _launch(self, kernel: str, call: ast.Call) -> list[str]:
        if kernel not in self.names:
            raise GenerateError(f"the wrapper launches {kernel}, which the compile did not record: no family")
        if self.launched >= len(self.launches):
            raise GenerateError("the wrapper launches more kernels than the compile recorded: no family")
        spec = self.launches[self.launched]
        self.launched += 1
        if spec.kernel != kernel:
            raise GenerateError(f"the wrapper's launch {self.launched} is {kernel}, the compile's {spec.kernel}: no family")
        runtime = [a for a in spec.args if a.kind != "constexpr"]
        args = [self.expression(a) for a in call.args]
        if len(args) != len(runtime):
            raise GenerateError(f"{kernel}: the wrapper passes {len(args)} arguments, the kernel takes "
                                f"{len(runtime)}: no family")
        written = [arg for arg, given in zip(runtime, args) if arg.kind == "tensor" and arg.written
                   and re.fullmatch(r"in\d+", self.bound.get(given, ""))]
        if written:
            raise GenerateError(f"{kernel} writes into input {written[0].name}: no family (kernel.py never changes "
                                "its caller's tensors)")
        scalars = {arg.name: given for arg, given in zip(runtime, args)}
        tuned = self.tuned[self.launched - 1] if self.launched <= len(self.tuned) else {}
        lines = self._probe() + ["if not _fake:"]
        name = self.names[kernel]
        special = tuned.get("special")
        if special:  # the kernel with the cases' sizes as constants, where the inputs repeat them
            given = ", ".join(scalars[p] for p in special["params"])
            values = "{" + ", ".join(repr(tuple(v)) for v in special["values"]) + "}"
            lines.append(f"    _kernel = _sized({special['kernel']}, {name}, ({given},), {values})")
            name = "_kernel"
        general = [self._launch_text(name, spec, {**spec.constexprs, **spec.options}, scalars, args)]
        if tuned.get("timed") and all(n in scalars for n in timed_sizes(spec)):  # timed per bucket of its sizes
            general = self._timed(name, spec, scalars, args)
        own = {k: v for k, v in {**spec.constexprs, **spec.options}.items()
               if not (spec.kernel.startswith("triton_per_") and k == "R0_BLOCK")}
        buckets = [(where, config, came) for where, config, came in tuned.get("buckets", []) if config != own]
        for number, (where, config, came) in enumerate(buckets):
            lines += [f"    {'if' if number == 0 else 'elif'} TUNED and {self._in_bucket(where)}:  # {_comment(came)}",
                      "        " + self._launch_text(name, spec, config, scalars, args)]
        self.branched = self.branched or bool(buckets or special)
        if buckets:
            return lines + ["    else:"] + ["        " + line for line in general]
        return lines + ["    " + line for line in general]

    def _timed(self, name: str, spec: Any, scalars: dict[str, str], args: list[str]) -> list[str]:
        """The launch of a ``timeable`` kernel outside the cases' buckets: the configuration kernel.py
        timed fastest for this launch in the bucket of its sizes (``timed_sizes``: ``xnumel``, and a
        reduction's ``r0_numel``) (``_choice``; ``_tune`` times ``timed_configs`` the first time, on
        a GPU), Inductor's for the family's example first."""
        key = f"{self.function}:{self.launched - 1}"
        configs = timed_configs(spec)
        self.timed.append(key)
        self.configurations = max(self.configurations, len(configs))
        texts = [self._launch_text(name, spec, config, scalars, args) for config in configs]
        sizes = "(" + "".join(f"{scalars[n]}, " for n in timed_sizes(spec)) + ")"
        lines = [f"_i = _choice({key!r}, {sizes}, {len(texts)})",
                 "if _i is None:  # this bucket's first launch: each configuration timed once",
                 f"    _i = _tune({key!r}, {sizes}, (" + ", ".join(f"lambda: {t}" for t in texts) + ",), "
                 "device.type == 'cuda')"]
        for number, text in enumerate(texts):
            lines += [f"{'if' if number == 0 else 'elif'} _i == {number}:  # {_config_comment(configs[number])}",
                      f"    {text}"]
        return lines

    def _in_bucket(self, where: tuple) -> str:
        """Whether the inputs are in the bucket ``where`` (each tensor input's sizes, each to the power
        of two at or above it; 0 and 1 stay), as comparisons of their sizes: cheap on every call."""
        tensors = [i for i, item in enumerate(self.inputs) if "tensor" in item]
        if len(where) != len(tensors):
            raise GenerateError("a bucket of another number of tensors than the family's: no family")
        parts = [test for i, sizes in zip(tensors, where) for test in size_tests(f"in{i}", sizes)]
        return "(" + " and ".join(parts) + ")" if parts else "True"

    def _launch_text(self, name: str, spec: Any, config: dict, scalars: dict[str, str], args: list[str]) -> str:
        """One launch of ``name`` with ``config`` (its constexprs and options), the grid Inductor's for them."""
        constexprs = {k: v for k, v in config.items() if k in spec.constexprs}
        options = {k: v for k, v in config.items() if k not in spec.constexprs}
        if spec.kernel.startswith("triton_per_") and "R0_BLOCK" in spec.constexprs and "r0_numel" in scalars:
            constexprs["R0_BLOCK"] = f"triton.next_power_of_2({scalars['r0_numel']})"
        settings = [f"{k}={v if isinstance(v, str) and k == 'R0_BLOCK' else repr(v)}" for k, v in constexprs.items()]
        settings += [f"{k}={v!r}" for k, v in options.items()]
        grid = _grid(spec.grid_rule, constexprs, scalars)
        return f"{name}[{grid}]({', '.join(args + settings)})"

    def _returned(self, value: ast.expr | None) -> str:
        """The wrapper's outputs in the reference's container (one tensor, a tuple, a list)."""
        if not isinstance(value, (ast.Tuple, ast.List)):
            raise GenerateError("Inductor's wrapper returns no tuple of outputs: no family")
        items = [self.expression(e) for e in value.elts]
        self.aliases = any(_tensor_root(e) in self.derived for e in value.elts)
        if self.returns == "Tensor":
            if len(items) != 1:
                raise GenerateError(f"the wrapper returns {len(items)} values for the reference's one tensor: no family")
            return items[0]
        text = ", ".join(items)
        return f"[{text}]" if self.returns == "list" else f"({text}{',' if len(items) == 1 else ''})"

    def _probe(self) -> list[str]:
        if self.probed:
            return []
        self.probed = True
        return ["if _probe:", "    return True"]

    def expression(self, node: ast.expr) -> str:
        shape_reads = {id(sub.func) for sub in ast.walk(node) if _is_shape_read(sub)}
        dtype_roots = {id(sub.value) for sub in ast.walk(node) if _is_dtype(sub)}
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and not (sub.id in self.assigned or sub.id in SAFE_FUNCTIONS
                                                  or sub.id == "reinterpret_tensor" or id(sub) in dtype_roots):
                raise GenerateError(f"Inductor's wrapper reads {sub.id!r} before binding it: no family")
            if isinstance(sub, ast.Call):
                func = sub.func
                name = func.id if isinstance(func, ast.Name) else None
                if name == "reinterpret_tensor" or id(func) in shape_reads:
                    continue
                if name not in SAFE_FUNCTIONS and not _is_dtype(func):
                    raise GenerateError(f"Inductor's wrapper computes {ast.unparse(sub)[:80]}: no family")
            elif isinstance(sub, ast.Subscript) and not (isinstance(sub.value, ast.Name)
                                                         and isinstance(sub.slice, ast.Constant)):
                raise GenerateError(f"Inductor's wrapper computes {ast.unparse(sub)[:80]}: no family")
            elif isinstance(sub, (ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom, ast.NamedExpr, ast.JoinedStr,
                                  ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.Starred)):
                raise GenerateError(f"Inductor's wrapper computes {ast.unparse(sub)[:80]}: no family")
            elif isinstance(sub, ast.Attribute) and not _is_dtype(sub) and id(sub) not in shape_reads:
                raise GenerateError(f"Inductor's wrapper reads {ast.unparse(sub)[:80]}: no family")
        return ast.unparse(_Reinterpret().visit(node))


class _Reinterpret(ast.NodeTransformer):
    """``reinterpret_tensor(t, size, stride, offset)``: a view of ``t``'s storage ``offset`` elements
    past ``t``'s own offset."""

    def visit_Call(self, node: ast.Call) -> ast.AST:
        self.generic_visit(node)
        if isinstance(node.func, ast.Name) and node.func.id == "reinterpret_tensor" and len(node.args) == 4:
            base, size, stride, offset = node.args
            text = (f"{ast.unparse(base)}.as_strided({ast.unparse(size)}, {ast.unparse(stride)}, "
                    f"{ast.unparse(base)}.storage_offset() + {ast.unparse(offset)})")
            return ast.parse(text, mode="eval").body
        return node


def _grid(rule: dict | None, constexprs: dict, scalars: dict[str, str]) -> str:
    """The launch's grid as Python over its scalar arguments' expressions (Inductor's own
    ``GridExpr``, its block sizes filled in)."""
    from torch._inductor.runtime import triton_heuristics

    if not rule or rule.get("kind") != "inductor":
        raise GenerateError("a launch without Inductor's grid rule: no family")
    meta = dict(rule.get("inductor_meta") or {"grid_type": rule.get("grid_type")})
    blocks = {k: v for k, v in constexprs.items() if isinstance(v, int) and not isinstance(v, bool)}
    try:
        expr = triton_heuristics.GridExpr.from_meta(meta, blocks)
    except Exception as exc:  # noqa: BLE001 - a grid type this torch does not know
        raise GenerateError(f"grid {meta.get('grid_type')}: {type(exc).__name__}: no family") from None
    parts = [str(getattr(expr, axis)) for axis in ("x_grid", "y_grid", "z_grid")]
    names = sorted({n for part in parts for n in re.findall(r"[A-Za-z_]\w*", part)})
    missing = [n for n in names if n not in scalars and n not in constexprs]
    if missing:
        raise GenerateError(f"grid {meta.get('grid_type')} reads {', '.join(missing)}: no family")
    values = {**{k: str(v) for k, v in constexprs.items()}, **scalars}
    return "(" + ", ".join(re.sub(r"[A-Za-z_]\w*", lambda m: f"({values[m.group(0)]})", part)
                           for part in parts) + ")"


# configurations kernel.py times for a launch outside the cases' buckets, besides Inductor's for the
# family's example. A 1-D pointwise kernel (XBLOCK, num_warps): measured 2026-11-29
# (results/generate-family/s9-graph/), the example's one configuration was 2x off torch.compile at
# another size, two of these reached it
TIMED = ((256, 4), (512, 4), (512, 8), (1024, 4), (1024, 8), (2048, 8))
# a looped reduction (XBLOCK rows per program, R0_BLOCK of the row per step, num_warps): Inductor's
# family example takes one for every row length and count (XBLOCK=2, R0_BLOCK=1024, num_warps=16 for
# seed 004's norms), slow where rows are few or short
TIMED_LOOPED = ((1, 1024, 4), (1, 2048, 8), (2, 1024, 8), (2, 2048, 16), (4, 512, 8), (8, 256, 4), (16, 64, 4))
# (a family's reduction is looped: its row length is symbolic, so Inductor never bounds it for a persistent one)
_KINDS = {"triton_poi_": {"XBLOCK"}, "triton_red_": {"XBLOCK", "R0_BLOCK"}}


def timeable(spec: Any, text: str = "") -> bool:
    """A launch kernel.py may time configurations of: a 1-D pointwise kernel (``XBLOCK``; each
    element on its own, so every configuration computes the same values) or a looped reduction
    along one axis (``XBLOCK``, ``R0_BLOCK``; another block sums in another order: verification forces each
    configuration and compares within the tolerance, ``check._each_configuration``), that only
    writes what it does not read: timing launches it again and again, so a kernel that accumulates
    (an atomic, an ``in_out_ptr``) would add into its output each time. ``text``: its ``def``
    (its module's decorator says ``atomic_add_found`` either way; none read: not timed)."""
    wanted = next((blocks for prefix, blocks in _KINDS.items() if spec.kernel.startswith(prefix)), None)
    if wanted is None or set(spec.constexprs) != wanted:
        return False
    if any(a.name.startswith("in_out_ptr") for a in spec.args):
        return False
    return bool(text) and "atomic" not in text


def size_tests(name: str, sizes: Sequence[int]) -> list[str]:
    """Whether tensor ``name``'s dims are in a bucket's ``sizes`` (each the power of two at or above
    the size; 0 and 1 stay), one comparison per dim: what kernel.py's families and a model's baked
    module (``modules.bake``) test to pick a bucket's configuration."""
    return [f"{name}.size({d}) == {b}" if b <= 1 else f"{b // 2} < {name}.size({d}) <= {b}"
            for d, b in enumerate(sizes)]


def timed_sizes(spec: Any) -> tuple[str, ...]:
    """The scalar arguments whose buckets key a ``timeable`` launch's choice: its element count, and
    a reduction's row length."""
    return ("xnumel",) if spec.kernel.startswith("triton_poi_") else ("xnumel", "r0_numel")


def timed_configs(spec: Any) -> list[dict]:
    """A ``timeable`` launch's configurations: Inductor's for the family's example first, then
    those of ``TIMED`` or ``TIMED_LOOPED`` that differ from it (the other options, ``num_stages``
    among them, kept)."""
    base = {**spec.constexprs, **spec.options}
    if spec.kernel.startswith("triton_poi_"):
        others = [{"XBLOCK": x, "num_warps": w} for x, w in TIMED]
    else:
        others = [{"XBLOCK": x, "R0_BLOCK": r, "num_warps": w} for x, r, w in TIMED_LOOPED]
    configs = [base]
    for other in others:
        config = {**base, **other}
        if config not in configs:
            configs.append(config)
    return configs


def _config_comment(config: dict) -> str:
    return " ".join(f"{k}={config[k]}" for k in ("XBLOCK", "R0_BLOCK", "num_warps") if k in config)


def _tensor_root(node: ast.AST) -> str | None:
    """The name a tensor expression of the wrapper is that name, or a view of it (``reinterpret_tensor``); else None."""
    while isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "reinterpret_tensor" \
            and node.args:
        node = node.args[0]
    return node.id if isinstance(node, ast.Name) else None


def _comment(text: str) -> str:
    """``text`` as a one-line comment of at most 120 characters."""
    return " ".join(text.split())[:120]


def _called(func: ast.expr) -> str:
    """The name a call calls: ``f`` of ``f(...)`` and of ``obj.f(...)``; "" for anything else."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


def _is_shape_read(node: ast.AST) -> bool:
    """``t.size()``, ``t.stride()``, ``t.storage_offset()`` of a name (the wrapper reads sizes so)."""
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and not node.args \
        and node.func.attr in ("size", "stride", "storage_offset") and isinstance(node.func.value, ast.Name)


def _is_name(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Name) and node.id == name


def _is_attribute(node: ast.AST, attr: str) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == attr


def _is_dtype(node: ast.AST) -> bool:
    """``torch.float32`` and the like: the one attribute read the wrapper may make."""
    return isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "torch" \
        and isinstance(getattr(__import__("torch"), node.attr, None), __import__("torch").dtype)


def _short(node: ast.AST) -> str:
    return " ".join(ast.unparse(node).split())[:80]
