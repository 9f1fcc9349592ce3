"""The attributes Triton's Python bindings cannot read, parsed once from the printed module.

The bindings give no getter for enum attributes (``evictionPolicy``, ``cacheModifier``) nor for
dense constants. Both ops are leaves (no regions), so the k-th ``tt.load`` in the printed module
(pre-order) is the k-th ``tt.load`` in ``module.walk`` (post-order): leaves keep their relative
order in both. ``parse`` pairs them by that index and refuses to guess if the counts disagree.
"""

from __future__ import annotations

import dataclasses
import re
import struct

from triton._C.libtriton import ir


class PrintedIRError(RuntimeError):
    """The printed module does not match the walked one: a Triton change tritune must follow."""


@dataclasses.dataclass(frozen=True)
class LoadAttrs:
    cache: ir.CACHE_MODIFIER = ir.CACHE_MODIFIER.NONE
    evict: ir.EVICTION_POLICY = ir.EVICTION_POLICY.NORMAL
    volatile: bool = False
    boundary_check: tuple[int, ...] = ()
    padding: int | None = None


@dataclasses.dataclass(frozen=True)
class FloatConstant:
    """A float ``arith.constant``: a scalar, or a splat tensor of one value."""

    value: float
    element_type: str  # f16, bf16, f32, f64


@dataclasses.dataclass(frozen=True)
class PrintedAttrs:
    loads: tuple[LoadAttrs, ...]
    # None for constants that are not a float scalar or float splat (ints, non-splat dense).
    constants: tuple[FloatConstant | None, ...]


_LOAD_LINE = re.compile(r'(?:^|[\s"])tt\.load(?=[\s"(])')
_CONST_LINE = re.compile(r'(?:^|[\s"])arith\.constant(?=[\s"(])')
_CACHE = re.compile(r"cacheModifier\s*=\s*(\w+)")
_EVICT = re.compile(r"evictionPolicy\s*=\s*(\w+)")
_VOLATILE = re.compile(r"isVolatile\s*=\s*true")
_BOUNDARY = re.compile(r"boundaryCheck\s*=\s*array<i32(?::\s*([-\d,\s]*))?>")
_PADDING = re.compile(r"padding\s*=\s*(\d+)")
_CONST_VALUE = re.compile(
    r"arith\.constant\s+(?:dense<(?P<dense>[^>\[]+)>|(?P<scalar>[-+0-9.eExXa-fA-FinfINFnaN]+))"
    r"\s*:\s*(?:tensor<[^>]*x)?(?P<ty>bf16|f16|f32|f64)\b"
)
_HEX_FORMATS = {"f16": ("<e", "<H"), "f32": ("<f", "<I"), "f64": ("<d", "<Q")}


def parse(text: str) -> PrintedAttrs:
    lines = text.splitlines()
    loads = tuple(_load_attrs(line) for line in lines if _LOAD_LINE.search(_strip_loc(line)))
    constants = tuple(_constant(line) for line in lines if _CONST_LINE.search(_strip_loc(line)))
    return PrintedAttrs(loads=loads, constants=constants)


def _strip_loc(line: str) -> str:
    at = line.find(" loc(")
    return line if at < 0 else line[:at]


def _load_attrs(line: str) -> LoadAttrs:
    line = _strip_loc(line)
    cache = _CACHE.search(line)
    evict = _EVICT.search(line)
    boundary = _BOUNDARY.search(line)
    padding = _PADDING.search(line)
    return LoadAttrs(
        cache=ir.CACHE_MODIFIER.__members__[cache.group(1).upper()] if cache else ir.CACHE_MODIFIER.NONE,
        evict=ir.EVICTION_POLICY.__members__[evict.group(1).upper()] if evict else ir.EVICTION_POLICY.NORMAL,
        volatile=bool(_VOLATILE.search(line)),
        boundary_check=_int_list(boundary.group(1)) if boundary else (),
        padding=int(padding.group(1)) if padding else None,
    )


def _int_list(text: str | None) -> tuple[int, ...]:
    return tuple(int(part) for part in (text or "").split(",") if part.strip())


def _constant(line: str) -> FloatConstant | None:
    match = _CONST_VALUE.search(_strip_loc(line))
    if not match:
        return None
    literal = (match.group("dense") or match.group("scalar")).strip()
    value = _float_literal(literal, match.group("ty"))
    return None if value is None else FloatConstant(value=value, element_type=match.group("ty"))


def _float_literal(literal: str, element_type: str) -> float | None:
    """MLIR prints finite floats in decimal and inf/nan (and some others) as raw hex bits."""
    literal = literal.strip('"')
    if literal.lower().startswith("0x"):
        bits = int(literal, 16)
        if element_type == "bf16":
            return struct.unpack("<f", struct.pack("<I", bits << 16))[0]
        float_fmt, int_fmt = _HEX_FORMATS[element_type]
        return struct.unpack(float_fmt, struct.pack(int_fmt, bits))[0]
    try:
        return float(literal)
    except ValueError:
        return None
