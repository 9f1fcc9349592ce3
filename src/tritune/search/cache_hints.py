"""Cache-hint variants: ``eviction_policy`` per ``tl.load`` of one kernel, as a source edit.

A variant is the kernel's captured source file with ``eviction_policy="evict_first"`` or
``"evict_last"`` added to (or replacing the one on) chosen loads of the kernel function, found by
name with ``ast``; the text is edited at the call's exact byte offsets, so every other byte of
the file stays as it was (no unparse: comments, quotes and the other kernels are untouched).
On sm_90 the policy becomes ``ld.global.L1::evict_first.L2::cache_hint`` with an L2 access
policy: ``evict_first`` lets data streamed once leave L2 first, ``evict_last`` keeps data that
will be read again. Seed 001 describes Inductor's use (evict_last for broadcast and re-read data,
evict_first for the last read of a looped reduction); DESIGN.md measured 1.19x from one such
hint (seed 000's fp16 [8192,3137] loop).

Each load is classified from its pointer expression (``Load.reused`` says why, None if not):

- no program id in the address: every program reads the same data (weights, bias, a scale);
  or no ``program_id(k)`` of a grid axis ``k`` with several programs: every program along that
  axis reads it (a matmul's A tile along ``pid_n``, attention's K and V along the query blocks);
- the program id enters only through ``%`` or ``//`` of an index (and not both, by one divisor,
  of one index: that covers every element once): broadcast across programs (Inductor's
  ``x0 = xindex % 768``; a matmul's ``pid_m = pid // n``: the A tile is read by a row of programs);
- inside a loop without that loop's variable (or a pointer advanced in it): re-read each iteration;
- the same pointer text is loaded again later (a two-pass reduction's first pass);
- the address comes from loaded values (a gather): Inductor keeps non-coalesced loads evict_last,
  "we will likely load each element multiple times".

Everything else is read once (streamed). The plan: evict_last for reused loads, evict_first for
streamed ones. Proposals, most promising first, since a candidate costs a build, a verification
and a timing (a budget of a few per kernel):

1. the plan on every load that differs from it (for an elementwise kernel, every load streamed:
   all loads evict_first);
2. each of the plan's changes alone (when it changes several loads), loads whose hint contradicts
   the plan first: one wrong guess should not hide the others' gain;
3. each load set against the plan (the opposite policy), loads that already carry a hint first:
   Inductor's own choices get flipped, and a misclassified load gets its other chance.

Skipped loads (never touched): a cache modifier (ptxas rejects ``.ca``/``.cg`` with any eviction
policy, checked with Triton 3.6 for sm_90), a volatile load, a policy or cache modifier that is
not a string literal, ``**kwargs``. A variant already tried (same key, or the same source text)
is not proposed again.
"""

from __future__ import annotations

import ast
import dataclasses
import math
from pathlib import Path
from typing import Iterable

from tritune.model import families
from tritune.model.launch import LaunchSpec, SpecError
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.rewrites.base import dotted, keyword, language_names, line_offsets

POLICIES = ("evict_first", "evict_last")
POLICY_ARG = 6  # tl.load(pointer, mask, other, boundary_check, padding_option, cache_modifier, eviction_policy)
PID = "pid"  # tag: the value follows the program id
INDIRECT = "indirect"  # tag: the value was loaded from memory (a gather's index)
NAME_PREFIX = "cache hints: "  # a variant's name: the prefix, then "load<i> <policy>, ..."


@dataclasses.dataclass(frozen=True)
class Load:
    """One ``tl.load`` call of the kernel, in source order."""

    index: int
    pointer: str  # source text of the pointer argument
    policy: str  # current eviction policy: "", "evict_first" or "evict_last"
    reused: str | None  # why its data is read again; None when streamed (read once)
    skip: str | None  # why it must not be edited; None when editable
    edit: tuple[int, int, str]  # byte span to replace (start == end: insert) and quote character

    @property
    def plan(self) -> str:
        return "evict_last" if self.reused else "evict_first"


def find_loads(source: str, kernel: str, *, grid: list[int] | None = None) -> list[Load]:
    """The loads of function ``kernel`` in ``source`` (the last definition, as Python binds it).
    ``grid``: the launch's grid, when known: with one program nothing is shared between programs,
    and an axis of one program shares nothing along it."""
    tree = ast.parse(source)
    defs = [n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == kernel]
    if not defs:
        return []
    fn = max(defs, key=lambda n: n.lineno)
    walker = _Walker(language_names(tree))
    walker.block(fn.body, env={}, loops=())
    data = source.encode()
    offsets = line_offsets(data)
    calls = sorted(walker.loads, key=lambda c: (c.lineno, c.col_offset))
    pointers = [keyword(c, "pointer", position=0) for c in calls]
    dumps = [ast.dump(p) if p is not None else "" for p in pointers]
    loads = []
    for index, call in enumerate(calls):
        deps, loops = walker.loads[call]
        again = bool(dumps[index]) and dumps[index] in dumps[index + 1:]
        reused = _reuse(deps, loops, again, grid, walker.axes)
        policy, skip, edit = _policy_site(data, call, offsets)
        text = ast.get_source_segment(source, pointers[index]) if pointers[index] is not None else ""
        loads.append(Load(index, " ".join((text or "").split()), policy, reused, skip, edit))
    return loads


def rewrite(source: str, kernel: str, policies: dict[int, str]) -> str:
    """``source`` with load ``i`` of ``kernel`` given ``policies[i]``; every other byte kept."""
    loads = find_loads(source, kernel)
    for index, policy in policies.items():
        if policy not in POLICIES:
            raise ValueError(f"eviction policy {policy!r} is not one of {POLICIES}")
        if not 0 <= index < len(loads):
            raise ValueError(f"{kernel} has {len(loads)} tl.load calls, no load{index}")
        if loads[index].skip:
            raise ValueError(f"{kernel} load{index} ({loads[index].pointer}) cannot take a hint: {loads[index].skip}")
    data = source.encode()
    for index in sorted(policies, key=lambda i: loads[i].edit[0], reverse=True):  # back to front
        start, end, quote = loads[index].edit
        policy = policies[index]
        text = f"{quote}{policy}{quote}" if start != end else f", eviction_policy={quote}{policy}{quote}"
        data = data[:start] + text.encode() + data[end:]
    return data.decode()


class CacheHintProposer:
    """Eviction-policy variants of a launch's kernel file.

    ``root``: the capture directory, whose ``sources/`` copy is the text replay loads and the
    variant replaces. Without it the program's own file (``spec.source_file``) is read: the same
    text unless the file was edited after the capture, so give ``root`` where it is known."""

    name = families.CACHE_HINTS

    def __init__(self, root: str | Path | None = None) -> None:
        self.root = Path(root) if root is not None else None

    def propose(self, spec: LaunchSpec, trials: list[Trial], limit: int) -> list[Variant]:
        source = self.source_of(spec)
        loads = [load for load in find_loads(source, spec.kernel, grid=_grid(spec)) if not load.skip]
        done = {t.variant.key() for t in trials} | {t.variant.source for t in trials if t.variant.source}
        proposals: list[Variant] = []
        for change in _changes(loads):
            if len(proposals) >= limit:
                break
            text = rewrite(source, spec.kernel, change)
            variant = Variant(name=_name(change), source=text, knobs=_knobs(change))
            if text == source or variant.key() in done or text in done:
                continue
            done |= {variant.key(), text}
            proposals.append(variant)
        return proposals

    def source_of(self, spec: LaunchSpec) -> str:
        if self.root is None:
            path = Path(spec.source_file or "")
            if not spec.source_file or not path.is_file():
                raise SpecError(f"{spec.id}: cache hints need the capture directory (CacheHintProposer(root)); "
                                f"the kernel's file {spec.source_file!r} is not on this machine")
        else:
            path = self.root / spec.source
            if not spec.source or not path.is_file():
                raise SpecError(f"{spec.id}: kernel source {path} is missing from the capture directory")
        return path.read_bytes().decode()  # bytes: keep "\r\n" as it is


# -------------------------------------------------------------------------------- strategy

def _changes(loads: list[Load]) -> Iterable[dict[int, str]]:
    """Policy changes in the order of the module docstring (duplicates are dropped later)."""
    planned = [load for load in loads if load.policy != load.plan]
    if planned:
        yield {load.index: load.plan for load in planned}
    if len(planned) > 1:
        for load in sorted(planned, key=_hinted_first):
            yield {load.index: load.plan}
    for load in sorted(loads, key=_hinted_first):
        opposite = _opposite(load.plan)
        if load.policy != opposite:
            yield {load.index: opposite}


def _hinted_first(load: Load) -> tuple[int, int]:
    """Loads that carry a hint first: among the plan's changes, a hint the plan contradicts."""
    return (0 if load.policy else 1, load.index)


def _opposite(policy: str) -> str:
    return POLICIES[1 - POLICIES.index(policy)]


def _name(change: dict[int, str]) -> str:
    return NAME_PREFIX + ", ".join(f"load{i} {p}" for i, p in sorted(change.items()))


def _knobs(change: dict[int, str]) -> tuple[str, ...]:
    """The knobs the variant turns (``Variant.knobs``), one per load: ``evict:load0=evict_first``."""
    return tuple(f"evict:load{i}={p}" for i, p in sorted(change.items()))


def _grid(spec: LaunchSpec) -> list[int] | None:
    grid = [g for g in spec.grid or [] if isinstance(g, int) and not isinstance(g, bool)]
    return grid if grid and len(grid) == len(spec.grid) else None


# ----------------------------------------------------------------------------- reuse rules

def _reuse(deps: frozenset, loops: tuple, again: bool, grid: list[int] | None, axes: set[int]) -> str | None:
    """Why the data at this address is read more than once (module docstring), None if not."""
    programs = math.prod(grid) if grid else None
    if INDIRECT in deps:
        return "gathered through loaded indices (Inductor's rule: likely read more than once)"
    if programs != 1 and not _follows_program(deps):
        return "every program reads it (no program id in the address)"
    missing = [k for k in sorted(axes) if ("axis", k) not in deps and (grid is None or _size(grid, k) > 1)]
    if programs != 1 and missing:
        return f"every program along grid axis {missing[0]} reads it (program_id({missing[0]}) not in the address)"
    if programs != 1 and _broadcast(deps):
        return "broadcast across programs (program id only through % or //)"
    if loops and loops[-1] not in deps:
        return "read again every iteration of its loop"
    if again:
        return "loaded again later"
    return None


def _size(grid: list[int], axis: int) -> int:
    return grid[axis] if axis < len(grid) else 1


def _program_axis(call: ast.Call) -> int:
    node = keyword(call, "axis", position=0)
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, int) else 0


def _follows_program(deps: frozenset) -> bool:
    return any(tag == PID or (isinstance(tag, tuple) and tag[0] in ("mod", "div")) for tag in deps)


def _broadcast(deps: frozenset) -> bool:
    """Program id only through ``%``/``//``, and never both by one divisor of one index (that is
    a bijection: ``x0 = i % 768; x1 = i // 768`` with ``x0 + 768 * x1`` reads every element once;
    a grouped matmul's ``pid % group`` and ``pid // (group * n)`` are not)."""
    if PID in deps:
        return False
    mods = {tag[1:] for tag in deps if isinstance(tag, tuple) and tag[0] == "mod"}
    divs = {tag[1:] for tag in deps if isinstance(tag, tuple) and tag[0] == "div"}
    return not (mods & divs)


class _Walker:
    """Which values follow the program id and which loop's iteration, statement by statement.

    Tags: ``"pid"`` (linear in the program id), ``("axis", k)`` (follows ``program_id(k)`` in any
    way), ``("mod"|"div", index, divisor)`` (through ``%``/``//`` of a program-id index),
    ``("loop", line, column)`` (changes every iteration of the loop there), ``"indirect"``
    (loaded from memory)."""

    def __init__(self, language: set[str]) -> None:
        self.language = language
        self.loads: dict[ast.Call, tuple[frozenset, tuple]] = {}
        self.axes: set[int] = set()  # program_id axes the kernel reads

    def block(self, stmts: list[ast.stmt], env: dict, loops: tuple) -> None:
        for stmt in stmts:
            self.statement(stmt, env, loops)

    def statement(self, stmt: ast.stmt, env: dict, loops: tuple) -> None:
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            self.loop(stmt, env, loops)
        elif isinstance(stmt, (ast.If, ast.With, ast.AsyncWith, ast.Try)):
            for expr in _headers(stmt):
                self.scan(expr, env, loops)
            for body in ("body", "orelse", "finalbody"):
                self.block(getattr(stmt, body, []), env, loops)
            for handler in getattr(stmt, "handlers", []):
                self.block(handler.body, env, loops)
        elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            return  # a nested definition is not the kernel's code
        else:
            self.scan(stmt, env, loops)
            self.assign(stmt, env, loops)

    def loop(self, stmt: ast.stmt, env: dict, loops: tuple) -> None:
        tag = ("loop", stmt.lineno, stmt.col_offset)
        header = stmt.iter if isinstance(stmt, (ast.For, ast.AsyncFor)) else stmt.test
        self.scan(header, env, loops)
        if isinstance(stmt, (ast.For, ast.AsyncFor)):
            for name in _names(stmt.target):
                env[name] = self.deps(stmt.iter, env) | {tag}
        for _ in range(2):  # twice: values carried from one iteration to the next get the tag
            self.block(stmt.body, env, loops + (tag,))
        self.block(stmt.orelse, env, loops)

    def assign(self, stmt: ast.stmt, env: dict, loops: tuple) -> None:
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        elif isinstance(stmt, ast.AugAssign):
            targets, value = [stmt.target], stmt.value
        else:
            return
        deps = self.deps(value, env)
        names = [name for target in targets for name in _names(target)]
        carried = isinstance(stmt, ast.AugAssign) or bool(set(names) & set(_names(value)))
        for name in names:
            tags = deps | (env.get(name, frozenset()) if isinstance(stmt, ast.AugAssign) else frozenset())
            env[name] = tags | (set(loops[-1:]) if carried else set())

    def scan(self, node: ast.AST, env: dict, loops: tuple) -> None:
        """Record every ``tl.load`` in ``node`` with its pointer's tags and enclosing loops."""
        for call in ast.walk(node):
            if isinstance(call, ast.Call) and self.is_load(call):
                pointer = keyword(call, "pointer", position=0)
                self.loads[call] = (self.deps(pointer, env) if pointer is not None else frozenset(), loops)

    def deps(self, node: ast.AST, env: dict) -> frozenset:
        if isinstance(node, ast.Name):
            return frozenset(env.get(node.id, ()))
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "program_id":
            axis = _program_axis(node)
            self.axes.add(axis)
            return frozenset({PID, ("axis", axis)})
        if isinstance(node, ast.Call) and self.is_load(node):
            pointer = keyword(node, "pointer", position=0)
            return (self.deps(pointer, env) if pointer is not None else frozenset()) | {INDIRECT}
        if isinstance(node, ast.Call):
            parts = [*node.args, *(k.value for k in node.keywords)]
            if isinstance(node.func, ast.Attribute):
                parts.append(node.func.value)  # x.to(...), ptrs.advance(...)
            return frozenset().union(*(self.deps(p, env) for p in parts))
        if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Mod, ast.FloorDiv)):
            left, right = self.deps(node.left, env), self.deps(node.right, env)
            if not _follows_program(left):
                return left | right
            # i % d, i // d: keep i's own %/// tags (x1 = (i // 64) % 12 still pairs with i % 64)
            kind = "mod" if isinstance(node.op, ast.Mod) else "div"
            return (left - {PID}) | {(kind, ast.dump(node.left), ast.dump(node.right))} | right
        return frozenset().union(*(self.deps(child, env) for child in ast.iter_child_nodes(node)))

    def is_load(self, call: ast.Call) -> bool:
        func = call.func
        if not (isinstance(func, ast.Attribute) and func.attr == "load"):
            return False
        return dotted(func.value) in self.language


def _headers(stmt: ast.stmt) -> list[ast.AST]:
    if isinstance(stmt, ast.If):
        return [stmt.test]
    if isinstance(stmt, (ast.With, ast.AsyncWith)):
        return [item.context_expr for item in stmt.items]
    return []


def _names(target: ast.AST) -> list[str]:
    return [n.id for n in ast.walk(target) if isinstance(n, ast.Name)]






# ---------------------------------------------------------------------------- text offsets

def _policy_site(data: bytes, call: ast.Call, offsets: list[int]) -> tuple[str, str | None, tuple[int, int, str]]:
    """(current policy, why the load is not editable or None, (start, end, quote): the bytes
    that hold the policy literal, or an empty span after the last argument to insert one)."""
    nowhere = (0, 0, '"')
    if any(k.arg is None for k in call.keywords) or any(isinstance(a, ast.Starred) for a in call.args):
        return "", "unpacked arguments (*args/**kwargs)", nowhere
    cache = keyword(call, "cache_modifier", position=5)
    if cache is not None and not (isinstance(cache, ast.Constant) and cache.value in ("", None)):
        return "", "a cache modifier (ptxas rejects .ca/.cg with an eviction policy)", nowhere
    volatile = keyword(call, "volatile", position=7)
    if volatile is not None and not (isinstance(volatile, ast.Constant) and volatile.value is False):
        return "", "a volatile load", nowhere
    node = keyword(call, "eviction_policy", position=POLICY_ARG)
    if node is not None:
        if not (isinstance(node, ast.Constant) and isinstance(node.value, str)):
            return "", "an eviction policy that is not a string literal", nowhere
        start = _offset(offsets, node.lineno, node.col_offset)
        end = _offset(offsets, node.end_lineno, node.end_col_offset)
        quote = "'" if data[start:end].lstrip(b"rRuU").startswith(b"'") else '"'  # the file's own quotes
        return node.value, None, (start, end, quote)
    arguments = [*call.args, *call.keywords]
    if not arguments:
        return "", "a load without arguments", nowhere
    last = max(arguments, key=lambda n: (n.end_lineno, n.end_col_offset))
    at = _offset(offsets, last.end_lineno, last.end_col_offset)
    return "", None, (at, at, '"')






def _offset(offsets: list[int], lineno: int, col: int) -> int:
    return offsets[lineno - 1] + col
