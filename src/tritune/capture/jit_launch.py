"""From a ``kernel[grid](...)`` launch (seen by ``_jit_shim``) to a ``LaunchSpec`` in the recorder.

Hot path: a repeated launch costs a tuple key (kernel, wrapper kind, per argument dtype / shape /
stride / offset / device or the scalar's value, keyword arguments, grid) and a dict lookup. Only
a new key builds a spec: arguments bound to parameters by the JIT's own binder (so defaults,
``None`` and ints equal to 1 are treated as Triton treats them), constexprs (annotated
``tl.constexpr``: defaults, heuristics and the autotuner's config included), options (keyword
arguments that are not parameters; ``num_warps=4``, ``num_stages=3`` filled in on a GPU, as the
CUDA backend defaults), the grid and its rule (``grid_rule``), and the written tensors
(``writes``): on a GPU from the TTIR of the kernel the launch returned, under the interpreter
from a TTIR compiled for sm_90, else observed.

Which tensor arguments overlap in memory is noted in ``extra["overlapping"]`` (``aliasing``):
the proposers offer no-alias variants only for launches whose arguments were disjoint.

Constexpr values are written by ``model.constexprs.encode`` (a ``tl.float16`` dtype as
``{"tl_dtype": "fp16"}``, a jit function by name...); a value it cannot write makes the launch
unsupported, and the recorder keeps it in ``skipped.jsonl`` with the reason.
"""

from __future__ import annotations

import inspect
import types
from typing import Any, Callable, Hashable

import torch
from triton.backends.compiler import GPUTarget
from triton.compiler import make_backend
from triton.runtime.jit import JITFunction, create_function_from_signature

from tritune import aliasing
from tritune.capture import grid_blocks, grid_rule, skipped
from tritune.capture._jit_shim import Launch, is_interpreted
from tritune.capture._language_shim import compilable_language
from tritune.capture.spec import source_hash
from tritune.capture.writes import Snapshot, Writes, WritesError, compile_ttir, from_ttir, ttir_params
from tritune.kernel_facts import DEFAULT_OPTIONS
from tritune.model import constexprs as codec
from tritune.model.launch import ArgSpec, LaunchSpec, min_storage_size

STORAGE_SLACK = 1 << 20  # elements a view may reach past its span: see _storage_size
_TARGET = GPUTarget("cuda", 90, 32)
_UNREAD = object()  # Kernel.tiles not read yet (None is an answer: the source cannot tell)


class UnsupportedLaunch(ValueError):
    """A launch whose arguments a LaunchSpec cannot describe (a TensorDescriptor, a tuple...)."""


class Kernel:
    """What one jit function needs for capture, computed once."""

    def __init__(self, fn: Any):
        self.fn = fn
        python_fn = fn.fn
        self.jit = fn if isinstance(fn, JITFunction) else _compilable(python_fn, {})
        self.names = [p.name for p in self.jit.params]
        self._name_set = set(self.names)
        self.constexpr = {p.name for p in self.jit.params if p.is_constexpr}
        self.defaults = {name: p.default for name, p in self.jit.signature.parameters.items()
                         if p.default is not inspect.Parameter.empty}
        self.backend = make_backend(_TARGET)
        self.binder = create_function_from_signature(self.jit.signature, self.jit.params, self.backend)
        self.name = python_fn.__name__
        self.module = python_fn.__module__
        self.source_file = inspect.getsourcefile(python_fn) or ""
        self.source_hash = source_hash(self.jit.src)
        self.writes: dict[Hashable, Writes | None] = {}  # specialization -> TTIR writes
        self._tiles: set[tuple[int, str]] | None | object = _UNREAD

    @property
    def tiles(self) -> set[tuple[int, str]] | None:
        """Which constexpr tiles which grid dimension (``capture.grid_blocks``), read once."""
        if self._tiles is _UNREAD:
            self._tiles = grid_blocks.tiles(self.jit.src, sorted(self.constexpr), self.name)
        return self._tiles  # type: ignore[return-value]

    def bind(self, args: tuple, kwargs: dict) -> dict[str, Any]:
        """Parameter name -> value, defaults applied: what Triton passes a grid function."""
        bound = dict(self.defaults)
        bound.update(zip(self.names, args))
        bound.update((k, v) for k, v in kwargs.items() if k in self._name_set)
        return bound


def _compilable(python_fn: Any, done: dict) -> JITFunction:
    """A ``JITFunction`` of an interpreted kernel, for compiling its TTIR on the CPU.

    Under ``TRITON_INTERPRET=1`` the jit helpers a kernel calls are ``InterpretedFunction``
    objects, which the compiler rejects: compile a copy of the function whose globals hold
    ``JITFunction`` versions of them (helpers reached through a module attribute are not
    converted; such kernels fall back to observed writes).
    """
    if python_fn in done:
        return done[python_fn]
    scope = dict(python_fn.__globals__)
    copy = types.FunctionType(python_fn.__code__, scope, python_fn.__name__, python_fn.__defaults__,
                              python_fn.__closure__)
    for attr in ("__qualname__", "__module__", "__annotations__", "__kwdefaults__", "__doc__"):
        setattr(copy, attr, getattr(python_fn, attr))
    done[python_fn] = jit = JITFunction(copy)
    for name, value in python_fn.__globals__.items():
        if is_interpreted(value):
            scope[name] = _compilable(value.fn, done)
    return jit


class JitListener:
    """The ``_jit_shim`` listener that feeds a ``Recorder``."""

    def __init__(self, recorder):
        self.recorder = recorder
        self.kernels: dict[int, Kernel] = {}

    def kernel(self, fn: Any) -> Kernel:
        kernel = self.kernels.get(id(fn))
        if kernel is None or kernel.fn is not fn:
            kernel = self.kernels[id(fn)] = Kernel(fn)
        return kernel

    def __call__(self, launch: Launch) -> Callable[[Any], None] | None:
        try:
            return self._listen(launch)
        except Exception as exc:
            if not getattr(exc, "_tritune_skipped", False):
                self.recorder.skip(None, skipped.of_launch(launch.fn, "error", exc))  # named, never dropped
            raise  # the shim reports it on stderr

    def _listen(self, launch: Launch) -> Callable[[Any], None] | None:
        kernel = self.kernels.get(id(launch.fn))
        if kernel is None or kernel.fn is not launch.fn:
            kernel = self.kernel(launch.fn)
        grid, bound = launch.grid, None
        if callable(grid):
            bound = kernel.bind(launch.args, launch.kwargs)
            grid = grid(bound)
        key = fast_key(kernel, launch, grid)
        try:
            if self.recorder.bump(key):
                return None
        except TypeError:  # an unhashable argument or constexpr (a list): slower, still exact
            key = repr(key)
            if self.recorder.bump(key):
                return None
        if bound is None:
            bound = kernel.bind(launch.args, launch.kwargs)
        try:
            spec, compile_args = build_spec(kernel, launch, bound, grid)
        except Exception as exc:  # not described: recorded as skipped, and not tried again
            kind = "unsupported" if isinstance(exc, UnsupportedLaunch) else "error"
            self.recorder.skip(key, skipped.of_launch(launch.fn, kind, exc if kind == "error" else str(exc)))
            exc._tritune_skipped = True
            raise
        tensors = {a.name: bound[a.name] for a in spec.tensors}
        writes, snapshot = None, None
        if launch.interpreted:
            writes = ttir_writes(kernel, spec, compile_args)
            if writes is None:
                snapshot = Snapshot(tensors)

        def after(result: Any) -> None:
            if snapshot is not None:
                _mark(spec, snapshot.changed(), "observed")
            elif writes is not None:
                _mark(spec, writes.names, writes.source, writes.read)
            else:
                found = _returned_writes(result, kernel, spec, compile_args)
                found = found or ttir_writes(kernel, spec, compile_args)
                if found is None:  # no TTIR at all: every tensor may be an output
                    _mark(spec, {a.name for a in spec.tensors}, "unknown")
                else:
                    _mark(spec, found.names, found.source, found.read)
            try:
                self.recorder.add(spec, tensors, fast_key=key)
            except Exception as exc:
                self.recorder.skip(None, skipped.of_launch(launch.fn, "error", exc))
                raise  # the shim reports it

        return after


def fast_key(kernel: Kernel, launch: Launch, grid: Any) -> tuple:
    """What makes two launches the same, cheaply (may be unhashable: see ``JitListener``).

    A float scalar that is NaN never equals itself: such launches take the slow path each time
    and are merged by ``Recorder.add`` (whose key is the spec's JSON).
    """
    tensor = torch.Tensor
    args = tuple([(a.dtype, a.shape, a.stride(), a.storage_offset(), a.device) if isinstance(a, tensor) else a
                  for a in launch.args])
    kwargs = tuple([(k, (v.dtype, v.shape, v.stride(), v.storage_offset(), v.device) if isinstance(v, tensor) else v)
                    for k, v in launch.kwargs.items()]) if launch.kwargs else ()
    return (id(kernel), launch.wrappers and launch.kind, args, kwargs, tuple(grid))


# -------------------------------------------------------------------------- the spec

def build_spec(kernel: Kernel, launch: Launch, bound: dict, grid: Any) -> tuple[LaunchSpec, dict]:
    """The spec of a new launch (``written`` not yet known) and what compiling its TTIR needs."""
    bound_args, specialization, _ = kernel.binder(*launch.args, **launch.kwargs)
    types = [s[0] for s in specialization]
    args, constexprs = [], {}
    for name, kind, value in zip(kernel.names, types, bound_args.values()):
        if name in kernel.constexpr:
            args.append(ArgSpec(name, "constexpr"))
            try:
                constexprs[name] = codec.encode(value, name)
            except codec.UnsupportedConstexpr as exc:
                raise UnsupportedLaunch(str(exc)) from None
        else:
            args.append(_arg_spec(name, value))
    options = {k: v for k, v in launch.kwargs.items() if k not in kernel.names}
    if not launch.interpreted:
        options = {**DEFAULT_OPTIONS, **options}
    padded = grid_rule.pad3(grid)
    scalars = {a.name: a.value for a in args if a.kind == "scalar"}
    rule, unexplained = grid_rule.infer(padded, len(tuple(grid)), launch.grid if callable(launch.grid) else None,
                                        bound, constexprs, scalars, kernel.tiles)
    extra = _extra(launch, unexplained)
    aliasing.record(extra, {a.name: bound[a.name] for a in args if a.kind == "tensor"})
    spec = LaunchSpec(kernel=kernel.name, kind=launch.kind, module=kernel.module, source_file=kernel.source_file,
                      source="", source_hash=kernel.source_hash, args=args, constexprs=constexprs,
                      options=options, grid=padded, grid_rule=rule, extra=extra)
    compile_args = {
        "signature": dict(zip(kernel.names, types)),
        "constexprs": {n: v for n, t, v in zip(kernel.names, types, bound_args.values()) if t == "constexpr"},
        "attrs": {(i,): kernel.backend.parse_attr(s[1]) for i, s in enumerate(specialization)
                  if s[0] != "constexpr" and isinstance(s[1], str)},
        "ttir_params": ttir_params(kernel.names, types),
    }
    return spec, compile_args


def _arg_spec(name: str, value: Any) -> ArgSpec:
    if value is None:
        return ArgSpec(name, "none")
    if isinstance(value, torch.Tensor):
        return ArgSpec(name, "tensor", shape=list(value.shape), stride=list(value.stride()),
                       dtype=str(value.dtype).removeprefix("torch."), device=str(value.device),
                       storage_offset=value.storage_offset(), storage_size=_storage_size(value))
    if hasattr(value, "item") and not hasattr(value, "data_ptr"):  # numpy scalar
        value = value.item()
    for kind in (bool, int, float):  # bool first: it is an int
        if isinstance(value, kind):
            return ArgSpec(name, "scalar", value=value, type=kind.__name__)
    raise UnsupportedLaunch(f"argument {name!r} is a {type(value).__name__}; "
                            "capture records tensors, int/float/bool scalars and None")


def _storage_size(tensor: torch.Tensor) -> int:
    """Elements replay allocates: the real storage (a kernel may read past its view, e.g. a base
    pointer with its own offsets), but at most the view's span or ``STORAGE_SLACK`` more, so a
    small view of a huge buffer does not make replay allocate the whole buffer."""
    needed = min_storage_size(tensor.shape, tensor.stride(), tensor.storage_offset())
    real = tensor.untyped_storage().nbytes() // max(tensor.element_size(), 1)
    span = needed - tensor.storage_offset()
    return max(needed, min(real, needed + max(span, STORAGE_SLACK)))


def _extra(launch: Launch, unexplained: list[str]) -> dict:
    extra: dict[str, Any] = {}
    tuner = launch.autotuner
    if tuner is not None:
        best = getattr(tuner, "best_config", None)
        extra["autotune"] = {
            "config": _plain_dict(best.all_kwargs()) if best is not None else None,
            "configs": [_plain_dict(c.all_kwargs()) for c in tuner.configs],
            "key": list(tuner.keys),
        }
    heuristics = [w for w in launch.wrappers if type(w).__name__ == "Heuristics"]
    if heuristics:
        extra["heuristics"] = sorted({name for w in heuristics for name in w.values})
    if unexplained:
        extra["grid_unexplained"] = unexplained
    return extra


def _plain_dict(values: dict) -> dict:
    """An autotune config's values as JSON (informational: one the codec cannot write is named by
    its type)."""
    plain = {}
    for key, value in values.items():
        try:
            plain[key] = codec.encode(value, key)
        except codec.UnsupportedConstexpr:
            plain[key] = {"unsupported": type(value).__qualname__}
    return plain


# ------------------------------------------------------------------------- the writes

def ttir_writes(kernel: Kernel, spec: LaunchSpec, compile_args: dict) -> Writes | None:
    """Writes from a TTIR compiled here for sm_90 (cached per specialization); None if it fails."""
    key = repr((compile_args["signature"], compile_args["constexprs"], sorted(compile_args["attrs"].items())))
    if key not in kernel.writes:
        try:
            with compilable_language():
                ttir = compile_ttir(kernel.jit, compile_args["signature"], compile_args["constexprs"],
                                    compile_args["attrs"])
            kernel.writes[key] = from_ttir(ttir, compile_args["ttir_params"], [a.name for a in spec.tensors])
        except Exception:  # noqa: BLE001 - any compile failure: the caller observes instead
            kernel.writes[key] = None
    return kernel.writes[key]


def _returned_writes(result: Any, kernel: Kernel, spec: LaunchSpec, compile_args: dict) -> Writes | None:
    ttir = getattr(result, "asm", {}).get("ttir") if result is not None else None
    if not ttir:
        return None
    try:
        return from_ttir(ttir, compile_args["ttir_params"], [a.name for a in spec.tensors])
    except WritesError:
        return None


def _mark(spec: LaunchSpec, written: set[str] | frozenset[str], source: str,
          read: frozenset[str] | None = None) -> None:
    """Mark written tensors; from a TTIR also record which are loaded (``extra["reads"]``: the
    bench counts their bytes, and an argument both read and written moves its bytes twice)."""
    if read is not None:
        spec.extra["reads"] = sorted(read)
    for arg in spec.tensors:
        arg.written = arg.name in written
    spec.writes_from = source
