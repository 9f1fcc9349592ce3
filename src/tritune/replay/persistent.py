"""How a persistent-grid variant is launched (``Variant.grid == {"persistent": {...}}``).

The ``persistent-grid`` rewrite (``tritune.rewrites.persistent_grid``) turns a kernel whose
programs are independent tiles into a loop over tiles, so it needs two things at each launch:
the number of tiles the program's own grid had (``G0 * G1``: passed as the new parameter named by
``"tiles"``, and ``G0`` as the one named by ``"g0"`` when the kernel reads ``program_id(1)``),
and a launch grid of ``min(tiles, k * SMs)`` programs. The original grid is whatever the launch
would have had: replay's (the spec's, or recomputed from its grid rule), the applier's (the
live launch's, a callable one called first). A grid the rewrite does not cover (a third
dimension, or a second one for a kernel that reads only ``program_id(0)``) gets None: replay
refuses it, the applier launches as written.

The SM count is the device's (``multi_processor_count``), read once per device. The
interpreter has no SMs: it uses ``INTERPRETER_SMS``, a small fixed number, so that CPU tests
run fewer programs than tiles.
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

INTERPRETER_SMS = 4  # "SMs" under TRITON_INTERPRET=1: k=1 runs 4 programs


@dataclasses.dataclass(frozen=True)
class PersistentGrid:
    k: int            # programs per SM
    tiles: str        # the kernel parameter that gets the tile count
    g0: str | None    # the one that gets the first grid dimension (2-D kernels), else None
    sms: int          # SMs of the device launched on

    @classmethod
    def of(cls, rule: dict | None, sms: int) -> "PersistentGrid | None":
        """The launch of ``rule`` (a ``Variant.grid``; None: not persistent); ValueError if the
        rule is not one this tritune knows."""
        if rule is None:
            return None
        body = rule.get("persistent") if isinstance(rule, dict) and len(rule) == 1 else None
        if not isinstance(body, dict) or not _positive(body.get("k")) or not isinstance(body.get("tiles"), str):
            raise ValueError(f"unknown variant grid rule {rule!r}")
        return cls(int(body["k"]), body["tiles"], body.get("g0"), sms)

    @property
    def extras(self) -> tuple[str, ...]:
        """The parameters the rewrite added, in the order ``launch`` gives their values."""
        return (self.tiles,) if self.g0 is None else (self.tiles, self.g0)

    def launch(self, grid: Any) -> tuple[tuple[int, int, int], dict[str, int]] | None:
        """``(grid to launch, values of the added parameters)`` for the program's ``grid``
        (1 to 3 dimensions), or None when the rewrite does not cover that grid."""
        dims = [int(g) for g in grid] + [1] * (3 - len(grid))
        if dims[2] != 1 or (self.g0 is None and dims[1] != 1):
            return None
        tiles = dims[0] * dims[1]
        extras = {self.tiles: tiles} if self.g0 is None else {self.tiles: tiles, self.g0: dims[0]}
        return (min(tiles, self.k * self.sms), 1, 1), extras

    def adapter(self, names: tuple[str, ...] | list[str]):
        """For a launch whose arguments are a tuple in the variant's parameter order (``names``)
        with placeholders for the added parameters: ``(arguments, grid3) -> (arguments, grid3)``,
        or ``(arguments, None)`` when the grid is not covered."""
        positions = [list(names).index(name) for name in self.extras]

        def adapt(found: tuple, grid: tuple) -> tuple[tuple, tuple | None]:
            launched = self.launch(grid)
            if launched is None:
                return found, None
            values = list(found)
            for position, name in zip(positions, self.extras):
                values[position] = launched[1][name]
            return tuple(values), launched[0]

        return adapt


def sm_count(device: Any, interpreted: bool) -> int:
    """The SMs of ``device`` (a torch device, its string or index; None: the current one)."""
    if interpreted:
        return INTERPRETER_SMS
    import torch

    if device is None:
        device = torch.cuda.current_device()
    return _sm_count(str(torch.device(device)) if not isinstance(device, int) else f"cuda:{device}")


@functools.lru_cache(maxsize=None)
def _sm_count(device: str) -> int:
    import torch

    return int(torch.cuda.get_device_properties(torch.device(device)).multi_processor_count)


def _positive(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
