"""PTX statistics, parsed once into a dataclass. Counts are static (instructions in the text, not
executions): an instruction inside a loop counts once.

What is counted and why (seed 003: 16-byte vector loads, division -> multiply by reciprocal):

- global loads and stores by access width in bits (``ld.global.v4.b32`` -> 128): 128-bit accesses
  are the vectorized ones;
- divisions by opcode (``div.full.f32`` is Triton's approximate ``/``, ``div.rn.f32`` the
  IEEE-rounded ``div_rn``, ``div.s32`` an integer division), reciprocals (``rcp.*``);
- special functions (``ex2``, ``lg2``, ``sqrt``, ``rsqrt``, ``sin``, ``cos``, ``tanh``), ``fma``,
  shared-memory accesses, barriers, and the total instruction count.
"""

from __future__ import annotations

import collections
import dataclasses
import re

SPECIAL_FUNCTIONS = ("ex2", "lg2", "sqrt", "rsqrt", "sin", "cos", "tanh")

# One instruction: optional guard predicate, then the opcode with its dot-separated modifiers.
# "\t@%p1 ld.global.v4.b32 { %r1, %r2, %r3, %r4 }, [ %rd1 + 0 ];" -> "ld.global.v4.b32"
_INSTRUCTION = re.compile(r"^\s*(?:@!?%\w+\s+)?([a-z][a-z0-9_]*(?:\.[A-Za-z0-9_:]+)*)[\s;]")
_VECTOR = re.compile(r"^v(\d+)$")
_SCALAR = re.compile(r"^[bsuf](\d+)$")


@dataclasses.dataclass(frozen=True)
class PtxStats:
    global_loads: dict[int, int]  # access width in bits -> count
    global_stores: dict[int, int]
    shared_loads: int
    shared_stores: int
    divisions: dict[str, int]  # opcode -> count
    reciprocals: dict[str, int]
    special: dict[str, int]  # ex2, lg2, sqrt, ... -> count
    fma: int
    barriers: int
    instructions: int

    @property
    def vector_loads_128(self) -> int:
        return self.global_loads.get(128, 0)

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)


def parse_ptx(text: str) -> PtxStats:
    loads: collections.Counter[int] = collections.Counter()
    stores: collections.Counter[int] = collections.Counter()
    divisions: collections.Counter[str] = collections.Counter()
    reciprocals: collections.Counter[str] = collections.Counter()
    special: collections.Counter[str] = collections.Counter()
    counts = collections.Counter()
    for opcode in _opcodes(text):
        parts = opcode.split(".")
        base = parts[0]
        counts["instructions"] += 1
        if base in ("ld", "st") and "global" in parts:
            (loads if base == "ld" else stores)[access_bits(parts)] += 1
        elif base in ("ld", "st") and "shared" in parts:
            counts["shared_" + ("loads" if base == "ld" else "stores")] += 1
        elif base == "div":
            divisions[opcode] += 1
        elif base == "rcp":
            reciprocals[opcode] += 1
        elif base in SPECIAL_FUNCTIONS:
            special[base] += 1
        elif base == "fma":
            counts["fma"] += 1
        elif base in ("bar", "barrier"):
            counts["barriers"] += 1
    return PtxStats(
        global_loads=dict(sorted(loads.items())),
        global_stores=dict(sorted(stores.items())),
        shared_loads=counts["shared_loads"],
        shared_stores=counts["shared_stores"],
        divisions=dict(sorted(divisions.items())),
        reciprocals=dict(sorted(reciprocals.items())),
        special=dict(sorted(special.items())),
        fma=counts["fma"],
        barriers=counts["barriers"],
        instructions=counts["instructions"],
    )


def access_bits(modifiers: list[str]) -> int:
    """Width of one memory access: vector length times element width (``v4`` + ``b32`` -> 128)."""
    lanes, element = 1, 0
    for modifier in modifiers[1:]:
        if match := _VECTOR.match(modifier):
            lanes = int(match.group(1))
        elif match := _SCALAR.match(modifier):
            element = int(match.group(1))
    return lanes * element


def _opcodes(text: str):
    in_body = False
    for line in text.splitlines():
        stripped = line.strip()
        if not in_body:
            in_body = stripped == "{"  # instructions start at the body of an .entry/.func
            continue
        if not stripped or stripped.startswith(("//", ".", "$", "{", "}")):
            continue
        if match := _INSTRUCTION.match(line):
            yield match.group(1)
