"""``optimize.json`` as a typed value: ``RunResults`` holding one ``KernelResult`` per decision key.

The loop owns the contract and writes it (``RunResults.write``); ``report/`` and ``commands/``
read it back with ``RunResults.from_json`` / ``RunResults.load`` instead of re-parsing dicts.

The loop writes the file while kernels finish, so a record may lack anything: a baseline that
could not run has no times, a kernel without a byte count has no roofline floor, a run cut short
has no ``finished``. ``from_json`` normalizes every field in one place (a missing, null or
mistyped number becomes ``None``); only the file as a whole is checked strictly: not JSON, not an
optimize results file, or a format version this code does not know is a one-line
``ResultsError``. Version 1 files (before time shares) read as version 2 without shares.

Program-level figures (section "Rank by time" of the design): every key's baseline is timed once
before anything is proposed (``KeyTime``); its ``time_share`` is launches x time over the sum for
all keys. ``coverage`` is the share of the program's kernel time held by the keys the loop ran on,
``expected_gain`` the fraction of kernel time the decisions save if each key's speedup holds in
the program (Amdahl: sum of share x (1 - 1/speedup) over improved keys).

Lanes (``tritune optimize --workers``, ``loop.lanes``): ``lanes`` has a ``LaneLine`` per lane
(its GPU, the keys it optimized, its busy and idle seconds, why it died if it did), and each
kernel names the lane that ran it. On a host with two kinds of GPU every key is optimized once per
kind: ``targets`` lists the kinds, and each key time and kernel names its ``gpu``; each kind's
shares sum to 1, so ``program_ms``, ``coverage`` and ``expected_gain`` are the mean over kinds.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any, Mapping

from tritune.secrets import write_json

FORMAT_KEY = "tritune_optimize"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
FILE_NAME = "optimize.json"
SPLIT_KEYS = ("to_first_s", "baseline_s", "profile_s", "build_s", "verify_s", "time_s", "judge_s", "idle_s")
FIXED_KEYS = ("start_s", "baselines_s", "total_s", "build_s", "rank_time_s", "head_s")
DEFAULT_THRESHOLD = 1.05  # TritonForge's success bar (seed 002 §4.2), ArbiterSettings.threshold


class ResultsError(ValueError):
    """The results are not a readable optimize.json; the message is one line naming the problem."""


# ------------------------------------------------------------------------------------- fields

def number(value: Any) -> float | None:
    """A finite int/float as float; None for null, NaN, inf, bools and anything else."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def positive(value: Any) -> float | None:
    value = number(value)
    return value if value is not None and value > 0 else None


def nonnegative(value: Any) -> float | None:
    value = number(value)
    return value if value is not None and value >= 0 else None


def count(value: Any, default: int = 0) -> int:
    """A non-negative int field (bools are not counts)."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else default


def text(value: Any, default: str = "") -> str:
    """A string field as a string: None becomes ``default``, other types their str()."""
    if value is None:
        return default
    return value if isinstance(value, str) else str(value)


def seconds_of(value: Any) -> dict[str, float]:
    """A dict of seconds (a split): its non-negative numbers, the rest left out."""
    found = {name: nonnegative(seconds) for name, seconds in mapping(value).items()}
    return {name: seconds for name, seconds in found.items() if seconds is not None}


def mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def records(value: Any) -> list[dict[str, Any]]:
    return [item for item in value if isinstance(item, dict)] if isinstance(value, list) else []


# ---------------------------------------------------------------------------------- per key

@dataclasses.dataclass
class KeyTime:
    """One decision key as the run found it before optimizing: its baseline timed once."""

    key_sha: str
    id: str
    kernel: str
    launches: int
    baseline_ms: float | None  # None: the baseline could not be timed
    time_share: float | None = None  # launches x time / the program's kernel time
    failure: str | None = None
    message: str = ""
    gpu: str | None = None  # the kind of GPU it was timed on, on a host with several kinds only

    @property
    def total_ms(self) -> float | None:
        return None if self.baseline_ms is None else self.baseline_ms * self.launches

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "KeyTime":
        return cls(key_sha=text(data.get("key_sha")), id=text(data.get("id")), kernel=text(data.get("kernel")),
                   launches=count(data.get("launches"), 1), baseline_ms=positive(data.get("baseline_ms")),
                   time_share=nonnegative(data.get("time_share")), failure=text(data.get("failure")) or None,
                   message=text(data.get("message")), gpu=text(data.get("gpu")) or None)


def shares(times: list[KeyTime]) -> list[KeyTime]:
    """Each timed key's share of the summed kernel time (launches x baseline); keys whose baseline
    could not be timed get None. Returned costliest first, untimed keys last (stable)."""
    total = sum(t.total_ms for t in times if t.total_ms is not None)
    for t in times:
        t.time_share = (t.total_ms / total) if t.total_ms is not None and total > 0 else None
    return sorted(times, key=lambda t: (t.time_share is None, -(t.time_share or 0.0)))


@dataclasses.dataclass
class CandidateLine:
    """One candidate of a key, as the loop records it (``KernelLoop._record``) and the report reads it.

    ``status``: ``verified`` (verified and timed), ``accepted`` (the decision), ``rejected`` (the
    arbiter turned it down for good), ``failed`` (``failure`` says its kind), ``busy`` (another run
    held it when the budget ran out), ... as the loop says. ``seconds`` from its submission to its
    result, split into ``verify_s``, ``time_s`` and ``wait_s``; ``share_s`` its round's wall time
    over the candidates evaluated in it. ``verdict``, ``reason`` and ``confirmed`` are the arbiter's
    once it judged the candidate (left out of the JSON before)."""

    variant: str = ""
    variant_hash: str = ""
    family: str = ""
    mode: str = ""
    status: str = ""
    failure: str | None = None
    message: str = ""
    time_ms: float | None = None
    speedup: float | None = None
    seconds: float = 0.0
    verify_s: float | None = None
    time_s: float | None = None
    wait_s: float | None = None
    share_s: float | None = None
    reused: bool = False
    notes: list[str] = dataclasses.field(default_factory=list)
    prior: bool = False  # a config the store decided for a kernel like this one (``search.prior``)
    verdict: str | None = None
    reason: str | None = None
    confirmed: float | None = None

    def to_json(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        if self.verdict is None:
            for name in ("verdict", "reason", "confirmed"):
                del body[name]
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "CandidateLine":
        notes = data.get("notes")
        return cls(variant=text(data.get("variant")), variant_hash=text(data.get("variant_hash")),
                   family=text(data.get("family")), mode=text(data.get("mode")), status=text(data.get("status")),
                   failure=text(data.get("failure")) or None, message=text(data.get("message")),
                   time_ms=positive(data.get("time_ms")), speedup=positive(data.get("speedup")),
                   seconds=nonnegative(data.get("seconds")) or 0.0, verify_s=nonnegative(data.get("verify_s")),
                   time_s=nonnegative(data.get("time_s")), wait_s=nonnegative(data.get("wait_s")),
                   share_s=nonnegative(data.get("share_s")), reused=data.get("reused") is True,
                   notes=[text(n) for n in notes] if isinstance(notes, list) else [],
                   prior=data.get("prior") is True, verdict=text(data.get("verdict")) or None,
                   reason=text(data.get("reason")) or None, confirmed=positive(data.get("confirmed")))


@dataclasses.dataclass
class KernelResult:
    """What the loop found for one decision key (``KernelLoop.run``)."""

    id: str = ""
    kernel: str = ""
    kind: str = "unknown"
    category: str = "other"
    launches: int = 1  # how often the program launched this key (all its launches)
    key_sha: str = ""
    time_share: float | None = None
    budget_s: float | None = None  # the wall time this key was given
    baseline_ms: float | None = None
    best_ms: float | None = None
    speedup: float | None = None
    accepted: bool = False
    decision: str | None = None
    decision_hash: str | None = None  # the decided variant's hash (a Ray lane's records are checked by it)
    won_by: list[str] = dataclasses.field(default_factory=list)  # the knobs the decision changed
    bytes: int | None = None
    floor_ms: float | None = None
    roofline_before: float | None = None
    roofline_after: float | None = None
    bottleneck: dict | None = None
    profile_source: str | None = None
    profile_note: str = ""
    rounds: int = 0
    finish: str | None = None
    finish_reason: str = ""
    hints: list[dict] = dataclasses.field(default_factory=list)
    candidates: list[CandidateLine] = dataclasses.field(default_factory=list)
    waited: int = 0
    busy: int = 0
    skipped: int = 0  # variants not tried: they timed out on a sibling key of the same source
    wall_s: float | None = None
    failure: str | None = None
    message: str = ""
    llm: dict | None = None  # the LLM family's rounds, replies, failure classes and cost (``llm.family``)
    lane: str | None = None  # the lane that ran it (None: resumed from an earlier run's record)
    gpu: str | None = None  # the kind of GPU it was optimized on, on a host with several kinds only
    # Where its wall time went, in seconds (``SPLIT_KEYS``; ``KernelLoop`` module docstring):
    # to_first_s from its start to its first candidate's submission; idle_s is wall_s less the
    # others but to_first_s (which overlaps them). Empty for a record older than the split.
    split: dict[str, float] = dataclasses.field(default_factory=dict)
    timed_candidates: int = 0  # candidates verified and timed (this run's and reused ones)

    @property
    def ran(self) -> bool:
        """The baseline was timed, so the loop ran on this key."""
        return self.failure is None and self.baseline_ms is not None

    def improved(self, threshold: float = DEFAULT_THRESHOLD) -> bool:
        return self.ran and self.accepted and self.speedup is not None and self.speedup >= threshold

    def to_json(self) -> dict[str, Any]:
        body = dataclasses.asdict(self)
        body["candidates"] = [candidate.to_json() for candidate in self.candidates]
        body["count"] = self.launches  # the name format 1 used, kept for readers of old scripts
        return body

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "KernelResult":
        size = data.get("bytes")
        won = data.get("won_by")
        return cls(
            id=text(data.get("id")), kernel=text(data.get("kernel")), kind=text(data.get("kind")) or "unknown",
            category=text(data.get("category")) or "other",
            launches=count(data.get("launches", data.get("count")), 1), key_sha=text(data.get("key_sha")),
            time_share=nonnegative(data.get("time_share")), budget_s=positive(data.get("budget_s")),
            baseline_ms=positive(data.get("baseline_ms")), best_ms=positive(data.get("best_ms")),
            speedup=positive(data.get("speedup")), accepted=data.get("accepted") is True,
            decision=text(data.get("decision")) or None, decision_hash=text(data.get("decision_hash")) or None,
            won_by=[text(w) for w in won] if isinstance(won, list) else [],
            bytes=size if isinstance(size, int) and not isinstance(size, bool) and size >= 0 else None,
            floor_ms=positive(data.get("floor_ms")), roofline_before=number(data.get("roofline_before")),
            roofline_after=number(data.get("roofline_after")),
            bottleneck=data.get("bottleneck") if isinstance(data.get("bottleneck"), dict) else None,
            profile_source=text(data.get("profile_source")) or None, profile_note=text(data.get("profile_note")),
            rounds=count(data.get("rounds")), finish=text(data.get("finish")) or None,
            finish_reason=text(data.get("finish_reason")), hints=records(data.get("hints")),
            candidates=[CandidateLine.from_json(c) for c in records(data.get("candidates"))],
            waited=count(data.get("waited")),
            busy=count(data.get("busy")), skipped=count(data.get("skipped")), wall_s=nonnegative(data.get("wall_s")),
            failure=text(data.get("failure")) or None, message=text(data.get("message")),
            llm=data.get("llm") if isinstance(data.get("llm"), dict) else None,
            lane=text(data.get("lane")) or None, gpu=text(data.get("gpu")) or None,
            split=seconds_of(data.get("split")), timed_candidates=count(data.get("timed_candidates")),
        )


@dataclasses.dataclass
class LaneLine:
    """One lane of the run: a GPU's workers (or an interpreter's), driven by a thread of its own."""

    name: str = ""  # "cuda:0", "interpreter:1"
    gpu: str = ""
    kernels: int = 0  # keys it optimized
    busy_s: float = 0.0  # running jobs: its share of the ranking, then its keys
    idle_s: float = 0.0  # waiting, with nothing it could take (the others' last keys, a cover reached)
    died: str | None = None  # why it stopped taking keys (its key went to another lane)

    def to_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> "LaneLine":
        return cls(name=text(data.get("name")), gpu=text(data.get("gpu")), kernels=count(data.get("kernels")),
                   busy_s=nonnegative(data.get("busy_s")) or 0.0, idle_s=nonnegative(data.get("idle_s")) or 0.0,
                   died=text(data.get("died")) or None)


# ---------------------------------------------------------------------------------- the run

@dataclasses.dataclass
class RunResults:
    """One optimize run: its settings, the timed keys, and a result per key the loop ran on."""

    command: str = ""
    started: str = ""
    finished: str | None = None
    target: dict = dataclasses.field(default_factory=dict)
    settings: dict = dataclasses.field(default_factory=dict)
    meaningful: bool | None = None
    copy_gbps: float | None = None
    store: str = ""
    launches: str = ""
    run_id: int | None = None
    planned: int | None = None  # keys the run meant to optimize (after --kernel/--max-kernels/--sample)
    keys: int | None = None  # distinct keys in the capture
    cover: float | None = None  # stop once this share of kernel time is covered
    jobs: int | None = None  # workers that built and verified candidates at once (--jobs)
    llm: dict | None = None  # the LLM family's total cost, and why the endpoint stopped being asked
    stopped: str | None = None
    targets: list[dict] = dataclasses.field(default_factory=list)  # every kind of GPU, when more than one
    lanes: list[LaneLine] = dataclasses.field(default_factory=list)
    timed: list[KeyTime] = dataclasses.field(default_factory=list)  # every key, costliest first (per kind)
    kernels: list[KernelResult] = dataclasses.field(default_factory=list)  # in the order of ``timed``
    # The run's fixed costs in seconds (``FIXED_KEYS``): start_s the lanes and workers starting,
    # baselines_s timing the baselines for the ranking, total_s every second before the first key
    # started; of baselines_s, build_s building the launches in the verify workers and rank_time_s
    # timing them (the local lane that ranked longest); head_s how long before the run its lanes'
    # workers began to start, beside the program's capture (``lanes.HeadStart``; absent without).
    # ``deadline_s``: the run's deadline.
    fixed: dict[str, float] = dataclasses.field(default_factory=dict)
    deadline_s: float | None = None
    wall_s: float | None = None  # the run's seconds so far (written with each update)

    # ------------------------------------------------------------------------ derived figures

    @property
    def threshold(self) -> float:
        """The success bar the run used: ``settings.threshold`` (or ``settings.arbiter.threshold``,
        or ``min_speedup``), else 1.05."""
        for place in (self.settings, mapping(self.settings.get("arbiter"))):
            for key in ("threshold", "min_speedup"):
                value = positive(place.get(key))
                if value is not None:
                    return value
        return DEFAULT_THRESHOLD

    @property
    def kinds(self) -> int:
        """How many kinds of GPU the keys were timed on (1 but on a mixed host)."""
        return max(1, len({t.gpu for t in self.timed}))

    @property
    def program_ms(self) -> float | None:
        """The program's kernel time per captured run: launches x baseline over every timed key."""
        totals = [t.total_ms for t in self.timed if t.total_ms is not None]
        return sum(totals) / self.kinds if totals else None

    @property
    def coverage(self) -> float | None:
        """The share of kernel time held by the keys the loop ran on (None without shares)."""
        held = [k.time_share for k in self.kernels if k.ran and k.time_share is not None]
        return sum(held) / self.kinds if self.timed else None

    @property
    def expected_gain(self) -> float | None:
        """Fraction of the program's kernel time the decisions save: sum of share x (1 - 1/speedup)."""
        if not self.timed:
            return None
        return sum(k.time_share * (1 - 1 / k.speedup) for k in self.kernels
                   if k.improved(self.threshold) and k.time_share is not None and k.speedup) / self.kinds

    @property
    def fixed_share(self) -> float | None:
        """The run's fixed costs (``fixed["total_s"]``) as a share of its deadline (None without one)."""
        total = self.fixed.get("total_s")
        return total / self.deadline_s if total is not None and self.deadline_s else None

    @property
    def candidate_share(self) -> float | None:
        """The share of the run's time (its wall time on each lane) its keys spent after their
        first candidate was submitted: candidates built, verified, timed and judged. A key's
        time before its first candidate (baseline, profile) and the run's fixed costs are the
        rest. None before any wall time is known."""
        if not self.wall_s:
            return None
        spent = sum(max(0.0, (k.wall_s or 0.0) - k.split["to_first_s"]) for k in self.kernels
                    if "to_first_s" in k.split)
        return min(1.0, spent / (self.wall_s * max(1, len(self.lanes))))

    # ------------------------------------------------------------------------------- the file

    def to_json(self) -> dict[str, Any]:
        body = {FORMAT_KEY: FORMAT_VERSION}
        for field in dataclasses.fields(self):
            if field.name not in ("timed", "kernels", "lanes"):
                body[field.name] = getattr(self, field.name)
        body["lanes"] = [lane.to_json() for lane in self.lanes]
        body.update(program_ms=self.program_ms, coverage=self.coverage, expected_gain=self.expected_gain,
                    fixed_share=self.fixed_share, candidate_share=self.candidate_share,
                    timed=[t.to_json() for t in self.timed], kernels=[k.to_json() for k in self.kernels])
        return body

    @classmethod
    def from_json(cls, data: Any, where: str = "results") -> "RunResults":
        if not isinstance(data, dict) or FORMAT_KEY not in data:
            raise ResultsError(f"{where} is not a tritune optimize results file (no {FORMAT_KEY!r} key)")
        version = data[FORMAT_KEY]
        if isinstance(version, bool) or version not in READABLE_VERSIONS:
            raise ResultsError(f"{where} has optimize format version {version!r}; this tritune reads version(s) "
                               f"{', '.join(map(str, READABLE_VERSIONS))}")
        kernels = data.get("kernels")
        if kernels is None:
            kernels = []
        if not isinstance(kernels, list):
            raise ResultsError(f"{where}: 'kernels' is a {type(kernels).__name__}, not a list")
        for index, record in enumerate(kernels):
            if not isinstance(record, dict):
                raise ResultsError(f"{where}: kernels[{index}] is a {type(record).__name__}, not an object")
        meaningful = data.get("meaningful")
        if not isinstance(meaningful, bool):  # older files: the interpreter's target says it
            meaningful = False if text(mapping(data.get("target")).get("gpu")).lower() == "interpreter" else None
        run_id, planned, keys = data.get("run_id"), data.get("planned"), data.get("keys")
        return cls(
            command=text(data.get("command")), started=text(data.get("started")),
            finished=text(data.get("finished")) or None, target=mapping(data.get("target")),
            settings=mapping(data.get("settings")), meaningful=meaningful,
            copy_gbps=positive(data.get("copy_gbps")), store=text(data.get("store")),
            launches=text(data.get("launches")), run_id=count(run_id) if run_id is not None else None,
            planned=count(planned) if planned is not None else None, keys=count(keys) if keys is not None else None,
            cover=positive(data.get("cover")), jobs=count(data.get("jobs")) or None,
            llm=data.get("llm") if isinstance(data.get("llm"), dict) else None,
            stopped=text(data.get("stopped")) or None,
            targets=records(data.get("targets")), lanes=[LaneLine.from_json(x) for x in records(data.get("lanes"))],
            timed=[KeyTime.from_json(t) for t in records(data.get("timed"))],
            kernels=[KernelResult.from_json(k) for k in kernels],
            fixed=seconds_of(data.get("fixed")), deadline_s=positive(data.get("deadline_s")),
            wall_s=nonnegative(data.get("wall_s")),
        )

    @classmethod
    def load(cls, path: str | Path) -> "RunResults":
        """From a file, or the directory holding ``optimize.json``."""
        path = Path(path)
        if path.is_dir():
            path = path / FILE_NAME
        if not path.is_file():
            raise ResultsError(f"no such file: {path}")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except UnicodeDecodeError:
            raise ResultsError(f"{path} is not a text file (expected an optimize.json)") from None
        except json.JSONDecodeError as exc:
            raise ResultsError(f"{path} is not JSON (line {exc.lineno}: {exc.msg})") from None
        return cls.from_json(data, str(path))

    def write(self, path: str | Path) -> None:
        """Atomically and scrubbed (``secrets.write_json``)."""
        write_json(path, self.to_json(), indent=1)
