"""One launch of an Inductor kernel (a ``CachingAutotuner``) as a ``LaunchSpec``.

Inductor's launcher takes the kernel's non-constexpr parameters positionally, in the order of
``fn.arg_names`` (constexpr parameters come from the chosen config or ``triton_meta["constants"]``),
followed by ``inductor_meta["extra_launcher_args"]`` (``FixedGrid``'s ``_grid_0..2``), which are
not kernel parameters and only feed the grid.

What the spec takes from Inductor:
  constexprs  the chosen config's ``kwargs`` and ``triton_meta["constants"]``, for parameters
              that are ``tl.constexpr``; constants Inductor gave for other parameters (size-1
              arguments it specialized) go to ``extra["specialized"]``: replay passes those
              positionally and the JIT specializes them the same way.
  options     what Inductor's ``_create_compile_options`` hands ``triton.compile`` and the JIT
              accepts too: num_warps, num_stages, debug (device asserts of indirect indexing),
              sanitize_overflow=False, enable_fp_fusion, launch_pdl, launch_cooperative_grid,
              enable_reflect_ftz (when ``disable_ftz``), maxnreg and num_ctas when set.
  written     Inductor's own names (``out_ptr*``, ``in_out_ptr*``, workspace ``ws_ptr*``) and
              ``mutated_arg_names``: ``writes_from="inductor"``.
  grid        Inductor's grid rule (``inductor_grid``) evaluated for the chosen config.
  extra       kernel_num_gb (bytes moved, for the roofline), kernel_type (poi/per/red/...),
              config_from, which tensor arguments overlap (``aliasing``), and a small JSON
              subset of ``inductor_meta``.
"""

from __future__ import annotations

import inspect
import sys
from typing import Any, Sequence

from tritune import aliasing
from tritune.capture.inductor_grid import grid_for, grid_rule
from tritune.capture.spec import source_hash
from tritune.kernel_facts import inductor_kind
from tritune.model import constexprs as codec
from tritune.model.launch import ArgSpec, LaunchSpec, SpecError, min_storage_size

WRITTEN_PREFIXES = ("out_ptr", "in_out_ptr", "ws_ptr")
HEURISTIC_TYPES = {"POINTWISE": "poi", "PERSISTENT_REDUCTION": "per", "REDUCTION": "red",
                   "SPLIT_SCAN": "scan", "TEMPLATE": "tem", "USER_AUTOTUNE": "user", "FIXED": "fixed"}
# inductor_meta entries small and useful enough to keep with the spec.
META_KEPT = ("kernel_name", "grid_type", "mutated_arg_names", "no_x_dim", "num_load", "num_store",
             "num_reduction", "atomic_add_found", "tiling_scores", "kernel_num_gb", "kernel_flop",
             "persistent_reduction", "cooperative_reduction", "RSPLIT_SIZE", "optimize_mem",
             "dynamic_scale_rblock", "backend_hash")


def constexpr_names(fn: Any) -> list[str]:
    """The ``tl.constexpr`` parameters of a JITFunction or (interpreter) InterpretedFunction."""
    indices = getattr(fn, "constexprs", None)
    if indices is not None and hasattr(fn, "arg_names"):
        return [fn.arg_names[i] for i in indices]
    names = []
    for name, param in inspect.signature(fn.fn).parameters.items():
        annotation = param.annotation
        text = annotation if isinstance(annotation, str) else getattr(annotation, "__name__", repr(annotation))
        if "constexpr" in str(text):
            names.append(name)
    return names


def kernel_source_text(fn: Any) -> str:
    return getattr(fn, "src", None) or inspect.getsource(fn.fn)


def launch_spec(tuner: Any, args: Sequence[Any], config: Any, *, config_from: str,
                source_file: str | None = None, device: str | None = None) -> tuple[LaunchSpec, dict[str, Any]]:
    """The spec of ``tuner`` launched on ``args`` with ``config``, and the real argument values
    by name (for the recorder to save index tensors). ``device`` overrides the tensors' device
    (specs built on the CPU from a GPU module say where the kernel really runs)."""
    fn = tuner.fn
    static = _static(tuner)
    extra_args = static["extra_launcher_args"]
    kernel_args = list(args[: len(args) - len(extra_args)] if extra_args else args)
    positional = static["positional"]
    if len(kernel_args) != len(positional):
        raise SpecError(f"{fn.__name__}: launched with {len(kernel_args)} arguments, its non-constexpr "
                        f"parameters are {positional}")
    values = dict(zip(positional, kernel_args))
    specs = []
    for name in fn.arg_names:
        if name in values:
            specs.append(_arg_spec(name, values[name], static["written"], device))
        else:
            specs.append(ArgSpec(name=name, kind="constexpr"))
    chosen = dict(getattr(config, "kwargs", {}) or {})
    constants = static["constants"]
    for name in ("num_warps", "num_stages"):  # a kernel may take these as constexprs (see Inductor)
        if name in static["constexprs"] and name not in chosen and name not in constants:
            chosen[name] = getattr(config, name)
    missing = [name for name in static["constexprs"] if name not in chosen and name not in constants]
    if missing:
        raise SpecError(f"{fn.__name__}: no value for constexpr(s) {missing} in the config or triton_meta")
    constexprs = {name: codec.encode(chosen[name] if name in chosen else constants[name], name)
                  for name in static["constexprs"]}
    scalars = dict(values)
    if extra_args:
        scalars.update(zip(extra_args, args[len(args) - len(extra_args):]))
    rule = grid_rule(tuner.inductor_meta, scalars)
    grid = grid_for(rule, {**constants, **chosen}, scalars)
    extra = {**static["extra"], "config_from": config_from}
    aliasing.record(extra, {a.name: values[a.name] for a in specs if a.kind == "tensor"})
    spec = LaunchSpec(
        kernel=fn.__name__, kind="inductor", module=getattr(fn.fn, "__module__", "") or "",
        source_file=source_file or static["source_file"], source="", source_hash=static["source_hash"],
        args=specs, constexprs=constexprs, options=_options(tuner, config, static), grid=list(grid),
        grid_rule=rule, writes_from="inductor",
        extra=extra,
    )
    return spec, values


def _static(tuner: Any) -> dict[str, Any]:
    """What every launch of this tuner shares, computed once and kept on the tuner."""
    cached = getattr(tuner, "_tritune_static", None)
    if cached is not None:
        return cached
    fn, meta = tuner.fn, tuner.inductor_meta
    constexprs = constexpr_names(fn)
    constants = dict(tuner.triton_meta.get("constants") or {})
    mutated = set(getattr(tuner, "mutated_arg_names", None) or meta.get("mutated_arg_names") or ())
    written = {name for name in fn.arg_names if name.startswith(WRITTEN_PREFIXES) or name in mutated}
    name = fn.__name__
    kind = inductor_kind(name)
    heuristic = getattr(getattr(tuner, "heuristic_type", None), "name", None)
    source_file = getattr(tuner, "filename", None) or inspect.getsourcefile(fn.fn) or ""
    static = {
        "constexprs": constexprs,
        "constants": {k: v for k, v in constants.items() if k in constexprs},
        "positional": [n for n in fn.arg_names if n not in constexprs],
        "written": written,
        "extra_launcher_args": list(meta.get("extra_launcher_args") or ()),
        "source_hash": source_hash(kernel_source_text(fn)),
        "source_file": source_file,
        "extra": {
            "kernel_num_gb": meta.get("kernel_num_gb"),
            "kernel_type": kind or HEURISTIC_TYPES.get(heuristic or "", heuristic),
            "heuristic": heuristic,
            "size_hints": _jsonable(getattr(tuner, "size_hints", None)),
            "specialized": {k: _jsonable(v) for k, v in constants.items() if k not in constexprs},
            "mutated_arg_names": sorted(mutated),
            "inductor_meta": {k: _jsonable(meta[k]) for k in META_KEPT if k in meta},
            "torch": sys.modules["torch"].__version__ if "torch" in sys.modules else None,
        },
    }
    try:
        tuner._tritune_static = static
    except AttributeError:  # a tuner with __slots__: recompute next time
        pass
    return static


def _options(tuner: Any, config: Any, static: dict) -> dict[str, Any]:
    """Inductor's compile options (see ``_create_compile_options``) that the JIT accepts too."""
    meta, inductor_meta = tuner.triton_meta, tuner.inductor_meta
    options: dict[str, Any] = {
        "num_warps": config.num_warps,
        "num_stages": config.num_stages,
        "debug": bool(inductor_meta.get("assert_indirect_indexing", True)) and not inductor_meta.get("is_hip", False),
        "sanitize_overflow": False,
    }
    for key in ("enable_fp_fusion", "launch_pdl", "launch_cooperative_grid"):
        if key in meta:
            options[key] = meta[key]
    if meta.get("disable_ftz", False):
        options["enable_reflect_ftz"] = False
    if getattr(config, "maxnreg", None):
        options["maxnreg"] = config.maxnreg
    if getattr(config, "num_ctas", 1) not in (None, 1):
        options["num_ctas"] = config.num_ctas
    return options


def _arg_spec(name: str, value: Any, written: set[str], device: str | None) -> ArgSpec:
    if value is None:
        return ArgSpec(name=name, kind="none")
    if hasattr(value, "data_ptr") and hasattr(value, "stride"):
        shape, stride = list(value.shape), list(value.stride())
        offset = int(value.storage_offset())
        # Inductor's own benchmark harness (rand_strided) allocates exactly the view's extent: the
        # kernel indexes through the view, so a larger storage behind it is never read.
        return ArgSpec(name=name, kind="tensor", shape=shape, stride=stride,
                       dtype=str(value.dtype).removeprefix("torch."), device=device or str(value.device),
                       storage_offset=offset, storage_size=min_storage_size(shape, stride, offset),
                       written=name in written)
    if isinstance(value, bool):
        return ArgSpec(name=name, kind="scalar", value=value, type="bool")
    if isinstance(value, int):
        return ArgSpec(name=name, kind="scalar", value=value, type="int")
    if isinstance(value, float):
        return ArgSpec(name=name, kind="scalar", value=value, type="float")
    if hasattr(value, "item"):  # a numpy / 0-d torch scalar
        return _arg_spec(name, value.item(), written, device)
    raise SpecError(f"argument {name!r}: cannot record a {type(value).__name__}")


def _jsonable(value: Any) -> Any:
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    return getattr(value, "name", None) or str(value)
