"""Which tensor arguments a kernel writes: from its TTIR, or by watching one launch.

Replay compares only written arguments, and must not treat an index tensor as an output (its
values matter; see ``recorder``), so this is decided per launch specialization.

From TTIR (``from_ttir``): every pointer parameter of the kernel's ``tt.func`` is followed
forward through the ops that derive pointers from pointers (``tt.addptr``, ``tt.splat``,
``tt.broadcast``, ``tt.expand_dims``, reshapes, ``arith.select``, ``tt.make_tensor_ptr`` /
``tt.advance``, loop and branch values of ``scf.for`` / ``scf.if`` / ``scf.while``). A parameter
whose pointers reach the pointer operand of ``tt.store``, ``tt.atomic_rmw``, ``tt.atomic_cas`` or
a descriptor store is written. One whose pointers reach an op not understood here (a call, a
pointer turned into an integer, a pointer stored as data) is *unsure* and counted as written,
with ``source == "ttir-conservative"``; a parameter whose pointers reach only loads is never
counted as written.

TTIR argument order: constexpr parameters are absent from the ``tt.func`` signature, and so are
the runtime arguments the JIT specializes to constants (``None``, an ``int`` equal to 1); the
others keep their order. ``ttir_params`` pairs them up from the JIT's own specialization.

Under ``TRITON_INTERPRET=1`` there is no compiled kernel: ``compile_ttir`` builds the TTIR for
sm_90 on the CPU (front end and TTIR passes only, in a private cache, no tritune passes). When
that fails, ``Snapshot`` watches a launch: tensors that changed were written (``"observed"``;
a kernel that writes back the values already there is missed).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
from typing import Any, Iterable, Sequence

from tritune.ir import ModuleView, parse_module
from tritune.ir.provenance import FORWARD_ALL, FORWARD_FIRST  # the ops that derive pointers from pointers

STORES = {"tt.store", "tt.atomic_rmw", "tt.atomic_cas", "tt.descriptor_store", "tt.descriptor_reduce",
          "tt.descriptor_scatter"}
READS = {"tt.load", "tt.descriptor_load", "tt.descriptor_gather", "tt.prefetch"}


class WritesError(ValueError):
    """The TTIR does not match the launch (argument count), or cannot be read."""


@dataclasses.dataclass(frozen=True)
class Writes:
    written: frozenset[str]  # reach a store's pointer operand
    unsure: frozenset[str]  # reach an op we cannot follow: counted as written
    read: frozenset[str] = frozenset()  # reach a load's pointer operand (bytes moved, in-out)

    @property
    def names(self) -> frozenset[str]:
        return self.written | self.unsure

    @property
    def source(self) -> str:
        return "ttir-conservative" if self.unsure else "ttir"


def ttir_params(names: Sequence[str], types: Sequence[str]) -> list[str]:
    """The parameters that are ``tt.func`` arguments, in order: those not specialized to constants."""
    return [name for name, kind in zip(names, types) if kind != "constexpr"]


def from_ttir(ttir: str, params: Sequence[str], pointers: Iterable[str]) -> Writes:
    """Written pointer parameters of the public ``tt.func`` in ``ttir``.

    ``params``: the parameter names of the function's arguments, in order (``ttir_params``);
    ``pointers``: which of them are tensors (pointers or descriptors) to follow.
    """
    try:
        view = ModuleView.build(parse_module(ttir))
    except Exception as exc:  # noqa: BLE001 - bindings raise RuntimeError with MLIR's message
        raise WritesError(f"cannot parse the TTIR: {exc}") from None
    return _Tracer(view).writes(list(params), set(pointers))


class _Tracer:
    def __init__(self, view: ModuleView):
        self.view = view
        self.block_args: dict[int, list[int]] = {}  # block id -> value ids of its arguments
        for op in view.ops:
            if op.block is not None and op.block.id not in self.block_args:
                handle = op.handle.get_block()
                self.block_args[op.block.id] = [handle.arg(i).id() for i in range(handle.get_num_arguments())]

    def writes(self, params: list[str], pointers: set[str]) -> Writes:
        func = self._kernel_func()
        args = self._region_args(func, 0)
        if len(args) != len(params):
            raise WritesError(f"the TTIR function has {len(args)} arguments, the launch {len(params)} "
                              f"non-constexpr parameters ({', '.join(params)})")
        written, unsure, read = set(), set(), set()
        for name, value_id in zip(params, args):
            if name in pointers:
                reached = self._follow(value_id)
                if "write" in reached:
                    written.add(name)
                elif "unsure" in reached:
                    unsure.add(name)
                if "read" in reached:
                    read.add(name)
        return Writes(frozenset(written), frozenset(unsure), frozenset(read))

    def _kernel_func(self):
        funcs = self.view.ops_named("tt.func")
        public = [f for f in funcs if _visibility(f) != "private"]
        if len(public) != 1:
            raise WritesError(f"expected one public tt.func in the TTIR, found {len(public)}")
        return public[0]

    def _region_args(self, op, region: int) -> list[int]:
        region_id = op.region_ids[region]
        for block in self.view.blocks.values():
            if block.parent is op and block.region_id == region_id:
                return self.block_args.get(block.id, [])
        return []

    def _follow(self, start: int) -> set[str]:
        """``"write"`` / ``"unsure"`` if pointers derived from value ``start`` reach such a use."""
        reached: set[str] = set()
        seen, todo = {start}, [start]
        while todo:
            value = self.view.values.get(todo.pop())
            if value is None:  # an argument nobody uses
                continue
            for op, index in value.uses:
                for successor in self._successors(op, index, reached):
                    if successor not in seen:
                        seen.add(successor)
                        todo.append(successor)
        return reached

    def _successors(self, op, index: int, reached: set[str]) -> list[int]:
        name = op.name
        results = [r.id for r in op.results]
        if name in STORES:
            reached.add("write" if index == 0 else "unsure")  # else: the pointer itself stored
            return []
        if name in READS:
            reached.add("read" if index == 0 else "unsure")
            return []
        if name in FORWARD_ALL:
            return results
        if name in FORWARD_FIRST:
            if index == 0:
                return results
            reached.add("unsure")
            return []
        if name == "arith.select" and index in (1, 2):
            return results
        if name == "scf.for" and index >= 3:  # lower, upper, step, then the loop-carried inits
            carried = index - 3
            return [results[carried], self._region_args(op, 0)[carried + 1]]
        if name == "scf.while":
            return [self._region_args(op, 0)[index]]
        if name == "scf.condition" and index >= 1:
            parent = op.block.parent
            return [parent.results[index - 1].id, self._region_args(parent, 1)[index - 1]]
        if name == "scf.yield":
            return self._yielded(op, index)
        reached.add("unsure")
        return []

    def _yielded(self, op, index: int) -> list[int]:
        parent = op.block.parent if op.block is not None else None
        if parent is None:
            return []
        if parent.name == "scf.for":
            return [parent.results[index].id, self._region_args(parent, 0)[index + 1]]
        if parent.name == "scf.if":
            return [parent.results[index].id]
        if parent.name == "scf.while":  # the "after" region yields the next "before" arguments
            return [self._region_args(parent, 0)[index]]
        return [r.id for r in parent.results]


def _visibility(func) -> str:
    try:
        return func.handle.get_str_attr("sym_visibility") or "public"
    except Exception:  # noqa: BLE001 - absent attribute: public (MLIR's default)
        return "public"


# ------------------------------------------------------------------- TTIR without a GPU

class _Stop(Exception):
    """Raised after the TTIR stage: nothing later is needed."""


def compile_ttir(jit_fn: Any, signature: dict[str, str], constexprs: dict, attrs: dict) -> str:
    """The TTIR of ``jit_fn`` (a ``JITFunction``) for this specialization, built for sm_90."""
    import tempfile

    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    got: dict[str, str] = {}

    def hook(backend, stages, options, language, capability):
        make_ttir = stages["ttir"]

        def keep(src, metadata):
            got["ttir"] = str(make_ttir(src, metadata))
            raise _Stop

        stages["ttir"] = keep

    source = ASTSource(jit_fn, signature, constexprs, attrs)
    with knobs.cache.scope(), knobs.runtime.scope(), tempfile.TemporaryDirectory(prefix="tritune-capture-") as cache:
        knobs.cache.dir = cache
        knobs.runtime.add_stages_inspection_hook = hook
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                triton.compile(source, target=GPUTarget("cuda", 90, 32))
        except _Stop:
            pass
    if "ttir" not in got:
        raise WritesError("the compiler returned without a TTIR stage")
    return got["ttir"]


# --------------------------------------------------------------------- by observation

class Snapshot:
    """Copies of tensors before a launch; ``changed()`` after it names those that differ."""

    def __init__(self, tensors: dict[str, Any]):
        self.tensors = tensors
        self.before = {name: t.detach().clone() for name, t in tensors.items()}

    def changed(self) -> set[str]:
        return {name for name, t in self.tensors.items() if not _same(self.before[name], t.detach())}


def _same(a, b) -> bool:
    import torch

    if a.dtype.is_floating_point or a.dtype.is_complex:
        both_nan = torch.isnan(a) & torch.isnan(b)
        return bool(((a == b) | both_nan).all())
    return bool(torch.equal(a, b))
