"""One optimize run as the user asked for it: ``RunRequest``.

The command line builds it once from its options (``tritune optimize``); the loop's session reads
it (``loop.session.optimize``) and hands each key its ``settings``. What the run is asked to do is
here; who does it (the lanes, their workers, the progress display) is passed beside it.

    out         the run's folder: ``optimize.json``, ``kernels.jsonl``, the baselines, the report
    settings    the loop's settings (``LoopSettings``): rounds, candidates, budget, families, ``--llm``
    store_path  the decision store; None: ``OUT/decisions.db`` (``store``)
    kernels     only these kernels (names or launch ids); () = all
    max_kernels at most this many keys, costliest first
    sample      a seeded random sample of the keys instead (a benchmark over hundreds of kernels)
    deadline_s  no key starts after this many seconds, none runs past it by more than its round
    cover       stop once the keys the loop ran on hold this share of the kernel time, in (0, 1]
    floor_s     the least wall time a key gets
    command     what was captured, as the results name it
    fresh       start a new run instead of resuming an interrupted one
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from tritune.model.settings import LoopSettings

STORE_FILE = "decisions.db"  # the decision store's name in the run's folder, when --store is not given
DEFAULT_COVER = 0.95  # stop once the keys optimized hold 95% of the program's kernel time
FLOOR_S = 10.0  # the least wall time a key gets: a profile and a round or two of candidates


@dataclasses.dataclass(frozen=True)
class RunRequest:
    out: Path
    settings: LoopSettings = LoopSettings()
    store_path: Path | None = None
    kernels: tuple[str, ...] = ()
    max_kernels: int | None = None
    sample: int | None = None
    deadline_s: float | None = None
    cover: float = DEFAULT_COVER
    floor_s: float = FLOOR_S
    command: str = ""
    fresh: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "out", Path(self.out))
        if self.store_path is not None:
            object.__setattr__(self, "store_path", Path(self.store_path))
        object.__setattr__(self, "kernels", tuple(self.kernels))
        if not 0 < self.cover <= 1:
            raise ValueError(f"--cover must be in (0, 1], not {self.cover}")

    @property
    def store(self) -> Path:
        """The decision store's path: ``store_path``, else ``OUT/decisions.db``."""
        return self.store_path if self.store_path is not None else self.out / STORE_FILE
