"""hoist-invariant-load (exact): a ``tl.load`` that reads the same thing every iteration of its
``for`` loop is done once, before the loop.

Rewrite::

    for k in range(start, stop, BLOCK):
        w = tl.load(w_ptr + cols, mask=cols < N)
        ...
      ->
    _tritune_hoisted_0 = tl.load(w_ptr + cols, mask=(cols < N) & (start < stop))
    for k in range(start, stop, BLOCK):
        w = _tritune_hoisted_0
        ...

The loop may run zero times, and then the original reads nothing: the hoisted load's mask is
conjoined with the trip-count condition (``start < stop`` for a positive step, ``start > stop``
for a negative one, both under the step's sign for a constexpr step; an unmasked load gets the
condition as its mask; none when the range is literal and not empty). A runtime step is refused:
Triton hands it to ``scf.for`` as it is, which runs a negative step unlike Python's ``range``
(only a constexpr negative step is turned around), so no one condition is right for both. Where
the loop runs, the condition is true and the mask, ``other`` and every other argument are the
load's own text: the same lanes read the same addresses.

Legal when all of these hold (anything not understood refuses, with the reason):
- the load is a direct part of a simple statement (assignment or expression) at the top level of
  the loop's body, not under ``if``/``while``/a nested loop, nor in a conditional expression
  (``a if c else tl.load(p)``) or ``and``/``or``: every iteration that runs reads it; the loop
  has no ``break``/``continue``/``return`` (an iteration could end before the load) nor ``else``;
- its pointer, mask and every other argument name nothing assigned in the loop (the loop
  variable, a pointer advanced in it, a value updated in it), call only functions of
  ``triton.language`` that do not touch memory (no load in its address: a gather's index is
  read memory too), and use no ``*args``/``**kwargs``: the expression evaluated before the loop
  has the value it has in every iteration; the range's bounds pass the same test (they are
  copied into the condition, which is evaluated where the range is);
- the load is not volatile, has no ``.cv`` cache modifier ("fetch again": a poll of memory
  others write) and is not a block-pointer load (``boundary_check``/``padding_option``, or a
  pointer from ``tl.make_block_ptr``): those cannot take the condition as a mask;
- nothing in the loop may write memory the load may read, the standard of the
  ``merge-redundant-loads`` pass: a ``tl.store``, an atomic, a barrier, inline asm, a call to a
  function outside ``triton.language`` (unless a helper of the same file that provably writes
  nothing), a method that stores, or a call of unknown effect all block. Two different pointer
  values can alias, so a store through another parameter blocks too;
- except under no-alias specialization (``KernelSource.noalias``): a ``tl.store`` whose pointer
  derives from other pointer parameters than the load's does not block (the applier checks at
  each launch that distinct pointer arguments do not overlap; the rewrite records ``noalias`` in
  ``assumes``). Atomics and barriers still block: they order this program's loads after other
  programs' writes (a lock, a flag), whatever memory they touch themselves.

The parameters a pointer may derive from (its *roots*) are over-approximated: a pointer comes
only from a pointer parameter, through ``+``, the left side of ``-``, subscripts, locals (every
assignment to them, wherever in the function), ``tl.where``/conditional expressions (both sides)
and the calls that pass a pointer through (``tl.multiple_of``, ``tl.broadcast_to``,
``tl.advance``, ...). Products, comparisons and integer builtins end the walk. Parameters known to
be integers (``tl.constexpr``, the launch's signature, operands of ``*``/``//``/``%``/shifts/
bitwise, arguments of ``range``/``tl.arange``/``tl.cdiv``) drop out. The true root is one of the
rest, so a store whose roots share none with the load's writes another argument. Roots are not
known when the walk meets what it does not follow (a loaded value: pointers may be read from
memory; a cast; a helper's result) or finds no parameter: then the store blocks.

Writes by other programs of the same launch without synchronisation are a data race in the
original kernel too: a non-volatile load promises no ordering with them (as ``merge-redundant-
loads`` says); with no atomic or barrier in the loop there is no synchronisation to move across.

Exact: memory is unchanged across the loop (the legality above), so the hoisted load reads the
same bytes as each iteration's load did; results are bitwise identical.

Note: Triton's own ``triton-licm`` (sm_80/sm_90, before the pipeliner) hoists loads out of loops
that do not write memory at all, so the gain of this rule is mostly under no-alias (loops that
store through another pointer), on other targets, and in what it lets the rest of the search see.

Parameters: ``{"load": i}`` hoists the i-th hoistable load of the kernel (source order, counting
only the loads this rule can hoist under the kernel's ``noalias``), ``{"load": [i, j, ...]}``
several. ``rewrites()`` offers every hoistable load at once first (no extra work is ever added:
each hoisted load runs at most once instead of once per iteration), then each alone, since a
hoisted tile stays live across the loop and several can cost registers (spills); at most
``MAX_PROPOSALS`` rewrites.
"""

from __future__ import annotations

import ast
import dataclasses

from tritune.rewrites.base import (EXACT, NOALIAS, Edit, KernelSource, NotRewritable, Rewrite, dotted, keyword,
                                   names_in)

NAME = "hoist-invariant-load"
PREFIX = "_tritune_hoisted_"
MAX_PROPOSALS = 5

# tl.load(pointer, mask, other, boundary_check, padding_option, cache_modifier, eviction_policy, volatile)
MASK, BOUNDARY, PADDING, CACHE, VOLATILE = 1, 3, 4, 5, 7
# triton.language functions that write memory or order this program's memory with other programs'
_TL_WRITES = {"store", "store_tensor_descriptor", "debug_barrier", "inline_asm_elementwise", "map_elementwise"}
# tensor / tensor-descriptor methods that only compute (or read: a descriptor's load and gather)
_METHODS = {"to", "reshape", "view", "trans", "permute", "broadcast_to", "expand_dims", "ravel", "split", "sum",
            "max", "min", "argmax", "argmin", "cumsum", "cumprod", "sort", "flip", "xor_sum", "reduce", "reduce_or",
            "associative_scan", "histogram", "gather", "load", "abs", "exp", "exp2", "log", "log2", "sqrt",
            "sqrt_rn", "rsqrt", "sigmoid", "softmax", "sin", "cos", "erf", "floor", "ceil", "cdiv", "cast",
            "logical_and", "logical_or", "item", "advance"}
_BUILTINS = {"range", "min", "max", "abs", "len", "int", "float", "bool"}
_PURE_MODULES = ("math", "libdevice")  # tl.math.*, tl.extra.cuda.libdevice.*, a libdevice imported by name
# calls that return their first argument's pointer (a block pointer's base for make_block_ptr)
_THROUGH = {"multiple_of", "max_contiguous", "max_constancy", "broadcast_to", "reshape", "view", "expand_dims",
            "ravel", "trans", "permute", "advance", "make_block_ptr"}
# calls whose result is never a pointer
_NUMBERS = {"arange", "program_id", "num_programs", "cdiv", "zeros", "zeros_like", "full", "minimum", "maximum",
            "sum", "max", "min", "argmax", "argmin", "cumsum", "cumprod", "abs", "umulhi", "clamp", "fma", "exp",
            "exp2", "log", "log2", "sqrt", "rsqrt", "sigmoid", "rand", "randint", "randn", "floor", "ceil"}
_INTEGER_OPS = (ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow, ast.LShift, ast.RShift, ast.BitAnd, ast.BitOr,
                ast.BitXor, ast.MatMult)
_UNKNOWN = "?"  # a root the walk cannot name


@dataclasses.dataclass(frozen=True)
class Hoistable:
    call: ast.Call
    loop: ast.For
    noalias: bool  # legal only under the no-alias assumption
    why: str
    condition: str | None  # true exactly when the loop runs; None: it always does


class HoistInvariantLoad:
    name = NAME
    exact = EXACT

    def rewrites(self, kernel: KernelSource) -> list[Rewrite]:
        found = hoistable(kernel)
        choices = ([list(range(len(found)))] if len(found) > 1 else []) + [[i] for i in range(len(found))]
        return [self.apply(kernel, {"load": c if len(c) > 1 else c[0]}) for c in choices[:MAX_PROPOSALS]]

    def apply(self, kernel: KernelSource, params: dict) -> Rewrite:
        found = hoistable(kernel)
        wanted = params.get("load")
        indices = wanted if isinstance(wanted, list) else [wanted]
        if not indices or not all(isinstance(i, int) and not isinstance(i, bool) and 0 <= i < len(found)
                                  for i in indices):
            raise NotRewritable(f"{kernel.kernel} has {len(found)} hoistable loads; no load {wanted!r}")
        chosen = [found[i] for i in sorted(set(indices))]
        source = kernel.edit(_edits(kernel, chosen))
        why = "; ".join(h.why for h in chosen)
        assumes = (NOALIAS,) if any(h.noalias for h in chosen) else ()
        return Rewrite(NAME, EXACT, why, source, params={"load": wanted}, assumes=assumes)


def hoistable(kernel: KernelSource) -> list[Hoistable]:
    """The loads of ``kernel`` this rule can hoist, in source order; ``NotRewritable`` with every
    refusal's reason when there is none."""
    analysis = _Analysis(kernel)
    found, refused = [], []
    for call in kernel.calls("load"):
        loop = analysis.loops.get(call)
        if loop is None:
            continue
        pointer = keyword(call, "pointer", 0)
        where = f"load {' '.join(kernel.segment(pointer or call).split())} (line {call.lineno})"
        try:
            found.append(analysis.check(call, loop, where))
        except NotRewritable as reason:
            refused.append(f"{where}: {reason}")
    if not found:
        raise NotRewritable("; ".join(refused) if refused else "no tl.load in the body of a for loop")
    return found


class _Analysis:
    """One kernel's loops, helpers, locals and pointer roots."""

    def __init__(self, kernel: KernelSource) -> None:
        self.kernel = kernel
        self.loops: dict[ast.Call, ast.stmt] = {}  # a load in a loop's body -> the innermost such loop
        for loop in ast.walk(kernel.function):
            if isinstance(loop, (ast.For, ast.AsyncFor, ast.While)):
                for node in (n for statement in loop.body for n in ast.walk(statement)):
                    if isinstance(node, ast.Call) and kernel.is_language(node.func, "load"):
                        self.loops[node] = loop  # walk order: inner loops come later and win
        self.helpers = {n.name: n for n in kernel.tree.body if isinstance(n, ast.FunctionDef)}
        self.pure_modules = _pure_imports(kernel.tree)
        self.defs = _definitions(kernel.function)
        self.integers = self._integers()
        self.locals = _locals(kernel.function)

    # -- one load ---------------------------------------------------------------------------

    def check(self, call: ast.Call, loop: ast.stmt, where: str) -> Hoistable:
        if not isinstance(loop, ast.For):
            raise NotRewritable(f"its loop (line {loop.lineno}) is not a for loop")
        statement = next((s for s in loop.body if _contains(s, call)), None)
        if statement is None or not isinstance(statement, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Expr)):
            raise NotRewritable(f"not at the top level of its loop's body (line {loop.lineno}): "
                                "it may not run every iteration")
        if _conditional(statement, call):
            raise NotRewritable("under a conditional expression or and/or: it may not run every iteration")
        if loop.orelse or any(isinstance(n, (ast.Break, ast.Continue, ast.Return)) for n in ast.walk(loop)):
            raise NotRewritable(f"the loop (line {loop.lineno}) has break/continue/return/else")
        self._check_arguments(call, loop)
        for bound in _bounds(self.kernel, loop):
            if bound is not None:
                self._check_pure(bound, "the loop's range")
        condition = _trip_condition(self.kernel, loop)
        noalias = self._check_writes(call, loop)
        what = ("the loop's stores go through other pointer parameters (no-alias)" if noalias
                else "nothing in the loop writes memory")
        return Hoistable(call, loop, noalias, f"{where} is the same every iteration of the loop at line "
                                              f"{loop.lineno} and {what}", condition)

    def _check_arguments(self, call: ast.Call, loop: ast.For) -> None:
        if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
            raise NotRewritable("unpacked arguments (*args/**kwargs)")
        volatile = keyword(call, "volatile", VOLATILE)
        if volatile is not None and not (isinstance(volatile, ast.Constant) and volatile.value is False):
            raise NotRewritable("a volatile load (each read must happen)")
        cache = keyword(call, "cache_modifier", CACHE)
        if cache is not None and not (isinstance(cache, ast.Constant) and cache.value in ("", None, ".ca", ".cg")):
            raise NotRewritable(f"cache modifier {self.kernel.segment(cache)} (.cv fetches again on every read)")
        for name, position in (("boundary_check", BOUNDARY), ("padding_option", PADDING)):
            if not _empty(keyword(call, name, position)):
                raise NotRewritable(f"a block-pointer load ({name}): it takes no mask for the trip count")
        if "make_block_ptr" in self._through_calls(keyword(call, "pointer", 0)):
            raise NotRewritable("a block-pointer load: it takes no mask for the trip count")
        assigned = _assigned(loop)
        arguments = [*call.args, *(k.value for k in call.keywords)]
        changing = sorted(set().union(*(names_in(a) for a in arguments)) & assigned)
        if changing:
            raise NotRewritable(f"its arguments use {', '.join(changing)}, assigned in the loop (line {loop.lineno})")
        for argument in arguments:
            self._check_pure(argument, "its arguments")

    def _check_pure(self, node: ast.AST, what: str) -> None:
        """``node`` computes a value without touching memory (it is moved or copied before the loop)."""
        for inner in ast.walk(node):
            if isinstance(inner, (ast.NamedExpr, ast.Lambda, ast.Await, ast.Yield, ast.YieldFrom)):
                raise NotRewritable(f"{what} hold a construct this rule does not move ({type(inner).__name__})")
            if isinstance(inner, ast.Call):
                if self.kernel.is_language(inner.func, "load") or _method(inner) == "load":
                    raise NotRewritable(f"{what} read memory (a load in them)")
                helper = isinstance(inner.func, ast.Name) and inner.func.id in self.helpers
                if helper or self.effect(inner, self.locals, set()):
                    raise NotRewritable(f"{what} call {dotted(inner.func) or 'a function'}, not known to be pure")

    # -- what the loop writes ---------------------------------------------------------------

    def _check_writes(self, call: ast.Call, loop: ast.For) -> bool:
        """False when nothing in the loop writes memory; True when only stores through other
        pointer parameters do and ``kernel.noalias`` allows it; else ``NotRewritable``."""
        stores, blocking = [], []
        for node in ast.walk(loop):
            if not isinstance(node, ast.Call):
                continue
            effect = self.effect(node, self.locals, set())
            if effect == "store":
                stores.append(node)
            elif effect:
                blocking.append(effect)
        if blocking:
            raise NotRewritable(f"the loop (line {loop.lineno}) has {blocking[0]}, which may write what it reads")
        if not stores:
            return False
        first = stores[0]
        store_text = " ".join(self.kernel.segment(first).split())
        if not self.kernel.noalias:
            raise NotRewritable(f"the loop (line {loop.lineno}) stores ({store_text}); without no-alias any store "
                                "may write what it reads")
        mine = self.roots(keyword(call, "pointer", 0), "its pointer")
        for store in stores:
            text = " ".join(self.kernel.segment(store).split())
            shared = sorted(mine & self.roots(keyword(store, "pointer", 0), f"the pointer of {text}"))
            if shared:
                raise NotRewritable(f"the loop stores through {' or '.join(shared)} too ({text})")
        return True

    def effect(self, call: ast.Call, local: set[str], visiting: set[str]) -> str | None:
        """None when ``call`` cannot write memory or order it; ``"store"`` for a plain ``tl.store``;
        else what it is, for the reason."""
        name = dotted(call.func)
        if name is not None and "." in name:
            base, attr = name.rsplit(".", 1)
            if base in self.kernel.language:
                if attr == "store":
                    return "store"
                if attr in _TL_WRITES or attr.startswith("atomic_"):
                    return f"tl.{attr}"
                return None
            head = name.split(".", 1)[0]
            if head in self.kernel.language or head in self.pure_modules:
                modules = base.split(".")
                return None if modules[-1] in _PURE_MODULES or head in self.pure_modules else f"a call to {name}"
            if head not in local:
                return f"a call to {name} (effects unknown)"
        if isinstance(call.func, ast.Attribute):  # a method of a value: tensor, descriptor
            method = call.func.attr
            return None if method in _METHODS else f"a call of .{method}() (effects unknown)"
        if isinstance(call.func, ast.Name) and call.func.id not in local:
            if call.func.id in _BUILTINS:
                return None
            helper = self.helpers.get(call.func.id)
            if helper is not None and helper.name not in visiting:
                inner = _locals(helper)
                effects = [self.effect(c, inner, visiting | {helper.name})
                           for c in ast.walk(helper) if isinstance(c, ast.Call)]
                written = next((e for e in effects if e), None)
                return None if written is None else f"a call to {helper.name} (which has {_article(written)})"
            return f"a call to {call.func.id} (it may write memory)"
        return f"a call of {type(call.func).__name__} (effects unknown)"

    # -- pointer roots ----------------------------------------------------------------------

    def roots(self, pointer: ast.expr | None, what: str) -> set[str]:
        """The pointer parameters ``pointer`` may derive from (the true one is among them);
        ``NotRewritable`` when they are not known."""
        terms = self._terms(pointer, set()) if pointer is not None else {_UNKNOWN}
        if _UNKNOWN in terms:
            raise NotRewritable(f"under no-alias: {what} goes through a value this rule does not follow "
                                "(read from memory, cast, or a helper's result): its parameter is not known")
        if not terms - self.integers:
            raise NotRewritable(f"under no-alias: {what} derives from no pointer parameter this rule can see")
        return terms - self.integers

    def _terms(self, node: ast.expr, visiting: set[str]) -> set[str]:
        """Parameters whose pointer may flow into ``node`` (``_UNKNOWN`` for what is not followed)."""
        if isinstance(node, ast.Name):
            found = {node.id} if node.id in self.kernel.params else set()
            if node.id in visiting:
                return found
            for value in self.defs.get(node.id, []):
                found |= self._terms(value, visiting | {node.id}) if value is not None else {_UNKNOWN}
            return found
        if isinstance(node, ast.Constant):
            return set()
        if isinstance(node, ast.BinOp):
            if isinstance(node.op, ast.Add):
                return self._terms(node.left, visiting) | self._terms(node.right, visiting)
            if isinstance(node.op, ast.Sub):  # int - pointer and pointer - pointer are not Triton
                return self._terms(node.left, visiting)
            return set()
        if isinstance(node, (ast.Compare, ast.BoolOp)) or isinstance(node, ast.UnaryOp) and \
                not isinstance(node.op, ast.UAdd):
            return set()
        if isinstance(node, ast.UnaryOp):
            return self._terms(node.operand, visiting)
        if isinstance(node, ast.Subscript):
            return self._terms(node.value, visiting)
        if isinstance(node, ast.IfExp):
            return self._terms(node.body, visiting) | self._terms(node.orelse, visiting)
        if isinstance(node, ast.Call):
            return self._call_terms(node, visiting)
        return {_UNKNOWN}

    def _call_terms(self, call: ast.Call, visiting: set[str]) -> set[str]:
        name = dotted(call.func) or ""
        attr = name.rsplit(".", 1)[-1]
        language = "." in name and name.rsplit(".", 1)[0] in self.kernel.language
        if language and attr == "where":
            values = [keyword(call, "x", 1), keyword(call, "y", 2)]
            return set().union(*(self._terms(v, visiting) if v is not None else {_UNKNOWN} for v in values))
        if language and attr in _THROUGH:
            first = keyword(call, "base", 0) if attr in ("make_block_ptr", "advance") else call.args[0] \
                if call.args else None
            return self._terms(first, visiting) if first is not None else {_UNKNOWN}
        if language and attr in _NUMBERS or isinstance(call.func, ast.Name) and call.func.id in _BUILTINS:
            return set()
        method = isinstance(call.func, ast.Attribute) and not language
        if method and call.func.attr in _THROUGH - {"make_block_ptr"}:
            return self._terms(call.func.value, visiting)  # p.reshape(...), p.broadcast_to(...)
        if method and call.func.attr == "to" and self._scalar_type(keyword(call, "dtype", 0)):
            return self._terms(call.func.value, visiting)  # offs.to(tl.int64): what it casts
        return {_UNKNOWN}  # a load (pointers to pointers), a cast to a pointer, a helper's result

    def _scalar_type(self, dtype: ast.expr | None) -> bool:
        """``tl.int64``, ``tl.float32``: a type that is no pointer (``tl.pointer_type(...)`` and
        ``p.dtype.element_ty`` may be one)."""
        name = dotted(dtype) if dtype is not None else None
        return name is not None and name.count(".") == 1 and name.split(".")[0] in self.kernel.language

    def _through_calls(self, pointer: ast.expr | None) -> set[str]:
        """The pass-through calls a pointer's definition goes through (``make_block_ptr``...)."""
        found, seen, todo = set(), set(), [pointer] if pointer is not None else []
        while todo:
            node = todo.pop()
            for inner in ast.walk(node):
                if isinstance(inner, ast.Call):
                    found.add((dotted(inner.func) or "").rsplit(".", 1)[-1])
                elif isinstance(inner, ast.Name) and inner.id not in seen:
                    seen.add(inner.id)
                    todo.extend(v for v in self.defs.get(inner.id, []) if v is not None)
        return found

    def _integers(self) -> set[str]:
        """Parameters that are not pointers: declared so, or used the way no pointer can be."""
        known = set(self.kernel.constexpr_params())
        signature = (self.kernel.launch or {}).get("signature")
        if isinstance(signature, dict):
            known |= {n for n, t in signature.items() if isinstance(t, str) and not t.startswith("*")}
        used = set()
        for node in ast.walk(self.kernel.function):
            if isinstance(node, ast.BinOp) and isinstance(node.op, _INTEGER_OPS):
                used |= _bare_names(node.left, node.right)
            elif isinstance(node, ast.Call) and (dotted(node.func) or "").rsplit(".", 1)[-1] in (
                    "range", "arange", "cdiv", "static_range"):
                used |= _bare_names(*node.args)
        # a parameter reassigned may hold an integer later: its use then says nothing about it
        return known | {n for n in used if n in self.kernel.params and n not in self.defs}


# ------------------------------------------------------------------------------------ edits

def _edits(kernel: KernelSource, chosen: list[Hoistable]) -> list[Edit]:
    """One insertion before each loop (its hoisted loads, in source order) and one replacement
    per hoisted call."""
    taken = {n.id for n in ast.walk(kernel.tree) if isinstance(n, ast.Name)}
    names, number = [], 0
    for _ in chosen:
        while f"{PREFIX}{number}" in taken:
            number += 1
        names.append(f"{PREFIX}{number}")
        number += 1
    data = kernel.text.encode()
    edits, before = [], {}
    for hoisted, name in zip(chosen, names):
        start, end = kernel.span(hoisted.call)
        edits.append(Edit(start, end, name))
        before.setdefault(hoisted.loop, []).append(f"{name} = {_guarded(kernel, hoisted)}")
    for loop, lines in before.items():
        at = kernel.line_start(loop.lineno)
        line = data[at:].split(b"\n", 1)[0]
        newline = "\r\n" if line.endswith(b"\r") else "\n"
        indent = kernel.indent_of(loop)
        edits.append(Edit(at, at, "".join(f"{indent}{text}{newline}" for text in lines)))
    return edits


def _guarded(kernel: KernelSource, hoisted: Hoistable) -> str:
    """The load's text with the trip-count condition conjoined to its mask (every other byte kept)."""
    call, condition = hoisted.call, hoisted.condition
    start, end = kernel.span(call)
    text = kernel.text.encode()[start:end]
    if condition is None:
        return text.decode()
    mask = keyword(call, "mask", MASK)
    if mask is None:
        last = max([*call.args, *call.keywords], key=lambda n: (n.end_lineno, n.end_col_offset))
        at = kernel.span(last)[1] - start
        return (text[:at] + f", mask={condition}".encode() + text[at:]).decode()
    lo, hi = (i - start for i in kernel.span(mask))
    guard = condition if isinstance(mask, ast.Constant) and mask.value is None \
        else f"{_atom(kernel, mask)} & {condition}"
    return (text[:lo] + guard.encode() + text[hi:]).decode()


def _trip_condition(kernel: KernelSource, loop: ast.For) -> str | None:
    """A boolean true exactly when ``loop`` runs at least once; None when it always does."""
    start, stop, step = _bounds(kernel, loop)
    values = [_literal(n) if n is not None else d for n, d in ((start, 0), (stop, None), (step, 1))]
    if values[2] == 0:
        raise NotRewritable(f"the loop at line {loop.lineno} has step 0")
    if isinstance(values[0], int) and values[0] == values[1] or all(isinstance(v, int) for v in values) \
            and len(range(*values)) == 0:
        raise NotRewritable(f"the loop at line {loop.lineno} never runs")
    if all(isinstance(v, int) for v in values):
        return None
    lo = _atom(kernel, start) if start is not None else "0"
    hi = _atom(kernel, stop)
    if isinstance(values[2], int):
        return f"({lo} < {hi})" if values[2] > 0 else f"({lo} > {hi})"
    # Triton runs a constexpr step as Python's range does (a negative one by swapping the bounds);
    # a runtime step goes to scf.for as it is, which runs a negative one differently (lb < ub).
    fixed = kernel.constexpr_params() - _assigned(kernel.function)
    if not names_in(step) <= fixed or any(isinstance(n, ast.Call) for n in ast.walk(step)):
        raise NotRewritable(f"the loop at line {loop.lineno} has a runtime step: its trip count is not known "
                            "(Triton runs a negative runtime step unlike Python's range)")
    by = _atom(kernel, step)
    if isinstance(values[0], int) and isinstance(values[1], int):
        return f"({by} > 0)" if values[0] < values[1] else f"({by} < 0)"  # equal bounds: never runs (above)
    return f"((({lo} < {hi}) & ({by} > 0)) | (({lo} > {hi}) & ({by} < 0)))"


def _bounds(kernel: KernelSource, loop: ast.For) -> tuple[ast.expr | None, ast.expr, ast.expr | None]:
    """(start, stop, step) of ``for ... in range/tl.range/tl.static_range(...)``."""
    it = loop.iter
    if not (isinstance(it, ast.Call) and (isinstance(it.func, ast.Name) and it.func.id == "range"
                                          or kernel.is_language(it.func, "range")
                                          or kernel.is_language(it.func, "static_range"))):
        raise NotRewritable(f"the loop at line {loop.lineno} is not over range/tl.range/tl.static_range")
    if any(isinstance(a, ast.Starred) for a in it.args) or any(k.arg is None for k in it.keywords):
        raise NotRewritable(f"the range of the loop at line {loop.lineno} unpacks its arguments")
    args = it.args[:3]
    step = keyword(it, "step", 2)
    if len(args) == 1:
        return None, args[0], step
    if len(args) >= 2:
        return args[0], args[1], step
    raise NotRewritable(f"the range of the loop at line {loop.lineno} has no bound")


# ---------------------------------------------------------------------------------- helpers

def _atom(kernel: KernelSource, node: ast.expr) -> str:
    """``node``'s text, in parentheses unless it binds tighter than any operator."""
    text = kernel.segment(node)
    simple = isinstance(node, (ast.Name, ast.Constant, ast.Attribute, ast.Call, ast.Subscript))
    return text if simple else f"({text})"


def _literal(node: ast.expr) -> int | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = _literal(node.operand)
        return None if inner is None else -inner
    return None


def _contains(tree: ast.AST, node: ast.AST) -> bool:
    return any(n is node for n in ast.walk(tree))


def _conditional(statement: ast.stmt, call: ast.Call) -> bool:
    """Whether ``call`` sits where it may be skipped: a branch of ``x if c else y``, ``and``/``or``."""
    return any(isinstance(n, (ast.IfExp, ast.BoolOp, ast.Lambda, ast.comprehension, ast.ListComp, ast.GeneratorExp,
                              ast.SetComp, ast.DictComp)) and _contains(n, call) for n in ast.walk(statement))


def _assigned(loop: ast.AST) -> set[str]:
    """Every name bound anywhere in ``loop``: its variable, assignments, ``+=``, nested targets."""
    return {n.id for n in ast.walk(loop) if isinstance(n, ast.Name) and isinstance(n.ctx, (ast.Store, ast.Del))}


def _empty(node: ast.expr | None) -> bool:
    """An absent argument, or the default of ``boundary_check``/``padding_option``."""
    return node is None or isinstance(node, ast.Constant) and node.value in ("", None) \
        or isinstance(node, (ast.Tuple, ast.List)) and not node.elts


def _locals(function: ast.FunctionDef) -> set[str]:
    """Parameters and every name the function assigns: a call through one is a value's method."""
    args = function.args
    params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
    return params | _assigned(function)


def _method(call: ast.Call) -> str | None:
    return call.func.attr if isinstance(call.func, ast.Attribute) else None


def _bare_names(*nodes: ast.expr) -> set[str]:
    return {n.id for n in nodes if isinstance(n, ast.Name)}


def _article(effect: str) -> str:
    return "a tl.store" if effect == "store" else effect


def _definitions(function: ast.FunctionDef) -> dict[str, list[ast.expr | None]]:
    """Local -> every value assigned to it anywhere in the function (None: one not followed, such
    as a loop variable over something other than a range, or a tuple unpacked from a call)."""
    defs: dict[str, list[ast.expr | None]] = {}

    def bind(target: ast.expr, value: ast.expr | None) -> None:
        if isinstance(target, ast.Name):
            defs.setdefault(target.id, []).append(value)
        elif isinstance(target, (ast.Tuple, ast.List)):
            same = isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
            for i, element in enumerate(target.elts):
                bind(element, value.elts[i] if same else None)
        else:
            for name in ast.walk(target):
                if isinstance(name, ast.Name):
                    defs.setdefault(name.id, []).append(None)

    for node in ast.walk(function):
        if isinstance(node, ast.Assign):
            for target in node.targets:
                bind(target, node.value)
        elif isinstance(node, ast.AugAssign):
            bind(node.target, ast.BinOp(left=node.target, op=node.op, right=node.value))
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            bind(node.target, node.value)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            integer = isinstance(node.iter, ast.Call) and (dotted(node.iter.func) or "").rsplit(".", 1)[-1] in (
                "range", "static_range")
            bind(node.target, ast.Constant(0) if integer else None)
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            for item in node.items:
                if item.optional_vars is not None:
                    bind(item.optional_vars, None)
    return defs


def _pure_imports(tree: ast.Module) -> set[str]:
    """Names bound to math-only modules: ``from triton.language.extra import libdevice``, Inductor's
    ``from torch._inductor.runtime.triton_helpers import libdevice, math as tl_math``."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and (
                node.module.startswith("triton.language") or node.module == "torch._inductor.runtime.triton_helpers"):
            names |= {a.asname or a.name for a in node.names if a.name in _PURE_MODULES}
    return names
