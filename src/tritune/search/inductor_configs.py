"""Inductor's max-autotune configs for a captured Inductor kernel: where the config search starts.

``torch.compile(mode="max-autotune-no-cudagraphs")`` times more configs than the default mode
before it runs coordinate descent from the fastest: for a looped reduction the six of Inductor's
``_reduction_configs`` where the default mode keeps the one its reduction hint picks (torch 2.13,
``{'x': 8192, 'r0_': 2048}`` INNER: (XBLOCK, R0_BLOCK, warps) = (2, 2048, 16) by default, then
(16, 32, 2), (1, 2048, 16), (64, 64, 2), (8, 512, 4), (64, 4, 8) under max-autotune). A descent
one knob at a time from the default config reaches few of those within a few dozen candidates
(three knobs move at once), so ``LaunchConfigSearch`` tries them first and walks from the best:
what max-autotune does, on more knobs. Each one is still built, verified and timed as any other.

The list is computed, never copied: the kernel's decorator in the captured source,

    @triton_heuristics.reduction(size_hints={...}, reduction_hint=ReductionHint.INNER,
                                 filename=__file__, triton_meta={...}, inductor_meta={...})

is read with ``ast`` (``_value``: literals, ``set()``, Inductor's hint enums and
``DeviceProperties(...)``; nothing from the file is imported or run), and the installed Inductor's
heuristic of that name (``HEURISTICS``) is called with the same arguments, ``max_autotune`` set in
``inductor_meta`` (what the mode sets) and ``return_configs=True``. A kernel compiled with
max-autotune already gets none: Inductor timed them. ``NoConfigs`` says in one line why a kernel
has none (no such decorator, an argument ``_value`` does not read, an Inductor that refuses);
``seeds`` turns that into no seeds, and the search goes on as a plain descent.
"""

from __future__ import annotations

import ast
import functools
from typing import Any

from tritune.errors import one_line
from tritune.model.launch import LaunchSpec
from tritune.search import space

HEURISTICS = ("pointwise", "reduction", "persistent_reduction")  # triton_heuristics.<name>(...)
HINT_ENUMS = ("ReductionHint", "TileHint", "AutotuneHint")  # torch._inductor.runtime.hints
MAX_AUTOTUNE_KEYS = ("max_autotune", "max_autotune_pointwise")  # either widens the lists
SKIPPED_ARGUMENTS = ("filename",)  # ``__file__``: only names the module in Inductor's logs


class NoConfigs(ValueError):
    """Inductor's max-autotune configs cannot be computed for this kernel; the text says why."""


def seeds(spec: LaunchSpec, source: str | None) -> list[dict[str, Any]]:
    """Max-autotune's configs for ``spec``'s kernel as launch-config knob values (``space.knobs``
    names), in Inductor's order; [] when it has none (``NoConfigs``) or ``spec`` is not Inductor's.
    A config that sets a constexpr which is not a knob of ``spec`` is left out: the search could
    not launch it as Inductor would."""
    if spec.kind != "inductor" or not source:
        return []
    try:
        configs = max_autotune_configs(source, spec.kernel)
    except NoConfigs:
        return []
    names = {knob.name for knob in space.knobs(spec)}
    return [config for config in configs if set(config) <= names]


def max_autotune_configs(source: str, kernel: str) -> list[dict[str, Any]]:
    """Each config max-autotune times for ``kernel`` (constexprs, ``num_warps``, ``num_stages``,
    ``maxnreg`` when set), in Inductor's order; ``NoConfigs`` when they cannot be computed."""
    configs, why = _computed(source, kernel)
    if why is not None:
        raise NoConfigs(why)
    return [dict(config) for config in configs]


@functools.lru_cache(maxsize=64)  # the loop asks each round; the answer depends on the text alone
def _computed(source: str, kernel: str) -> tuple[tuple[tuple[tuple[str, Any], ...], ...], str | None]:
    """(the configs as knob-value pairs, None), or ((), why not)."""
    try:
        name, arguments = decorator_arguments(source, kernel)
    except NoConfigs as exc:
        return (), str(exc)
    except ImportError as exc:  # the decorator's enums are torch's: no torch, no Inductor to ask
        return (), f"{kernel}: no Inductor to read its decorator with: {one_line(exc)}"
    meta = arguments.get("inductor_meta") or {}
    if any(meta.get(key) for key in MAX_AUTOTUNE_KEYS):
        return (), None  # compiled under max-autotune: Inductor timed these and kept the captured one
    arguments["inductor_meta"] = {**meta, "max_autotune": True}
    try:
        from torch._inductor.runtime import triton_heuristics

        configs = getattr(triton_heuristics, name)(**arguments, return_configs=True)
    except Exception as exc:  # noqa: BLE001 - any refusal of the installed Inductor means no seeds
        return (), f"{kernel}: Inductor's {name}() gave no configs: {one_line(exc)}"
    return tuple(tuple(_knob_values(config).items()) for config in configs), None


def decorator_arguments(source: str, kernel: str) -> tuple[str, dict[str, Any]]:
    """(the heuristic's name, its keyword arguments as values) of ``kernel``'s
    ``@triton_heuristics.<name>(...)`` in ``source``; ``NoConfigs`` when there is none to read."""
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        raise NoConfigs(f"{kernel}: the source does not parse: {exc.msg}") from None
    defs = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel]
    if not defs:
        raise NoConfigs(f"no function {kernel} in the source")
    fn = max(defs, key=lambda n: n.lineno)  # the last definition, as Python binds it
    for decorator in fn.decorator_list:
        if (isinstance(decorator, ast.Call) and isinstance(decorator.func, ast.Attribute)
                and isinstance(decorator.func.value, ast.Name) and decorator.func.value.id == "triton_heuristics"):
            name = decorator.func.attr
            if name not in HEURISTICS:
                raise NoConfigs(f"{kernel}: triton_heuristics.{name} is not one of {', '.join(HEURISTICS)}")
            if decorator.args:
                raise NoConfigs(f"{kernel}: triton_heuristics.{name} takes positional arguments here")
            return name, {k.arg: _value(k.value, kernel) for k in decorator.keywords
                          if k.arg is not None and k.arg not in SKIPPED_ARGUMENTS}
    raise NoConfigs(f"{kernel}: no @triton_heuristics decorator (not Inductor's kernel module)")


def _value(node: ast.expr, kernel: str) -> Any:
    """A decorator argument's value: a literal, a dict/list/tuple/set of values, ``set()``,
    ``ReductionHint.INNER`` (the enums of ``HINT_ENUMS``) or ``DeviceProperties(k=<value>...)``."""
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Dict) and None not in node.keys:
        return {_value(k, kernel): _value(v, kernel) for k, v in zip(node.keys, node.values)}
    if isinstance(node, (ast.List, ast.Tuple, ast.Set)):
        items = [_value(item, kernel) for item in node.elts]
        return {ast.List: list, ast.Tuple: tuple, ast.Set: set}[type(node)](items)
    if (isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant)
            and isinstance(node.operand.value, (int, float))):
        return -node.operand.value
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in HINT_ENUMS:
        from torch._inductor.runtime import hints

        found = getattr(getattr(hints, node.value.id, None), node.attr, None)
        if found is not None:
            return found
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
        called = node.func.id
        if called == "set" and not node.args and not node.keywords:
            return set()
        if called == "DeviceProperties" and not node.args and all(k.arg for k in node.keywords):
            from torch._inductor.runtime.hints import DeviceProperties

            try:
                return DeviceProperties(**{k.arg: _value(k.value, kernel) for k in node.keywords})
            except TypeError as exc:  # a field this torch does not know (another torch wrote it)
                raise NoConfigs(f"{kernel}: DeviceProperties(...) of another torch: {exc}") from None
    raise NoConfigs(f"{kernel}: cannot read {ast.unparse(node)[:80]} in the decorator")


def _knob_values(config: Any) -> dict[str, Any]:
    """An Inductor ``Config`` as knob values: its kwargs (the block constexprs), warps, stages,
    and ``maxnreg`` when it sets one (unset is the search's own default)."""
    values = {**config.kwargs, "num_warps": config.num_warps, "num_stages": config.num_stages}
    if getattr(config, "maxnreg", None):
        values["maxnreg"] = config.maxnreg
    return values
