"""Blocks -> Markdown (GitHub-flavoured tables). Images are linked by their relative path.

Text is escaped for a table cell: ``|`` would split the cell, and Markdown passes raw HTML
through, so ``<`` is written ``&lt;`` (a kernel named ``<script>`` stays text) and ``&`` ``&amp;``.
``>`` is left alone: it opens a quote only at the start of a line, and no cell or item starts one.
"""

from __future__ import annotations

from typing import Sequence

from tritune.report.blocks import Block, Heading, Image, Items, Para, Table


def escape(value: str) -> str:
    value = value.replace("\\", "\\\\").replace("&", "&amp;").replace("<", "&lt;")
    return " ".join(value.replace("|", "\\|").split())


def render(blocks: Sequence[Block]) -> str:
    parts = [_block(b) for b in blocks]
    return "\n\n".join(parts) + "\n"


def _block(block: Block) -> str:
    if isinstance(block, Heading):
        return "#" * block.level + " " + escape(block.text)
    if isinstance(block, Para):
        return f"> **{escape(block.text)}**" if block.warning else escape(block.text)
    if isinstance(block, Items):
        return "\n".join(f"- {escape(item)}" for item in block.items)
    if isinstance(block, Table):
        head = "| " + " | ".join(escape(h) for h in block.headers) + " |"
        rule = "|" + "|".join("---" for _ in block.headers) + "|"
        rows = ["| " + " | ".join(escape(c) for c in row) + " |" for row in block.rows]
        return "\n".join([head, rule, *rows])
    if isinstance(block, Image):
        return f"![{escape(block.caption)}]({block.relative})"
    raise TypeError(f"unknown report block {block!r}")
