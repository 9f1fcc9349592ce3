"""A decided jit launch without Triton's ``run``: signatures made for one call shape, and the
compiled binary launched straight.

``Signatures`` gives a jit function's launch its signature (what ``JitEntry.fast`` is keyed by):
the dict key that fixes the decision key, the rewrite, Triton's specialization and the grid rule's
inputs. Triton 3.6 (``native_specialize_impl``) specializes a tensor on its dtype and the 16-byte
alignment of its data pointer, an int on its value class (1, i32/i64/u64, divisible by 16), a
float or bool argument on its type only, and a constexpr (None included) on its value; launch
options and ``knobs.runtime.debug``/``knobs.compilation.instrumentation_mode`` go into its
options. A signature holds: per tensor its dtype, shape and ``data_ptr() & 15``; per int its
value; per constexpr its value (a float or bool constexpr too); per keyword option its value;
and each argument's exact class. Strides are not in it: neither the key nor Triton's
specialization depends on them (a program passing a stride passes an int, which is). The current
device and the knobs are checked by ``Direct`` at each launch.

The first call shape of a function (the number of positional arguments, the keyword names, the
class of each argument) gets a builder made for it (``_builder``: Python source generated once,
as Triton's own binder is), which checks each argument's class and returns a flat tuple: no
binding, no list, one tuple allocated. Up to ``_SHAPES`` shapes get one; any other launch (an
argument of another class, a tensor subclass not seen yet) gets the general form
(``Signatures.general``), tagged so it never equals a builder's.

``Direct`` is one prepared launch's binary on one device: recorded from what Triton's ``run``
returned on the launch that compiled (or found) it, it launches as ``JITFunction.run`` does at
its end (``CompiledKernel.run(grid..., stream, function, metadata, ...)``), with the arguments in
the variant's parameter order (``Recipe``: the program's positional arguments, its keyword
arguments and the fixed values: the decision's constexprs, defaults) and the grid padded to three
(a callable grid is called with every argument by name, as Triton calls it). It refuses (the
caller goes through Triton's ``run``) while a launch hook is set (``knobs.runtime.
launch_enter_hook``/``launch_exit_hook``: profilers, proton), a pre-run hook is on the function,
a global the kernel reads has changed (Triton raises then), the debug or instrumentation knob
moved, or the current device is another. A persistent-grid decision's ``Direct`` gets an
adapter (``replay.persistent.PersistentGrid.adapter``) that puts the grid's tile count in the
added arguments and launches fewer programs; a grid it does not cover is refused.
``GuardedDirect`` (a decision that assumes its tensor arguments do not overlap) also refuses a
launch whose tensors overlap.
"""

from __future__ import annotations

import operator
from typing import Any, Callable, Sequence

_SHAPES = 4  # call shapes per function with a builder of their own
_GENERAL = object()  # first element of a general signature: never a builder's tag (an int)
_NOT_FOUND = object()


class Signatures:
    """A jit function's signatures (see the module docstring)."""

    __slots__ = ("names", "constexpr", "tensor", "builders", "first", "_general")

    def __init__(self, names: Sequence[str], constexpr: set[str] | frozenset[str], tensor: type,
                 general: Callable[[tuple, dict, type], tuple]):
        self.names, self.constexpr, self.tensor = tuple(names), frozenset(constexpr), tensor
        self.builders: list[Callable] = []
        self.first: Callable[[tuple, dict], tuple | None] = _none  # the hot path calls this first
        self._general = general

    def __call__(self, args: tuple, kwargs: dict) -> tuple:
        first = self.first(args, kwargs)
        if first is not None:
            return first
        for builder in self.builders[1:]:
            found = builder(args, kwargs)
            if found is not None:
                return found
        if len(self.builders) < _SHAPES:
            builder = self._learn(args, kwargs)
            if builder is not None:
                return builder(args, kwargs)
        return self.general(args, kwargs)

    def general(self, args: tuple, kwargs: dict) -> tuple:
        """Any launch: the Inductor-style signature plus every constexpr's class and value."""
        names, constexpr = self.names, self.constexpr
        values = [(a.__class__, a) for name, a in zip(names, args) if name in constexpr]
        values += [(name, a.__class__, a) for name, a in kwargs.items() if name in constexpr]
        return (_GENERAL, self._general(args, kwargs, self.tensor), tuple(values))

    def _learn(self, args: tuple, kwargs: dict) -> Callable | None:
        if len(args) > len(self.names):
            return None
        kinds = []
        for value in (*args, *kwargs.values()):
            cls = value.__class__
            kind = _KINDS.get(cls) or ("tensor" if isinstance(value, self.tensor) else None)
            if kind is None:
                return None
            kinds.append((cls, kind))
        params = set(self.names)
        constexpr = [name in self.constexpr for name in self.names[:len(args)]]
        constexpr += [name in self.constexpr or name not in params for name in kwargs]  # options: by value
        builder = _builder(len(self.builders), len(args), tuple(kwargs), kinds, constexpr)
        self.builders.append(builder)
        if len(self.builders) == 1:
            self.first = builder
        return builder


_KINDS = {int: "int", float: "float", bool: "bool", type(None): "none"}


def _builder(tag: int, nargs: int, kwnames: tuple, kinds: list, constexpr: list[bool]) -> Callable:
    """A signature function for one call shape (generated source: one class check and the
    described values per argument, one tuple)."""
    names = [f"a{i}" for i in range(nargs)] + [f"k{i}" for i in range(len(kwnames))]
    namespace: dict[str, Any] = {"_missing": _NOT_FOUND}
    lines = ["def signature(args, kwargs):",
             f"    if len(args) != {nargs} or len(kwargs) != {len(kwnames)}: return None"]
    if nargs:
        lines.append(f"    {', '.join(names[:nargs])}, = args")
    for i, kwname in enumerate(kwnames):
        lines.append(f"    k{i} = kwargs.get({kwname!r}, _missing)")
    checks, parts = [], [str(tag)]
    for i, (name, (cls, kind), fixed) in enumerate(zip(names, kinds, constexpr)):
        namespace[f"c{i}"] = cls
        checks.append(f"{name}.__class__ is not c{i}")
        if kind == "tensor":
            parts += [f"{name}.dtype", f"{name}.shape", f"{name}.data_ptr() & 15"]
        elif kind == "int" or (fixed and kind in ("float", "bool")):
            parts.append(name)  # floats and bools: by class only, unless a constexpr or option
    lines.append(f"    if {' or '.join(checks)}: return None" if checks else "    pass")
    lines.append(f"    return ({', '.join(parts)},)")
    exec("\n".join(lines), namespace)  # noqa: S102 - our own text, made from names and counts
    return namespace["signature"]


def _none(args: tuple, kwargs: dict) -> None:
    return None


class Recipe:
    """Where each argument of the variant's launch comes from, for one prepared launch: the
    program's positional arguments, its keyword arguments by name, or a fixed value."""

    __slots__ = ("fixed", "kwnames", "getter", "names")

    def __init__(self, names: Sequence[str], sources: dict[str, tuple], nargs: int):
        """``names``: the variant's parameters in order; ``sources``: name -> ("arg", i), ("kw",
        name) or ("fixed", value). Raises KeyError for a parameter without one."""
        fixed, kwnames, picks = [], [], []
        for name in names:
            kind, what = sources[name]
            if kind == "arg":
                picks.append(what)
            elif kind == "fixed":
                picks.append(nargs + len(fixed))
                fixed.append(what)
            else:
                picks.append(("kw", len(kwnames)))
                kwnames.append(what)
        base = nargs + len(fixed)
        picks = [base + p[1] if isinstance(p, tuple) else p for p in picks]
        self.names, self.fixed, self.kwnames = tuple(names), tuple(fixed), tuple(kwnames)
        # in order already (the usual case: positional arguments, then constexprs): no pick
        self.getter = None if picks == list(range(base + len(kwnames))) else _picker(picks)

    def arguments(self, args: tuple, kwargs: dict) -> tuple:
        found = args + self.fixed if self.fixed else args
        if self.kwnames:
            found += tuple([kwargs[name] for name in self.kwnames])
        return found if self.getter is None else self.getter(found)


def _picker(picks: list[int]) -> Callable[[tuple], tuple]:
    if len(picks) == 1:
        only = picks[0]
        return lambda found: (found[only],)
    return operator.itemgetter(*picks)


class Direct:
    """One prepared launch's compiled binary on one device (see the module docstring).
    ``launch(args, kwargs, grid)`` returns the compiled kernel, or ``REFUSED``."""

    __slots__ = ("kernel", "run", "function", "metadata", "device", "fn", "recipe", "grid3", "runtime", "compilation",
                 "enter", "leave", "debug", "instrumentation", "device_of", "stream_of", "persistent")

    def __init__(self, kernel: Any, device: Any, fn: Any, recipe: Recipe, grid3: Callable[[Any], tuple | None],
                 device_of: Callable[[], Any], stream_of: Callable[[Any], Any],
                 persistent: Callable[[tuple, tuple], tuple] | None = None):
        from triton import knobs

        self.kernel, self.run, self.function, self.metadata = kernel, kernel.run, kernel.function, kernel.packed_metadata
        self.device, self.fn, self.recipe, self.grid3 = device, fn, recipe, grid3
        self.device_of, self.stream_of = device_of, stream_of
        self.persistent = persistent
        self.runtime, self.compilation = knobs.runtime, knobs.compilation
        # Triton's own hook chains: a hook is added to them, or one is put in their place
        hooks = vars(type(knobs.runtime))
        self.enter, self.leave = hooks["launch_enter_hook"], hooks["launch_exit_hook"]
        self.debug, self.instrumentation = knobs.runtime.debug, knobs.compilation.instrumentation_mode

    def launch(self, args: tuple, kwargs: dict, grid: Any) -> Any:
        runtime, enter, leave = self.runtime, self.enter, self.leave
        if (runtime.launch_enter_hook is not enter or enter.calls or runtime.launch_exit_hook is not leave
                or leave.calls or runtime.debug != self.debug
                or self.compilation.instrumentation_mode != self.instrumentation):
            return REFUSED
        fn = self.fn
        if fn.pre_run_hooks or (fn.used_global_vals and _globals_moved(fn.used_global_vals)):
            return REFUSED
        device = self.device_of()
        if device != self.device:
            return REFUSED
        found = self.recipe.arguments(args, kwargs)
        if callable(grid):
            grid = grid(dict(zip(self.recipe.names, found)))
            size = len(grid)
            grid = (grid[0], grid[1] if size > 1 else 1, grid[2] if size > 2 else 1)
        else:
            grid = self.grid3(grid)
            if grid is None:
                return REFUSED
        if self.persistent is not None:
            found, grid = self.persistent(found, grid)
            if grid is None:
                return REFUSED
        self.run(grid[0], grid[1], grid[2], self.stream_of(device), self.function, self.metadata, None, None, None,
                 *found)
        return self.kernel


class GuardedDirect(Direct):
    """A ``Direct`` whose decision assumes its tensor arguments do not overlap: each launch checks
    the live arguments first (``aliasing.Guard``) and is refused where they overlap (the caller
    checks again and launches the program's own kernel). Only such decisions get this class, so
    the others' launches pay nothing for it."""

    __slots__ = ("guard",)

    def __init__(self, *args: Any, guard: Callable[[tuple, dict], bool]):
        super().__init__(*args)
        self.guard = guard

    def launch(self, args: tuple, kwargs: dict, grid: Any) -> Any:
        if not self.guard(args, kwargs):
            return REFUSED
        return Direct.launch(self, args, kwargs, grid)


REFUSED = object()


def _globals_moved(used: dict) -> bool:
    for (name, _), (value, where) in used.items():
        if where.get(name, _NOT_FOUND) != value:
            return True
    return False


def compiled_kernel(result: Any) -> Any:
    """What Triton's ``run`` returned, if it is a compiled kernel ``Direct`` can launch (not the
    interpreter's None, not a kernel still compiling)."""
    if result is None or hasattr(result, "result"):
        return None
    try:
        if result.run is None or result.function is None or not hasattr(result, "packed_metadata"):
            return None
    except Exception:  # noqa: BLE001 - e.g. handles that failed to load: Triton's way every time
        return None
    return result
