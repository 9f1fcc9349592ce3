"""One-line error messages for the report: the exception type and the line that says what broke."""

from __future__ import annotations

import re

_PTXAS_LINE = re.compile(r"^ptxas .*?(line \d+); error\s*:\s*(.+)$")


def one_line(exc: BaseException) -> str:
    name = type(exc).__name__
    if name == "CompilationError":
        return f"{name}: {_compilation_error(exc)}"
    if name == "PTXASError":
        return f"{name}: {_ptxas_error(str(exc))}"
    if isinstance(exc, SyntaxError):
        return f"{name}: {exc.msg} (line {exc.lineno})"
    lines = [line.strip() for line in str(exc).splitlines() if line.strip()]
    return f"{name}: {lines[0]}" if lines else name


def _compilation_error(exc: BaseException) -> str:
    # Triton's message is "at L:C:\n<source excerpt>\n<error>"; keep the position and the error.
    node = getattr(exc, "node", None)
    where = f"at {node.lineno}:{node.col_offset}: " if hasattr(node, "lineno") else ""
    message = getattr(exc, "error_message", None)
    if message is None and exc.__cause__ is not None:
        message = one_line(exc.__cause__)
    lines = [line.strip() for line in str(message or "").splitlines() if line.strip()]
    return where + (lines[0] if lines else "compilation failed")


def _ptxas_error(text: str) -> str:
    # "ptxas /tmp/x.ptx, line 46; error   : Modifier '.evict_first' cannot be combined with ..."
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    for line in lines:
        match = _PTXAS_LINE.match(line)
        if match:
            return f"ptxas: {match.group(1)}: {match.group(2)}"
    return (lines or ["ptxas failed"])[0]
