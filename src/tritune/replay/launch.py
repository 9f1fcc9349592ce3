"""Replay one captured launch, as captured or as a variant.

``Replay(spec, variant, root)`` loads the kernel, resolves constexprs, options and the grid, and
``replay(args)`` launches it on arguments from ``make_args``. On a GPU the kernel is compiled
once (``JITFunction.run(..., warmup=True)`` returns the ``CompiledKernel``) and every launch goes
straight to the compiled kernel, as Inductor's launchers do: no argument binding per call, so
microsecond kernels are timed without the JIT's Python dispatch. A variant with compiler passes
is compiled inside ``tritune.compiler.enabled(...)``; its binary lives under its own cache key,
so baseline and variant can share a process. Under ``TRITON_INTERPRET=1`` every launch goes
through the interpreter (nothing is compiled, so passes have no effect there: ``compiles`` is
False).

A variant with a grid of its own (``Variant.grid``: a persistent-grid rewrite, ``replay.
persistent``) launches ``grid`` (min(tiles, k x SMs) programs) and gets the tile count of the
grid the spec gives (``program_grid``) as its added argument(s).

On a GPU, replay gives Triton a scratch allocator when none is set (``ensure_allocator``): a
kernel that makes tensor descriptors inside needs one, and the program had one.

A variant whose source no rule of tritune's made (a model's) is checked against the captured file
before it is imported (``allowlist.sandbox.check_variant_source``); refused, it raises ``Unsafe``, a
failure of kind ``unsafe``.
"""

from __future__ import annotations

import contextlib
import math
from pathlib import Path
from typing import Any

from tritune.allowlist import sandbox
from tritune.capture.spec import confined_source
from tritune.model import constexprs as codec
from tritune.model.launch import LaunchSpec, SpecError
from tritune.model.variant import Variant
from tritune.replay.inputs import device_of, interpreting, make_args
from tritune.replay.kernel import load_kernel
from tritune.replay.persistent import PersistentGrid, sm_count


class Replay:
    def __init__(self, spec: LaunchSpec, variant: Variant = Variant(), *, root: str | Path,
                 device: str | None = None) -> None:
        self.spec, self.variant, self.root = spec, variant, Path(root)
        self.device = device_of(spec, device)
        unknown = sorted(set(variant.constexprs) - set(spec.constexprs))
        if unknown:
            raise SpecError(f"{spec.id}: variant sets {unknown}, which are not constexprs of {spec.kernel} "
                            f"(its constexprs: {sorted(spec.constexprs)})")
        left = codec.left_as_text(spec.extra)
        if left:
            raise SpecError(f"{spec.id}: constexpr(s) {left} were recorded as text by an older tritune "
                            f"({', '.join(repr(spec.constexprs.get(n)) for n in left)}), which cannot be turned "
                            "back into values: capture again")
        self.encoded = {**spec.constexprs, **variant.constexprs}  # as recorded: the key's and the grid rule's
        self.options = {**spec.options, **variant.options}
        if sandbox.needs_check(variant):  # a model's source, or of unknown origin: before it runs
            sandbox.check_variant_source(confined_source(self.root, spec).read_text(), variant.source, spec.kernel)
        self.fn = load_kernel(spec, self.root, variant.source)
        self.constexprs = self._decoded()  # the values the kernel is launched with
        self.compiles = not interpreting()
        if self.compiles:
            ensure_allocator(self.device)
        self.program_grid = self._grid()  # what the program launches with these constexprs
        self.grid, self.extras = self._launch_grid()
        self._compiled = None

    def _decoded(self) -> dict[str, Any]:
        """The constexprs as values (``model.constexprs.decode``: a dtype tag is a ``tl.dtype``, a
        jit function is found by name in the loaded kernel's module); ``SpecError`` if one cannot be."""
        if not codec.needs_decoding(self.encoded):
            return dict(self.encoded)
        python_fn = getattr(self.fn, "fn", None)
        scope = getattr(python_fn, "__globals__", None)
        try:
            return codec.decode_all(self.encoded, scope)
        except codec.ConstexprError as error:
            raise SpecError(f"{self.spec.id}: {error}") from None

    # ------------------------------------------------------------------------------------ grid

    def _grid(self) -> tuple[int, int, int]:
        rule = self.spec.grid_rule
        changed = any(self.encoded[k] != self.spec.constexprs[k] for k in self.variant.constexprs)
        if rule is None or not changed:
            return tuple(self.spec.grid)
        scalars = {a.name: a.value for a in self.spec.args if a.kind == "scalar"}
        if rule.get("kind") == "cdiv":
            return _cdiv_grid(rule, {**scalars, **self.constexprs})
        if rule.get("kind") == "inductor":
            from tritune.capture.inductor import grid_for

            grid = tuple(grid_for(rule, self.constexprs, scalars))
            return grid + (1,) * (3 - len(grid))
        raise SpecError(f"{self.spec.id}: unknown grid_rule kind {rule.get('kind')!r}")

    def _launch_grid(self) -> tuple[tuple[int, int, int], dict[str, int]]:
        """The grid launched and the arguments a variant's own grid rule adds."""
        if self.variant.grid is None:
            return self.program_grid, {}
        try:
            persistent = PersistentGrid.of(self.variant.grid, sm_count(self.device, not self.compiles))
        except ValueError as error:
            raise SpecError(f"{self.spec.id}: {error}") from None
        launched = persistent.launch(self.program_grid)
        if launched is None:
            raise SpecError(f"{self.spec.id}: the persistent-grid variant does not cover grid "
                            f"{list(self.program_grid)} (a dimension its kernel does not read)")
        return launched

    # ---------------------------------------------------------------------------------- launch

    def _params(self, args: dict[str, Any]) -> dict[str, Any]:
        """Every parameter by name, in the loaded kernel's order: arguments, constexprs and what
        the variant's grid rule adds."""
        values = dict(self.extras)
        for arg in self.spec.args:
            values[arg.name] = self.constexprs[arg.name] if arg.kind == "constexpr" else args[arg.name]
        order = getattr(self.fn, "arg_names", None)
        if order is None or set(order) != set(values):
            return values
        return {name: values[name] for name in order}  # a compiled kernel takes them positionally

    def _passes(self):
        if not self.variant.passes:
            return contextlib.nullcontext()
        import tritune.compiler

        return tritune.compiler.enabled(self.variant.passes, fast_math=self.variant.fast_math)

    def compile(self, args: dict[str, Any] | None = None) -> Any:
        """Build the kernel for these arguments' specialization (default: fresh ones); the
        compiler's error if it fails. Nothing to build under the interpreter."""
        if not self.compiles:
            return None
        if self._compiled is None:
            if args is None:
                args = make_args(self.spec, self.root, device=self.device)
            with self._passes():
                self._compiled = self.fn.run(**self._params(args), grid=self.grid, warmup=True, **self.options)
            if hasattr(self._compiled, "result"):  # an async compile future
                self._compiled = self._compiled.result()
        return self._compiled

    def __call__(self, args: dict[str, Any]) -> None:
        params = self._params(args)
        if not self.compiles:
            self.fn.run(**params, grid=self.grid, warmup=False, **self.options)
            return
        kernel = self._compiled or self.compile(args)
        kernel[self.grid](*params.values())

    def launcher(self, args: dict[str, Any]):
        """A no-argument callable that launches on ``args`` (for timing loops)."""
        self.compile(args)
        params = self._params(args)
        if not self.compiles:
            return lambda: self.fn.run(**params, grid=self.grid, warmup=False, **self.options)
        run = self._compiled[self.grid]
        values = list(params.values())
        return lambda: run(*values)


def ensure_allocator(device: str) -> bool:
    """Give Triton a global-scratch allocator when none is set; returns whether it set one.

    A kernel that allocates at launch (``tl.make_tensor_descriptor`` in the kernel, as
    flash-linear-attention's ``solve_tril`` does on Hopper) needs ``triton.set_allocator``: the
    program had one (it could not have launched the kernel otherwise), and so must replay. One the
    kernel file set on import (fla sets its own) is kept."""
    import triton

    try:
        from triton.runtime import _allocation

        if _allocation._allocator.get() is not _allocation._NULL_ALLOCATOR:
            return False
    except (ImportError, AttributeError):  # another Triton: leave whatever is there
        return False

    def allocate(size: int, alignment: int, stream: Any) -> Any:
        import torch

        return torch.empty(size, dtype=torch.int8, device=device)

    triton.set_allocator(allocate)
    return True


def _cdiv_grid(rule: dict, values: dict[str, Any]) -> tuple[int, int, int]:
    grid = []
    for dim in rule["dims"]:
        if "const" in dim:
            grid.append(int(dim["const"]))
        else:
            numel, block = values[dim["numel"]], values[dim["block"]]
            grid.append(math.ceil(int(numel) / int(block)))
    return tuple(grid + [1] * (3 - len(grid)))
