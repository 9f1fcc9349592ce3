"""Constexpr values as JSON and back: what capture writes, replay and apply launch with, and the
decision key holds.

Triton takes as a ``tl.constexpr`` any value it can put in the kernel: ints, floats, bools, None,
strings (a kernel compares them: ``if ACTIVATION == "gelu"``), Triton dtypes (``OUT_DTYPE=
tl.float16``, a stream-K accumulator type), pointer dtypes, ``tl.constexpr(...)`` wrappers of any
of these, tuples of them, and ``@triton.jit`` functions (the kernel calls them). ``encode``:

    ====================================  ==========================================================
    None, bool, int, float, str           as they are
    ``tl.constexpr(v)``                   ``encode(v)`` (the parameter is a constexpr either way)
    ``tl.float16`` (a ``tl.dtype``)       ``{"tl_dtype": "fp16"}`` (Triton's name of it)
    ``tl.pointer_type(tl.float16)``       ``{"tl_pointer": {"tl_dtype": "fp16"}, "address_space": 1,
                                          "const": false}``
    a tuple                               ``{"tuple": [encode(item), ...]}``
    a ``@triton.jit`` function            ``{"tl_jit": "name", "module": "its module"}``: replay and
                                          apply take the function of that name from the kernel's
                                          own module (``decode``'s ``scope``)
    ====================================  ==========================================================

Anything else raises ``UnsupportedConstexpr`` naming the parameter and the type: capture records
that launch as skipped, with this reason, rather than a guess. Never ``str(value)``: text is a
string to the compiler (replaying ``"fp16"`` failed with ``'str' object has no attribute
'scalar'``).

``decode(encoded, scope)`` gives the live value back, and ``encode(decode(x)) == x`` for every
encoded ``x`` but a jit function's (found by name in ``scope``, a module replay named itself). The
decision key holds ``encode`` of the live value at apply time and the spec's encoded value at
capture: the same JSON. ``encode`` of an already encoded value returns it (``key_value``: the key
takes either).

Captures made before this encoding wrote non-JSON values as text and named them in
``extra["constexprs_as_text"]``; ``migrate`` turns the dtype names among them back into tags when
such a file is read, and leaves the names it cannot turn back in that list (replay then refuses
the launch, naming them: capture again).
"""

from __future__ import annotations

from typing import Any, Mapping

AS_TEXT = "constexprs_as_text"  # the extra field of captures made before this encoding
_TAGS = ("tl_dtype", "tl_pointer", "tuple", "tl_jit")


class UnsupportedConstexpr(ValueError):
    """A constexpr value this encoding cannot write (the message names its parameter and type)."""


class ConstexprError(ValueError):
    """An encoded constexpr that cannot be turned back into a value (one line saying why)."""


def encode(value: Any, name: str = "?") -> Any:
    """The JSON form of a constexpr value (module docstring); ``UnsupportedConstexpr`` if none."""
    from triton.language import core

    if isinstance(value, core.constexpr):
        value = value.value
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if type(value).__module__ == "numpy" and hasattr(value, "item"):  # a numpy scalar
        return encode(value.item(), name)
    if isinstance(value, core.pointer_type):
        return {"tl_pointer": encode(value.element_ty, name), "address_space": int(value.address_space),
                "const": bool(value.const)}
    if isinstance(value, core.dtype) and type(value) is core.dtype:  # not a block or other composite type
        return {"tl_dtype": value.name}
    if isinstance(value, tuple):
        return {"tuple": [encode(item, name) for item in value]}
    if _is_jit(value):
        python_fn = _python_fn(value)
        return {"tl_jit": python_fn.__name__, "module": python_fn.__module__ or ""}
    if is_encoded(value):
        return value
    raise UnsupportedConstexpr(f"constexpr {name!r} is a {type(value).__module__}.{type(value).__qualname__} "
                               "(capture records None, bool, int, float, str, Triton dtypes, pointer dtypes, "
                               "tuples and jit functions)")


def key_value(value: Any) -> Any:
    """``encode`` for the decision key, whether ``value`` is live or already encoded; a JSON list
    (a file written by hand or by an older tritune: replay refuses it) keys as it is. Raises
    ``UnsupportedConstexpr`` like ``encode``."""
    if isinstance(value, list):
        return [key_value(item) for item in value]
    return encode(value)


def is_encoded(value: Any) -> bool:
    """A tagged object ``encode`` writes (checked deeply enough to tell it from any other dict)."""
    if not isinstance(value, dict):
        return False
    if "tl_dtype" in value:
        return set(value) == {"tl_dtype"} and isinstance(value["tl_dtype"], str)
    if "tl_pointer" in value:
        return set(value) <= {"tl_pointer", "address_space", "const"} and is_encoded(value["tl_pointer"])
    if "tuple" in value:
        return set(value) == {"tuple"} and isinstance(value["tuple"], list)
    if "tl_jit" in value:
        return set(value) <= {"tl_jit", "module"} and isinstance(value["tl_jit"], str)
    return False


def decode(value: Any, name: str = "?", scope: Mapping[str, Any] | None = None) -> Any:
    """The live value of an encoded constexpr; ``scope`` (the kernel module's globals) resolves
    jit functions. ``ConstexprError`` for a tag it does not know or a value it cannot rebuild."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, list):  # JSON has no tuples: a list only comes from a hand-made file
        raise ConstexprError(f"constexpr {name!r}: a list {value!r} is not a constexpr value (tuples are "
                             '{"tuple": [...]})')
    if not isinstance(value, dict) or not any(tag in value for tag in _TAGS):
        raise ConstexprError(f"constexpr {name!r}: {value!r} is not a constexpr encoding this tritune knows")
    from triton.language import core

    if "tl_dtype" in value:
        dtype_name = value["tl_dtype"]
        if not isinstance(dtype_name, str) or not core.dtype.is_dtype(dtype_name):
            raise ConstexprError(f"constexpr {name!r}: {dtype_name!r} is not a Triton dtype")
        return core.dtype(dtype_name)
    if "tl_pointer" in value:
        element = decode(value["tl_pointer"], name, scope)
        if not isinstance(element, core.dtype):
            raise ConstexprError(f"constexpr {name!r}: a pointer to {element!r}, not to a Triton dtype")
        return core.pointer_type(element, int(value.get("address_space", 1)), bool(value.get("const", False)))
    if "tuple" in value:
        return tuple(decode(item, name, scope) for item in value["tuple"])
    return _jit_function(value, name, scope)


def decode_all(values: Mapping[str, Any], scope: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``decode`` of every value, by name."""
    return {key: decode(value, key, scope) for key, value in values.items()}


def needs_decoding(values: Mapping[str, Any]) -> bool:
    """Whether any value is a tagged object (plain JSON scalars launch as they are)."""
    return any(isinstance(v, dict) for v in values.values())


def migrate(constexprs: dict[str, Any], extra: dict[str, Any]) -> None:
    """Turn an older capture's dtype text (``extra["constexprs_as_text"]``) into tags, in place;
    names whose text is not a dtype stay listed (``left_as_text``)."""
    names = extra.get(AS_TEXT)
    if not names:
        return
    left = []
    for name in names:
        tagged = _dtype_from_text(constexprs.get(name))
        if tagged is None:
            left.append(name)
        else:
            constexprs[name] = tagged
    if left:
        extra[AS_TEXT] = left
    else:
        del extra[AS_TEXT]


def left_as_text(extra: Mapping[str, Any]) -> list[str]:
    """Constexprs an older capture wrote as text that ``migrate`` could not turn back."""
    return list(extra.get(AS_TEXT) or ())


def _dtype_from_text(text: Any) -> dict | None:
    """``"fp16"`` -> ``{"tl_dtype": "fp16"}``; ``"pointer<fp16>"`` / ``"const_pointer<fp16>"`` ->
    the pointer's tag; anything else None."""
    if not isinstance(text, str):
        return None
    from triton.language import core

    if core.dtype.is_dtype(text):
        return {"tl_dtype": text}
    for prefix, const in (("pointer<", False), ("const_pointer<", True)):
        if text.startswith(prefix) and text.endswith(">"):
            inner = _dtype_from_text(text[len(prefix):-1])
            if inner is not None:
                return {"tl_pointer": inner, "address_space": 1, "const": const}
    return None


def _is_jit(value: Any) -> bool:
    return type(value).__name__ in ("JITFunction", "InterpretedFunction") and hasattr(value, "fn")


def _python_fn(value: Any) -> Any:
    fn = value
    while hasattr(fn, "fn"):
        fn = fn.fn
    return fn


def _jit_function(value: dict, name: str, scope: Mapping[str, Any] | None) -> Any:
    wanted = value.get("tl_jit")
    found = (scope or {}).get(wanted) if isinstance(wanted, str) else None
    if found is None or not _is_jit(found):
        raise ConstexprError(f"constexpr {name!r}: jit function {value.get('module')}.{wanted} is not defined "
                             "in the kernel's own file (replay and apply find it there by name)")
    return found
