"""The jit function a decision launches, and the compiler passes it is built with.

``variant_kernel(fn, variant)``:

* options or constexprs only: ``fn`` itself. Triton's in-memory cache is keyed by
  specialization, constexprs and options, so the variant's binary sits beside the baseline's
  under its own key, exactly what the program would get had it passed those values.
* ``passes``: a private clone of ``fn`` (a new ``JITFunction`` over the same Python function), so
  that a binary built with tritune's passes never enters ``fn``'s cache (Triton's cache key does
  not know the passes; ``tritune.compiler.jit_caches`` parks every live function's cache on each
  switch, ``fn``'s included, so ``fn`` gets its own back untouched).
* ``source``: the kernel loaded from the replacement text of its file, as replay loads it
  (``replay.kernel.load_kernel``: the text is imported as a fresh module, the kernel found by
  name under any wrapper). Importing runs the file's top level, as replay does. A source no rule of
  tritune's made (a model's) must first pass ``allowlist.sandbox.check_variant_source`` against ``fn``'s
  own file; refused, the plan fails and its launches run the kernel as written.

``Passes`` compiles with the passes: the first launch of each set of launch options (the key
fixes everything else Triton specializes on) runs inside ``tritune.compiler.enabled(passes)``,
which costs a scan of live jit functions (tens of ms) once; afterwards the clone keeps the cache
built under the passes' salt and later launches are plain Triton launches (no scope, no scan).
Under ``TRITON_INTERPRET=1`` nothing is compiled, so the passes change nothing there (as in
replay), but the same steps run.
"""

from __future__ import annotations

import contextlib
import hashlib
import inspect
import types
from pathlib import Path
from typing import Any, Callable, Hashable, Iterator

from tritune import config
from tritune.allowlist import sandbox
from tritune.capture._jit_shim import is_interpreted


# (id(fn), source sha, passes, fast_math) -> (fn, its variant kernel). Keys whose decisions share a
# source and pass set share one kernel and its binaries; another pass set never shares a clone (its
# binaries live under another cache salt, and ``Passes`` keeps one salted cache per clone).
_MADE: dict[tuple, tuple[Any, Any]] = {}


def variant_kernel(fn: Any, variant: Any) -> Any:
    if variant.source is None and not variant.passes:
        return fn
    sha = hashlib.sha256(variant.source.encode()).hexdigest() if variant.source is not None else None
    what = (id(fn), sha, tuple(variant.passes), bool(variant.fast_math) and bool(variant.passes))
    made = _MADE.get(what)
    if made is None or made[0] is not fn:
        if sandbox.needs_check(variant):  # refused: the plan fails, its launches run the kernel as written
            sandbox.check_variant_source(_captured_text(fn), variant.source, fn.fn.__name__)
        made = _MADE[what] = (fn, load_source(fn, variant.source) if variant.source is not None else clone(fn))
    return made[1]


def _captured_text(fn: Any) -> str:
    """The text of ``fn``'s own source file, which a variant's source replaces."""
    file = inspect.getsourcefile(fn.fn)
    if file is None:
        raise sandbox.Unsafe(0, f"the source file of {fn.fn.__name__} cannot be read to check the variant against")
    return Path(file).read_text()


def clone(fn: Any) -> Any:
    """A new jit function over ``fn``'s Python function, with ``fn``'s settings and empty caches."""
    if is_interpreted(fn):
        from triton.runtime.interpreter import InterpretedFunction

        return InterpretedFunction(fn.fn, **fn.kwargs)
    from triton.runtime.jit import JITFunction

    return JITFunction(fn.fn, version=fn.version, do_not_specialize=fn.do_not_specialize,
                       do_not_specialize_on_alignment=fn.do_not_specialize_on_alignment, debug=fn.debug,
                       noinline=fn.noinline, repr=fn._repr, launch_metadata=fn.launch_metadata)


def load_source(fn: Any, text: str) -> Any:
    """The kernel named like ``fn`` in ``text`` (a whole replacement of ``fn``'s source file)."""
    from tritune.replay.kernel import load_kernel

    name = fn.fn.__name__
    file = inspect.getsourcefile(fn.fn) or f"{name}.py"
    where = types.SimpleNamespace(id=name, kernel=name, source=Path(file).name, source_file=file)
    with _interpreting(is_interpreted(fn)):
        return load_kernel(where, ".", source=text)


@contextlib.contextmanager
def _interpreting(on: bool) -> Iterator[None]:
    """``TRITON_INTERPRET`` as ``fn`` was made (``@triton.jit`` reads it when it decorates), so
    the variant is launched by the same ``run`` as the kernel it replaces."""
    with config.override({config.ENV_INTERPRET: "1" if on else "0"}):
        yield


class Passes:
    """Builds a decision's clone with its passes, once per launch options (see the module docstring)."""

    def __init__(self, variant: Any):
        self.names = tuple(variant.passes)
        self.fast_math = bool(variant.fast_math)
        self.built: set[Hashable] = set()

    def run(self, fn: Any, options: Hashable, launch: Callable[[], Any]) -> Any:
        if not self.names or options in self.built:
            return launch()
        import tritune.compiler

        with tritune.compiler.enabled(self.names, fast_math=self.fast_math):
            result = launch()
            salted = vars(fn).get("device_caches")
        if salted is not None:
            fn.device_caches = salted  # leaving the scope parked it: the clone keeps its pass-built binaries
        self.built.add(options)
        return result


def options_key(kwargs: dict, params: frozenset[str] | set[str]) -> Hashable:
    """The launch options among keyword arguments (what is not a parameter), as a hashable value."""
    items = tuple(sorted((k, v) for k, v in kwargs.items() if k not in params))
    try:
        hash(items)
    except TypeError:
        return repr(items)
    return items
