"""Infer the specialization to compile a kernel with, when nobody launched it.

Per non-constexpr parameter, the type (first that applies):
  ``--signature NAME=TYPE``; Inductor's ``triton_meta["signature"]``; the parameter's annotation;
  a pointer by use, with its element type (``pointers``: ``tl.load(X + offs)`` makes ``X`` a
  pointer, whatever its name); a pointer by name (ends in ``ptr``, or starts with
  ``in_ptr``/``out_ptr``/``in_out_ptr``) -> ``*fp32``; anything else -> ``i32``.
  Pointers are assumed 16-byte aligned (``tt.divisibility=16``, what the JIT sees for torch
  tensors); integers are not assumed divisible by 16. Inductor's kernels carry their own attributes.

Per constexpr parameter, the value (first that applies), with where it came from:
  ``given`` (``--constexpr NAME=VALUE``); ``inductor`` (triton_meta constants); ``config`` (the
  first config of Inductor's or ``triton.autotune``'s list); ``heuristic`` (a
  ``triton.heuristics`` function that can be evaluated on the values known so far); ``default``
  (the parameter's default); ``fallback`` (128 for names containing ``BLOCK``). A constexpr with
  none of these is a ``LaunchError`` naming the parameter and the flag to pass.
  A ``--constexpr`` naming a runtime parameter specializes it as a constant, like the JIT does
  for an integer equal to 1.

num_warps: ``--num-warps``, else the first config's, else 4. num_stages: the config's, else 3.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from tritune.analyze.discover import Kernel
from tritune.analyze.pointers import infer_pointers

DEFAULT_NUM_WARPS = 4
DEFAULT_NUM_STAGES = 3
FALLBACK_BLOCK = 128
POINTER_TYPE = "*fp32"
INTEGER_TYPE = "i32"
ALIGNED = [["tt.divisibility", 16]]


class LaunchError(ValueError):
    pass


@dataclasses.dataclass(frozen=True)
class Launch:
    signature: dict[str, str]  # every parameter, constexprs as "constexpr"
    constexprs: dict[str, Any]
    sources: dict[str, str]  # constexpr name -> given/inductor/config/heuristic/default/fallback
    attrs: dict[tuple[int, ...], list]
    num_warps: int
    num_stages: int

    @property
    def inferred(self) -> list[str]:
        return [name for name, source in self.sources.items() if source != "given"]


def infer_launch(
    kernel: Kernel,
    *,
    constexprs: Mapping[str, Any] | None = None,
    signature: Mapping[str, str] | None = None,
    num_warps: int | None = None,
) -> Launch:
    given_values = dict(constexprs or {})
    given_types = dict(signature or {})
    config = kernel.configs[0] if kernel.configs else None
    values: dict[str, Any] = {}
    sources: dict[str, str] = {}
    for param in kernel.fn.params:
        name = param.name
        if name in given_values:
            values[name], sources[name] = given_values[name], "given"
        elif param.is_constexpr:
            found = _constexpr(kernel, param, config)
            if found is not None:
                values[name], sources[name] = found
    types = _param_types(kernel, given_types, constants=set(given_values))
    _apply_heuristics(kernel, values, sources)
    _apply_fallbacks(kernel, values, sources)
    order = [p.name for p in kernel.fn.params if p.name in values]  # parameter order
    values, sources = {n: values[n] for n in order}, {n: sources[n] for n in order}
    return Launch(
        signature={p.name: "constexpr" if p.name in values else types[p.name] for p in kernel.fn.params},
        constexprs=values,
        sources=sources,
        attrs=kernel.attrs if kernel.attrs is not None else _aligned_pointers(kernel, types),
        num_warps=num_warps or (config and config.num_warps) or DEFAULT_NUM_WARPS,
        num_stages=(config and config.num_stages) or DEFAULT_NUM_STAGES,
    )


def default_param_type(name: str) -> str:
    pointer = name.endswith("ptr") or name.startswith(("in_ptr", "out_ptr", "in_out_ptr"))
    return POINTER_TYPE if pointer else INTEGER_TYPE


def parse_value(text: str) -> int | float | bool:
    """A constexpr value from the command line: ``true``/``false``, an int (``0x`` ok), a float."""
    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    try:
        return int(lowered, 0)
    except ValueError:
        pass
    try:
        return float(lowered)
    except ValueError:
        raise ValueError(f"{text!r} is not an int, a float or true/false") from None


def parse_assignment(text: str) -> tuple[str, str]:
    """``"NAME=VALUE"`` -> ``("NAME", "VALUE")``; anything else is a ValueError saying so."""
    name, sep, value = text.partition("=")
    if not sep or not name.strip().isidentifier() or not value.strip():
        raise ValueError(f"expected NAME=VALUE, got {text!r}")
    return name.strip(), value.strip()


def parse_type(text: str) -> str:
    """A runtime parameter's type as ``--signature`` gives it (``*fp16``, ``i32``), checked by
    Triton's own parser (``str_to_ty``); a ValueError naming it otherwise (an unknown name ended
    the analysis in ``KeyError: 'float99'``)."""
    from triton.language import str_to_ty

    try:
        str_to_ty(text, None)
    except Exception:  # noqa: BLE001 - KeyError, IndexError, ...: Triton's parser has no error of its own
        raise ValueError(f"{text!r} is not a Triton type (e.g. *fp16, *fp32, *i64, i32, fp32)") from None
    return text


def _constexpr(kernel: Kernel, param, config) -> tuple[Any, str] | None:
    name = param.name
    if name in kernel.constants:
        return kernel.constants[name], "inductor"
    if config is not None and name in config.kwargs:
        return config.kwargs[name], "config"
    if param.has_default and name not in kernel.heuristics:
        return _plain(param.default), "default"
    return None


def _apply_heuristics(kernel: Kernel, values: dict, sources: dict) -> None:
    """``triton.heuristics`` functions see the launch arguments; we have only the values known so far."""
    for name, function in kernel.heuristics.items():
        if name in values:
            continue
        try:
            values[name] = function(dict(values))
            sources[name] = "heuristic"
        except Exception:  # noqa: BLE001 - needs a runtime argument we do not have
            continue


def _apply_fallbacks(kernel: Kernel, values: dict, sources: dict) -> None:
    for param in kernel.fn.params:
        name = param.name
        if not param.is_constexpr or name in values:
            continue
        if param.has_default:
            values[name], sources[name] = _plain(param.default), "default"
        elif "BLOCK" in name.upper():
            values[name], sources[name] = FALLBACK_BLOCK, "fallback"
        else:
            raise LaunchError(
                f"cannot infer constexpr {name!r} of {kernel.name}: pass --constexpr {name}=VALUE")


def _param_types(kernel: Kernel, given_types: Mapping[str, str], constants: set[str]) -> dict[str, str]:
    """Each runtime parameter's type; the source is read only for what nobody declared."""
    runtime = [p for p in kernel.fn.params if not p.is_constexpr and p.name not in constants]
    declared = {p.name: t for p in runtime if (t := _declared_type(kernel, p, given_types))}
    if len(declared) == len(runtime):
        return declared
    used = infer_pointers(kernel.fn, known={**declared, **dict.fromkeys(constants, "constexpr")})
    return {p.name: declared.get(p.name) or used.get(p.name) or default_param_type(p.name) for p in runtime}


def _declared_type(kernel: Kernel, param, given_types: Mapping[str, str]) -> str | None:
    name = param.name
    if name in given_types:
        return given_types[name]
    if kernel.signature and kernel.signature.get(name, "constexpr") != "constexpr":
        return kernel.signature[name]
    return param.annotation_type or None


def _aligned_pointers(kernel: Kernel, types: Mapping[str, str]) -> dict[tuple[int, ...], list]:
    return {
        (param.num,): ALIGNED for param in kernel.fn.params
        if types.get(param.name, "").startswith("*")
    }


def _plain(value: Any) -> Any:
    """``tl.constexpr(128)`` defaults -> ``128``."""
    return getattr(value, "value", value)
