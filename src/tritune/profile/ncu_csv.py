"""Nsight Compute's ``--csv --page raw`` output, parsed once into plain values.

The raw page is one wide table: a header row, a units row, then one row per profiled launch::

    ==PROF== Connected to process 4242 (/usr/bin/python3.12)
    "ID","Process ID",...,"Kernel Name",...,"Block Size","Grid Size","Device","CC","dram__bytes.sum",...
    "","",...,"","",...,"","","","","byte",...
    "0","4242",...,"add_kernel",...,"(128, 1, 1)","(8, 1, 1)","0","9.0","13,056",...
    ==PROF== Disconnected from process 4242

Every field is quoted; numbers carry thousands separators (``"1,205.00"``); a metric the GPU
cannot collect reads ``"n/a"``. ``==PROF==``/``==WARNING==`` lines and the profiled program's
own output may come before and after the table. Units are scaled per column unless ncu runs with
``--print-units base`` (``"usecond"`` instead of ``"nsecond"``): ``to_base`` undoes that.

``parse_raw(text)`` -> one ``Row`` per launch; ``facts(row)`` -> a dict whose keys are
``profile.bottleneck.Facts`` fields (plus ``l2_throughput_pct``, ``dram_throughput_pct``,
``dram_bytes``). Pure text processing: no subprocess, no GPU.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import re
from typing import Any

# Columns ncu writes before the metrics; anything else with "__" in its name is a metric.
ID_COLUMN = "ID"
KERNEL_COLUMN = "Kernel Name"
GRID_COLUMN = "Grid Size"
BLOCK_COLUMN = "Block Size"

# Metric -> Facts key (or extra key) and the base unit the fact is in.
DURATION = "gpu__time_duration.sum"
FACT_METRICS = {
    DURATION: "duration_ms",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": "sol_memory_pct",  # SOL "Memory Throughput"
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": "sol_compute_pct",  # SOL "Compute (SM) Throughput"
    "sm__warps_active.avg.pct_of_peak_sustained_active": "achieved_occupancy_pct",
    "launch__registers_per_thread": "registers",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": "l2_throughput_pct",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": "dram_throughput_pct",
    "dram__bytes.sum": "dram_bytes",
}
INTEGER_FACTS = ("registers", "dram_bytes")

# WarpStateStats' breakdown: warp cycles per issued instruction spent in each stall reason
# (sm_70 on; 17 reasons on sm_90). "selected" (the issuing warp, ~1.0) is not a stall: left out.
STALL_PREFIX = "smsp__average_warps_issue_stalled_"
STALL_SUFFIX = "_per_issue_active.ratio"
STALL_REASONS = (
    "barrier", "branch_resolving", "dispatch_stall", "drain", "imc_miss", "lg_throttle", "long_scoreboard",
    "math_pipe_throttle", "membar", "mio_throttle", "misc", "no_instruction", "not_selected",
    "short_scoreboard", "sleeping", "tex_throttle", "wait",
)
STALL_METRICS = tuple(f"{STALL_PREFIX}{reason}{STALL_SUFFIX}" for reason in STALL_REASONS)
METRICS = tuple(FACT_METRICS) + STALL_METRICS
FACT_KEYS = tuple(FACT_METRICS.values()) + ("stalls",)  # what ``facts`` returns, always all of them

# Unit -> factor to the base unit (ns for time, bytes for sizes: ncu's prefixes are decimal).
_SCALE = {
    "nsecond": 1.0, "ns": 1.0, "usecond": 1e3, "us": 1e3, "msecond": 1e6, "ms": 1e6, "second": 1e9, "s": 1e9,
    "byte": 1.0, "kbyte": 1e3, "mbyte": 1e6, "gbyte": 1e9, "tbyte": 1e12,
}
_TRIPLE = re.compile(r"^\(\s*(\d+)\s*,\s*(\d+)\s*,\s*(\d+)\s*\)$")
_MISSING = {"", "n/a", "N/A"}


_WANTED = set(FACT_METRICS) | set(STALL_METRICS)


class CsvError(ValueError):
    """The text holds no raw-page table, or one that does not read as one."""


@dataclasses.dataclass(frozen=True)
class Row:
    """One profiled launch: its identity columns and its metrics as (value, unit)."""

    kernel: str
    grid: tuple[int, int, int] | None
    block: tuple[int, int, int] | None
    metrics: dict[str, tuple[float | None, str]]  # metric -> (value in the printed unit, unit)

    def value(self, metric: str) -> float | None:
        """The metric in its base unit (ns, bytes, %), None when absent or n/a."""
        value, unit = self.metrics.get(metric, (None, ""))
        return to_base(value, unit)


def parse_raw(text: str) -> list[Row]:
    """Every launch in ncu's ``--csv --page raw`` output (``CsvError`` when there is no table)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith(f'"{ID_COLUMN}",')), None)
    if start is None:
        raise CsvError("no ncu raw-page table in the output (no header row starting with \"ID\")")
    table = [line for line in lines[start:] if line.startswith('"')]  # drop ==PROF== and program output
    records = list(csv.reader(io.StringIO("\n".join(table))))
    header = records[0]
    if len(records) < 2 or not _is_units_row(records[1], header):
        raise CsvError("ncu raw-page table has no units row under its header")
    units, rows = records[1], []
    for number, record in enumerate(records[2:], start=3):
        if len(record) != len(header):
            raise CsvError(f"ncu raw-page row {number} has {len(record)} fields, the header {len(header)}")
        rows.append(_row(dict(zip(header, record)), dict(zip(header, units))))
    return rows


def facts(row: Row) -> dict[str, Any]:
    """Facts keys (durations in ms, percentages 0..100) plus the extras, from one launch."""
    found: dict[str, Any] = {}
    for metric, key in FACT_METRICS.items():
        value = row.value(metric)
        if value is not None and key == "duration_ms":
            value = value / 1e6  # ns -> ms
        if value is not None and key in INTEGER_FACTS:
            value = int(round(value))
        found[key] = value
    stalls = {reason: row.value(metric) for reason, metric in zip(STALL_REASONS, STALL_METRICS)}
    stalls = {reason: value for reason, value in stalls.items() if value is not None}
    found["stalls"] = stalls or None
    return found


def number(text: str) -> float | None:
    """``"1,205.00"`` -> 1205.0; ``"n/a"`` and ``""`` -> None; anything else non-numeric is an error."""
    text = text.strip()
    if text in _MISSING:
        return None
    try:
        return float(text.replace(",", ""))
    except ValueError:
        raise CsvError(f"ncu value {text!r} is not a number") from None


def to_base(value: float | None, unit: str) -> float | None:
    if value is None:
        return None
    return value * _SCALE.get(unit.strip().lower(), 1.0)


def _is_units_row(record: list[str], header: list[str]) -> bool:
    """Under the header: the identity columns empty (a launch row has its ID there)."""
    return len(record) == len(header) and record[header.index(ID_COLUMN)] == ""


def _row(fields: dict[str, str], units: dict[str, str]) -> Row:
    """The metrics tritune asked for must be numbers; any other ``__`` column ncu adds on its own
    is kept when numeric and skipped when not (ncu 2025 on the H100 prints one holding "No-CC")."""
    metrics = {}
    for name, text in fields.items():
        if "__" not in name:
            continue
        try:
            metrics[name] = (number(text), units[name])
        except CsvError:
            if name in _WANTED:
                raise
    return Row(kernel=fields.get(KERNEL_COLUMN, ""), grid=_triple(fields.get(GRID_COLUMN)),
               block=_triple(fields.get(BLOCK_COLUMN)), metrics=metrics)


def _triple(text: str | None) -> tuple[int, int, int] | None:
    match = _TRIPLE.match((text or "").strip())
    return tuple(int(g) for g in match.groups()) if match else None  # type: ignore[return-value]
