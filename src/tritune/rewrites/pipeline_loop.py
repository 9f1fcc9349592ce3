"""pipeline-loop (exact): a ``for`` loop over loads asks Triton to software-pipeline it.

Rewrite (only the loop's iterator changes; every other byte of the file is kept)::

    for k in range(0, K, BK):                 for k in tl.range(0, K, BK, num_stages=3):
    for k in tl.range(0, K, BK):        ->    for k in tl.range(0, K, BK, num_stages=3):

with ``loop_unroll_factor=U`` added when U > 1 and ``warp_specialize=True`` where it is offered
(below). Parameters: ``{"loop": i, "num_stages": S, "loop_unroll_factor": U}`` (plus
``"warp_specialize": True``); ``i`` counts the kernel's ``for`` and ``while`` loops in source order.
Why it helps: the launch option ``num_stages`` pipelines only loads that feed a ``tl.dot``; a
loop's own ``num_stages`` prefetches most of its loads S - 1 iterations ahead (Triton 3.6 on
sm_90: ``cp.async`` into shared memory), so a looped reduction streams instead of waiting for each
load (``tl.range`` documents the difference).

Legal when all of these hold:

- the function is ``@triton.jit``-decorated (a loop of a plain Python helper is not the kernel's);
- the loop is ``for NAME in range(a[, b[, c]])`` or ``tl.range`` carrying at most ``step``: not
  ``static_range`` (unrolled at compile time), no ``num_stages``/``loop_unroll_factor``/
  ``warp_specialize`` or other hand-set attribute, no ``*args``/``**kwargs`` (nor keywords on the
  builtin ``range``), no literal argument that is not an integer, no ``else`` clause;
- the loop is innermost: Triton pipelines innermost loops only (checked with Triton 3.6 for
  sm_90: ``num_stages`` on an outer loop whose loads sit in an inner loop pipelines nothing), so
  its loads must be directly in its body (through ``if``, ``static_range`` and same-file helper
  calls, which are inlined), and the rule rewrites the inner loop instead;
- it loads memory (``tl.load``, a tensor descriptor's ``.load``) and none of the loads is
  volatile or ``.cv`` (a loop polling memory other programs write);
- nothing in it orders memory: no ``tl.debug_barrier``, no atomic (locks, counters), no inline
  assembly, no ``break``/``continue``/``return``, no call whose effects the rule cannot see (a
  helper imported from elsewhere);
- nothing in it writes memory a load of the loop may read. Triton's pipeliner does not order a
  prefetched load after the stores of earlier iterations: a loop whose iteration i stores the row
  iteration i + 1 loads compiles (Triton 3.6, sm_90) to copies of iterations 0 and 1 issued
  before iteration 0's store, so the pipelined loop reads stale data. Any pointer parameter may
  alias another, so a loop that stores is refused, unless the kernel is specialized under
  no-alias (``KernelSource.noalias``): then a store is allowed when its pointer derives from
  other pointer parameters than every load's (a pointer read from memory, or a store inside a
  helper, still refuses), and the rewrite records the assumption (``assumes=("noalias",)``).

Exact: ``num_stages`` changes only when each load is issued (earlier, into shared memory, waited
for before its first use); ``loop_unroll_factor`` repeats the body U times in the same order with
a remainder loop; warp specialization moves the loads and the MMA into separate warp groups that
hand tiles over in order. No arithmetic is added, removed or reordered, and with no write in the
loop the prefetched bytes are the bytes the original load reads: results are bitwise identical.

``warp_specialize`` on sm_90 (compiled with Triton 3.6.0 for ``GPUTarget("cuda", 90, 32)``):
- a ``tl.dot`` K-loop whose loads are tensor-descriptor loads (``desc.load``): compiles, the TTGIR
  has a ``ttg.warp_specialize`` region and the kernel runs 12 warps instead of 4: offered;
- the same loop over pointer loads (``tl.load``): the NVGPUWarpSpecialization pass asserts
  (WSLowerToken.cpp) and compilation fails: not offered;
- a loop without ``tl.dot`` (a row sum): compiles, but nothing is partitioned and the loop's
  pipelining is dropped (``tt.num_stages = 0``): not offered.
"""

from __future__ import annotations

import ast
import builtins
import dataclasses

from tritune.rewrites.base import (EXACT, NOALIAS, Edit, KernelSource, Knob, NotRewritable, Rewrite, dotted,
                                   imported_names, imports, keyword, names_in)

STAGES = (1, 2, 3, 4, 5)  # the search's values for num_stages (1: no pipelining, with unrolling)
UNROLLS = (1, 2, 4)
MAX_STAGES = MAX_UNROLL = 8  # apply() refuses more: each stage holds a copy of the loop's tiles in shared memory
# The most promising loop gets these (num_stages, loop_unroll_factor) first: 3 is Triton's own
# default for dot loops, 2 needs the least shared memory, 4 hides more latency; unrolling last.
PLAN = ((3, 1), (2, 1), (4, 1), (3, 2))
MAX_PROPOSALS = 6  # each costs a build, a verification and a timing
HAND_SET = ("num_stages", "loop_unroll_factor", "disallow_acc_multi_buffer", "flatten", "warp_specialize",
            "disable_licm")  # tl.range's attributes after step, in its positional order
UNKNOWN = "<unknown>"  # a value's origin: read from memory or cast to a pointer (it may point anywhere)
# Modules whose functions are Triton builtins or pure helpers (Inductor's triton_helpers, libdevice)
PURE_MODULES = ("triton", "torch._inductor.runtime")


@dataclasses.dataclass(frozen=True)
class Loop:
    """One ``for``/``while`` loop of the kernel, in source order, and whether it can be pipelined."""

    index: int
    node: ast.stmt
    problem: str | None          # why it cannot be pipelined; None when it can
    loads: int = 0
    dots: int = 0
    warp_specialize: str | None = "the loop cannot be pipelined"  # why not offered; None when offered
    assumes: tuple[str, ...] = ()

    @property
    def where(self) -> str:
        return f"loop {self.index} (line {self.node.lineno})"


class PipelineLoop:
    name = "pipeline-loop"
    exact = EXACT

    def rewrites(self, kernel: KernelSource) -> list[Rewrite]:
        found = loops(kernel)
        ready = sorted((loop for loop in found if loop.problem is None), key=_promise)
        if not ready:
            if not found:
                raise NotRewritable(f"{kernel.kernel} has no loop")
            raise NotRewritable("; ".join(f"{loop.where}: {loop.problem}" for loop in found))
        best, others = ready[0], ready[1:]
        plans = [{"loop": best.index, "num_stages": s, "loop_unroll_factor": u} for s, u in PLAN]
        if best.warp_specialize is None:
            plans.append({"loop": best.index, "num_stages": 3, "loop_unroll_factor": 1, "warp_specialize": True})
        plans += [{"loop": loop.index, "num_stages": 3, "loop_unroll_factor": 1} for loop in others]
        return [self.apply(kernel, params) for params in plans[:MAX_PROPOSALS]]

    def apply(self, kernel: KernelSource, params: dict) -> Rewrite:
        index, stages, unroll, specialize = _params(params)
        found = loops(kernel)
        if not 0 <= index < len(found):
            raise NotRewritable(f"{kernel.kernel} has {len(found)} loops, no loop {index}")
        loop = found[index]
        if loop.problem is not None:
            raise NotRewritable(f"{loop.where}: {loop.problem}")
        if specialize and loop.warp_specialize is not None:
            raise NotRewritable(f"{loop.where}: no warp_specialize: {loop.warp_specialize}")
        call = loop.node.iter
        edits = []
        if not kernel.is_language(call.func, "range"):  # the builtin range: name Triton's
            alias = kernel.language_alias()
            if alias is None:
                raise NotRewritable("triton.language is not imported under a name the rewrite could use")
            edits.append(Edit(*kernel.span(call.func), f"{alias}.range"))
        extra = f", num_stages={stages}" + (f", loop_unroll_factor={unroll}" if unroll > 1 else "")
        extra += ", warp_specialize=True" if specialize else ""
        last = max([*call.args, *call.keywords], key=lambda n: (n.end_lineno, n.end_col_offset))
        at = kernel.span(last)[1]
        edits.append(Edit(at, at, extra))
        knobs = [Knob("num_stages", stages, STAGES), Knob("loop_unroll_factor", unroll, UNROLLS)]
        if loop.warp_specialize is None:
            knobs.append(Knob("warp_specialize", specialize, (False, True)))
        why = (f"{loop.where} loads {loop.loads} time(s) and writes no memory it reads "
               + ("(distinct pointer arguments under no-alias)" if loop.assumes else "(no store, atomic or barrier)")
               + ": its loads may be issued early; no arithmetic changes")
        return Rewrite(rule=self.name, exact=self.exact, why=why, source=kernel.edit(edits),
                       params={"loop": index, "num_stages": stages, "loop_unroll_factor": unroll,
                               **({"warp_specialize": True} if specialize else {})},
                       knobs=tuple(knobs), assumes=loop.assumes)


def _promise(loop: Loop) -> tuple[int, int, int]:
    """Loops feeding a dot first (the MMA waits on both operands), then those that load most."""
    return (-loop.dots, -loop.loads, loop.index)


def _params(params: dict) -> tuple[int, int, int, bool]:
    unknown = set(params) - {"loop", "num_stages", "loop_unroll_factor", "warp_specialize"}
    if unknown:
        raise NotRewritable(f"unknown pipeline-loop parameters: {', '.join(sorted(unknown))}")
    index, stages = params.get("loop"), params.get("num_stages")
    unroll, specialize = params.get("loop_unroll_factor", 1), params.get("warp_specialize", False)
    for name, value, top in (("loop", index, None), ("num_stages", stages, MAX_STAGES),
                             ("loop_unroll_factor", unroll, MAX_UNROLL)):
        low = 0 if name == "loop" else 1
        if not isinstance(value, int) or isinstance(value, bool) or value < low or (top and value > top):
            raise NotRewritable(f"{name} must be an integer from {low}" + (f" to {top}" if top else "")
                                + f", not {value!r}")
    if not isinstance(specialize, bool):
        raise NotRewritable(f"warp_specialize must be true or false, not {specialize!r}")
    return index, stages, unroll, specialize


# ------------------------------------------------------------------------------- the loops

def loops(kernel: KernelSource) -> list[Loop]:
    """Every ``for``/``while`` loop of the kernel in source order, each with why it cannot be
    pipelined (None when it can)."""
    nodes = sorted(_loop_nodes(kernel.function.body), key=lambda n: (n.lineno, n.col_offset))
    jit = _is_jit(kernel.function)
    found = []
    for index, node in enumerate(nodes):
        if not jit:
            found.append(Loop(index, node, f"{kernel.kernel} is not a @triton.jit function"))
            continue
        problem = _header_problem(kernel, node)
        found.append(Loop(index, node, problem) if problem else _body(kernel, index, node))
    return found


def _loop_nodes(stmts: list[ast.stmt]) -> list[ast.stmt]:
    """Loops in ``stmts`` at any depth, not those of nested function or class definitions."""
    found = []
    for node in stmts:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            continue
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            found.append(node)
        for field in ("body", "orelse", "finalbody"):
            found += _loop_nodes(getattr(node, field, []))
        for handler in getattr(node, "handlers", []):
            found += _loop_nodes(handler.body)
    return found


def _is_jit(function: ast.FunctionDef) -> bool:
    for decorator in function.decorator_list:
        name = dotted(decorator.func if isinstance(decorator, ast.Call) else decorator) or ""
        if name.split(".")[-1] == "jit":
            return True
    return False


def _is_static(kernel: KernelSource, node: ast.stmt) -> bool:
    if not (isinstance(node, ast.For) and isinstance(node.iter, ast.Call)):
        return False
    return kernel.is_language(node.iter.func, "static_range") or dotted(node.iter.func) == "static_range"


def _header_problem(kernel: KernelSource, node: ast.stmt) -> str | None:
    """Why the loop's header rules it out, or None."""
    if isinstance(node, ast.While):
        return "a while loop (tl.range pipelines for loops only)"
    if isinstance(node, ast.AsyncFor) or node.orelse:
        return "an async or for-else loop"
    if not isinstance(node.target, ast.Name):
        return "the loop variable is not a plain name"
    call = node.iter
    if _is_static(kernel, node):
        return "a static_range loop is unrolled at compile time: nothing to pipeline"
    builtin = isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id == "range"
    if not (builtin or (isinstance(call, ast.Call) and kernel.is_language(call.func, "range"))):
        return f"iterates over {kernel.segment(call)!r}, not range(...)"
    if any(isinstance(a, ast.Starred) for a in call.args) or any(k.arg is None for k in call.keywords):
        return "unpacked range arguments (*args/**kwargs)"
    if builtin and call.keywords:
        return "range(...) with keyword arguments"
    if not builtin:
        given = [HAND_SET[i - 3] for i in range(3, min(len(call.args), 3 + len(HAND_SET)))]
        given += [k.arg for k in call.keywords if k.arg in HAND_SET]
        if given:
            return f"tl.range already carries {given[0]} (set by hand)"
        if any(k.arg not in ("arg1", "arg2", "step") for k in call.keywords):
            return "tl.range with a keyword it does not take"
    if not 1 <= len(call.args) + len(call.keywords) <= 3:
        return "range with no or too many arguments"
    for arg in [*call.args, *(k.value for k in call.keywords)]:
        if isinstance(arg, ast.Constant) and (not isinstance(arg.value, int) or isinstance(arg.value, bool)):
            return f"a range argument that is not an integer: {kernel.segment(arg)}"
    return None


def _body(kernel: KernelSource, index: int, node: ast.For) -> Loop:
    scan = _Scan(kernel)
    scan.block(node.body, helper=None)
    if scan.problems:
        return Loop(index, node, scan.problems[0])
    if not scan.loads:
        return Loop(index, node, "no load in the loop: nothing to prefetch")
    assumes: tuple[str, ...] = ()
    if scan.stores:
        problem = _store_problem(kernel, scan)
        if problem:
            return Loop(index, node, problem)
        assumes = (NOALIAS,)
    if not scan.dots:
        specialize = "the loop has no tl.dot (sm_90 compiles it but drops the loop's pipelining)"
    elif scan.pointer_loads or scan.stores:
        specialize = "not every load is a tensor-descriptor load with no store (sm_90 fails to compile it)"
    else:
        specialize = None
    return Loop(index, node, None, len(scan.loads), scan.dots, specialize, assumes)


def _store_problem(kernel: KernelSource, scan: "_Scan") -> str | None:
    """Why the loop's stores may write what its loads read (None: they cannot, under no-alias)."""
    text = kernel.segment(scan.stores[0][0]) or "a pointer"
    if not kernel.noalias:
        return (f"stores through {text}, which may alias what the loop loads: the pipeliner issues later "
                "iterations' loads before earlier stores (legal under no-alias specialization)")
    inside = next((h for _, h in [*scan.stores, *scan.loads] if h), None)
    if inside:
        return f"stores while a load or store sits inside helper {inside} (its pointers are the helper's)"
    origins = _Origins(kernel)
    loaded = set()
    for load, _ in scan.loads:
        roots = origins.roots(load)
        if UNKNOWN in roots or not roots:
            return f"loads through {kernel.segment(load)}, a pointer of unknown origin, while the loop stores"
        loaded |= roots
    for store, _ in scan.stores:
        roots = origins.roots(store)
        if UNKNOWN in roots or not roots:
            return f"stores through {kernel.segment(store)}, a pointer of unknown origin"
        if roots & loaded:
            shared = sorted(roots & loaded)[0]
            return f"stores through {kernel.segment(store)}, which derives from {shared} the loop loads"
    return None


class _Scan:
    """What a loop body does: its loads and stores (pointer expressions, and the helper they sit
    in), its dots, and the first reasons it cannot be pipelined. Same-file helpers it calls are
    scanned too (Triton inlines them)."""

    def __init__(self, kernel: KernelSource) -> None:
        self.kernel = kernel
        self.helpers = {n.name: n for n in kernel.tree.body if isinstance(n, ast.FunctionDef)}
        self.modules = _pure_roots(kernel.tree)
        self.imported = imported_names(kernel.tree)
        self.loads: list[tuple[ast.expr, str | None]] = []
        self.stores: list[tuple[ast.expr, str | None]] = []
        self.pointer_loads = 0
        self.dots = 0
        self.problems: list[str] = []
        self.seen: set[str] = set()

    def block(self, stmts: list[ast.stmt], helper: str | None) -> None:
        for stmt in stmts:
            for node in ast.walk(stmt):
                self.node(node, helper)

    def node(self, node: ast.AST, helper: str | None) -> None:
        where = f" (in helper {helper})" if helper else ""
        if isinstance(node, (ast.For, ast.AsyncFor, ast.While)) and not _is_static(self.kernel, node):
            self.problems.append(f"contains a loop at line {node.lineno}{where}: Triton pipelines innermost loops "
                                 "only (rewrite the inner one)")
        elif isinstance(node, (ast.Break, ast.Continue)) or (isinstance(node, ast.Return) and helper is None):
            self.problems.append(f"leaves the loop early (line {node.lineno})")
        elif isinstance(node, ast.Call):
            self.call(node, helper, where)

    def call(self, call: ast.Call, helper: str | None, where: str) -> None:
        name = dotted(call.func)
        attr = call.func.attr if isinstance(call.func, ast.Attribute) else name
        if attr is None:  # fns[0](x), (lambda: ...)(): nothing to look up
            self.problems.append(f"calls {self.kernel.segment(call.func)}{where}, whose effects the rule cannot see")
            return
        if name is not None and "." not in name and name not in self.imported:
            if name in self.helpers:
                if name not in self.seen:  # a helper is scanned once: its effects do not change
                    self.seen.add(name)
                    self.block(self.helpers[name].body, name)
                return
            if hasattr(builtins, name):
                return
            self.problems.append(f"calls {name}{where}, whose memory effects the rule cannot see")
            return
        root = (name or "").split(".")[0]
        if root in self.imported and root not in self.modules:
            self.problems.append(f"calls {name}{where}, whose memory effects the rule cannot see")
            return
        method = root not in self.modules  # x.to(...), desc.load(...): a method of a value
        if attr in ("store", "store_tensor_descriptor") or (method and attr == "scatter"):
            pointer = call.func.value if method else keyword(call, "pointer" if attr == "store" else "desc", 0)
            self.stores.append((pointer if pointer is not None else call, helper))
        elif attr.startswith("atomic") or "barrier" in attr or attr.startswith("inline_asm"):
            self.problems.append(f"{name or attr}{where} orders or writes memory in the loop (an atomic, a barrier "
                                 "or inline assembly)")
        elif attr in ("load", "load_tensor_descriptor") or (method and attr == "gather"):  # tl.gather: registers
            self.load(call, attr, method, where, helper)
        elif attr in ("dot", "dot_scaled"):
            self.dots += 1

    def load(self, call: ast.Call, attr: str, method: bool, where: str, helper: str | None) -> None:
        if method:  # a tensor descriptor's load: the descriptor is the pointer
            self.loads.append((call.func.value, helper))
            return
        pointer = keyword(call, "pointer" if attr == "load" else "desc", 0)
        self.loads.append((pointer if pointer is not None else call, helper))
        if attr != "load":
            return
        self.pointer_loads += 1
        volatile = keyword(call, "volatile", 7)
        cache = keyword(call, "cache_modifier", 5)
        plain_cache = cache is None or (isinstance(cache, ast.Constant) and cache.value in ("", None, ".ca", ".cg"))
        if not plain_cache or (volatile is not None and not (isinstance(volatile, ast.Constant)
                                                             and volatile.value is False)):
            self.problems.append(f"a volatile or .cv load{where} (it may poll memory other programs write)")


class _Origins:
    """Which pointer parameters a value of the kernel derives from, through its assignments (an
    over-approximation: every name a value's expression mentions counts), or ``UNKNOWN`` when it
    was read from memory or cast to a pointer, here or in a helper it calls (``reads_memory``).

    The pointer parameters: those the captured launch types as pointers (``launch["signature"]``,
    ``"*fp32"``), else every parameter that is neither constexpr nor used as an integer
    (``_integers``). A pointer wrongly taken for an integer leaves an expression with no pointer
    root, which refuses; only an expression mixing it with another pointer candidate could slip."""

    def __init__(self, kernel: KernelSource) -> None:
        self.kernel = kernel
        signature = (kernel.launch or {}).get("signature") or {}
        pointers = {p for p, t in signature.items() if str(t).startswith("*") or "tensordesc" in str(t)}
        self.pointers = pointers or set(kernel.params) - kernel.constexpr_params() - _integers(kernel)
        self.helpers = {n.name: n for n in kernel.tree.body if isinstance(n, ast.FunctionDef)}
        self.sources: dict[str, set[str]] = {}
        for node in ast.walk(kernel.function):
            for target, value in _assignments(node):
                deps = names_in(value) | ({UNKNOWN} if self.reads_memory(value) else set())
                for name in names_in(target):
                    self.sources.setdefault(name, set()).update(deps)

    def reads_memory(self, value: ast.AST, visiting: frozenset[str] = frozenset()) -> bool:
        """Whether ``value`` may be read from memory or cast to a pointer. A same-file helper's
        result is, if its body does either (``_row(t, i)`` returning ``tl.load(t + i).to(
        tl.pointer_type(...))``); any other function's (imported, computed) may be."""
        for call in (n for n in ast.walk(value) if isinstance(n, ast.Call)):
            func = call.func
            if isinstance(func, ast.Attribute):
                if func.attr in ("load", "load_tensor_descriptor", "gather", "pointer_type", "int_to_ptr") \
                        or func.attr.startswith("atomic"):
                    return True
            elif not isinstance(func, ast.Name):
                return True
            elif func.id in self.helpers:
                if func.id not in visiting and any(self.reads_memory(stmt, visiting | {func.id})
                                                   for stmt in self.helpers[func.id].body):
                    return True
            elif not hasattr(builtins, func.id):
                return True
        return False

    def roots(self, expr: ast.AST) -> set[str]:
        found, todo, seen = set(), list(names_in(expr)) + ([UNKNOWN] if self.reads_memory(expr) else []), set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            if name == UNKNOWN or name in self.pointers:
                found.add(name)
            todo += self.sources.get(name, ())
        return found


def _integers(kernel: KernelSource) -> set[str]:
    """Names used as integers: a direct operand of ``*``, ``/``, ``%``, a shift or bitwise operator,
    of an ordering comparison (``offs < n``), or an argument of ``range``/``tl.arange``/``cdiv``.
    Triton only offsets and dereferences pointers, so none of these is one."""
    found: set[str] = set()
    for node in ast.walk(kernel.function):
        operands: list[ast.AST] = []
        if isinstance(node, ast.BinOp) and not isinstance(node.op, (ast.Add, ast.Sub)):
            operands = [node.left, node.right]
        elif isinstance(node, ast.Compare) and all(isinstance(op, (ast.Lt, ast.LtE, ast.Gt, ast.GtE))
                                                   for op in node.ops):
            operands = [node.left, *node.comparators]
        elif isinstance(node, ast.Call) and (dotted(node.func) or "").split(".")[-1] in ("range", "arange", "cdiv"):
            operands = list(node.args)
        found |= {o.id for o in operands if isinstance(o, ast.Name)}
    return found


def _assignments(node: ast.AST) -> list[tuple[ast.AST, ast.AST]]:
    if isinstance(node, ast.Assign):
        return [(t, node.value) for t in node.targets]
    if isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
        return [(node.target, node.value)]
    if isinstance(node, (ast.For, ast.AsyncFor)):
        return [(node.target, node.iter)]
    return []


# -------------------------------------------------------------------------------- imports

def _pure_roots(tree: ast.Module) -> set[str]:
    """Names bound to Triton or Inductor's runtime helpers (``tl``, ``triton``, ``libdevice``,
    ``triton_helpers``, ``tl_math``): their functions' effects are known by name."""
    return {name for name, origin in imports(tree) if origin.startswith(PURE_MODULES)} | {"tl", "triton"}
