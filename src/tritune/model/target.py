"""Where kernels run, as a value: ``Target``, the GPU and Triton a decision is keyed by.

``gpu``, ``capability`` and ``triton_version`` are the identity (``identity``): a decision holds
for one of them (``DecisionKey``). The rest is what a worker measured or read on that GPU once,
for the run: the copy bandwidth (the roofline), whether times are GPU times (``meaningful``: not
under Triton's interpreter), and the facts a model's prompt gives (SMs, L2, shared memory and
registers per SM). ``store.keys.current_target`` makes one on this machine; ``loop.jobs.target_job``
makes one in a worker, and it crosses as ``to_json``.
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

INTERPRETER_GPU = "interpreter"  # the gpu of Triton's interpreter (TRITON_INTERPRET=1), capability 0
FACTS = ("sm_count", "l2_bytes", "smem_per_sm", "regs_per_sm")


@dataclasses.dataclass(frozen=True)
class Target:
    gpu: str  # the device's name ("NVIDIA H200"), or INTERPRETER_GPU
    capability: int  # major * 10 + minor (90 for sm_90); 0 for the interpreter
    triton_version: str
    copy_gbps: float | None = None  # measured copy bandwidth; None without a GPU
    meaningful: bool = False  # times are a GPU's (not the interpreter's)
    sm_count: int | None = None
    l2_bytes: int | None = None
    smem_per_sm: int | None = None
    regs_per_sm: int | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "capability", int(self.capability))

    @property
    def identity(self) -> "Target":
        """The target as a decision's key knows it: GPU, capability and Triton only."""
        return Target(self.gpu, self.capability, self.triton_version)

    @property
    def interpreted(self) -> bool:
        return self.gpu == INTERPRETER_GPU

    def facts(self) -> dict[str, int]:
        """The GPU facts known (``FACTS``), for a model's prompt."""
        return {name: getattr(self, name) for name in FACTS if getattr(self, name) is not None}

    def key_json(self) -> dict[str, Any]:
        """The identity as JSON: how a run's settings and its results name the target."""
        return {"gpu": self.gpu, "capability": self.capability, "triton_version": self.triton_version}

    def to_json(self) -> dict[str, Any]:
        """Everything known: the identity, the copy bandwidth, ``meaningful``, the facts known."""
        return {**self.key_json(), "copy_gbps": self.copy_gbps, "meaningful": self.meaningful, **self.facts()}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> "Target":
        known = {field.name for field in dataclasses.fields(cls)}
        return cls(**{name: value for name, value in body.items() if name in known})
