"""Profile one captured launch: static facts, Nsight Compute when it can run, and the bottleneck.

``profile_launch(spec, root, variant, timing=bench_spec's result)`` merges three fact sources
into one dict that ``Facts.from_mapping`` reads, and classifies it:

1. ``timing`` (``bench.run.bench_spec``): ``duration_ms`` (its ``time_ms``), ``graph_ms``,
   ``roofline`` -- only when ``meaningful`` (GPU times, not the interpreter's numpy times);
2. ``static`` (``profile.static``): registers, spills, shared memory, occupancy and its
   limiter, blocks per SM, programs, SM count, reduction facts;
3. ``ncu`` (``profile.ncu``): SOL memory/compute %, achieved occupancy, L2/DRAM throughput,
   DRAM bytes, registers, stall reasons; ncu's duration only where no timing was given
   (ncu replays the kernel with caches flushed: ``ncu_duration_ms`` keeps it apart).

Later sources win for the same key (ncu's register count is the loaded binary's). When ncu is
absent or fails, ``Profile.source`` is ``"timing+static"`` and ``note`` says why in one line;
``use_ncu="require"`` raises ``NcuUnavailable`` instead, ``"never"`` does not try.

Before trusting ncu's row, the profiled launch's grid must be the replay's: another launch with
the kernel's name would otherwise pass for it.

ncu and the jail (``tritune.worker.jail``). ncu talks to the process it profiles over sockets,
and its target imports the capture's kernel file (and the variant's source) like any replay. A
jailed worker may open no socket, so in one ncu cannot run: the profile falls back to timing +
static (``ncu_status`` "jailed"; ``use_ncu="require"`` fails, ``--unsafe-no-jail`` runs the
workers unjailed). A variant from a model (its ``rewrite`` rule "llm") is never run under ncu,
jailed or not: ncu's target would run its code outside the worker's limits
(``ncu_status`` "model-variant").
"""

from __future__ import annotations

import dataclasses
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Mapping

from tritune import config
from tritune.model import families
from tritune.model.launch import LaunchSpec
from tritune.profile import ncu as ncu_cli, ncu_csv
from tritune.profile.bottleneck import Bottleneck, Facts, classify
from tritune.profile.ncu import WARMUP_LAUNCHES

USE_NCU = ("auto", "never", "require")
DEFAULT_TIMEOUT_S = 180.0  # ~20 replay passes of a slow kernel plus torch's import, with margin
TIMING_KEYS = ("graph_ms", "roofline", "gbps", "copy_gbps", "bytes", "floor_ms")
FALLBACK = "classified from timing + static analysis"


@dataclasses.dataclass(frozen=True)
class Profile:
    facts: dict[str, Any]  # Facts.from_mapping(facts) is what was classified
    source: str  # "ncu" or "timing+static"
    note: str  # one line: how the facts were obtained, or why ncu is missing from them
    ncu: dict[str, Any] | None  # ncu's raw metrics (base units), kernel, grid, command
    bottleneck: Bottleneck
    ncu_status: str = "ok"  # "ok", or NcuUnavailable.kind ("missing", "permission", ...), or "not-used"
    ncu_s: float | None = None  # seconds ncu ran (profiling or failing); None: not tried
    static_s: float | None = None  # seconds the static facts took

    def to_json(self) -> dict[str, Any]:
        return {"source": self.source, "note": self.note, "ncu_status": self.ncu_status, "facts": self.facts,
                "ncu": self.ncu, "bottleneck": self.bottleneck.to_json(), "ncu_s": self.ncu_s,
                "static_s": self.static_s}


def profile_launch(spec: LaunchSpec, root: str | Path, variant: Any = None, *, timing: Mapping[str, Any] | None = None,
                   use_ncu: str = "auto", timeout_s: float = DEFAULT_TIMEOUT_S, device: str | None = None) -> Profile:
    """Profile one launch of ``spec`` (as ``variant``); see the module doc."""
    from tritune.profile.static import static_facts

    if use_ncu not in USE_NCU:
        raise ValueError(f"use_ncu must be one of {', '.join(USE_NCU)}, got {use_ncu!r}")
    began = time.monotonic()
    static = static_facts(spec, root, variant, device=device)
    static_s = time.monotonic() - began
    raw, status, note, ncu_s = None, "ok", "", None
    if use_ncu == "never":
        status, note = "not-used", f"ncu not used (use_ncu='never'): {FALLBACK}"
    else:
        began = time.monotonic()
        try:
            raw = run_ncu(spec, root, variant, timeout_s=timeout_s, device=device, grid=static["grid"])
            note = f"ncu profiled launch {WARMUP_LAUNCHES + 1} of {spec.kernel} ({raw['ncu_path']})"
            if raw["dropped"]:
                note += f"; metrics this ncu does not know: {', '.join(raw['dropped'])}"
        except ncu_cli.NcuUnavailable as exc:
            if use_ncu == "require":
                raise ncu_cli.NcuUnavailable(exc.kind, f"use_ncu='require' but {exc}") from None
            status, note = exc.kind, f"{exc}: {FALLBACK}"
        ncu_s = time.monotonic() - began
    if static.get("static_error"):
        note += f"; no static facts ({static['static_error']})"
    facts = merge_facts(timing, static, raw["facts"] if raw else None)
    return Profile(facts=facts, source="ncu" if raw else "timing+static", note=note, ncu=raw,
                   bottleneck=classify(Facts.from_mapping(facts)), ncu_status=status, ncu_s=ncu_s,
                   static_s=static_s)


def merge_facts(timing: Mapping[str, Any] | None, static: Mapping[str, Any],
                ncu_facts: Mapping[str, Any] | None) -> dict[str, Any]:
    """One dict for ``Facts.from_mapping``: static, then ncu over it, then meaningful timing.
    Every ncu key is present (None without ncu), so the schema does not depend on the source."""
    facts = {**dict.fromkeys(ncu_csv.FACT_KEYS), "ncu_duration_ms": None, **static}
    for key, value in (ncu_facts or {}).items():
        if value is not None:
            facts[key] = value
    if ncu_facts and ncu_facts.get("duration_ms") is not None:
        facts["ncu_duration_ms"] = ncu_facts["duration_ms"]
    if timing and timing.get("meaningful"):
        if timing.get("time_ms") is not None:
            facts["duration_ms"] = timing["time_ms"]
        facts.update({k: timing[k] for k in TIMING_KEYS if timing.get(k) is not None})
    facts["timing_meaningful"] = bool(timing and timing.get("meaningful"))
    return facts


def run_ncu(spec: LaunchSpec, root: str | Path, variant: Any = None, *, timeout_s: float = DEFAULT_TIMEOUT_S,
            device: str | None = None, grid: Any = None) -> dict[str, Any]:
    """ncu on one launch of the replay: ``{"facts", "metrics", "kernel", "grid", "block", "command",
    "dropped", "ncu_path"}``, or ``NcuUnavailable``."""
    from tritune.replay import interpreting

    from tritune.worker import jail

    if from_model(variant):
        raise ncu_cli.NcuUnavailable("model-variant", "a model's variant is never run under ncu (module docstring)")
    if jail.entered() is not None:
        raise ncu_cli.NcuUnavailable("jailed", "ncu talks to its target over sockets, which this worker's jail "
                                     "refuses (--unsafe-no-jail runs workers unjailed)")
    if interpreting():
        raise ncu_cli.NcuUnavailable("interpreter", "TRITON_INTERPRET=1 runs kernels on the CPU: nothing for ncu")
    path = ncu_cli.find_ncu()
    with tempfile.TemporaryDirectory(prefix="tritune-profile-") as tmp:
        payload = Path(tmp) / "payload.json"
        payload.write_text(json.dumps(target_payload(spec, root, variant, device=device)))
        done = ncu_cli.profile(path, spec.kernel, target_command(payload), skip=WARMUP_LAUNCHES,
                               timeout_s=timeout_s, env=target_env())
    row = done.row
    if grid is not None and row.grid is not None and tuple(row.grid) != tuple(grid):
        raise ncu_cli.NcuUnavailable("grid-mismatch", f"ncu profiled a launch of {row.kernel} with grid "
                                     f"{list(row.grid)}, the replay's grid is {list(grid)}")
    metrics = {name: row.value(name) for name in row.metrics}
    return {"facts": ncu_csv.facts(row), "metrics": metrics, "kernel": row.kernel, "grid": row.grid,
            "block": row.block, "command": done.command, "dropped": list(done.dropped), "ncu_path": path}


def from_model(variant: Any) -> bool:
    """Whether ``variant`` was written by a model (its rewrite's rule is the model family's name)."""
    return families.by_model(variant)


def target_payload(spec: LaunchSpec, root: str | Path, variant: Any = None, *, device: str | None = None) -> dict:
    return {"spec": spec.to_json(), "root": str(Path(root).resolve()),
            "variant": variant.to_json() if variant is not None else None,
            "warmup": WARMUP_LAUNCHES, "device": device}


def target_command(payload: str | Path) -> list[str]:
    return [sys.executable, "-m", "tritune.profile.target", str(payload)]


def target_env() -> dict[str, str]:
    """This environment, with tritune importable in the target even when it is not installed."""
    package_root = str(Path(__file__).resolve().parents[2])  # .../src, holding tritune/
    return config.environment({config.ENV_PYTHONPATH: config.python_path_first(package_root)})


def profile_job(payload: dict) -> dict:
    """Worker entry: ``{"spec", "root", "variant"?, "timing"?, "use_ncu"?, "timeout_s"?, "device"?}``
    -> ``Profile.to_json()``."""
    from tritune.model.variant import Variant

    spec = LaunchSpec.from_json(payload["spec"])
    variant = Variant.from_json(payload["variant"]) if payload.get("variant") else None
    profile = profile_launch(spec, payload["root"], variant, timing=payload.get("timing"),
                             use_ncu=payload.get("use_ncu", "auto"),
                             timeout_s=float(payload.get("timeout_s", DEFAULT_TIMEOUT_S)), device=payload.get("device"))
    return profile.to_json()
