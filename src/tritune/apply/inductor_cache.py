"""Decisions served by Inductor itself, through its autotune cache: no patch, no per-launch cost.

Inductor keeps each kernel's tuned config in ``{kernel hash}.best_config`` beside the kernel's
module (``AutotuneCache``; coordinate descent writes it through the tuner's ``save_cache_hook``),
and the next compile of that kernel reads it (``check_autotune_cache``) and launches that config
alone. A decision that changes only Inductor's config knobs (constexprs among the config's
``kwargs``: XBLOCK, YBLOCK, R0_BLOCK...; options ``num_warps``/``num_stages``) can be written
there, so that from the next process on Inductor compiles and launches the decided config
itself, and the applier's hook has nothing to do for that kernel (the launched config's
constexprs are no decision's key: its launches go straight to Inductor).

When (``reason_not`` says why not, and the launch-time path applies the decision instead):
  * the decision changes nothing but config knobs (no source, passes, maxnreg...) and assumes
    nothing of the live arguments (``Variant.assumes``: only the launch-time path checks them);
  * the kernel's sizes are static (every ``*numel`` parameter is a literal in its body): one
    entry serves every launch of the kernel file, so it must be the key's only size; and it is
    the kernel's only decision here;
  * Inductor made an autotune cache for the tuner (``save_cache_hook``: caches on, more than one
    config or coordinate descent) with a local file;
  * Inductor's own reader (``AutotuneCache.read_best``, with the configs Inductor started from)
    gives back exactly the decided config. The entry says ``found_by_coordesc``: with
    coordinate descent on, Inductor takes it as its result and does not tune again; without it,
    torch 2.13 takes any config, older ones only one of the kernel's own configs.

Only the local file is written (a remote cache is left alone), through a copy of the tuner's
``AutotuneCache`` (Inductor's format, for the running torch). What was there before (e.g.
coordinate descent's entry) is kept in the manifest ``<store>.inductor-cache.json``; ``remove``
puts it back (or deletes the file), unless Inductor has written the file since. The applier
removes the entries of decisions no longer usable whenever it reads the store, and those of a
kernel it rolls back; ``tritune store inductor-cache STORE --remove`` removes them all.
"""

from __future__ import annotations

import contextlib
import copy
import json
import re
from pathlib import Path
from typing import Any, Callable, Iterator

KNOB_OPTIONS = frozenset({"num_warps", "num_stages"})


def manifest_path(store_path: str | Path) -> Path:
    return Path(f"{store_path}.inductor-cache.json")


def reason_not(tuner: Any, config: Any, decision: Any, decisions_of_kernel: int) -> str | None:
    """Why ``decision`` cannot be served through Inductor's cache for ``tuner`` settled on
    ``config``; None if it can be tried."""
    why = not_config_only(tuner, config, decision, decisions_of_kernel)
    if why is not None:
        return why
    cache = _cache(tuner)
    if cache is None or not getattr(cache, "local_cache", None):
        return "Inductor keeps no local autotune cache for it"
    return None


def not_config_only(tuner: Any, config: Any, decision: Any, decisions_of_kernel: int) -> str | None:
    """Why ``decision`` is not one config serving every launch of ``tuner`` (Inductor's knobs
    alone, static sizes, the kernel's only decision); None when it is (``apply.inductor_swap``
    and this module's cache entries both need that)."""
    variant = decision.variant
    if variant.assumes:  # only the launch-time path checks each launch's arguments
        return f"it assumes {'+'.join(variant.assumes)}, which each launch must be checked for"
    if variant.source is not None or variant.grid is not None or variant.passes or variant.fast_math:
        return "it changes the kernel's code"
    knobs = set(getattr(config, "kwargs", {}) or {})
    if not set(variant.constexprs) <= knobs or not set(variant.options) <= KNOB_OPTIONS:
        return "it changes more than Inductor's config knobs"
    if decisions_of_kernel != 1:
        return "the kernel has several decisions"
    if not static_sizes(tuner):
        return "the kernel's sizes are dynamic"
    return None


def static_sizes(tuner: Any) -> bool:
    source = getattr(tuner.fn, "src", None) or ""
    numels = [name for name in tuner.fn.arg_names if name.endswith("numel")]
    return all(re.search(rf"^\s+{name} = \d+\s*$", source, re.MULTILINE) for name in numels)


def decided_config(config: Any, variant: Any) -> Any:
    from triton import Config

    options = {"num_warps": config.num_warps, "num_stages": config.num_stages, **variant.options}
    return Config({**config.kwargs, **variant.constexprs}, **options)


def write(tuner: Any, config: Any, decision: Any, store_path: str | Path, candidates: list) -> str | None:
    """Write the decided config as ``tuner``'s entry in Inductor's local autotune cache and note
    it in the manifest; returns why not when Inductor would not serve it (nothing is left)."""
    cache = copy.copy(_cache(tuner))
    cache.remote_cache = None  # a shared cache is not ours to write
    if hasattr(cache, "artifact_recorder"):
        cache.artifact_recorder = None
    path = Path(cache.local_cache[1])
    wanted = decided_config(config, decision.variant)
    with _manifest(store_path) as entries:
        mine = next((e for e in entries if e["path"] == str(path)), None)
        before = _text(path)
        previous = mine["previous"] if mine is not None and before == mine["written"] else before
        cache.save(wanted, 0, found_by_coordesc=True)
        served = cache.read_best(tuner.inductor_meta, list(candidates))
        if served is None or not _same(served, wanted):
            _put_back(path, previous)
            if mine is not None:
                entries.remove(mine)
            return "Inductor's cache reader would not serve it (torch without coordinate descent)"
        if mine is not None:
            entries.remove(mine)
        entries.append({"path": str(path), "key": decision.key.sha, "kernel": decision.key.kernel,
                        "previous": previous, "written": _text(path)})
    return None


def remove(store_path: str | Path, keep: Callable[[dict], bool] = lambda entry: False) -> list[str]:
    """Take out the entries for which ``keep`` is False, putting back what was there before
    (unless Inductor rewrote the file since); returns the kernels they were for."""
    if not manifest_path(store_path).is_file():
        return []
    removed = []
    with _manifest(store_path) as entries:
        for entry in list(entries):
            if keep(entry):
                continue
            path = Path(entry["path"])
            if _text(path) == entry["written"]:
                _put_back(path, entry["previous"])
            entries.remove(entry)
            removed.append(entry["kernel"])
    return removed


def entries(store_path: str | Path) -> list[dict]:
    path = manifest_path(store_path)
    return json.loads(path.read_text()).get("entries", []) if path.is_file() else []


def _cache(tuner: Any) -> Any:
    hook = getattr(tuner, "save_cache_hook", None)
    return getattr(hook, "__self__", None)


def _same(a: Any, b: Any) -> bool:
    return (dict(a.kwargs), a.num_warps, a.num_stages) == (dict(b.kwargs), b.num_warps, b.num_stages)


def _text(path: Path) -> str | None:
    try:
        return path.read_text()
    except FileNotFoundError:
        return None


def _put_back(path: Path, text: str | None) -> None:
    if text is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(text)


@contextlib.contextmanager
def _manifest(store_path: str | Path) -> Iterator[list[dict]]:
    """The manifest's entries, read and written back under a lock (data-parallel ranks of one
    program write the same entries at once)."""
    import fcntl

    path = manifest_path(store_path)
    with open(f"{path}.lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = entries(store_path)
        yield found
        path.write_text(json.dumps({"entries": found}, indent=1))
