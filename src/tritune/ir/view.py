"""A small typed view over a Triton MLIR module, built from Triton's Python bindings.

The bindings expose ops one at a time (name, operands, results, containing block, regions) but no
use lists, no parent links and no op identity. ``ModuleView.build`` walks the module once and
derives all of that: every value with its defining op and its uses, every block with its ops in
order and its parent op, and the enum/constant attributes parsed from the printed module.

A view is a snapshot: any rewrite makes it stale. The rewrite driver rebuilds it after each
rewrite (kernels are a few hundred ops, so this is cheap and keeps the logic simple).
"""

from __future__ import annotations

import dataclasses
from typing import Iterator

from triton._C.libtriton import ir

from tritune.ir import printed


@dataclasses.dataclass(eq=False)
class Value:
    id: int
    handle: ir.value
    type: str
    owner: "Op | None"  # None for block arguments
    uses: list[tuple["Op", int]] = dataclasses.field(default_factory=list)

    @property
    def num_uses(self) -> int:
        return len(self.uses)


@dataclasses.dataclass(eq=False)
class Block:
    id: int
    parent: "Op | None"  # the op whose region holds this block; None for the module body
    region_id: int
    ops: list["Op"] = dataclasses.field(default_factory=list)


@dataclasses.dataclass(eq=False)
class Op:
    index: int  # position in the walk (post-order)
    name: str
    handle: ir.operation
    operands: list[Value]
    results: list[Value]
    block: Block | None
    region_ids: list[int]
    load: printed.LoadAttrs | None = None
    constant: printed.FloatConstant | None = None

    @property
    def result(self) -> Value:
        return self.results[0]

    @property
    def position(self) -> int:
        """Position of this op inside its block."""
        assert self.block is not None
        return self.block.ops.index(self)

    def __repr__(self) -> str:
        return f"Op(#{self.index} {self.name})"


@dataclasses.dataclass
class ModuleView:
    module: ir.module
    ops: list[Op]
    values: dict[int, Value]
    blocks: dict[int, Block]

    @classmethod
    def build(cls, module: ir.module) -> "ModuleView":
        handles: list[ir.operation] = []
        module.walk(handles.append)
        blocks: dict[int, Block] = {}
        region_parent: dict[int, Op] = {}
        values: dict[int, Value] = {}
        ops: list[Op] = []
        pending_blocks: list[tuple[Block, ir.block]] = []

        for index, handle in enumerate(handles):
            results = []
            op = Op(index, handle.get_name(), handle, [], results, None, [])
            for i in range(handle.get_num_results()):
                result = handle.get_result(i)
                value = Value(result.id(), result, str(result.get_type()), op)
                values[value.id] = value
                results.append(value)
            for i in range(handle.get_num_regions()):
                region_id = handle.get_region(i).id()
                op.region_ids.append(region_id)
                region_parent[region_id] = op
            block_handle = handle.get_block()
            if block_handle is not None:
                block = blocks.get(block_handle.id())
                if block is None:
                    block = Block(block_handle.id(), None, block_handle.get_parent().id())
                    blocks[block.id] = block
                    pending_blocks.append((block, block_handle))
                block.ops.append(op)
                op.block = block
            ops.append(op)

        for block, _ in pending_blocks:
            block.parent = region_parent.get(block.region_id)

        # Operands after all results exist: a post-order walk visits a loop-carried use inside a
        # region before the op that defines the value after it, and block arguments have no op.
        for op in ops:
            for i in range(op.handle.get_num_operands()):
                handle = op.handle.get_operand(i)
                value = values.get(handle.id())
                if value is None:
                    value = Value(handle.id(), handle, str(handle.get_type()), None)
                    values[value.id] = value
                value.uses.append((op, i))
                op.operands.append(value)

        view = cls(module, ops, values, blocks)
        view._attach_printed_attrs()
        return view

    def _attach_printed_attrs(self) -> None:
        attrs = printed.parse(self.module.str())
        loads = self.ops_named("tt.load")
        constants = self.ops_named("arith.constant")
        if len(loads) != len(attrs.loads) or len(constants) != len(attrs.constants):
            raise printed.PrintedIRError(
                f"printed module has {len(attrs.loads)} tt.load / {len(attrs.constants)} "
                f"arith.constant, the walk found {len(loads)} / {len(constants)}")
        for op, load in zip(loads, attrs.loads):
            op.load = load
        for op, constant in zip(constants, attrs.constants):
            op.constant = constant

    # -- queries ---------------------------------------------------------------------------

    def ops_named(self, *names: str) -> list[Op]:
        return [op for op in self.ops if op.name in names]

    def context(self) -> ir.context:
        return context_of(self.module)

    def nested_ops(self, op: Op) -> Iterator[Op]:
        """Every op inside ``op``'s regions, at any depth."""
        for block in self.blocks.values():
            if block.parent is not None and self._is_inside(block, op):
                yield from block.ops

    def _is_inside(self, block: Block, op: Op) -> bool:
        parent = block.parent
        while parent is not None:
            if parent is op:
                return True
            parent = parent.block.parent if parent.block is not None else None
        return False

    def ancestor_in(self, op: Op, block: Block) -> Op | None:
        """The op of ``block`` that is ``op`` or contains it; None if ``op`` is not under it."""
        current: Op | None = op
        while current is not None and current.block is not None:
            if current.block is block:
                return current
            current = current.block.parent
        return None

    def dominates(self, a: Op, b: Op) -> bool:
        """``a`` properly dominates ``b`` (structured control flow: single-block regions).

        True when ``a`` comes before ``b`` in ``a``'s block, or before the op of that block
        that contains ``b``. Regions with several blocks (unstructured control flow) are never
        reasoned about: the answer there is False, which keeps every user of it sound.
        """
        if a is b or a.block is None:
            return False
        if sum(1 for blk in self.blocks.values() if blk.region_id == a.block.region_id) != 1:
            return False
        anchor = self.ancestor_in(b, a.block)
        return anchor is not None and a.position < anchor.position

    def ops_between(self, a: Op, b: Op) -> Iterator[Op]:
        """Every op that may execute after ``a`` and before ``b``, given ``a`` dominates ``b``.

        The ops after ``a`` in its block up to the op holding ``b``, with all their nested ops;
        and, when ``b`` is nested (a loop body, an if branch), every op in the op holding it:
        over a loop's back edge anything in the body may run between the two.
        """
        assert a.block is not None
        anchor = self.ancestor_in(b, a.block)
        assert anchor is not None, "ops_between needs a to dominate b"
        for op in a.block.ops[a.position + 1:anchor.position]:
            yield op
            yield from self.nested_ops(op)
        if anchor is not b:
            yield from self.nested_ops(anchor)


def context_of(module: ir.module) -> ir.context:
    """The MLIR context of ``module`` (the bindings expose it only through values)."""
    found: list[ir.context] = []

    def visit(op: ir.operation) -> None:
        if not found and op.get_num_results():
            found.append(op.get_result(0).get_context())

    module.walk(visit)
    if not found:
        raise ValueError("module has no op with a result to take the context from")
    return found[0]
