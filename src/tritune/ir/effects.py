"""Which ops may write global memory.

Sound by construction: an op is known not to write global memory only if its dialect is pure
(``arith``, ``math``) or its name is in ``NO_GLOBAL_WRITE``. Everything else (stores, atomics,
calls, barriers, inline asm not marked pure, ops this list has never heard of) may write.
Structured control flow ops (``scf.for``, ``scf.if``, ...) do not write by themselves; callers
that reason about a range of ops include the ops nested in them (``ModuleView.ops_between``).
"""

from __future__ import annotations

from tritune.ir.view import Op

PURE_DIALECTS = ("arith.", "math.")

NO_GLOBAL_WRITE = frozenset({
    # triton: reads, address arithmetic, shape ops, reductions (their bodies are checked too)
    "tt.load", "tt.descriptor_load", "tt.descriptor_gather", "tt.gather",
    "tt.get_program_id", "tt.get_num_programs", "tt.make_range", "tt.splat", "tt.unsplat",
    "tt.broadcast", "tt.expand_dims", "tt.reshape", "tt.trans", "tt.join", "tt.split", "tt.cat",
    "tt.addptr", "tt.advance", "tt.make_tensor_ptr", "tt.make_tensor_descriptor",
    "tt.int_to_ptr", "tt.ptr_to_int", "tt.bitcast", "tt.fp_to_fp", "tt.clampf",
    "tt.precise_divf", "tt.precise_sqrt", "tt.mulhiui", "tt.dot", "tt.dot_scaled",
    "tt.reduce", "tt.reduce.return", "tt.scan", "tt.scan.return", "tt.histogram",
    "tt.map_elementwise", "tt.map_elementwise.return", "tt.assume", "tt.return",
    "tt.extern_elementwise",
    # structured control flow: the ops inside are checked separately
    "scf.for", "scf.if", "scf.while", "scf.yield", "scf.condition",
    # triton gpu: layout and shared-memory ops that never touch global memory
    "ttg.convert_layout", "ttg.local_alloc", "ttg.local_load", "ttg.memdesc_subslice",
    "ttg.memdesc_index", "ttg.memdesc_trans", "ttg.memdesc_reshape",
})


def may_write_global(op: Op) -> bool:
    if op.name.startswith(PURE_DIALECTS):
        return False
    if op.name == "tt.load":
        # A volatile load orders memory accesses; treat it like a write so nothing moves across it.
        return op.load is None or op.load.volatile
    if op.name == "tt.elementwise_inline_asm":
        return op.handle.get_bool_attr("pure") is not True
    return op.name not in NO_GLOBAL_WRITE
