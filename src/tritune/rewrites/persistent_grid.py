"""persistent-grid: a kernel whose programs are independent tiles becomes a loop over the tiles,
launched on about k x SM-count programs. Exact.

The rewrite (1-D: the kernel reads ``tl.program_id(0)`` only)::

    def k(x_ptr, n, BLOCK: tl.constexpr):            def k(x_ptr, n, BLOCK: tl.constexpr, _tritune_tiles):
        pid = tl.program_id(0)                  ->       for _tritune_tile in tl.range(tl.program_id(0), _tritune_tiles,
        ...                                                                            tl.num_programs(0)):
                                                             pid = _tritune_tile
                                                             ...

2-D (it reads ``program_id(1)`` too): the tiles are ``G0 * G1`` and tile ``t`` is program
``(t % G0, t // G0)``, the order Triton numbers programs in; ``G0`` comes in as
``_tritune_g0``. The added parameters go last (before the first one with a default); replay and
the applier pass the tile count of the grid the program would have launched, and launch
``min(tiles, k * SMs)`` programs instead (``Variant.grid``, ``replay.persistent``). A docstring
and leading ``name = <constant>`` statements (Inductor's ``xnumel = 1024``) stay before the
loop. A name bound before the loop (a parameter, such a constant) that the body assigns
(``X += row * stride``) would carry from one tile to the next: inside the loop it is renamed
``_tritune_v_X``, bound to ``X`` at the top of each tile. Inductor kernels get the same added
parameter (their tile count is ``cdiv(xnumel, XBLOCK)`` only for some grid types, and one launch
path for every kernel is simpler than two); the applier's Inductor path passes it.

Legal when each tile computes exactly what its program computed. A program's work is a function
of its program ids, its arguments and memory; the loop hands tile ``t`` the ids program ``t``
had and the same arguments, so it is the same work, provided nothing else tells programs apart
or orders them. The criterion, each case refused with its reason:

* every ``tl.program_id`` has a literal axis 0 or 1 (axis 2: a 3-D grid) and is in the kernel
  itself; any use of its value is then fine, because every use is replaced (an index, a seed of
  ``tl.rand``, a branch on it: all see the tile's id);
* no ``tl.num_programs`` (the loop changes it), no ``return`` (it would end the program's
  remaining tiles; Triton 3.6 has no ``continue`` to turn it into a skip), no
  ``tl.debug_barrier``, no atomics of any kind (locks, counters, spin-waits order programs: a
  program waiting on a tile that its own loop runs later never returns), no inline assembly, no
  SM id or clock reads;
* calls only to ``tl`` (and Inductor's ``triton_helpers``/``libdevice``/``tl_math``, names
  with none of the above), methods of values, a few builtins, and functions of the same file
  that obey the same rules and read no program id; anything else is a function the rule cannot
  see into;
* nothing the re-indentation could change: no multi-line string in the loop, no tabs, each
  statement on its own lines; no lambda, comprehension, nested function, ``global``.

The loop is a ``tl.range``, which Triton may software-pipeline (the next tile's loads issued
before this tile's stores). That is legal for the same reason: the original grid's programs run
in no order, so a kernel whose tile reads what another tile writes already had a race.

Parameters: ``{"k": k}``, programs per SM, also the rewrite's knob (the search may move it to 1,
2, 4 or 8; ``apply`` takes 1 to 64; the text is the same for every k, only the launch grid
differs). ``rewrites()`` proposes k = 4, 8, 2, 1 (memory-bound tiles want several programs per
SM to hide latency; 1 is the classic persistent matmul). Given the launch's facts (``KernelSource.launch``: ``grid``, ``sm_count``) it checks the grid's shape
and drops each k whose k x SMs programs would already cover every tile (nothing would loop).
"""

from __future__ import annotations

import ast
import dataclasses

from tritune.rewrites.base import (EXACT, Edit, KernelSource, Knob, NotRewritable, Rewrite, dotted, imported_names,
                                   line_offsets, names_in)

NAME = "persistent-grid"
TILES, G0, TILE = "_tritune_tiles", "_tritune_g0", "_tritune_tile"
PIDS = ("_tritune_pid0", "_tritune_pid1")
PREFIX = "_tritune_"
RENAMED = "_tritune_v_"
KS = (4, 8, 2, 1)  # programs per SM, most promising first
MAX_K = 64

# attribute names that tell programs apart or order them (checked on any call: tl.*, helpers, methods)
_FORBIDDEN = {"num_programs": "tl.num_programs counts programs, which the loop changes",
              "debug_barrier": "tl.debug_barrier",
              "inline_asm_elementwise": "inline assembly (it may read the program id)",
              "smid": "an SM id read", "globaltimer": "a clock read", "clock": "a clock read"}
_HELPER_MODULES = frozenset({"triton_helpers", "libdevice", "tl_math", "math"})  # Inductor's, Triton's
_BUILTINS = frozenset({"range", "min", "max", "abs", "int", "float", "bool", "len", "isinstance", "print",
                       "getattr", "hasattr"})
_SCOPES = (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.FunctionDef,
           ast.AsyncFunctionDef, ast.ClassDef, ast.Global, ast.Nonlocal, ast.Yield, ast.YieldFrom, ast.Await,
           ast.Delete)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What the analysis found: where the loop goes and what it replaces."""

    dims: int                              # 1 or 2
    calls: tuple[tuple[ast.Call, int], ...]  # each tl.program_id call and its axis
    region: tuple[ast.stmt, ...]           # the statements that go inside the loop
    span: tuple[int, int]                  # their whole lines, as byte offsets
    carried: frozenset[str]                # names bound before the loop that the loop assigns
    indent: str                            # the body's indentation
    unit: str                              # one level of indentation
    language: str                          # the name triton.language is bound to


class PersistentGrid:
    name = NAME
    exact = EXACT

    def rewrites(self, kernel: KernelSource) -> list[Rewrite]:
        plan = analyze(kernel)
        return [self._rewrite(kernel, plan, k) for k in _worthwhile(plan, kernel.launch)]

    def apply(self, kernel: KernelSource, params: dict) -> Rewrite:
        k = params.get("k")
        if set(params) != {"k"} or not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= MAX_K:
            raise NotRewritable(f"persistent-grid takes {{'k': 1..{MAX_K}}}, got {params!r}")
        return self._rewrite(kernel, analyze(kernel), k)

    def _rewrite(self, kernel: KernelSource, plan: Plan, k: int) -> Rewrite:
        rule = {"k": k, "tiles": TILES} if plan.dims == 1 else {"k": k, "tiles": TILES, "g0": G0}
        why = (f"tl.program_id only picks the tile ({len(plan.calls)} uses, {plan.dims}-D); no num_programs, "
               f"atomics, barriers or early return: tile t computes what program t did")
        return Rewrite(NAME, EXACT, why, kernel.edit([_signature(kernel, plan), _loop(kernel, plan)]),
                       params={"k": k}, knobs=(Knob("k", k, tuple(sorted(KS))),), grid={"persistent": rule})


# ------------------------------------------------------------------------------ legality

def analyze(kernel: KernelSource) -> Plan:
    """The plan for ``kernel``, or ``NotRewritable`` with the first reason it is not legal."""
    fn = kernel.function
    args = fn.args
    if args.vararg or args.kwarg or args.kwonlyargs:
        raise NotRewritable("*args, **kwargs or keyword-only parameters")
    if not kernel.params:
        raise NotRewritable("the kernel has no parameters")
    if any(n.startswith(PREFIX) for n in names_in(fn) | set(kernel.params)):
        raise NotRewritable(f"names starting with {PREFIX} are tritune's (already rewritten?)")
    _check_constructs(fn, "the kernel")
    calls = _program_ids(kernel)
    _check_calls(kernel, fn, "the kernel", set())
    body = list(fn.body)
    if body and _is_docstring(body[0]):
        body = body[1:]
    prologue = 0
    while prologue < len(body) and _is_constant_assign(body[prologue]):
        prologue += 1
    region = body[prologue:]
    if not region:
        raise NotRewritable("the kernel's body is only constants")
    span = _check_layout(kernel, region)
    bound = set(kernel.params) | {t.id for s in body[:prologue] for t in s.targets}
    stored = {n.id for s in region for n in ast.walk(s) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
    indent = kernel.indent_of(region[0])
    outer = kernel.indent_of(fn)
    unit = indent[len(outer):] if indent.startswith(outer) and len(indent) > len(outer) else ""
    if not unit or "\t" in indent:
        raise NotRewritable("the body's indentation is not spaces deeper than the def's")
    alias = kernel.language_alias()
    if alias is None:
        raise NotRewritable("triton.language is not imported under a name the rewrite could use")
    return Plan(2 if any(axis == 1 for _, axis in calls) else 1, tuple(calls), tuple(region), span,
                frozenset(bound & stored), indent, unit, alias)


def _program_ids(kernel: KernelSource) -> list[tuple[ast.Call, int]]:
    found = []
    for call in kernel.calls("program_id"):
        axis = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "axis"), None)
        if len(call.args) + len(call.keywords) != 1 or not isinstance(axis, ast.Constant) \
                or not isinstance(axis.value, int) or isinstance(axis.value, bool) or axis.value not in (0, 1, 2):
            raise NotRewritable(f"tl.program_id with an axis that is not a literal 0, 1 or 2: "
                                f"{kernel.segment(call)}")
        if axis.value == 2:
            raise NotRewritable("tl.program_id(2): a 3-D grid")
        found.append((call, axis.value))
    if not found:
        raise NotRewritable("no tl.program_id: every program computes the same thing")
    return found


def _check_calls(kernel: KernelSource, node: ast.FunctionDef, where: str, visiting: set[str]) -> None:
    """Every call in ``node``'s body is one the loop cannot change (see the module docstring)."""
    modules = imported_names(kernel.tree)
    helpers = {f.name: f for f in kernel.tree.body if isinstance(f, ast.FunctionDef)}
    for call in (n for s in node.body for n in ast.walk(s) if isinstance(n, ast.Call)):
        func = call.func
        attr = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else None
        if attr is None:  # getattr(tl, "program_id")(0), fns[0](x): a builtin-computed callee hides its name
            raise NotRewritable(f"{where} calls {kernel.segment(func) or 'a computed function'}, "
                                "a function the rule cannot name")
        _check_name(attr, where, program_id_ok=where == "the kernel" and kernel.is_language(func, "program_id"))
        name = dotted(func)
        root = name.split(".")[0] if name else None
        if isinstance(func, ast.Attribute) and root in modules:
            if not (root in kernel.language or root == "triton" or root in _HELPER_MODULES):
                raise NotRewritable(f"{where} calls {name} from a module the rule cannot see into")
        elif isinstance(func, ast.Name):
            if func.id in helpers and func.id not in visiting and func.id != kernel.kernel:
                helper = helpers[func.id]
                _check_constructs(helper, f"helper {func.id}", returns=True)
                _check_calls(kernel, helper, f"helper {func.id}", visiting | {func.id})
            elif func.id not in helpers and (func.id in modules or func.id not in _BUILTINS):
                raise NotRewritable(f"{where} calls {func.id}, which the rule cannot see into")


def _check_name(attr: str, where: str, program_id_ok: bool) -> None:
    if attr == "program_id" and not program_id_ok:
        raise NotRewritable(f"{where} reads the program id outside the kernel's own tl.program_id calls")
    # Inductor's triton_helpers are trusted by name: its ordering helpers are x_grid_barrier and
    # the split scan's exclusive_scan_decoupled_lookback[_64] (a spin-wait on the previous tile)
    if attr.startswith("atomic") or "barrier" in attr or "lookback" in attr:
        raise NotRewritable(f"{where} uses {attr}: atomics, barriers and lookback scans may order programs")
    if attr in _FORBIDDEN:
        raise NotRewritable(f"{where} uses {_FORBIDDEN[attr]}")


def _check_constructs(fn: ast.FunctionDef, where: str, returns: bool = False) -> None:
    for node in (n for s in fn.body for n in ast.walk(s)):  # not the decorators
        if isinstance(node, ast.Return) and not returns:
            raise NotRewritable(f"{where} returns early (line {node.lineno}): the loop would stop there")
        if isinstance(node, _SCOPES):
            raise NotRewritable(f"{where} has a {type(node).__name__} (line {node.lineno})")


def _check_layout(kernel: KernelSource, region: list[ast.stmt]) -> tuple[int, int]:
    """The region's lines as byte offsets, if re-indenting them changes nothing but indentation."""
    data = kernel.text.encode()
    offsets = line_offsets(data)
    start = offsets[region[0].lineno - 1]
    if data[start:start + region[0].col_offset].strip():
        raise NotRewritable("the body starts on the line of another statement")
    end = offsets[region[-1].end_lineno] if region[-1].end_lineno < len(offsets) else len(data)
    for node in ast.walk(ast.Module(body=region, type_ignores=[])):
        string = isinstance(node, ast.JoinedStr) or (isinstance(node, ast.Constant)
                                                      and isinstance(node.value, (str, bytes)))
        if string and node.lineno != node.end_lineno:
            raise NotRewritable(f"a string over several lines (line {node.lineno}) would change with the indentation")
    if any("\t" in line[: len(line) - len(line.lstrip())] for line in data[start:end].decode().splitlines()):
        raise NotRewritable("tabs in the body's indentation")
    return start, end


def _worthwhile(plan: Plan, launch: dict | None) -> list[int]:
    """The k to propose, given what is known of the launch (its grid, the device's SMs)."""
    grid = list((launch or {}).get("grid") or [])
    if not grid:
        return list(KS)
    grid = [int(g) for g in grid] + [1] * (3 - len(grid))
    if grid[2] != 1:
        raise NotRewritable(f"the launch's grid {grid} has a third dimension")
    if plan.dims == 1 and grid[1] != 1:
        raise NotRewritable(f"the launch's grid {grid} has a second dimension the kernel does not read")
    tiles, sms = grid[0] * grid[1], (launch or {}).get("sm_count")
    if not sms:
        return list(KS)
    ks = [k for k in KS if k * int(sms) < tiles]
    if not ks:
        raise NotRewritable(f"{tiles} tiles fit in one wave of {min(KS)} x {sms} SMs: nothing would loop")
    return ks


# ------------------------------------------------------------------------------ the edits

def _signature(kernel: KernelSource, plan: Plan) -> Edit:
    """Insert the added parameters before the first parameter with a default, else last."""
    args = kernel.function.args
    positional = [*args.posonlyargs, *args.args]
    added = [TILES] if plan.dims == 1 else [TILES, G0]
    defaulted = positional[len(positional) - len(args.defaults):] if args.defaults else []
    if defaulted:
        start = kernel.span(defaulted[0])[0]
        return Edit(start, start, "".join(f"{name}, " for name in added))
    end = kernel.span(positional[-1])[1]
    return Edit(end, end, "".join(f", {name}" for name in added))


def _loop(kernel: KernelSource, plan: Plan) -> Edit:
    """The region in the tile loop: one edit over its lines, program ids and carried names
    replaced, every line one level deeper."""
    start, end = plan.span
    replaced = [(kernel.span(call), (TILE if plan.dims == 1 else PIDS[axis]).encode()) for call, axis in plan.calls]
    replaced += [(kernel.span(n), (RENAMED + n.id).encode()) for s in plan.region for n in ast.walk(s)
                 if isinstance(n, ast.Name) and n.id in plan.carried]
    body = kernel.text.encode()[start:end]
    for (a, b), text in sorted(replaced, reverse=True):
        body = body[: a - start] + text + body[b - start:]
    lines = body.decode().splitlines(keepends=True)
    indented = "".join(plan.unit + line if line.strip() else line for line in lines)
    tl, inner = plan.language, plan.indent + plan.unit
    head = [f"{plan.indent}for {TILE} in {tl}.range({tl}.program_id(0), {TILES}, {tl}.num_programs(0)):\n"]
    if plan.dims == 2:
        used = {axis for _, axis in plan.calls}
        head += [f"{inner}{PIDS[0]} = {TILE} % {G0}\n"] if 0 in used else []
        head += [f"{inner}{PIDS[1]} = {TILE} // {G0}\n"] if 1 in used else []
    head += [f"{inner}{RENAMED}{name} = {name}\n" for name in sorted(plan.carried)]
    return Edit(start, end, "".join(head) + indented)


# ------------------------------------------------------------------------------ helpers

def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant) and isinstance(stmt.value.value, str)


def _is_constant_assign(stmt: ast.stmt) -> bool:
    """``name = 1024`` (or ``-1``, ``1.0``, ``True``): the same before the loop as in it."""
    value = stmt.value if isinstance(stmt, ast.Assign) else None
    if isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.USub):
        value = value.operand
    return (value is not None and all(isinstance(t, ast.Name) for t in stmt.targets)
            and isinstance(value, ast.Constant) and not isinstance(value.value, (str, bytes)))
