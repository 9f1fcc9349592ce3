"""Blocks -> one self-contained HTML page: inline CSS, plots embedded as base64 PNG, no network.

Every piece of text goes through ``html.escape`` (kernel names and messages come from user code).
"""

from __future__ import annotations

import base64
import html
from typing import Sequence

from tritune.report.blocks import Block, Heading, Image, Items, Para, Table

CSS = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1400px; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; font-size: 0.9em; }
th, td { border: 1px solid #ccc; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f0f0f0; }
tr:nth-child(even) td { background: #fafafa; }
.warning { border: 2px solid #c00; background: #fee; color: #900; padding: 0.8em; font-weight: bold; }
figure { margin: 1em 0; } img { max-width: 100%; } figcaption { color: #555; font-size: 0.9em; }
"""


TITLE = "tritune optimize report"


def render(blocks: Sequence[Block], title: str = TITLE) -> str:
    body = "\n".join(_block(b) for b in blocks)
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f"<title>{html.escape(title)}</title>\n<style>{CSS}</style>\n</head>\n<body>\n{body}\n</body>\n</html>\n")


def _block(block: Block) -> str:
    e = html.escape
    if isinstance(block, Heading):
        return f"<h{block.level}>{e(block.text)}</h{block.level}>"
    if isinstance(block, Para):
        return f'<p class="warning">{e(block.text)}</p>' if block.warning else f"<p>{e(block.text)}</p>"
    if isinstance(block, Items):
        return "<ul>\n" + "\n".join(f"<li>{e(item)}</li>" for item in block.items) + "\n</ul>"
    if isinstance(block, Table):
        head = "<tr>" + "".join(f"<th>{e(h)}</th>" for h in block.headers) + "</tr>"
        rows = ["<tr>" + "".join(f"<td>{e(c)}</td>" for c in row) + "</tr>" for row in block.rows]
        return "<table>\n" + "\n".join([head, *rows]) + "\n</table>"
    if isinstance(block, Image):
        data = base64.b64encode(block.path.read_bytes()).decode("ascii")
        return (f'<figure><img alt="{e(block.caption)}" src="data:image/png;base64,{data}">'
                f"<figcaption>{e(block.caption)}</figcaption></figure>")
    raise TypeError(f"unknown report block {block!r}")
