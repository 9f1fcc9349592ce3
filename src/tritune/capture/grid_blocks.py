"""Which block constexpr tiles which grid dimension, read from the kernel's source.

``grid_rule`` matches a grid dimension to ``cdiv(numel, BLOCK)`` by arithmetic (a fixed grid) or
by probing the grid function. Arithmetic alone also matches coincidences: a decode-attention
kernel launched over ``(batch, heads)`` has ``heads == cdiv(stride_qbs, BLOCK_DMODEL)`` since a
row of ``q`` is ``heads * head_dim`` long; a square transpose's second dimension matches its
*first* block as well as its second. A search that then changes that block launches another grid
over the same memory, and every candidate is a wrong result (the suite's decode attention spent 8
of 16 candidates so, 2026-11-29).

A block really tiles dimension ``d`` when the kernel's program index on ``d`` reaches memory only
through a product with that block: ``offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)``.
``tiles(source)`` follows each ``program_id(d)`` through the kernel's assignments (a name assigned
from an expression holding it holds it too, ``pid_m = pid // n`` included) into the pointer
arguments of ``load``, ``store``, the atomics, ``make_block_ptr`` and ``advance``; a product with
a block name (either side, at any depth of the product) scales it. ``(d, BLOCK)`` is a tile when
the index appears scaled by ``BLOCK`` somewhere and never reaches a pointer unscaled by it:

- ``partial_ptr + pid`` (one partial result per program, into a buffer the host sized for the
  captured block) and ``scales_ptr + pid_m * n + pid_n`` (one scale per quantization block) make
  the grid's size part of what the kernel computes: the block is not a tile;
- ``Q + cur_head * stride_qh`` (a head per program, no block at all) is not either.

The analysis is a filter, not a proof: verification still checks every variant. Where the source
cannot be read (no source, a syntax error, a ``program_id`` whose axis is not a literal, none at
all: a helper gives the index, an expression too deep to walk) it gives ``None`` and the rule stays
the arithmetic's alone, as before. Not followed (the block is then taken, and verification judges):
a helper function given the index, an index stored as a value, ``offs // BLOCK`` as a pointer.
"""

from __future__ import annotations

import ast
import textwrap
from typing import Iterable

POINTER_CALLS = frozenset({"load", "store", "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min",
                           "atomic_or", "atomic_xchg", "atomic_xor", "make_block_ptr", "advance"})
POINTER_KEYWORDS = frozenset({"pointer", "ptr", "base", "offsets"})
MAKE_BLOCK_PTR_OFFSETS = 3  # make_block_ptr(base, shape, strides, offsets, ...)
LOOP_PASSES_DEPTH = 4  # nested loops whose bodies are read twice (2**depth passes in all)


class Unreadable(Exception):
    """The source gives no answer (the caller keeps the arithmetic's rule)."""


def tiles(source: str | None, blocks: Iterable[str], kernel: str | None = None) -> set[tuple[int, str]] | None:
    """The pairs ``(grid dimension, block name)`` of ``blocks`` that tile the grid (module
    docstring), or None when the source cannot tell. ``kernel``: the function's name, when the
    source holds more than one."""
    try:
        function = _function(source, kernel)
        axes = _axes(function)
        if not axes:  # the index comes from a helper (or there is none): nothing to follow
            return None
        return {(d, block) for d in axes for block in blocks if _tiles(function, d, block)}
    except Exception:  # noqa: BLE001 - Unreadable, an expression too deep to walk (RecursionError), any surprise
        return None


def _function(source: str | None, kernel: str | None) -> ast.FunctionDef:
    if not source:
        raise Unreadable
    try:
        tree = ast.parse(textwrap.dedent(source))
    except SyntaxError:
        raise Unreadable from None
    functions = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)]
    found = next((f for f in functions if f.name == kernel), None) if kernel else None
    if found is None and functions:
        found = functions[0]
    if found is None:
        raise Unreadable
    return found


def _axes(function: ast.FunctionDef) -> set[int]:
    axes = set()
    for node in ast.walk(function):
        if _is_call(node, "program_id"):
            axes.add(_axis(node))
    return axes


def _axis(call: ast.Call) -> int:
    arg = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
    if isinstance(arg, ast.Constant) and isinstance(arg.value, int) and not isinstance(arg.value, bool):
        return arg.value
    raise Unreadable


def _is_call(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and _called(node.func) == name


def _called(func: ast.expr) -> str:
    """The name a call calls: ``f`` of ``f(...)`` and of ``tl.f(...)``; "" for anything else."""
    return func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""


class _Flow:
    """Where ``program_id(axis)`` flows, relative to one block name."""

    def __init__(self, axis: int, block: str):
        self.axis, self.block = axis, block
        self.held: set[str] = set()  # names holding the index unscaled
        self.scaled = False  # the index met the block in a product
        self.leaks = False  # the index reached a pointer unscaled
        self.loops = 0  # loops around the statement being read

    def raw(self, node: ast.AST | None) -> bool:
        """``node`` holds the index, not scaled by the block."""
        if node is None:
            return False
        if isinstance(node, ast.Call) and _is_call(node, "program_id") and _axis(node) == self.axis:
            return True
        if isinstance(node, ast.Name):
            return node.id in self.held
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            if self._mentions_block(node.left) or self._mentions_block(node.right):
                if self.raw(node.left) or self.raw(node.right):
                    self.scaled = True
                return False
        return any(self.raw(child) for child in ast.iter_child_nodes(node))

    def _mentions_block(self, node: ast.AST) -> bool:
        if isinstance(node, ast.Name):
            return node.id == self.block
        if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Mult):
            return self._mentions_block(node.left) or self._mentions_block(node.right)
        return False

    def statements(self, body: list[ast.stmt]) -> None:
        for statement in body:
            self.statement(statement)

    def statement(self, node: ast.stmt) -> None:
        for own in _own_expressions(node):  # a body's statements are walked in order, below
            for call in (n for n in ast.walk(own) if isinstance(n, ast.Call)):
                self._sink(call)
        if isinstance(node, ast.AugAssign) and isinstance(node.op, ast.Mult) and self._mentions_block(node.value):
            names = {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
            if names & self.held:  # ``off *= BLOCK``: scaled from here on
                self.scaled = True
                self.held -= names
        elif isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            value_raw = self.raw(node.value)
            for target in targets:
                names = {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
                if value_raw:
                    self.held |= names
                elif not isinstance(node, ast.AugAssign):
                    self.held -= names
        elif isinstance(node, ast.For):
            if self.raw(node.iter):
                self.held |= {n.id for n in ast.walk(node.target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.With):
            for item in node.items:
                if item.optional_vars is not None and self.raw(item.context_expr):
                    self.held |= {n.id for n in ast.walk(item.optional_vars) if isinstance(n, ast.Name)}
        # a loop's body hands names to its next pass: twice, down to LOOP_PASSES_DEPTH nested loops
        loop = isinstance(node, (ast.For, ast.While))
        passes = 2 if loop and self.loops < LOOP_PASSES_DEPTH else 1
        self.loops += loop
        for _ in range(passes):
            for field in ("body", "orelse", "finalbody"):
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], ast.stmt):
                    self.statements(inner)
        self.loops -= loop

    def _sink(self, call: ast.Call) -> None:
        name = _called(call.func)
        if name not in POINTER_CALLS:
            return
        pointers = list(call.args[:1]) + [k.value for k in call.keywords if k.arg in POINTER_KEYWORDS]
        if name == "make_block_ptr" and len(call.args) > MAKE_BLOCK_PTR_OFFSETS:
            pointers.append(call.args[MAKE_BLOCK_PTR_OFFSETS])
        if name == "advance":
            pointers.extend(call.args[1:2])
        if any(self.raw(p) for p in pointers):
            self.leaks = True


def _own_expressions(node: ast.stmt) -> list[ast.AST]:
    """A statement's expressions outside its bodies (a loop's ``iter``, an ``if``'s test)."""
    bodies = {id(s) for field in ("body", "orelse", "finalbody", "handlers") for s in getattr(node, field, None) or ()
              if isinstance(s, ast.AST)}
    return [child for child in ast.iter_child_nodes(node) if id(child) not in bodies]


def _tiles(function: ast.FunctionDef, axis: int, block: str) -> bool:
    flow = _Flow(axis, block)
    flow.statements(function.body)
    return flow.scaled and not flow.leaks
