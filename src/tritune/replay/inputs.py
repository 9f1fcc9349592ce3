"""Fresh inputs for a captured launch: tensors of the captured layout with new values.

Values by ``ArgSpec.values``:
  ``random``  floats ~ N(0, 1) (computed in fp32, then cast), integers uniform in [-64, 64),
              bools fair coin flips. Deterministic per ``seed``.
  ``saved``   the values the program had (index tensors), loaded from the capture directory.
  ``range``   integers uniform in [low, high] as observed at capture (so indices stay in range).

Each tensor is a view (``as_strided``) into a fresh storage of the captured size, so strides,
storage offsets and overlapping views look to the kernel exactly as they did in the program. The
storage sits inside guard margins (``tritune.replay.guard``): a write outside it cannot corrupt
another allocation, a read outside it gets NaN poison, and ``verify`` checks the margins after
every run. The data pointer keeps the alignment of an unguarded storage.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tritune.capture.spec import confined_data
from tritune.config import interpreting  # replay's callers ask it here
from tritune.model.launch import ArgSpec, LaunchSpec, SpecError
from tritune.replay.guard import Guard, allocate, layout

_FLOATS = {"float16", "bfloat16", "float32", "float64"}
_INT_LOW, _INT_HIGH = -64, 64


def device_of(spec: LaunchSpec, device: str | None = None) -> str:
    """Where to replay: ``device`` if given, the CPU under the interpreter, else the captured device."""
    if device:
        return device
    if interpreting():
        return "cpu"
    for arg in spec.tensors:
        if arg.device:
            return arg.device
    return "cuda"


def make_args(spec: LaunchSpec, root: str | Path, *, seed: int = 0, device: str | None = None,
              block: int | None = None, margins: bool = True) -> dict[str, Any]:
    """Every non-constexpr parameter of ``spec``, by name: fresh tensors, captured scalars, None.
    Tensors are guarded (``block`` sizes the margins, see ``guard.layout``) unless ``margins`` is
    False: compute-sanitizer checks allocation bounds, and a margin would hide an overrun from it."""
    import torch

    device = device_of(spec, device)
    generator = torch.Generator(device=device)
    guards = layout(spec, block, margins=margins)
    args: dict[str, Any] = {}
    for index, arg in enumerate(spec.args):
        if arg.kind == "tensor":
            generator.manual_seed(seed * 1_000_003 + index)
            args[arg.name] = _tensor(arg, Path(root), device, generator, guards[arg.name])
        elif arg.kind == "scalar":
            args[arg.name] = arg.value
        elif arg.kind == "none":
            args[arg.name] = None
    return args


def _tensor(arg: ArgSpec, root: Path, device: str, generator, guard: Guard) -> Any:
    storage = allocate(_torch_dtype(arg), device, guard)  # guard.size is arg.storage_size
    if arg.values == "saved":
        _load_saved(arg, root, storage)
    else:
        _fill(storage, arg, generator)
    return _view(storage, arg)


def _torch_dtype(arg: ArgSpec) -> Any:
    import torch

    dtype = getattr(torch, arg.dtype, None)
    if not isinstance(dtype, torch.dtype):
        raise SpecError(f"argument {arg.name!r}: unknown dtype {arg.dtype!r}")
    return dtype


def _view(storage, arg: ArgSpec) -> Any:
    """The argument's view of ``storage`` (a 1-D view into a guarded buffer: offsets add up)."""
    return storage.as_strided(arg.shape, arg.stride, storage.storage_offset() + arg.storage_offset)


def _fill(storage, arg: ArgSpec, generator) -> None:
    import torch

    if storage.numel() == 0:
        return
    if arg.dtype in _FLOATS:
        values = torch.randn(storage.shape, generator=generator, device=storage.device, dtype=torch.float32)
        storage.copy_(values)
    elif arg.dtype == "bool":
        storage.copy_(torch.randint(0, 2, storage.shape, generator=generator, device=storage.device).bool())
    elif storage.dtype.is_floating_point or storage.dtype.is_complex:  # fp8 and the like
        storage.copy_(torch.randn(storage.shape, generator=generator, device=storage.device))
    else:
        low, high = (int(arg.low), int(arg.high) + 1) if arg.values == "range" else (_INT_LOW, _INT_HIGH)
        info = torch.iinfo(storage.dtype)
        low, high = max(low, info.min), min(high, info.max + 1)
        storage.copy_(torch.randint(low, high, storage.shape, generator=generator, device=storage.device,
                                    dtype=torch.int64))


def _load_saved(arg: ArgSpec, root: Path, storage) -> None:
    """A saved tensor is the storage (``storage_size`` elements), the view itself (``shape``), or
    the storage from the view's offset on; anything else does not belong to this argument."""
    import torch

    path = confined_data(root, arg)  # checked here too: a spec need not come from read_launches
    if not path.exists():
        raise SpecError(f"argument {arg.name!r}: saved values {path} are missing")
    saved = torch.load(path, map_location=storage.device, weights_only=True)
    if saved.numel() == storage.numel():
        storage.copy_(saved.reshape(-1))
    elif list(saved.shape) == list(arg.shape):
        storage.zero_()
        _view(storage, arg).copy_(saved)
    elif saved.numel() == storage.numel() - arg.storage_offset:
        storage.zero_()
        storage[arg.storage_offset:].copy_(saved.reshape(-1))
    else:
        raise SpecError(f"argument {arg.name!r}: saved values {path} hold {saved.numel()} elements, "
                        f"the argument needs {storage.numel()}")


def outputs(spec: LaunchSpec, args: dict[str, Any]) -> dict[str, Any]:
    """The tensors the kernel writes, by name."""
    return {arg.name: args[arg.name] for arg in spec.written}
