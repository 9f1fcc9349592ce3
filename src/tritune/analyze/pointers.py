"""Which parameters of a kernel are pointers, and to what, read from how the kernel uses them.

``analyze`` compiles kernels nobody launched, so it must guess each parameter's type. Names like
``x_ptr`` say "pointer", but the common style is ``def k(X, Y, OUT, N, BLOCK)``. This module reads
the kernel's source (``fn.src``) with ``ast`` and answers from use: a few walks over the function,
nothing evaluated, no type inference beyond the rules below.

A parameter is a pointer when it is the base of a *pointer operand*:

- the first argument (or ``pointer=``) of ``tl.load``, ``tl.store``, ``tl.atomic_*``; the first
  argument (or ``base=``) of ``tl.make_block_ptr``/``tl.make_tensor_descriptor``;
- an argument of a ``@triton.jit`` helper whose own parameter is a pointer (followed one level).

The *base* of an operand is found by flattening it into the terms of a sum: through ``+``, the
left side of ``-``, locals (every assignment, ``+=`` and tuple assignments, to a fixpoint over
loops), subscripts (``offs[:, None]``) and calls that pass a pointer through (``tl.advance``,
``tl.multiple_of``, ``tl.max_contiguous``, ``tl.broadcast_to``, ...). Products, calls and the
right side of ``-`` end the walk: a pointer cannot be multiplied, and ``offs - X`` is no pointer.
A sum holds exactly one pointer, so among the parameters found (its *candidates*):

1. a parameter used as an integer (an operand of ``*``, ``/``, ``%``, a shift or a bitwise
   operator, of a comparison such as ``offs < N``, of ``range``/``tl.arange``/``tl.cdiv``) or
   declared one (``--signature``, ``--constexpr``, an annotation) is no candidate;
2. a parameter that is the only candidate of some operand is a pointer, and a sum holding a
   pointer so found is settled (repeated to a fixpoint);
3. a sum still open takes its leftmost candidate (``X + offs``: Triton code writes the pointer
   first).

The element type, from what the kernel names for the pointer itself, else ``fp32``:

- ``tl.load(P, other=0.0)`` with a float literal -> ``fp32``. An integer literal (``other=0``)
  is no signal: Triton casts ``other`` to the pointer's element type, and ``other=0`` is as
  common on float tensors as on integer ones;
- the literal values of ``tl.atomic_*`` (``tl.atomic_cas(LOCK, 0, 1)`` -> ``i32``; ``1.0`` ->
  ``fp32``): an atomic's literal is almost always a counter or a lock of its own type;
- a value loaded through P used in pointer arithmetic (``X + tl.load(IDX + i)``, a gather) ->
  ``i32``: Triton adds only integers to pointers; ``tl.atomic_and/or/xor`` on P -> ``i32``;
- ``tl.store(P, v.to(tl.float16))`` (directly or through one local) -> ``fp16``;
- several different signals for one pointer -> ``fp32``. An integer's width is never known: ``i32``.

Deliberately *not* signals: ``tl.load(P).to(tl.float16)`` converts what was loaded, whatever it
was; ``.to(P.dtype.element_ty)`` names no type. Limits: ``tl.where``/``if`` expressions choosing
between pointers are not followed; helpers are followed one level; an integer tensor that
nothing above names (loaded with ``other=0``, used in ``&`` or ``%``) is taken as ``fp32`` (pass
``--signature X=*i32``). An explicit ``--signature`` always wins (``launch`` asks this module only
for what nobody declared).
"""

from __future__ import annotations

import ast
import builtins
import functools
import inspect
from typing import Any, Iterable, Iterator, Mapping

import triton.language as tl
from triton.runtime.jit import JITFunction, type_canonicalisation_dict

DEFAULT_ELEMENT = "fp32"
INTEGER_ELEMENT = "i32"

_ATOMICS = [getattr(tl, name) for name in dir(tl) if name.startswith("atomic_")]
_INTEGER_ATOMICS = (tl.atomic_and, tl.atomic_or, tl.atomic_xor)  # Triton refuses floats for these
# What a call does with the pointer in its first argument, by function (looked up by identity):
# "memory" reads or writes through it, "base" builds a block pointer or descriptor on it,
# "through" returns it as a pointer again.
_ROLES = {
    **{id(fn): (fn, "memory") for fn in (tl.load, tl.store, *_ATOMICS)},
    **{id(fn): (fn, "base") for fn in (tl.make_block_ptr, tl.make_tensor_descriptor)},
    **{id(fn): (fn, "through") for fn in (tl.advance, tl.multiple_of, tl.max_contiguous, tl.max_constancy,
                                          tl.broadcast_to, tl.reshape, tl.view, tl.expand_dims)},
}
_INTEGER_ARGS = (builtins.range, tl.arange, tl.cdiv, tl.static_range, tl.range)
_ARITHMETIC = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift,
               ast.BitAnd, ast.BitOr, ast.BitXor, ast.MatMult)


def infer_pointers(fn: JITFunction, known: Mapping[str, str] | None = None) -> dict[str, str]:
    """Parameter -> pointer type (``"*fp32"``, ``"*i32"``, ...) for each parameter used as a pointer.

    ``known`` holds types already decided (given, Inductor's, annotated; ``"constexpr"`` for a
    constant): its pointers count as pointers, everything else in it is not one. A kernel whose
    source cannot be read gives ``{}`` (the caller falls back to names).
    """
    elements = _element_signals(fn, dict(known or {}), follow_helpers=True)
    return {name: "*" + _one(signals) for name, signals in elements.items()}


def _one(signals: set[str]) -> str:
    return next(iter(signals)) if len(signals) == 1 else DEFAULT_ELEMENT


def _element_signals(fn: JITFunction, known: dict[str, str], *, follow_helpers: bool) -> dict[str, set[str]]:
    """Pointer parameter -> the element types the kernel names for it (empty: none named)."""
    body = _parse(fn)
    if body is None:
        return {}
    reader = _Reader(fn, body, known, follow_helpers)
    return reader.elements()


def _parse(fn: JITFunction) -> ast.FunctionDef | None:
    try:
        tree = ast.parse(fn.src)
    except (AttributeError, TypeError, SyntaxError):
        return None
    return next((node for node in tree.body if isinstance(node, ast.FunctionDef)), None)


class _Reader:
    """One kernel's source: its locals, its pointer operands, and the choice of each operand's base."""

    def __init__(self, fn: JITFunction, body: ast.FunctionDef, known: dict[str, str], follow_helpers: bool):
        self.fn = fn
        self.body = body
        self.runtime = [p.name for p in fn.params if not p.is_constexpr]
        self.known_pointers = {n for n, t in known.items() if t.startswith("*")}
        self.integers = {n for n, t in known.items() if not t.startswith("*")} | self._used_as_integers()
        self.defs = self._local_definitions()
        self.follow_helpers = follow_helpers
        # (pointer operand, element type it names or None); a list, since an operand may repeat
        self.operands: list[tuple[ast.expr, str | None]] = list(self._pointer_operands())

    # -- the answer -------------------------------------------------------------------------

    def elements(self) -> dict[str, set[str]]:
        groups = [(self._candidates(expr), signal) for expr, signal in self.operands]
        pointers = self._sure_pointers([g for g, _ in groups])
        elements: dict[str, set[str]] = {}
        for candidates, signal in groups:
            bases = [c for c in candidates if c in pointers] or candidates[:1]
            for base in bases:
                elements.setdefault(base, set())
            if signal is not None and len(bases) == 1:  # an ambiguous operand names nobody's type
                elements[bases[0]].add(signal)
        return elements

    def _sure_pointers(self, groups: list[list[str]]) -> set[str]:
        pointers = set(self.known_pointers)
        changed = True
        while changed:
            changed = False
            for candidates in groups:
                if len(candidates) == 1 and candidates[0] not in pointers:
                    pointers.add(candidates[0])
                    changed = True
        return pointers

    def _candidates(self, expr: ast.expr) -> list[str]:
        found = [name for name in self._terms(expr, set()) if name not in self.integers]
        return list(dict.fromkeys(found))  # ordered, once each

    def _terms(self, expr: ast.expr | None, visiting: set[str]) -> Iterator[str]:
        """Parameters that could be the pointer in the sum ``expr``, left to right."""
        if isinstance(expr, ast.Name):
            yield from self._name_terms(expr.id, visiting)
        elif isinstance(expr, ast.BinOp) and isinstance(expr.op, (ast.Add, ast.Sub)):
            yield from self._terms(expr.left, visiting)
            if isinstance(expr.op, ast.Add):
                yield from self._terms(expr.right, visiting)
        elif isinstance(expr, ast.Subscript):
            yield from self._terms(expr.value, visiting)
        elif isinstance(expr, ast.Call):
            target = self._resolve(expr.func)
            if _role(target) in ("through", "base"):
                yield from self._terms(_first_argument(expr, target), visiting)

    def _name_terms(self, name: str, visiting: set[str]) -> Iterator[str]:
        if name in self.runtime:
            yield name
        if name in visiting:  # a loop-carried local (``ptrs += BLOCK``): its other definitions say it
            return
        visiting.add(name)
        for value in self.defs.get(name, []):
            yield from self._terms(value, visiting)

    # -- what the source says ---------------------------------------------------------------

    def _pointer_operands(self) -> Iterator[tuple[ast.expr, str | None]]:
        for call in _calls(self.body):
            target = self._resolve(call.func)
            role = _role(target)
            if role == "memory":
                pointer = _first_argument(call, target)
                yield pointer, self._named_element(call, target)
                yield from self._gathers(pointer)
            elif role == "base":
                yield _first_argument(call, target), None
            elif self.follow_helpers and _is_helper(target):
                yield from self._helper_operands(call, target)

    def _named_element(self, call: ast.Call, target: Any) -> str | None:
        if any(target is atomic for atomic in _INTEGER_ATOMICS):
            return INTEGER_ELEMENT
        if target is tl.load:  # an integer ``other`` is cast to floats too: only a float literal says
            named = _literal_element(_argument(call, 2, "other"))
            return named if named == DEFAULT_ELEMENT else None
        if target is tl.store:
            return self._converted_to(_argument(call, 1, "value"))
        values = [_argument(call, 1, "cmp"), _argument(call, 2, "val")] if target is tl.atomic_cas \
            else [_argument(call, 1, "val")]
        named = {_literal_element(value) for value in values}
        return named.pop() if len(named) == 1 else None

    def _gathers(self, pointer: ast.expr | None) -> Iterator[tuple[ast.expr | None, str | None]]:
        """Loads whose values are offsets of ``pointer``: their own pointers hold integers."""
        for load in self._loads_in_offsets(pointer, set()):
            yield _first_argument(load, tl.load), INTEGER_ELEMENT

    def _loads_in_offsets(self, expr: ast.expr | None, visiting: set[str]) -> Iterator[ast.Call]:
        # Other calls end the walk: ``tl.load(F).to(tl.int32)`` may have been floats.
        if isinstance(expr, ast.Call):
            target = self._resolve(expr.func)
            if target is tl.load:
                yield expr
            elif _role(target) == "through":
                yield from self._loads_in_offsets(_first_argument(expr, target), visiting)
        elif isinstance(expr, ast.BinOp):
            yield from self._loads_in_offsets(expr.left, visiting)
            yield from self._loads_in_offsets(expr.right, visiting)
        elif isinstance(expr, (ast.UnaryOp, ast.Subscript)):
            yield from self._loads_in_offsets(expr.operand if isinstance(expr, ast.UnaryOp) else expr.value, visiting)
        elif isinstance(expr, ast.Name) and expr.id not in visiting:
            visiting.add(expr.id)
            for value in self.defs.get(expr.id, []):
                yield from self._loads_in_offsets(value, visiting)

    def _converted_to(self, value: ast.expr | None) -> str | None:
        """``v.to(tl.float16)`` (or a local holding only that) -> ``"fp16"``."""
        if isinstance(value, ast.Name) and len(self.defs.get(value.id, [])) == 1:
            value = self.defs[value.id][0]
        if not (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute) and value.func.attr == "to"):
            return None
        dtype = self._resolve(_argument(value, 0, "dtype"))
        return type_canonicalisation_dict.get(dtype.name) if isinstance(dtype, tl.dtype) else None

    def _helper_operands(self, call: ast.Call, helper: JITFunction) -> Iterator[tuple[ast.expr, str | None]]:
        inner = _element_signals(helper, {}, follow_helpers=False)
        names = [p.name for p in helper.params]
        for index, name in enumerate(names):
            if name in inner:
                argument = _argument(call, index, name)
                if argument is not None:
                    signals = inner[name]
                    yield argument, next(iter(signals)) if len(signals) == 1 else None

    def _used_as_integers(self) -> set[str]:
        used: set[str] = set()
        for node in ast.walk(self.body):
            if isinstance(node, ast.BinOp) and isinstance(node.op, _ARITHMETIC):
                used.update(_names(node.left, node.right))
            elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.Invert)):
                used.update(_names(node.operand))
            elif isinstance(node, ast.Compare):
                used.update(_names(node.left, *node.comparators))
            elif isinstance(node, ast.Call) and any(self._resolve(node.func) is f for f in _INTEGER_ARGS):
                used.update(_names(*node.args))
        return used

    def _local_definitions(self) -> dict[str, list[ast.expr]]:
        """Local -> every expression assigned to it (a parameter reassigned counts too)."""
        defs: dict[str, list[ast.expr]] = {}
        for node in ast.walk(self.body):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    _bind(defs, target, node.value)
            elif isinstance(node, ast.AugAssign):
                _bind(defs, node.target, ast.BinOp(left=node.target, op=node.op, right=node.value))
            elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
                _bind(defs, node.target, node.value)
        return defs

    def _resolve(self, expr: ast.expr | None) -> Any:
        """``tl.load`` -> the function ``triton.language.load``, through the kernel's globals."""
        if isinstance(expr, ast.Name):
            scope = self.fn.fn.__globals__
            return scope[expr.id] if expr.id in scope else getattr(builtins, expr.id, None)
        if isinstance(expr, ast.Attribute):
            owner = self._resolve(expr.value)
            return getattr(owner, expr.attr, None) if owner is not None else None
        return None


def _calls(body: ast.FunctionDef) -> Iterator[ast.Call]:
    return (node for node in ast.walk(body) if isinstance(node, ast.Call))


def _role(target: Any) -> str | None:
    fn, role = _ROLES.get(id(target), (None, None))
    return role if fn is target else None


def _first_argument(call: ast.Call, target: Any) -> ast.expr | None:
    return _argument(call, 0, _first_parameter(target))


@functools.cache
def _first_parameter(fn: Any) -> str:
    """``"pointer"`` for ``tl.load``, ``"base"`` for ``tl.advance``: the keyword a caller may use."""
    return next(iter(inspect.signature(fn).parameters))


def _argument(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    if index < len(call.args) and not any(isinstance(a, ast.Starred) for a in call.args[:index + 1]):
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _bind(defs: dict[str, list[ast.expr]], target: ast.expr, value: ast.expr) -> None:
    if isinstance(target, ast.Name):
        defs.setdefault(target.id, []).append(value)
    elif isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
            and len(target.elts) == len(value.elts):
        for one_target, one_value in zip(target.elts, value.elts):
            _bind(defs, one_target, one_value)


def _names(*exprs: ast.expr) -> Iterable[str]:
    return [e.id for e in exprs if isinstance(e, ast.Name)]


def _literal_element(value: ast.expr | None) -> str | None:
    """``0``/``-1`` -> ``i32``; ``0.0``/``float("-inf")`` -> ``fp32``; anything else (``True`` too) -> None."""
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, (ast.USub, ast.UAdd)):
        value = value.operand
    if isinstance(value, ast.Constant) and not isinstance(value.value, bool):
        if isinstance(value.value, int):
            return INTEGER_ELEMENT
        if isinstance(value.value, float):
            return DEFAULT_ELEMENT
    if isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id == "float":
        return DEFAULT_ELEMENT
    return None


def _is_helper(target: Any) -> bool:
    # triton.language's own jit functions (tl.cdiv, tl.sum's combine) take no pointers worth following
    return isinstance(target, JITFunction) and not getattr(target, "__module__", "").startswith("triton.")
