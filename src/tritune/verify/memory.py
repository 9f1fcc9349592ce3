"""Peak device memory of a run, baseline against candidate.

A candidate that allocates far more device memory than the baseline (a cache of earlier outputs,
a scratch copy of every input) may be right and fast in the replay and still hurt the program,
which holds its own tensors beside it. Verification measures each run's own peak: the caching
allocator's ``max_memory_allocated`` after the run (its peak statistics reset before) less what
was allocated before it, so the inputs and their copies, identical for both sides, do not count.
The largest over each side's runs is kept.

A large increase (``LARGE_RATIO`` times the baseline's and ``LARGE_BYTES`` more) is reported in
the verification's ``notes`` and message, and from there in the candidate's record and the
report. It is not a rejection: a candidate that trades memory for time may be what the user
wants, and the figure is the replay's, not the program's.

What it cannot see: memory allocated outside PyTorch's caching allocator (Triton's own scratch
through ``cudaMalloc``, a driver's), and memory kept past the run that was allocated before it.
On the CPU (the interpreter) there is no device memory: every figure is None.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Iterator

LARGE_RATIO = 1.5
LARGE_BYTES = 64 * 1024 * 1024
_MIB = 1024 * 1024


@dataclasses.dataclass
class Peaks:
    """The largest per-run peak (bytes above what was allocated before the run) of each side;
    None where the device has no such statistic (the CPU)."""

    baseline: int | None = None
    candidate: int | None = None

    @contextlib.contextmanager
    def run(self, device: str, candidate: bool) -> Iterator[None]:
        """Measure the run inside the block (a no-op off CUDA)."""
        if not str(device).startswith("cuda"):
            yield
            return
        import torch

        torch.cuda.synchronize(device)
        torch.cuda.reset_peak_memory_stats(device)
        before = torch.cuda.memory_allocated(device)
        yield
        torch.cuda.synchronize(device)
        peak = max(0, torch.cuda.max_memory_allocated(device) - before)
        side = "candidate" if candidate else "baseline"
        setattr(self, side, max(getattr(self, side) or 0, peak))

    def note(self) -> str | None:
        """One line when the candidate's peak is a large increase over the baseline's, else None."""
        if self.baseline is None or self.candidate is None:
            return None
        more = self.candidate - self.baseline
        if more <= LARGE_BYTES or self.candidate <= LARGE_RATIO * self.baseline:
            return None
        ratio = f"{self.candidate / self.baseline:.1f}x" if self.baseline else "from none"
        return (f"peak device memory {self.candidate / _MIB:.0f} MiB against the baseline's "
                f"{self.baseline / _MIB:.0f} MiB ({ratio}, +{more / _MIB:.0f} MiB): reported, not a rejection")

    def to_json(self) -> dict:
        return {"baseline_peak_bytes": self.baseline, "candidate_peak_bytes": self.candidate}
