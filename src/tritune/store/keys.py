"""What a decision is keyed by: the kernel, its specialization, the GPU and the Triton version.

A decision (a verified faster variant) holds for one ``DecisionKey``:

``source_hash``, ``kernel``
    the kernel's source text (sha256, as capture records it) and name: an edited kernel is
    another kernel.
``specialization``
    canonical JSON (and its sha) of what Triton compiles separately plus the shape bucket:
    per non-constexpr parameter, in order,

    ======  ==========================================================================
    tensor  ``["T", dtype, [bucketed dims], aligned]``: rank and dtype exactly, each dimension
            through ``size_bucket``, ``aligned`` = the data pointer is 16-byte aligned (Triton
            specializes on it; a captured spec has no pointer, so ``storage_offset *
            itemsize % 16``: torch allocates storages on >= 16-byte boundaries)
    int     ``["I", triton_class, bucket]``: Triton's class (``"1"`` for the value 1, which it
            turns into a constant; else ``i32``/``i64``/``u64`` plus ``D`` when divisible by
            16) and the value through ``size_bucket``
    float   ``["F"]`` (Triton does not specialize floats; a decision does not depend on them)
    bool    ``["B"]``;  None ``["N"]`` (Triton turns None into a constant)
    ======  ==========================================================================

    and every ``tl.constexpr`` value exactly, as capture records it (``model.constexprs``:
    ``tl.float16`` is ``{"tl_dtype": "fp16"}``, at capture and in the running program alike; a
    value it cannot encode gets no key, and its launch runs as written). Launch options
    (num_warps...) are not part of the key: they are what a decision replaces.
``gpu_name``, ``capability``, ``triton_version``
    seed 001's lesson: a key without the GPU serves one GPU's decision on another.

The shape bucket (the choice): sizes and ints are rounded up to a power of two, so a decision
verified at n=1000 is used up to n=1024 and not at n=1025. Nearby sizes usually want the same
configuration, and rounding up keeps a verified "whole row in one block" decision inside the
sizes it covers. Change ``size_bucket`` and bump ``KEY_FORMAT`` together.

Two ways to a key, which must agree (tests check): ``key_for(spec)`` from a captured launch,
and ``LiveKeyer`` from a live launch's bound arguments, cached per raw argument tuple so that
the apply step pays a tuple build and a dict lookup per launch.
"""

from __future__ import annotations

import json
from typing import Any, Mapping, Sequence

from tritune.kernel_facts import ITEMSIZE
from tritune.model import constexprs as codec
from tritune.model.key import DecisionKey
from tritune.model.launch import ArgSpec, LaunchSpec
from tritune.model.target import INTERPRETER_GPU, Target

KEY_FORMAT = 1
_CACHE_LIMIT = 4096  # live keys kept per kernel; cleared when full (ints that change per launch)
_FLOAT = ("float",)  # the raw cache entry of any float: its value does not change the key
_BOOL = ("bool",)


# ------------------------------------------------------------------------- the descriptors

def size_bucket(n: int) -> int:
    """The power of two at or above ``|n|``, signed; 0 and 1 stay themselves (1 broadcasts)."""
    if n < 0:
        return -size_bucket(-n)
    return n if n <= 1 else 1 << (n - 1).bit_length()


def triton_int_class(value: int) -> str:
    """How Triton specializes an int argument (``native_specialize_impl`` in 3.6)."""
    if value == 1:
        return "1"
    kind = "i32" if -2**31 <= value < 2**31 else "i64" if -2**63 <= value < 2**63 else "u64"
    return kind + ("D" if value % 16 == 0 else "")


def tensor_desc(dtype: str, shape: Sequence[int], aligned: bool) -> list:
    return ["T", dtype, [size_bucket(int(d)) for d in shape], int(bool(aligned))]


def scalar_desc(value: Any) -> list | None:
    """A scalar argument's descriptor; None for a value a spec cannot hold."""
    if value is None:
        return ["N"]
    if isinstance(value, bool):  # before int: a bool is an int
        return ["B"]
    if isinstance(value, int):
        return ["I", triton_int_class(value), size_bucket(value)]
    if isinstance(value, float):
        return ["F"]
    return None


def constexpr_value(value: Any) -> Any:
    """A constexpr as capture records it (``model.constexprs.encode``), live or already recorded;
    ``UnsupportedConstexpr`` for a value capture cannot record."""
    return codec.key_value(value)


def specialization_json(args: Sequence[list], constexprs: Mapping[str, Any]) -> str:
    body = {"format": KEY_FORMAT, "args": list(args), "constexprs": dict(constexprs)}
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def itemsize(dtype: str) -> int:
    size = ITEMSIZE.get(dtype)
    if size is None:
        import torch

        size = getattr(torch, dtype).itemsize
    return size


# ------------------------------------------------------------------------------ from a spec

def specialization_of(spec: LaunchSpec) -> str:
    args = []
    for arg in spec.args:
        if arg.kind == "constexpr":
            continue
        args.append([arg.name, *_arg_desc(arg)])
    constexprs = {name: constexpr_value(spec.constexprs[name]) for name in spec.constexprs}
    return specialization_json(args, constexprs)


def _arg_desc(arg: ArgSpec) -> list:
    if arg.kind == "tensor":
        return tensor_desc(arg.dtype, arg.shape, arg.storage_offset * itemsize(arg.dtype) % 16 == 0)
    if arg.kind == "none":
        return ["N"]
    return scalar_desc(arg.value)


def key_for(spec: LaunchSpec, target: Target) -> DecisionKey:
    """The key of a captured launch on a given GPU and Triton version."""
    return DecisionKey(spec.source_hash, spec.kernel, specialization_of(spec), target.gpu, target.capability,
                       target.triton_version)


def current_target(device: str | None = None) -> Target:
    """The GPU and Triton of this machine (``Target.identity``), for ``key_for(spec, target)``.
    Under ``TRITON_INTERPRET=1`` (or on a CPU device) the GPU is ``INTERPRETER_GPU``, capability 0."""
    import triton
    from tritune.config import interpreting

    if interpreting() or (device is not None and device.startswith("cpu")):
        return Target(INTERPRETER_GPU, 0, triton.__version__)
    import torch

    index = torch.device(device or "cuda").index
    index = torch.cuda.current_device() if index is None else index
    major, minor = torch.cuda.get_device_capability(index)
    return Target(torch.cuda.get_device_name(index), major * 10 + minor, triton.__version__)


# --------------------------------------------------------------------------- from live args

class LiveKeyer:
    """Keys of live launches of one kernel on one target, cached by the raw argument tuple.

    ``keyer(bound)`` takes parameter name -> value with defaults applied (what
    ``tritune.capture.jit_launch.Kernel.bind`` returns) and gives the ``DecisionKey``, or None
    for arguments a spec cannot describe (no decision applies: the launch runs as it would).
    """

    def __init__(self, kernel: str, source_hash: str, params: Sequence[str], constexprs: Sequence[str],
                 target: Target):
        import torch

        self.kernel, self.source_hash = kernel, source_hash
        self.target = (target.gpu, target.capability, target.triton_version)
        self._constexprs = [p for p in params if p in set(constexprs)]
        self._args = [p for p in params if p not in set(constexprs)]
        self._tensor = torch.Tensor
        self._dtype_names: dict[Any, str] = {}
        self._cache: dict[tuple, DecisionKey] = {}

    @classmethod
    def for_kernel(cls, fn: Any, target: Target) -> "LiveKeyer":
        """For a ``@triton.jit`` function (``JITFunction`` or ``InterpretedFunction``)."""
        from tritune.capture.jit_launch import Kernel

        kernel = Kernel(fn)
        return cls(kernel.name, kernel.source_hash, kernel.names, sorted(kernel.constexpr), target)

    def __call__(self, bound: Mapping[str, Any]) -> DecisionKey | None:
        raw = []
        tensor = self._tensor
        for name in self._args:
            value = bound.get(name)
            if isinstance(value, tensor):
                raw.append((value.dtype, value.shape, value.data_ptr() & 15 == 0))
            elif type(value) is float:
                raw.append(_FLOAT)
            elif type(value) is bool:  # True == 1 in a tuple; Triton tells them apart
                raw.append(_BOOL)
            else:
                raw.append(value)
        for name in self._constexprs:
            value = bound.get(name)
            raw.append((value.__class__, value))
        try:
            raw_key = tuple(raw)
            found = self._cache.get(raw_key)
        except TypeError:  # an unhashable constexpr or argument: computed, not cached
            return self._build(bound)
        if found is None:
            found = self._build(bound)
            if found is not None:
                if len(self._cache) >= _CACHE_LIMIT:
                    self._cache.clear()
                self._cache[raw_key] = found
        return found

    def _build(self, bound: Mapping[str, Any]) -> DecisionKey | None:
        args = []
        for name in self._args:
            value = bound.get(name)
            if isinstance(value, self._tensor):
                desc = tensor_desc(self._dtype_name(value.dtype), value.shape, value.data_ptr() % 16 == 0)
            else:
                if hasattr(value, "item") and not hasattr(value, "data_ptr"):  # numpy scalar
                    value = value.item()
                desc = scalar_desc(value)
                if desc is None:
                    return None
            args.append([name, *desc])
        if any(name not in bound for name in self._constexprs):
            return None
        try:
            constexprs = {name: constexpr_value(bound[name]) for name in self._constexprs}
        except codec.UnsupportedConstexpr:  # capture could not have recorded it: no decision
            return None
        return DecisionKey(self.source_hash, self.kernel, specialization_json(args, constexprs), *self.target)

    def _dtype_name(self, dtype: Any) -> str:
        name = self._dtype_names.get(dtype)
        if name is None:
            name = self._dtype_names[dtype] = str(dtype).removeprefix("torch.")
        return name
