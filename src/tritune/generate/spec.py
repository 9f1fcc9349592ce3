"""The spec of ``tritune generate``: a Python file holding an unfused PyTorch computation and its inputs.

A spec file defines

    reference(*tensors)   the computation in plain PyTorch; returns a tensor or a tuple/list of them
    inputs(device)        a non-empty list of tuples, each the positional arguments of one call of
                          ``reference``: tensors on ``device`` and scalars (int, float, bool), at
                          least one tensor in each
    name                  optional: a string (default: the file's stem)
    tolerance             optional: ``{dtype name: (rtol, atol)}`` replacing the entries of the one
                          table (``tritune.verify.tolerances.TABLE``) for the dtypes it names
    pinned                optional: ``{argument name: [dim, ...]}``, dims kernel.py serves only at the
                          sizes the cases give them (a hidden size a kernel was written for):
                          ``pinned = {"x": [-1], "bias": [0]}``; the family's other sizes vary the rest
    unserved              optional: what kernel.py's ``run`` does with inputs its kernels do not serve
                          (another rank or dtype, a size of 0 or 1, a pinned size no case has):
                          ``"error"`` (the default: a one-line ``ValueError``) or ``"reference"``
                          (the reference, copied into kernel.py, with a one-time warning)

for example::

    name = "bias_gelu"

    def reference(x, bias):
        return torch.nn.functional.gelu(x + bias, approximate="tanh")

    def inputs(device):
        return [(torch.randn(8, 256, 1024, device=device, dtype=torch.float16),
                 torch.randn(1024, device=device, dtype=torch.float16))]

``load_spec`` imports the file (the user's own code: the user named it on the command line) and
checks all of the above; every problem is a ``SpecError`` whose message is one line naming the file
and the problem, which the CLI prints as it is. ``GenSpec.outputs`` runs the reference on a case
(on copies of its tensors: a reference that works in place does not change the case).
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any, Callable

from tritune.errors import InputError, one_line
from tritune.imports import import_file
from tritune.verify.tolerances import TABLE, Tolerance, tolerance_for

SCALARS = (bool, int, float)
_SHORT_DTYPES = (("bfloat", "bf"), ("float", "f"), ("uint", "u"), ("int", "i"), ("complex", "c"))


class GenerateError(RuntimeError):
    """A spec the model-free path cannot generate; ``str()`` is one line."""


class SpecError(InputError):
    """A spec the generator cannot use; ``str(exc)`` is one line naming the file and the problem."""


@dataclasses.dataclass(frozen=True, eq=False)  # eq=False: comparing tensors element-wise means nothing here
class Case:
    label: str  # "spec 0" / "odd" / "one row" / "larger" ...
    tensors: tuple  # the reference's positional arguments (tensors, maybe scalars)
    derived: bool = False


@dataclasses.dataclass(frozen=True)
class GenSpec:
    path: Path  # absolute
    name: str  # the spec's `name`, else the file's stem
    text: str  # the spec file's source (goes into LLM prompts)
    reference: Callable[..., Any]  # returns a tensor or a tuple/list of tensors
    make_inputs: Callable[[str], list]  # the spec's inputs(device)
    tolerance: dict | None  # optional override: {"float16": (rtol, atol), ...}
    pinned: dict = dataclasses.field(default_factory=dict)  # argument position -> dims (as the spec gives them)
    unserved: str = "error"  # or "reference"

    def pinned_dims(self, position: int, rank: int) -> set[int]:
        """The dims of argument ``position`` (a tensor of ``rank``) the spec pins, each made non-negative."""
        return {d % rank for d in self.pinned.get(position, ()) if rank}

    def error(self, problem: str) -> SpecError:
        return _error(self.path, problem)

    def cases(self, device: str) -> list[Case]:
        """The spec's own cases, ``inputs(device)`` checked (see the module doc)."""
        try:
            given = self.make_inputs(device)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code: any failure is the spec's
            raise self.error(f"inputs({device!r}) fails: {one_line(exc)}") from None
        if not isinstance(given, (list, tuple)) or not given:
            raise self.error(f"inputs({device!r}) returns {_kind(given)}, not a non-empty list of tuples")
        return [Case(f"spec {i}", self._arguments(i, item, device)) for i, item in enumerate(given)]

    def outputs(self, case: Case) -> tuple:
        """The reference's outputs on ``case`` (on copies of its tensors), as a tuple of tensors."""
        return self.outputs_and_sources(case)[0]

    def outputs_and_sources(self, case: Case) -> tuple[tuple, tuple]:
        """``outputs(case)``, and for each output the position of the argument whose memory it
        shares (the reference returned that input or a view of it), else None."""
        outputs, sources, _ = self.outputs_sources_kind(case)
        return outputs, sources

    def outputs_sources_kind(self, case: Case) -> tuple[tuple, tuple, str]:
        """``outputs_and_sources(case)``, and what the reference returned them in: ``"Tensor"``
        (one tensor), ``"list"``, or ``"tuple"`` (a named tuple, a structseq such as ``max``'s)."""
        import torch

        args = tuple(t.clone() if isinstance(t, torch.Tensor) else t for t in case.tensors)
        where = f"case {case.label!r} ({shapes_text(case.tensors)})"
        try:
            with torch.no_grad():
                result = self.reference(*args)
        except (Exception, SystemExit) as exc:  # noqa: BLE001 - the user's code: any failure is the spec's
            raise self.error(f"reference fails on {where}: {one_line(exc)}") from None
        outputs = tensors_of(result)
        if outputs is None:
            raise self.error(f"reference returns {_kind(result)} on {where}, not a tensor or a tuple of tensors")
        storages = {a.untyped_storage().data_ptr(): k for k, a in enumerate(args)
                    if isinstance(a, torch.Tensor) and a.untyped_storage().data_ptr()}
        return outputs, tuple(storages.get(t.untyped_storage().data_ptr()) for t in outputs), container(result)

    def tolerance_for(self, dtype: str) -> Tolerance:
        """The tolerance of an output of ``dtype`` (a torch dtype name): the spec's override, else the table's."""
        if self.tolerance and dtype in self.tolerance:
            rtol, atol = self.tolerance[dtype]
            return Tolerance(rtol, atol, f"the tolerance of {self.path.name} for {dtype}")
        return tolerance_for(dtype)

    def _arguments(self, index: int, item: Any, device: str) -> tuple:
        import torch

        where = f"inputs({device!r})[{index}]"
        if not isinstance(item, (tuple, list)):
            raise self.error(f"{where} is {_kind(item)}, not a tuple of the reference's arguments")
        wanted = torch.device(device).type
        for k, value in enumerate(item):
            if isinstance(value, torch.Tensor):
                if value.device.type != wanted:
                    raise self.error(f"{where}[{k}] is on {value.device}, not on {device!r}: "
                                     "make the tensors on the device inputs() is given")
            elif not isinstance(value, SCALARS):
                raise self.error(f"{where}[{k}] is {_kind(value)}: arguments are tensors and scalars "
                                 "(int, float, bool)")
        if not any(isinstance(value, torch.Tensor) for value in item):
            raise self.error(f"{where} holds no tensor")
        return tuple(item)


def load_spec(path: str | Path, *, device: str = "cpu", check: bool = True) -> GenSpec:
    """Import the spec file ``path`` and check it (see the module doc); ``check``: also run the
    reference on each of its own cases (on ``device``). One-line ``SpecError`` for any problem."""
    path = Path(path).expanduser().resolve()
    if not path.is_file():
        raise _error(path, "no such file")
    try:
        module = import_file(path)
    except Exception as exc:  # noqa: BLE001 - whatever the file raises, it does not import
        raise _error(path, f"does not import: {one_line(exc)}") from None
    functions = {}
    for name, signature in (("reference", "reference(*tensors)"), ("inputs", "inputs(device)")):
        functions[name] = getattr(module, name, None)
        if not callable(functions[name]):
            raise _error(path, f"defines no {signature} function")
    name = getattr(module, "name", None)
    if name is None:
        name = path.stem
    elif not isinstance(name, str) or not name.strip():
        raise _error(path, f"`name` must be a non-empty string, not {_kind(name)}")
    unserved = getattr(module, "unserved", "error")
    if unserved not in UNSERVED:
        raise _error(path, f"`unserved` must be one of {', '.join(map(repr, UNSERVED))}, not {unserved!r}")
    spec = GenSpec(path=path, name=name, text=path.read_text(errors="replace"), reference=functions["reference"],
                   make_inputs=functions["inputs"], tolerance=_tolerance(path, getattr(module, "tolerance", None)),
                   pinned=_pinned(path, getattr(module, "pinned", None), functions["reference"]), unserved=unserved)
    if unserved == "reference":
        try:
            reference_text(spec.text)
        except (ValueError, SyntaxError) as exc:
            raise _error(path, str(exc)) from None
    if check:
        for case in spec.cases(device):
            spec.outputs(case)
            for position, dims in spec.pinned.items():
                value = case.tensors[position] if position < len(case.tensors) else None
                rank = value.dim() if hasattr(value, "dim") else None
                if rank is None or any(not -rank <= d < rank for d in dims):
                    raise _error(path, f"`pinned` names dims {list(dims)} of argument {position}, which in case "
                                       f"{case.label!r} is {_kind(value) if rank is None else f'of rank {rank}'}")
    return spec


UNSERVED = ("error", "reference")


def reference_text(source: str, name: str = "reference") -> str:
    """The spec's ``reference`` as kernel.py holds it, for ``unserved = "reference"``:
    ``_reference``, made by a function holding the spec's imports and literal constants that the
    reference reads (``EPS = 1e-5``), so kernel.py needs nothing of the spec file. Raises
    ``ValueError`` (one line) where the copy could differ from what the spec's module runs: a
    ``reference`` that is decorated or bound more than once, a module-level name it reads that is
    bound more than once, by anything but an import or a literal, or that shadows a builtin
    (``from torch import sum``: copied, since the module's binding wins over the builtin)."""
    import ast
    import builtins
    import textwrap

    tree = ast.parse(source)
    bindings: dict[str, list[ast.stmt]] = {}
    for node in tree.body:
        for bound in _bound_names(node):
            bindings.setdefault(bound, []).append(node)
    found = bindings.get(name, [])
    if len(found) != 1 or not isinstance(found[0], ast.FunctionDef) or found[0].decorator_list:
        raise ValueError(f"unserved = 'reference' needs one undecorated def {name}(...) at the spec's top level, "
                         f"bound nowhere else")
    function = found[0]
    local = {a.arg for a in ast.walk(function.args) if isinstance(a, ast.arg)}
    local |= {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    read = {n.id for n in ast.walk(function) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)} - local
    kept, refused = [], []
    for wanted in sorted(read):
        nodes = bindings.get(wanted)
        if not nodes:
            if not hasattr(builtins, wanted):
                refused.append(wanted)  # nothing binds it: the reference would fail in the spec too
            continue
        node = nodes[0]
        literal = isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)
        if literal:
            try:
                ast.literal_eval(node.value)
            except ValueError:
                literal = False
        if len(nodes) != 1 or not (literal or isinstance(node, (ast.Import, ast.ImportFrom))):
            refused.append(wanted)
            continue
        if isinstance(node, ast.Assign):
            kept.append(ast.unparse(node))
        else:
            names = [a for a in node.names if (a.asname or a.name).split(".")[0] == wanted]
            kept.append(ast.unparse(type(node)(**{**node.__dict__, "names": names})))
    if refused:
        raise ValueError(f"unserved = 'reference': the reference reads {', '.join(refused)}, which the spec does not "
                         "bind once by an import or a literal constant: kernel.py cannot hold a copy of it")
    body = "\n".join(list(dict.fromkeys(kept)) + [ast.unparse(function), f"return {name}"])
    return ('def _reference_of():\n    """The spec\'s reference (its unserved = "reference"), for inputs no kernel serves."""\n'
            + textwrap.indent(body, "    ") + "\n\n\n_reference = _reference_of()\n")


def _bound_names(node: Any) -> list[str]:
    """The names a module-level statement binds (an import's first dotted part, a def's, a class's,
    every assignment target, a loop's or a with's variables)."""
    import ast

    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [(a.asname or a.name).split(".")[0] for a in node.names]
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [node.name]
    return [n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)] + \
        [n.name for n in ast.walk(node) if isinstance(n, (ast.FunctionDef, ast.ClassDef)) and n is not node]


def _pinned(path: Path, value: Any, reference: Callable) -> dict:
    """The spec's ``pinned`` (``{argument name: [dim, ...]}``) as argument position -> dims."""
    import inspect

    if value is None:
        return {}
    params = list(inspect.signature(reference).parameters)
    if not isinstance(value, dict):
        raise _error(path, f"`pinned` must be a dict {{argument name: [dim, ...]}}, not {_kind(value)}")
    pinned = {}
    for key, dims in value.items():
        if key not in params:
            raise _error(path, f"`pinned` names {key!r}, which is no argument of reference({', '.join(params)})")
        if isinstance(dims, int) and not isinstance(dims, bool):
            dims = [dims]
        if not isinstance(dims, (list, tuple)) or not dims or \
                not all(isinstance(d, int) and not isinstance(d, bool) for d in dims):
            raise _error(path, f"`pinned[{key!r}]` must be a dim or a list of dims (ints), not {dims!r}")
        pinned[params.index(key)] = tuple(dims)
    return pinned


def container(result: Any) -> str:
    """What a result comes in: ``"Tensor"``, ``"list"``, or ``"tuple"`` (a named tuple, a structseq
    such as ``max``'s, included)."""
    import torch

    return "Tensor" if isinstance(result, torch.Tensor) else "list" if isinstance(result, list) else "tuple"


def tensors_of(result: Any) -> tuple | None:
    """``result`` as a tuple of tensors: a tensor, or a non-empty tuple/list of them; else None."""
    import torch

    if isinstance(result, torch.Tensor):
        return (result,)
    if isinstance(result, (tuple, list)) and result and all(isinstance(t, torch.Tensor) for t in result):
        return tuple(result)
    return None


def shapes_text(tensors) -> str:
    """``"f16[8,256,1024], f16[1024]"`` for reports and prompts; a scalar as its value."""
    import torch

    parts = []
    for value in tensors:
        if isinstance(value, torch.Tensor):
            parts.append(f"{short_dtype(value.dtype)}[{','.join(map(str, value.shape))}]")
        else:
            parts.append(repr(value))
    return ", ".join(parts)


def short_dtype(dtype: Any) -> str:
    """``torch.float16`` -> ``"f16"``, ``bfloat16`` -> ``"bf16"``, ``int64`` -> ``"i64"``, ``bool`` as is."""
    name = str(dtype).removeprefix("torch.")
    for long, short in _SHORT_DTYPES:
        if name.startswith(long):
            return short + name[len(long):]
    return name


def _tolerance(path: Path, value: Any) -> dict | None:
    """The spec's ``tolerance``, checked: ``{dtype name: (rtol, atol)}`` with floats >= 0."""
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _error(path, f"`tolerance` must be a dict {{dtype name: (rtol, atol)}}, not {_kind(value)}")
    checked = {}
    for key, pair in value.items():
        dtype = str(key).removeprefix("torch.")  # "float16" or torch.float16
        if dtype not in TABLE:
            raise _error(path, f"`tolerance` names dtype {key!r}: expected one of {', '.join(TABLE)}")
        if not (isinstance(pair, (tuple, list)) and len(pair) == 2 and all(map(_non_negative, pair))):
            raise _error(path, f"`tolerance[{dtype!r}]` must be (rtol, atol), two finite numbers >= 0, "
                               f"not {pair!r}")
        checked[dtype] = (float(pair[0]), float(pair[1]))
    return checked


def _non_negative(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value >= 0


def _kind(value: Any) -> str:
    """How a value that is not what was wanted reads in a message: its type, and its length."""
    if isinstance(value, (list, tuple, dict)):
        name = type(value).__name__
        return f"a {name} of {len(value)}" if value else f"an empty {name}"
    if value is None:
        return "None"
    name = type(value).__name__
    return f"{'an' if name[0].lower() in 'aeiou' else 'a'} {name}"


def _error(path: Path, problem: str) -> SpecError:
    return SpecError(" ".join(f"{path}: {problem}".split()))  # one line, whatever a repr held
