"""Persistent -> looped: an Inductor persistent reduction rewritten to loop over its row.

Inductor's persistent reduction (``triton_per_*``) holds a whole row in registers:
``R0_BLOCK: tl.constexpr = N`` is fixed in the body (no config carries it, so coordinate descent
never moves it) and the body is straight-line code over an ``[XBLOCK, R0_BLOCK]`` tile. For long
rows that costs registers and occupancy; Inductor's own answer is a looped kernel (``triton_red_*``,
``for r0_offset in range(0, r0_numel, R0_BLOCK)``), which it only tries with ``multi_kernel``,
from its IR. Here the captured source is rewritten instead, statement by statement:

    reduction  x = tl.sum(v, 1)[:, None]         chunk 0: as written; chunk k: x = x + <same>
               x = triton_helpers.max2(v, 1)...   x = triton_helpers.maximum(x, <same>)  (min2: minimum)
    level      a reduction's result is known after the loop that reads its input: a value that
               depends on n reduction results (through one another) has level n; loop n recomputes
               every r-varying value it needs (loads included) and accumulates the reductions of
               that level; r-varying stores go in the loop of their level; x-only statements sit
               between the loops, x-only stores and barriers after the last one.
    chunk      r0_index = r0_offset + tl.arange(0, R0_BLOCK)[None, :]; r0_mask as written, so it
               masks the last chunk where the row was masked; chunk 0 is peeled before the loop,
               its row values renamed (``tmp0_c0``), so each accumulator starts as that chunk's
               value, of the type the kernel gives it, and only accumulators are loop-carried.

Legal (checked, else ``NotLoopable`` says why and nothing is proposed):
- the body is Inductor's straight-line persistent form: ``R0_BLOCK: tl.constexpr = <int>``,
  ``r0_index = tl.arange(0, R0_BLOCK)[None, :]``, ``r0_offset = 0``, no loop, branch or second
  reduction dimension; every name assigned once;
- every call is elementwise (tl.load, tl.where, libdevice.*, ...: ``ELEMENTWISE``) or one of the
  three reductions above as a whole statement (axis 1, of an r-varying value, then only
  ``[:, None]`` / ``.to(tl.float32)``): welford, argmax, scans and unknown calls are refused;
- the row is masked (``r0_mask = r0_index < r0_numel``: any smaller block), or it is unmasked and
  the body fixes ``r0_numel`` to the old block (a smaller power of two then divides it);
- memory: every load and store goes through a parameter plus an offset (a pointer kept in a
  local name would hide which buffer it reads); a pointer is stored by at most one statement; a
  pointer that is both loaded and stored is accessed at one address expression, every load of it
  comes before its store in the source, and no loop after the store's loop loads it: each
  element is read before it is overwritten, as in the original. ``tl.debug_barrier()`` goes
  before such a store (the in-place store of a chunk must not overtake another thread's load of
  it; in the persistent kernel the reduction between them synchronised the block).

Not exact: a sum is added up chunk by chunk (``tolerance``); max and min are exact. The rewrite
costs extra reads (a layer norm reads its row three times, where Inductor's looped kernel uses
Welford in two passes): it pays where the persistent row spills or starves occupancy, and the
arbiter decides. The reverse, looped -> persistent, is ``R0_BLOCK >= r0_numel`` of a looped
kernel (``space.r0_block_knob``: a single iteration), and back to persistent is the baseline.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from typing import Iterable

from tritune.model import families
from tritune.model.launch import LaunchSpec, SpecError
from tritune.model.trial import Trial
from tritune.model.variant import Variant
from tritune.rewrites.base import line_offsets
from tritune.search.cache_hints import CacheHintProposer

NAME_PREFIX = "looped reduction: R0_BLOCK="
KNOBS = ("persistent->looped", "R0_BLOCK")  # what its variants turn (``Variant.knobs``)
MIN_R0_BLOCK = 32  # one warp's worth of lanes per row: smaller chunks leave threads idle
MAX_PROPOSALS = 3  # R0_BLOCK / 2, / 4, / 8: each halving adds chunks and loop overhead
SEEDS = ("r0_index", "r0_offset", "r0_mask")  # the values that differ from chunk to chunk
REDUCTIONS = {"tl.sum": "{acc} + {part}", "triton_helpers.max2": "triton_helpers.maximum({acc}, {part})",
              "triton_helpers.min2": "triton_helpers.minimum({acc}, {part})"}
ELEMENTWISE = {"tl.load", "tl.store", "tl.where", "tl.full", "tl.broadcast_to", "tl.maximum", "tl.minimum",
               "tl.abs", "tl.exp", "tl.exp2", "tl.log", "tl.log2", "tl.sqrt", "tl.rsqrt", "tl.sigmoid", "tl.erf",
               "tl.fma", "tl.cos", "tl.sin", "tl.floor", "tl.ceil", "tl.program_id", "tl.arange",
               "tl.debug_barrier", "tl.device_assert", "triton_helpers.maximum", "triton_helpers.minimum",
               "triton_helpers.promote_to_tensor", "triton_helpers.div_floor_integer",
               "triton_helpers.remainder_integer", "triton_helpers.div_floor_floating", "float"}  # float("-inf")
ELEMENTWISE_MODULES = ("libdevice.", "tl_math.", "tl.math.")
METHODS = {"to"}  # tensor methods that are elementwise; .shape and .dtype are read, not called
UNMASKED = "tl.full([R0_BLOCK], True, tl.int1)[None, :]"
MASKED = "r0_index < r0_numel"
INDEX = "tl.arange(0, R0_BLOCK)[None, :]"
CHUNK0 = "_c0"  # suffix of chunk 0's own names


class NotLoopable(ValueError):
    """The kernel is not a persistent reduction this rewrite can loop soundly; the text says why."""


@dataclasses.dataclass
class _Stmt:
    index: int
    text: str  # the statement's source, as written
    target: str | None  # the name it assigns
    uses: set[str]
    role: str  # "static", "value", "reduction", "store", "barrier", "assert", "index", "mask", "offset"
    r_varying: bool = False
    level: int = 0
    combine: str = ""  # a reduction's accumulation template
    pointer: tuple[str, str, str] | None = None  # (base, address text, "load"/"store") of a store


@dataclasses.dataclass(frozen=True)
class Persistent:
    """A persistent reduction kernel, parsed and checked (``parse``)."""

    r0_block: int
    masked: bool
    statements: tuple[_Stmt, ...]
    body: tuple[int, int]  # byte offsets of the body in the file
    indent: str


def rewrite(source: str, kernel: str, r0_block: int) -> str:
    """``source`` with ``kernel`` looping over r0 in chunks of ``r0_block``; every other byte kept."""
    found = parse(source, kernel)
    if r0_block & (r0_block - 1) or not 0 < r0_block < found.r0_block:
        raise NotLoopable(f"R0_BLOCK {r0_block} is not a power of two below the persistent block {found.r0_block}")
    text = _emit(found, r0_block)
    start, end = found.body
    data = source.encode()
    return (data[:start] + text.encode() + data[end:]).decode()


def parse(source: str, kernel: str) -> Persistent:
    """The persistent reduction ``kernel`` of ``source``, or ``NotLoopable`` naming the first rule
    it breaks (module docstring)."""
    tree = ast.parse(source)
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel]
    if not defs:
        raise NotLoopable(f"no function {kernel} in the source")
    fn = max(defs, key=lambda n: n.lineno)
    params = {a.arg for a in fn.args.args}
    statements = [_statement(i, node, source) for i, node in enumerate(fn.body)]
    block, masked = _check_prologue(statements, params)
    _classify(statements)
    _check_memory(statements)
    data = source.encode()
    lines = line_offsets(data)  # ast columns are UTF-8 byte offsets
    first, last = fn.body[0], fn.body[-1]
    start = lines[first.lineno - 1]  # from the start of the first body line (its indentation)
    end = lines[last.end_lineno - 1] + last.end_col_offset
    indent = data[start:start + first.col_offset].decode()
    return Persistent(block, masked, tuple(statements), (start, end), indent)


def loopable(source: str, kernel: str) -> str | None:
    """None when ``kernel`` can be looped, else why not (one line)."""
    try:
        parse(source, kernel)
    except NotLoopable as exc:
        return str(exc)
    except SyntaxError as exc:
        return f"the source does not parse: {exc.msg}"
    return None


# ---------------------------------------------------------------------------------- parsing

def _statement(index: int, node: ast.stmt, source: str) -> _Stmt:
    text = ast.get_source_segment(source, node) or ""
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        if "constexpr" not in ast.unparse(node.annotation):
            raise NotLoopable(f"line {node.lineno}: an annotated assignment that is not a constexpr")
        return _Stmt(index, text, node.target.id, _names(node.value), "static")
    if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
        name, value = node.targets[0].id, node.value
        _check_calls(value, node.lineno)
        reduction = _reduction(value)
        if reduction is not None:
            call, template = reduction
            return _Stmt(index, text, name, _names(call.args[0]), "reduction", combine=template)
        role = {"r0_index": "index", "r0_mask": "mask", "r0_offset": "offset"}.get(name, "value")
        return _Stmt(index, text, name, _names(value), role)
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        called = _dotted(node.value.func)
        _check_calls(node.value, node.lineno)
        role = {"tl.store": "store", "tl.debug_barrier": "barrier", "tl.device_assert": "assert"}.get(called)
        if role is None:
            raise NotLoopable(f"line {node.lineno}: a call to {called or 'an expression'} as a statement")
        stmt = _Stmt(index, text, None, _names(node.value), role)
        if role == "store":
            stmt.pointer = _pointer(node.value, node.lineno, "store")
        return stmt
    raise NotLoopable(f"line {node.lineno}: a {type(node).__name__} statement (the body must be straight-line)")


def _check_prologue(statements: list[_Stmt], params: set[str]) -> tuple[int, bool]:
    """(the persistent R0_BLOCK, whether the row is masked); the rest of the rules on names."""
    by_target: dict[str, _Stmt] = {}
    for stmt in statements:
        if stmt.target is None:
            continue
        if stmt.target in by_target:
            raise NotLoopable(f"{stmt.target} is assigned twice")
        by_target[stmt.target] = stmt
    if any(name.endswith(CHUNK0) for s in statements for name in s.uses | {s.target or ""}):
        raise NotLoopable(f"the kernel already uses names ending in {CHUNK0}, which the rewrite gives chunk 0")
    block = by_target.get("R0_BLOCK")
    match = re.fullmatch(r"R0_BLOCK\s*:\s*tl\.constexpr\s*=\s*(\d+)", block.text) if block else None
    if match is None:
        raise NotLoopable("no R0_BLOCK: tl.constexpr = <int> in the body: not a persistent reduction")
    if any(name in by_target or name in params for name in ("R1_BLOCK", "RSPLIT")):
        raise NotLoopable("a second reduction dimension or a cooperative (RSPLIT) reduction")
    index, offset, mask = (by_target.get(n) for n in SEEDS)
    if index is None or _squash(index.text) != _squash(f"r0_index = {INDEX}"):
        raise NotLoopable(f"r0_index is not {INDEX}")
    if offset is None or _squash(offset.text) != "r0_offset=0":
        raise NotLoopable("r0_offset is not 0")
    if mask is None or _squash(mask.text) not in (_squash(f"r0_mask = {UNMASKED}"), _squash(f"r0_mask = {MASKED}")):
        raise NotLoopable(f"r0_mask is neither {UNMASKED} nor {MASKED}")
    r0_block, masked = int(match.group(1)), _squash(mask.text) == _squash(f"r0_mask = {MASKED}")
    numel = by_target.get("r0_numel")
    fixed = re.fullmatch(r"r0_numel\s*=\s*(\d+)", numel.text) if numel else None
    if not masked and (fixed is None or int(fixed.group(1)) != r0_block):
        raise NotLoopable("an unmasked row whose length the body does not fix to R0_BLOCK")
    if "r0_numel" not in params and numel is None:
        raise NotLoopable("no r0_numel to loop to")
    return r0_block, masked


def _classify(statements: list[_Stmt]) -> None:
    """Mark each statement r-varying or not and give it its level (module docstring)."""
    varying: set[str] = set()
    level: dict[str, int] = {}
    for stmt in statements:
        if stmt.role == "offset":
            varying.add(stmt.target)
            continue
        deps = stmt.uses - {stmt.target}
        stmt.r_varying = stmt.role in ("index", "mask") or bool(deps & varying)
        stmt.level = max((level.get(n, 0) for n in deps), default=0)
        if stmt.role == "static" and stmt.r_varying:
            raise NotLoopable(f"constexpr {stmt.target} depends on the row's index")
        if stmt.role == "reduction":
            if not stmt.r_varying:
                raise NotLoopable(f"{stmt.target} reduces a value that does not vary along the row")
            stmt.level += 1  # known after the loop that reads its input
            stmt.r_varying = False
        elif stmt.role == "store" and stmt.r_varying != _varies(stmt.pointer[1], varying):
            raise NotLoopable(f"a store whose address and value disagree on varying along the row: {stmt.text}")
        if stmt.target is not None:
            level[stmt.target] = stmt.level
            if stmt.r_varying:
                varying.add(stmt.target)
    for stmt in statements:
        if stmt.role == "reduction":
            stmt.level -= 1  # from here on: the loop that accumulates it


def _varies(address: str, varying: set[str]) -> bool:
    return bool(_names(ast.parse(address, mode="eval").body) & varying)


def _check_memory(statements: list[_Stmt]) -> None:
    """The memory rules of the module docstring, on the schedule ``_loops`` will build."""
    loads: dict[str, list[tuple[int, str]]] = {}
    for stmt in statements:
        for base, address in _loads_in(stmt.text):
            loads.setdefault(base, []).append((stmt.index, address))
    assigned = {s.target for s in statements if s.target is not None}
    local = sorted((set(loads) | {s.pointer[0] for s in statements if s.role == "store"}) & assigned)
    if local:
        raise NotLoopable(f"{local[0]} is a pointer kept in a local name: not a parameter plus an offset")
    stores: dict[str, _Stmt] = {}
    for stmt in statements:
        if stmt.role != "store":
            continue
        base, address, _ = stmt.pointer
        if base in stores:
            raise NotLoopable(f"{base} is stored twice")
        stores[base] = stmt
        for index, loaded in loads.get(base, ()):
            if loaded != address:
                raise NotLoopable(f"{base} is loaded at {loaded} and stored at {address}")
            if index > stmt.index:
                raise NotLoopable(f"{base} is loaded after it is stored")
    loops = _loops(statements)
    for base, store in stores.items():
        if base not in loads or not store.r_varying:
            continue
        reloaded = [n for n, body in enumerate(loops) if any(s.index in {i for i, _ in loads[base]} for s in body)]
        if max(reloaded, default=0) > store.level:
            raise NotLoopable(f"{base} would be loaded again after its store")


def _pointer(call: ast.Call, lineno: int, what: str) -> tuple[str, str, str]:
    if not call.args:
        raise NotLoopable(f"line {lineno}: a {what} without a pointer argument")
    node = call.args[0]
    base = node
    while isinstance(base, ast.BinOp) and isinstance(base.op, ast.Add):
        base = base.left
    if not isinstance(base, ast.Name):
        raise NotLoopable(f"line {lineno}: a {what} through {ast.unparse(node)}: not a parameter plus an offset")
    return base.id, _squash(ast.unparse(node)), what


def _loads_in(text: str) -> Iterable[tuple[str, str]]:
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and _dotted(node.func) == "tl.load":
            base, address, _ = _pointer(node, node.lineno, "load")
            yield base, address


def _reduction(value: ast.expr) -> tuple[ast.Call, str] | None:
    """(the reduction call, its accumulation template) when ``value`` is one of the reductions
    followed only by ``[:, None]`` / ``.to(tl.float32)``; None when it has no reduction."""
    node = value
    while True:
        if isinstance(node, ast.Subscript) and _squash(ast.unparse(node.slice)) in (":,None", "(:,None)"):
            node = node.value
        elif (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "to"
              and [ast.unparse(a) for a in node.args] == ["tl.float32"] and not node.keywords):
            node = node.func.value
        else:
            break
    if not isinstance(node, ast.Call) or _dotted(node.func) not in REDUCTIONS:
        return None
    if (len(node.args) != 2 or node.keywords or not isinstance(node.args[0], ast.Name)
            or not (isinstance(node.args[1], ast.Constant) and node.args[1].value == 1)):
        raise NotLoopable(f"{ast.unparse(value)}: a reduction that is not over axis 1 of a named value")
    return node, REDUCTIONS[_dotted(node.func)]


def _check_calls(value: ast.AST, lineno: int) -> None:
    """Every call in ``value`` elementwise, or a reduction in the one form ``_reduction`` accepts."""
    reduction = _reduction(value) if isinstance(value, ast.expr) else None
    for node in ast.walk(value):
        if not isinstance(node, ast.Call):
            continue
        name = _dotted(node.func)
        if reduction is not None and node is reduction[0]:
            continue
        if isinstance(node.func, ast.Attribute) and node.func.attr in METHODS and name not in REDUCTIONS:
            continue
        if name in ELEMENTWISE or (name and name.startswith(ELEMENTWISE_MODULES)):
            continue
        raise NotLoopable(f"line {lineno}: {name or ast.unparse(node.func)}(...) is not known to be elementwise")


# --------------------------------------------------------------------------------- schedule

def _loops(statements: list[_Stmt] | tuple[_Stmt, ...]) -> list[list[_Stmt]]:
    """The body of each loop: its roots (reductions it accumulates, r-varying stores and asserts
    of its level) and the r-varying statements they need, in source order."""
    defined = {s.target: s for s in statements if s.target is not None}
    roots: dict[int, list[_Stmt]] = {}
    for stmt in statements:
        if stmt.role == "reduction" or (stmt.r_varying and stmt.role in ("store", "assert")):
            roots.setdefault(stmt.level, []).append(stmt)
    loops = []
    for level in range(max(roots, default=-1) + 1):
        needed: set[int] = set()
        work = list(roots.get(level, ()))
        while work:
            stmt = work.pop()
            if stmt.index in needed:
                continue
            needed.add(stmt.index)
            work += [defined[n] for n in stmt.uses if n in defined and defined[n].r_varying and n != stmt.target]
        loops.append([s for s in statements if s.index in needed])
    return loops


def _emit(found: Persistent, r0_block: int) -> str:
    indent, statements = found.indent, found.statements
    loops = _loops(statements)
    loaded = {base for s in statements for base, _ in _loads_in(s.text)}
    # chunk 0's row values get names of their own: only the accumulators are carried into the
    # loop (a value carried in must keep its type, and chunk 0's offset is a constant 0)
    first = {n: f"{n}{CHUNK0}" for s in statements if s.r_varying or s.role == "offset" for n in [s.target] if n}
    out: list[str] = []

    def put(text: str, depth: int = 0) -> None:
        out.append(indent + "    " * depth + text)

    def outside(level: int) -> None:  # x-only statements known after loop ``level - 1``
        for s in statements:
            if s.level == level and not s.r_varying and s.role in ("static", "value", "assert"):
                put(_with_block(s, r0_block))

    def chunk(body: list[_Stmt], depth: int, rename: dict[str, str]) -> None:
        for s in body:
            if s.role == "index":
                text = f"r0_index = r0_offset + {INDEX}"
            elif s.role == "reduction" and not rename:
                text = f"{s.target} = " + s.combine.format(acc=s.target, part=s.text.split("=", 1)[1].strip())
            else:
                text = s.text
            if s.role == "store" and s.pointer[0] in loaded:
                put("tl.debug_barrier()", depth)
            put(_renamed(text, rename) if rename else text, depth)

    outside(0)
    for level, body in enumerate(loops):  # every level has a root: a reduction feeds the next
        put(f"# loop {level}: chunk 0, then the rest of the row")
        put(f"r0_offset{CHUNK0} = 0")
        chunk(body, 0, first)
        put("for r0_offset in tl.range(R0_BLOCK, r0_numel, R0_BLOCK):")
        chunk(body, 1, {})
        outside(level + 1)
    for s in statements:  # after the loops: x-only stores and barriers, as ordered in the source
        if s.role in ("store", "barrier") and not s.r_varying:
            if s.role == "store" and s.pointer[0] in loaded:
                put("tl.debug_barrier()")
            put(s.text)
    return "\n".join(out)


def _renamed(text: str, names: dict[str, str]) -> str:
    """``text`` (one statement) with its names replaced, through the AST (never inside a string)."""
    tree = ast.parse(text)
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id in names:
            node.id = names[node.id]
    return ast.unparse(tree)


def _with_block(stmt: _Stmt, r0_block: int) -> str:
    return f"R0_BLOCK: tl.constexpr = {r0_block}" if stmt.target == "R0_BLOCK" else stmt.text


# ---------------------------------------------------------------------------------- helpers

def _names(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def _dotted(node: ast.AST) -> str:
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    return ".".join([node.id, *reversed(parts)])


def _squash(text: str) -> str:
    return "".join(text.split())


# -------------------------------------------------------------------------------- proposals

class LoopedReductionProposer:
    """Looped variants of an Inductor persistent reduction, ``R0_BLOCK`` halved from the
    persistent block (at most ``MAX_PROPOSALS``, not below ``MIN_R0_BLOCK``); a smaller block is
    proposed only once the larger one built and verified. ``root``: the capture directory."""

    name = families.LOOPED_REDUCTION

    def __init__(self, root: str | None = None) -> None:
        self.root = root

    def propose(self, spec: LaunchSpec, trials: list[Trial], limit: int) -> list[Variant]:
        if spec.kind != "inductor" or limit <= 0:
            return []
        try:
            source = CacheHintProposer(self.root).source_of(spec)
            found = parse(source, spec.kernel)
        except (NotLoopable, SyntaxError, SpecError):
            return []
        outcome = {t.variant.source: t.ok for t in trials if t.variant.source is not None}
        proposals: list[Variant] = []
        for block in blocks(found.r0_block):
            text = rewrite(source, spec.kernel, block)
            if text not in outcome:
                proposals.append(Variant(name=f"{NAME_PREFIX}{block}", source=text, knobs=KNOBS))
                break  # the next smaller block waits for this one's outcome
            if not outcome[text]:
                break  # a failed block: a smaller one is not tried either
        return proposals[:limit]


def blocks(persistent: int) -> list[int]:
    """The looped blocks worth trying for a persistent block, largest first."""
    out, block = [], persistent // 2
    while block >= MIN_R0_BLOCK and len(out) < MAX_PROPOSALS:
        out.append(block)
        block //= 2
    return out



