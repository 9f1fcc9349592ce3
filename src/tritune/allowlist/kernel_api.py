"""Triton's kernel API, as the allowlist (``allowlist.sandbox``) lets untrusted kernel code reach it.

Generated from Triton's public API when first asked, so a Triton upgrade brings its new functions
and nothing else: ``module_members()`` (``triton.language.__all__`` less inline asm and Python
callables, ``tl.math``, libdevice, Inductor's ``triton_helpers`` jit helpers; no module or class
Triton did not list) and ``value_attrs()`` (what a kernel may read or call on a value).
"""
from __future__ import annotations

import functools
import inspect
import types

# Python builtins a kernel may call: those Triton's code generator itself knows (its
# ``builtin_namespace``, less getattr/hasattr/isinstance/list/print)
SAFE_BUILTINS = frozenset({"range", "min", "max", "int", "float", "len"})
# tl.* in __all__ that are refused: arbitrary PTX, or a Python callable applied per element
DENIED = {"inline_asm_elementwise": "it is arbitrary PTX", "map_elementwise": "it applies a Python callable"}
_TL_CLASSES = frozenset({"constexpr", "range", "static_range"})  # classes a kernel calls
ENUMS = {"PropagateNan": frozenset({"ALL", "NONE"})}
_MATH_CONSTANTS = frozenset({"pi", "e", "tau", "inf", "nan"})
_DTYPE_ATTRS = frozenset({"primitive_bitwidth", "int_bitwidth", "element_ty", "fp_mantissa_width",
                          "exponent_bias", "get_int_max_value", "get_int_min_value"})
_VALUE_DENIED = frozenset({"handle", "type", "to_ir", "mangle", "codegen_name", "cache_key_part", "scalar",
                            "with_element_ty", "kind", "KIND"})


@functools.cache
def module_members() -> dict[str, dict[str, str]]:
    """Each module a kernel may name -> its members a kernel may reach and what each is: another
    module of this table, or ``fn`` (called), ``dtype``, ``const``, ``enum``. Generated from
    Triton's public API, so a Triton upgrade brings its new functions and nothing else."""
    import triton.language as tl
    from triton.language.extra import libdevice

    members: dict[str, dict[str, str]] = {"triton": {"language": "tl", "cdiv": "fn", "next_power_of_2": "fn"}}
    tl_members = members["tl"] = {"math": "tl.math", "extra": "tl.extra"}
    for name in tl.__all__:
        value = getattr(tl, name, None)
        if name in DENIED or name.startswith("_") or isinstance(value, types.ModuleType):
            continue
        if isinstance(value, tl.dtype):
            tl_members[name] = "dtype"
        elif name in ENUMS:
            tl_members[name] = "enum"
        elif inspect.isclass(value):
            if name in _TL_CLASSES:
                tl_members[name] = "fn"
        elif callable(value):
            tl_members[name] = "fn"
        elif isinstance(value, (int, float)):
            tl_members[name] = "const"
    members["tl.math"] = {n: "fn" for n, v in vars(tl.math).items() if not n.startswith("_") and callable(v)
                          and not inspect.isclass(v) and getattr(v, "__module__", "").startswith("triton.language")}
    members["tl.extra"] = {"cuda": "tl.extra.cuda", "libdevice": "libdevice"}
    members["tl.extra.cuda"] = {"libdevice": "libdevice"}
    members["libdevice"] = {n: "fn" for n, v in vars(libdevice).items()
                            if not n.startswith("_") and inspect.isfunction(v) and v.__module__ == libdevice.__name__}
    members["math"] = {n: "const" for n in _MATH_CONSTANTS}
    return members


@functools.cache
def _helpers() -> dict[str, str]:
    """Inductor's ``triton_helpers``: its jit functions and Triton builtins (less inline asm and
    the eager random kernel). Imported only for a file that imports it (torch is then loaded)."""
    try:
        from torch._inductor.runtime import triton_helpers
        from triton.runtime.interpreter import InterpretedFunction
        from triton.runtime.jit import JITFunction
    except ImportError:
        return {}
    return {n: "fn" for n, v in vars(triton_helpers).items()
            if not n.startswith("_") and "inline_asm" not in n and n != "rand_eager_kernel"
            and (isinstance(v, (JITFunction, InterpretedFunction)) or getattr(v, "__triton_builtin__", False))}


def members(module: str) -> dict[str, str]:
    return _helpers() if module == "triton_helpers" else module_members()[module]


@functools.cache
def value_attrs() -> frozenset[str]:
    """Attributes of a value (a tensor, a pointer, a descriptor, a dtype) a kernel may use:
    ``tl.tensor``'s and ``tl.tensor_descriptor``'s public methods and properties and ``tl.dtype``'s
    ``is_*`` tests and widths, less what reaches the IR."""
    import triton.language as tl

    found = {n for n in dir(tl.tensor) if not n.startswith("_")} | {"dtype", "shape", "numel", "T"}
    found |= {n for n in dir(tl.tensor_descriptor) if not n.startswith("_")}  # a_desc.load([m, k])
    found |= {n for n in dir(tl.dtype) if n.startswith("is_")} | _DTYPE_ATTRS
    return frozenset(found - _VALUE_DENIED)
