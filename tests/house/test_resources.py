"""``tritune.resources``: ``--jobs`` bounded by the usable cores, the memory and what a round can use."""

from __future__ import annotations

import pytest

from tritune import resources
from tritune.resources import WORKER_BYTES, bound_jobs

GIB = 1 << 30


@pytest.mark.parametrize("asked, lanes, round_most, cores, memory, jobs, why", [
    (4, 1, 24, 16, 64 * GIB, 4, None),  # within every bound: as asked
    (500, 1, 24, 16, 64 * GIB, 16, "16 usable CPU core(s)"),
    (500, 2, 24, 16, 64 * GIB, 8, "16 usable CPU core(s) shared by 2 lanes"),
    (16, 1, 24, 64, 6 * GIB, 5, "6.0 GiB of memory available, about 1 GiB a worker"),  # 6 workers, one times
    (16, 1, 3, 64, 64 * GIB, 3, "a round builds at most 3 candidate(s) (--max-candidates)"),
    (8, 1, 24, 1, 64 * GIB, 1, "1 usable CPU core(s)"),
    (8, 4, 24, 2, GIB // 2, 1, "2 usable CPU core(s) shared by 4 lanes"),  # never below 1
    (64, 1, None, 32, None, 32, "32 usable CPU core(s)"),  # memory unknown: not a bound
])
def test_jobs_are_bounded_by_cores_memory_and_the_round(asked, lanes, round_most, cores, memory, jobs, why):
    assert bound_jobs(asked, lanes=lanes, round_most=round_most, cores=cores, memory=memory) == (jobs, why)


def test_available_memory_from_meminfo(tmp_path):
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       24684084 kB\nMemFree:        21489532 kB\nMemAvailable:   22790904 kB\n")
    assert resources.available_memory(str(meminfo)) == 22790904 * 1024
    assert resources.available_memory(str(tmp_path / "none")) is not None  # sysconf's free pages instead


def test_optimize_says_in_one_line_when_it_lowers_jobs(monkeypatch, capsys):
    """``--jobs 500`` on a machine of 2 cores: 2 workers, and one line says why."""
    from tritune.commands import optimize

    monkeypatch.setattr(resources, "usable_cores", lambda: 2)
    monkeypatch.setattr(resources, "available_memory", lambda: 64 * WORKER_BYTES)
    lanes = [object()]
    assert optimize._jobs(500, lanes, 24) == 2
    assert capsys.readouterr().err.splitlines() == ["tritune optimize: --jobs 500 lowered to 2: 2 usable CPU core(s)"]
    assert optimize._jobs(2, lanes, 24) == 2 and optimize._jobs(None, lanes, 1) == 1  # a round of one candidate
    assert capsys.readouterr().err == ""  # nothing asked was lowered
    assert optimize._jobs(500, None, 24) == 500  # Ray's lanes: another machine's cores
