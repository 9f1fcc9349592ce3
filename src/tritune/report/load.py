"""Read an ``optimize.json`` (the loop's results) and turn each kernel record into ``KernelFacts``.

The loop writes the file while kernels finish, so a record may lack anything: a baseline that
could not run has no times, a kernel without a byte count has no roofline floor, a run cut short
has no ``finished``. Everything downstream reads records through ``KernelFacts`` so a missing,
null or mistyped field becomes ``None`` (or a neutral default) in one place instead of a crash in
a table cell. Only the file as a whole is checked strictly: not JSON, not an optimize results
file, or a format version this code does not know is a one-line ``ReportError``.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Mapping

FORMAT_KEY = "tritune_optimize"
FORMAT_VERSION = 1
FILE_NAME = "optimize.json"
DEFAULT_THRESHOLD = 1.05  # TritonForge's success bar (seed 002 §4.2), ArbiterSettings.threshold


class ReportError(ValueError):
    """The results are not a readable optimize.json; the message is one line naming the problem."""


def load_results(results: Mapping[str, Any] | str | Path) -> dict[str, Any]:
    """The results as a dict, checked: a dict is checked as is; a path may name the file or the
    directory holding ``optimize.json``."""
    if isinstance(results, Mapping):
        return _checked(dict(results), "results")
    path = Path(results)
    if path.is_dir():
        path = path / FILE_NAME
    if not path.is_file():
        raise ReportError(f"no such file: {path}")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise ReportError(f"{path} is not a text file (expected an optimize.json)") from None
    except json.JSONDecodeError as exc:
        raise ReportError(f"{path} is not JSON (line {exc.lineno}: {exc.msg})") from None
    return _checked(data, str(path))


def _checked(data: Any, where: str) -> dict[str, Any]:
    if not isinstance(data, dict) or FORMAT_KEY not in data:
        raise ReportError(f"{where} is not a tritune optimize results file (no {FORMAT_KEY!r} key)")
    version = data[FORMAT_KEY]
    if version != FORMAT_VERSION:
        raise ReportError(f"{where} has optimize format version {version!r}; this tritune reads version "
                          f"{FORMAT_VERSION}")
    kernels = data.get("kernels")
    if kernels is None:
        kernels = []
    if not isinstance(kernels, list):
        raise ReportError(f"{where}: 'kernels' is a {type(kernels).__name__}, not a list")
    for index, record in enumerate(kernels):
        if not isinstance(record, dict):
            raise ReportError(f"{where}: kernels[{index}] is a {type(record).__name__}, not an object")
    return {**data, "kernels": kernels}


# ------------------------------------------------------------------------------------- fields

def number(value: Any) -> float | None:
    """A finite int/float as float; None for null, NaN, inf, bools and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def positive(value: Any) -> float | None:
    value = number(value)
    return value if value is not None and value > 0 else None


def text(value: Any, default: str = "") -> str:
    """A string field as a string: None becomes ``default``, other types their str()."""
    if value is None:
        return default
    return value if isinstance(value, str) else str(value)


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def threshold_of(results: Mapping[str, Any]) -> float:
    """The success bar the run used: ``settings.threshold`` (or ``settings.arbiter.threshold``,
    or ``min_speedup``), else 1.05."""
    settings = mapping(results.get("settings"))
    for place in (settings, mapping(settings.get("arbiter"))):
        for key in ("threshold", "min_speedup"):
            value = positive(place.get(key))
            if value is not None:
                return value
    return DEFAULT_THRESHOLD


def meaningful_of(results: Mapping[str, Any]) -> bool | None:
    """Whether the times are GPU times: False for the CPU interpreter (the flag, or a target named
    "interpreter" when the flag is absent); None when the file does not say."""
    flag = results.get("meaningful")
    if isinstance(flag, bool):
        return flag
    if text(mapping(results.get("target")).get("gpu")).lower() == "interpreter":
        return False
    return None


# ---------------------------------------------------------------------------------- per kernel

@dataclasses.dataclass(frozen=True)
class KernelFacts:
    """One kernel record, normalized. ``improved``: accepted and speedup >= the threshold (the
    decision is applied); ``applied_speedup`` is its speedup then and 1.0 otherwise (the original
    kernel runs); ``after_ms`` is the time that then runs per launch."""

    id: str
    kernel: str
    kind: str
    category: str
    count: int
    ran: bool  # the baseline was timed, so the kernel was optimized
    failure: str | None  # why the baseline could not run
    message: str
    baseline_ms: float | None
    best_ms: float | None
    speedup: float | None
    accepted: bool
    improved: bool
    applied_speedup: float | None  # None when the kernel did not run
    after_ms: float | None
    floor_ms: float | None
    roofline_before: float | None
    roofline_after: float | None
    decision: str
    bottleneck: str
    finish: str
    finish_reason: str
    wall_s: float | None
    candidates: tuple[dict[str, Any], ...]

    @property
    def label(self) -> str:
        return self.id or self.kernel or "?"

    @property
    def total_before_ms(self) -> float | None:
        return None if self.baseline_ms is None else self.baseline_ms * self.count

    @property
    def total_after_ms(self) -> float | None:
        return None if self.after_ms is None else self.after_ms * self.count


def kernel_facts(record: Mapping[str, Any], threshold: float) -> KernelFacts:
    baseline = positive(record.get("baseline_ms"))
    failure = text(record.get("failure")) or None
    ran = failure is None and baseline is not None
    best = positive(record.get("best_ms"))
    speedup = positive(record.get("speedup"))
    accepted = record.get("accepted") is True
    if accepted and speedup is None and baseline is not None and best is not None:
        speedup = baseline / best  # an accepted record without its confirmed ratio: the benchmark's
    improved = ran and accepted and speedup is not None and speedup >= threshold
    applied = (speedup if improved else 1.0) if ran else None
    after = _after_ms(baseline, best, speedup) if improved else baseline
    floor = positive(record.get("floor_ms"))
    count = record.get("count")
    bottleneck = mapping(record.get("bottleneck"))
    candidates = record.get("candidates")
    return KernelFacts(
        id=text(record.get("id")), kernel=text(record.get("kernel")),
        kind=text(record.get("kind")) or "unknown", category=text(record.get("category")) or "other",
        count=count if isinstance(count, int) and not isinstance(count, bool) and count >= 0 else 1,
        ran=ran, failure=failure if failure else (None if ran else "no_baseline"),
        message=text(record.get("message")),
        baseline_ms=baseline, best_ms=best, speedup=speedup, accepted=accepted, improved=improved,
        applied_speedup=applied, after_ms=after, floor_ms=floor,
        roofline_before=_roofline(record.get("roofline_before"), floor, baseline),
        roofline_after=_roofline(record.get("roofline_after"), floor, after),
        decision=text(record.get("decision")), bottleneck=text(bottleneck.get("kind")),
        finish=text(record.get("finish")), finish_reason=text(record.get("finish_reason")),
        wall_s=_nonnegative(record.get("wall_s")),
        candidates=tuple(c for c in candidates if isinstance(c, dict)) if isinstance(candidates, list) else (),
    )


def _after_ms(baseline: float | None, best: float | None, speedup: float) -> float | None:
    """The measured best time; baseline / speedup when the record has none."""
    if best is not None:
        return best
    return None if baseline is None else baseline / speedup


def _roofline(value: Any, floor: float | None, time_ms: float | None) -> float | None:
    """The recorded fraction of copy bandwidth; floor / time when the record has none."""
    recorded = number(value)
    if recorded is not None:
        return recorded
    return floor / time_ms if floor is not None and time_ms is not None else None


def _nonnegative(value: Any) -> float | None:
    value = number(value)
    return value if value is not None and value >= 0 else None
