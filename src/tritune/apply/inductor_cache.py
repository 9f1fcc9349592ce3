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
coordinate descent's entry) is kept in the store, signed (``store.inductor_entries``); ``remove``
puts it back (or deletes the file), unless Inductor has written the file since. The applier
removes the entries of decisions no longer usable whenever it reads the store, and those of a
kernel it rolls back; ``tritune store inductor-cache STORE --remove`` removes them all.

What it may touch: an entry names a file to write or delete, so one is followed only if this
user's tritune stored it (its signature) and its path is a ``.best_config`` file under Inductor's
cache directory (``TORCHINDUCTOR_CACHE_DIR``, else Inductor's default), checked after resolving
links, the file itself not a link (``outside_cache``); Inductor's own path is checked the same
way before anything is written. An entry that fails either check is ignored with one line on
stderr (an unsigned one is dropped from the store; a signed one outside, say after the cache
directory moved, is kept for when it is back). Files are opened without following a link. The
manifest of tritune before signing, ``<store>.inductor-cache.json``, is never read: one line says
it is ignored. Someone who may write in Inductor's cache directory can already change what
Inductor compiles and runs; that is Inductor's trust, not this module's.
"""

from __future__ import annotations

import contextlib
import copy
import os
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator

if TYPE_CHECKING:  # the store is imported once it is used: a process that never applies pays nothing
    from tritune.store.inductor_entries import InductorEntry

KNOB_OPTIONS = frozenset({"num_warps", "num_stages"})
SUFFIX = ".best_config"  # the only files written or deleted: Inductor's autotune cache entries


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


def write(tuner: Any, config: Any, decision: Any, store: Any, candidates: list) -> str | None:
    """Write the decided config as ``tuner``'s entry in Inductor's local autotune cache and note
    it in ``store`` (a ``DecisionStore`` or its path); returns why not when the file lies outside
    Inductor's cache directory or Inductor would not serve it (nothing is left then)."""
    cache = copy.copy(_cache(tuner))
    cache.remote_cache = None  # a shared cache is not ours to write
    if hasattr(cache, "artifact_recorder"):
        cache.artifact_recorder = None
    given = Path(cache.local_cache[1])
    why = outside_cache(given)
    if why is not None:
        return f"its autotune cache file {given} is {why}"
    path = given.resolve()
    wanted = decided_config(config, decision.variant)
    with _manifest(store) as entries:
        mine = next((e for e in entries if e.path == str(path)), None)
        before = _text(path)
        previous = mine.previous if mine is not None and before == mine.written else before
        cache.save(wanted, 0, found_by_coordesc=True)
        served = cache.read_best(tuner.inductor_meta, list(candidates))
        written = _text(path)
        if served is None or not _same(served, wanted) or written is None:
            _put_back(path, previous)
            if mine is not None:
                entries.remove(mine)
            return "Inductor's cache reader would not serve it (torch without coordinate descent)"
        if mine is not None:
            entries.remove(mine)
        from tritune.store.inductor_entries import InductorEntry

        entries.append(InductorEntry(str(path), decision.key.sha, decision.key.kernel, previous, written))
    return None


def remove(store: Any, keep: Callable[[InductorEntry], bool] = lambda entry: False) -> list[str]:
    """Take out the entries for which ``keep`` is False, putting back what was there before
    (unless Inductor rewrote the file since); returns the kernels they were for."""
    if isinstance(store, (str, Path)) and not Path(store).is_file():
        _old_manifest(store)
        return []
    removed: list[str] = []
    with _opened(store) as opened:
        if not opened.inductor_entries():  # the common case: no write transaction at every start
            _old_manifest(opened.path)
            return removed
        with _manifest(opened) as entries:
            for entry in list(entries):
                if keep(entry):
                    continue
                path = Path(entry.path).resolve()
                if _text(path) == entry.written:
                    _put_back(path, entry.previous)
                entries.remove(entry)
                removed.append(entry.kernel)
    return removed


def entries(store: Any) -> list[InductorEntry]:
    """The entries this user's tritune stored (each one outside Inductor's cache directory is
    said once on stderr, and listed: ``remove`` leaves it alone); unsigned ones are said and left out."""
    if isinstance(store, (str, Path)) and not Path(store).is_file():
        _old_manifest(store)
        return []
    with _opened(store) as opened:
        _old_manifest(opened.path)
        found = opened.inductor_entries()
    for entry in found:
        if not entry.signed:
            _ignored(opened.path, entry, UNSIGNED)
        elif (why := outside_cache(entry.path)) is not None:
            _ignored(opened.path, entry, why)
    return [entry for entry in found if entry.signed]


def outside_cache(path: str | Path) -> str | None:
    """Why tritune may not write or delete ``path`` (None: it may): it must be an absolute path of
    a ``.best_config`` file, not itself a link, inside Inductor's cache directory once every link
    on the way is resolved."""
    root = cache_root()
    if root is None:
        return "not checkable: Inductor's cache directory is unknown here (torch does not import)"
    path = Path(path)
    if not path.is_absolute():
        return "not an absolute path"
    if not path.name.endswith(SUFFIX):
        return f"not an autotune cache file ({SUFFIX})"
    if path.is_symlink():
        return "a link"
    if not path.resolve().is_relative_to(root):
        return f"outside Inductor's cache directory {root}"
    return None


def cache_root() -> Path | None:
    """Inductor's cache directory, as Inductor finds it, links resolved; None without torch."""
    from tritune import config

    given = config.inductor_cache_dir()
    if given is None:
        try:
            from torch._inductor.runtime.cache_dir_utils import default_cache_dir
        except ImportError:
            return None
        given = default_cache_dir()
    return Path(given).absolute().resolve()


def _cache(tuner: Any) -> Any:
    hook = getattr(tuner, "save_cache_hook", None)
    return getattr(hook, "__self__", None)


def _same(a: Any, b: Any) -> bool:
    return (dict(a.kwargs), a.num_warps, a.num_stages) == (dict(b.kwargs), b.num_warps, b.num_stages)


def _text(path: Path) -> str | None:
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)  # a link put there since the check: refused
    except FileNotFoundError:
        return None
    with os.fdopen(fd) as handle:
        return handle.read()


def _put_back(path: Path, text: str | None) -> None:
    if text is None:
        path.unlink(missing_ok=True)  # removes a link itself, never what it points to
        return
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
    with os.fdopen(fd, "w") as handle:
        handle.write(text)


@contextlib.contextmanager
def _opened(store: Any) -> Iterator[Any]:
    """``store`` itself when it is an open ``DecisionStore``, else the store at that path."""
    if not isinstance(store, (str, Path)):
        yield store
        return
    from tritune.store import DecisionStore

    with DecisionStore(store) as opened:
        yield opened


@contextlib.contextmanager
def _manifest(store: Any) -> Iterator[list[InductorEntry]]:
    """The entries that may be followed (signed here, paths inside Inductor's cache), in one
    write transaction of the store (data-parallel ranks of one program write the same entries at
    once); the list as the block leaves it is stored back, with the signed entries it did not
    hold. Every other entry is said once on stderr."""
    with _opened(store) as opened, opened.inductor_entries_locked() as (signed, unsigned):
        _old_manifest(opened.path)
        for entry in unsigned:
            _ignored(opened.path, entry, UNSIGNED)
        held_back = []
        for entry in signed:
            why = outside_cache(entry.path)
            if why is not None:
                _ignored(opened.path, entry, why)
                held_back.append(entry)
        followed = [entry for entry in signed if entry not in held_back]
        yield followed
        signed[:] = held_back + followed


UNSIGNED = "not signed by this user's tritune"
_said: set[tuple[str, ...]] = set()


def _ignored(store_path: Path, entry: InductorEntry, why: str) -> None:
    _say((str(store_path), entry.path, why), f"tritune: {store_path}: Inductor cache entry {entry.path!r} "
                                             f"ignored: {why} (nothing written or deleted there)")


def _old_manifest(store_path: str | Path) -> None:
    legacy = Path(f"{store_path}.inductor-cache.json")
    if legacy.is_file() or legacy.is_symlink():
        _say((str(legacy),), f"tritune: {legacy}: an unsigned manifest of an older tritune: ignored, never "
                             "followed (what it lists stays in Inductor's cache); remove the file")


def _say(key: tuple[str, ...], line: str) -> None:
    """One line on stderr, once per process: the applier reads the store again and again."""
    if key not in _said:
        _said.add(key)
        print(line, file=sys.stderr)
