"""Facts about kernels and launches that several stages use, kept in one place.

- ``ITEMSIZE`` / ``itemsize``  bytes per element of a torch dtype name (keys, roofline, guards)
- ``DEFAULT_OPTIONS``         the CUDA backend's launch options when a launch gives none
                              (capture fills them in; the search starts from them)
- ``inductor_kind``           what an Inductor kernel is, from its name: ``triton_poi_`` pointwise,
                              ``triton_per_`` persistent reduction (one block holds the whole
                              row: R0_BLOCK >= r0_numel), ``triton_red_`` looped reduction (a
                              loop over r0 in steps of R0_BLOCK), ``triton_tem_`` template (a
                              matmul or conv), ...

Nothing here imports torch or Triton at import time (the bottom of the import graph).
"""

from __future__ import annotations

import re
from typing import Any

ITEMSIZE = {  # torch dtype name -> bytes per element
    "bool": 1, "uint8": 1, "int8": 1, "float8_e4m3fn": 1, "float8_e5m2": 1, "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1, "int16": 2, "uint16": 2, "float16": 2, "bfloat16": 2, "int32": 4,
    "uint32": 4, "float32": 4, "int64": 8, "uint64": 8, "float64": 8, "complex64": 8, "complex128": 16,
}
DEFAULT_OPTIONS = {"num_warps": 4, "num_stages": 3}  # the CUDA backend's defaults

POINTWISE, PERSISTENT, LOOPED, TEMPLATE = "poi", "per", "red", "tem"
_INDUCTOR_NAME = re.compile(r"^triton_([a-z]+)_")


def itemsize(dtype: str) -> int:
    """Bytes per element of ``dtype`` (a torch dtype name); a ValueError names an unknown one."""
    try:
        return ITEMSIZE[dtype]
    except KeyError:
        raise ValueError(f"unknown tensor dtype {dtype!r}: no element size") from None


def inductor_kind(name: str) -> str | None:
    """``"poi"``, ``"per"``, ``"red"``, ``"tem"``, ... from an Inductor kernel's name; None for a
    name Inductor did not give."""
    match = _INDUCTOR_NAME.match(name)
    return match.group(1) if match else None


def r0_numel(spec: Any) -> int | None:
    """The reduction length: Inductor's ``r0_numel`` argument (kept in the grid rule's scalars too)."""
    for arg in spec.args:
        if arg.name in ("r0_numel", "rnumel") and arg.kind == "scalar":
            return int(arg.value)
    scalars = (spec.grid_rule or {}).get("scalars") or {}
    value = scalars.get("r0_numel") or scalars.get("rnumel")
    return int(value) if value else None
