"""Which kernel arguments a pointer value is derived from: the base of each pointer.

A pointer value comes from the kernel function's pointer arguments through ops that derive
pointers from pointers. ``Provenance.bases(value)`` walks back from a value to the set of
argument positions it may point into, or None when it cannot tell (the pointer was loaded from
memory, made from an integer, passed through a call or an op not listed here): None may point
anywhere, and every user must treat it so.

Followed back:
    ``FORWARD_ALL``    every operand may carry the pointer (splat, broadcast, reshapes, join, cat)
    ``FORWARD_FIRST``  operand 0 is the pointer, the others offsets (addptr, advance, block ptrs)
    ``arith.select``   either chosen value
    ``scf.for``        a result or a body argument: the initial value and the yielded one
    ``scf.if``         a result: what either branch yields
The function's entry block arguments are the bases. ``scf.while`` and anything else end the walk
with None. Loop-carried values are followed to a fixpoint (a cycle adds nothing new).
"""

from __future__ import annotations

from tritune.ir.view import ModuleView, Op, Value

# every pointer operand flows into every result
FORWARD_ALL = frozenset({"tt.splat", "tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans", "tt.bitcast",
                         "tt.join", "tt.cat", "ttg.convert_layout", "tt.unsplat"})
# operand 0 is the pointer, the others are offsets / shapes
FORWARD_FIRST = frozenset({"tt.addptr", "tt.advance", "tt.make_tensor_ptr", "tt.make_tensor_descriptor"})

_UNKNOWN = None


class Provenance:
    """Bases of the pointer values of one module view (built once per view)."""

    def __init__(self, view: ModuleView):
        self.view = view
        self.origin: dict[int, tuple[Op, int]] = {}  # block argument id -> (op owning the block, position)
        self.arguments: dict[int, int] = {}  # value id of a tt.func argument -> its position
        for block in view.blocks.values():
            if not block.ops:
                continue
            handle = block.ops[0].handle.get_block()
            for i in range(handle.get_num_arguments()):
                value_id = handle.arg(i).id()
                if block.parent is not None and block.parent.name == "tt.func":
                    self.arguments[value_id] = i
                elif block.parent is not None:
                    self.origin[value_id] = (block.parent, i)
        self._memo: dict[int, frozenset[int] | None] = {}

    def bases(self, value: Value) -> frozenset[int] | None:
        """Positions of the kernel arguments ``value`` may point into; None: anywhere."""
        if value.id not in self._memo:
            self._memo[value.id] = self._walk(value, set())
        return self._memo[value.id]

    def _walk(self, value: Value, visiting: set[int]) -> frozenset[int] | None:
        if value.id in self._memo:
            return self._memo[value.id]
        if value.id in visiting:
            return frozenset()  # a loop-carried cycle: its other inputs decide
        if value.id in self.arguments:
            return frozenset({self.arguments[value.id]})
        visiting = visiting | {value.id}
        found: set[int] = set()
        for source in self._sources(value):
            if source is None:
                return _UNKNOWN
            bases = self._walk(source, visiting)
            if bases is None:
                return _UNKNOWN
            found |= bases
        return frozenset(found)

    def _sources(self, value: Value) -> list[Value | None]:
        """The values ``value`` takes its pointer from; [None] when it cannot be followed."""
        op = value.owner
        if op is None:
            return self._block_argument_sources(value)
        if op.name in FORWARD_ALL:
            return list(op.operands)
        if op.name in FORWARD_FIRST:
            return [op.operands[0]]
        if op.name == "arith.select":
            return op.operands[1:3]
        index = op.results.index(value)
        if op.name == "scf.for":
            return [op.operands[3 + index], self._yielded(op, index)]
        if op.name == "scf.if":
            return [self._yielded(op, index, region) for region in range(len(op.region_ids))]
        return [None]

    def _block_argument_sources(self, value: Value) -> list[Value | None]:
        parent, position = self.origin.get(value.id, (None, -1))
        if parent is None or parent.name != "scf.for" or position == 0:  # 0: the induction variable
            return [None]
        return [parent.operands[3 + position - 1], self._yielded(parent, position - 1)]

    def _yielded(self, op: Op, index: int, region: int = 0) -> Value | None:
        """Operand ``index`` of the ``scf.yield`` ending ``op``'s region ``region``."""
        region_id = op.region_ids[region]
        for block in self.view.blocks.values():
            if block.parent is op and block.region_id == region_id and block.ops:
                last = block.ops[-1]
                if last.name == "scf.yield" and index < len(last.operands):
                    return last.operands[index]
        return None
