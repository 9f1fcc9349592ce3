"""What a decision is keyed by, as a value: ``DecisionKey``.

How a key is derived from a captured launch or a live one (the specialization, the shape bucket)
is ``tritune.store.keys``; this is the value the store, the loop and the applier pass around.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from typing import Any, Mapping

from tritune.model.target import Target


@dataclasses.dataclass(frozen=True)
class DecisionKey:
    source_hash: str
    kernel: str
    specialization: str  # canonical JSON, see the module docstring
    gpu_name: str
    capability: int  # major * 10 + minor (90 for sm_90); 0 for the interpreter
    triton_version: str
    specialization_sha: str = dataclasses.field(init=False, compare=False)
    sha: str = dataclasses.field(init=False, compare=False)  # the store's primary key

    def __post_init__(self) -> None:
        object.__setattr__(self, "capability", int(self.capability))
        object.__setattr__(self, "specialization_sha", _sha(self.specialization))
        body = [self.source_hash, self.kernel, self.specialization_sha, self.gpu_name, self.capability,
                self.triton_version]
        object.__setattr__(self, "sha", _sha(json.dumps(body)))

    def to_json(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> "DecisionKey":
        return cls(**{f.name: body[f.name] for f in dataclasses.fields(cls) if f.init})

    @property
    def target(self) -> Target:
        """The GPU and Triton the decision holds for (a ``Target``'s identity)."""
        return Target(self.gpu_name, self.capability, self.triton_version)

    def describe(self) -> str:
        return (f"{self.kernel} [{self.specialization_sha[:8]}] on {self.gpu_name} sm_{self.capability}, "
                f"triton {self.triton_version}")


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()
