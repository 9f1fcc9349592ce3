"""The ``triton.language`` shim: the language as the compiler needs it, inside an interpreted program.

Why it exists: capture (and the static profile) compile a TTIR for sm_90 on the CPU, to learn
which tensors a kernel writes, in a process where ``TRITON_INTERPRET=1`` runs kernels. Two things
the interpreter does to ``triton.language`` break that compile, and Triton has no hook for
either:

- while a kernel runs it replaces the language's builtins (``tl.load``, ``tl.tensor.__add__``...)
  with wrappers ``lambda *args, member=member, **kwargs`` defined in
  ``triton/runtime/interpreter.py`` (``_patch_attr``); after a call to a jit helper
  (``tl.max``...) some stay patched (``InterpretedFunction.__call__`` never restores them);
- the language's own jit helpers (``tl.max``, ``tl.sum``...) are ``InterpretedFunction``
  objects, which the compiler rejects.

So this module snapshots the attributes of ``TARGETS`` when it is imported (capture imports it
before any kernel is interpreted), and ``compilable_language()`` puts, for one compile, the
snapshot back (unwrapping any interpreter patch it finds), and ``JITFunction`` copies of the jit
helpers (made from ``InterpretedFunction.fn`` and ``.kwargs``) in place; everything is restored
afterwards. ``check_targets()`` raises ``ShimError`` naming what this Triton lacks;
``tests/capture/test_capture_language_shim.py`` fails when Triton changes any of it.
"""

from __future__ import annotations

import contextlib
import importlib
import sys
import types
from typing import Any, Iterator

from triton.runtime.jit import JITFunction

from tritune.capture._jit_shim import ShimError, is_interpreted

# (module, dotted attribute or "" for the module itself, kind): the namespaces the interpreter
# patches (``triton.runtime.interpreter._patch_lang``), snapshotted and restored here
TARGETS = (
    ("triton.language", "", "module"),
    ("triton.language.core", "", "module"),
    ("triton.language.math", "", "module"),
    ("triton.language", "tensor", "class"),
    ("triton.language.core", "tensor_descriptor_base", "class"),
    ("triton.language.core", "dtype", "class"),  # to_ir: the interpreter's lacks types the compiler has
)
PATCH_FILE = "interpreter.py"  # where the interpreter's wrappers are defined (their code's file)
PATCH_DEFAULT = "member"  # the keyword default under which a wrapper keeps the builtin it wraps

_MISSING = object()
_COPIES: dict[int, JITFunction] = {}


def _resolve(module_name: str, attr: str) -> Any:
    owner = importlib.import_module(module_name)
    for part in filter(None, attr.split(".")):
        owner = getattr(owner, part)
    return owner


def _is_kind(obj: Any, kind: str) -> bool:
    return isinstance(obj, type if kind == "class" else types.ModuleType)


def check_targets() -> list[Any]:
    """The namespaces of ``TARGETS``; ``ShimError`` naming every one this Triton lacks."""
    found, missing = [], []
    for module_name, attr, kind in TARGETS:
        name = ".".join(filter(None, (module_name, attr)))
        try:
            obj = _resolve(module_name, attr)
        except (ImportError, AttributeError):
            missing.append(name)
            continue
        if not _is_kind(obj, kind):
            missing.append(f"{name} as a {kind}")
            continue
        found.append(obj)
    if missing:
        import triton

        raise ShimError(f"triton {triton.__version__} has no {', '.join(missing)}: "
                        "tritune capture needs updating for this Triton")
    return found


# ``triton.language`` as it was when this module loaded, before any kernel was interpreted
_PRISTINE = [(obj, dict(vars(obj))) for obj in check_targets()]


def interpreter_patched(value: Any) -> Any | None:
    """The builtin an interpreter patch wraps, or None if ``value`` is not such a patch."""
    code = getattr(value, "__code__", None)
    member = (getattr(value, "__kwdefaults__", None) or {}).get(PATCH_DEFAULT)
    if code is None or member is None or not code.co_filename.endswith(PATCH_FILE):
        return None
    return member


def jit_copy(interpreted: Any) -> JITFunction:
    """A ``JITFunction`` of the language's ``InterpretedFunction`` helper (cached)."""
    copy = _COPIES.get(id(interpreted.fn))
    if copy is None:
        copy = _COPIES[id(interpreted.fn)] = JITFunction(interpreted.fn, **interpreted.kwargs)
    return copy


@contextlib.contextmanager
def compilable_language() -> Iterator[None]:
    """``triton.language`` as the compiler needs it, for one compile under the interpreter (see
    the module docstring). Everything is put back afterwards."""
    swapped: list[tuple[Any, str, Any]] = []

    def put(obj: Any, attr: str, value: Any) -> None:
        swapped.append((obj, attr, getattr(obj, attr, _MISSING)))
        if value is _MISSING:
            delattr(obj, attr)
        else:
            setattr(obj, attr, value)

    for obj, pristine in _PRISTINE:
        for attr in set(vars(obj)) | set(pristine):
            now, then = vars(obj).get(attr, _MISSING), pristine.get(attr, _MISSING)
            original = interpreter_patched(now)
            if original is not None:  # patched before this module loaded: unwrap it
                put(obj, attr, original)
            elif now is not then:
                put(obj, attr, then)
    for name, module in list(sys.modules.items()):
        if not name.startswith("triton.language") or module is None:
            continue
        for attr, value in list(vars(module).items()):
            if is_interpreted(value):
                put(module, attr, jit_copy(value))
    try:
        yield
    finally:
        for obj, attr, value in reversed(swapped):
            if value is _MISSING:
                delattr(obj, attr)
            else:
                setattr(obj, attr, value)
