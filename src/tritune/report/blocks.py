"""A report as a list of blocks (headings, paragraphs, item lists, tables, images), which
``markdown`` and ``html`` render; ``document`` and ``llm`` build them."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Sequence


@dataclasses.dataclass(frozen=True)
class Heading:
    level: int
    text: str


@dataclasses.dataclass(frozen=True)
class Para:
    text: str
    warning: bool = False


@dataclasses.dataclass(frozen=True)
class Items:
    items: Sequence[str]


@dataclasses.dataclass(frozen=True)
class Table:
    headers: Sequence[str]
    rows: Sequence[Sequence[str]]


@dataclasses.dataclass(frozen=True)
class Image:
    path: Path  # the PNG on disk
    relative: str  # its path from the report's folder
    caption: str


Block = Heading | Para | Items | Table | Image
