"""Errors, once for all of tritune: one line per exception, and Triton's compile failures by type.

- ``one_line(exc)``: ``Type: the line that says what broke`` (Triton's multi-line compile and
  ptxas messages reduced to their position and error). An ``InputError`` is already the line a
  user should read, so it is given as is, without its type name.
- ``compile_failure(exc)``: ``RESOURCES``, ``PTXAS``, ``COMPILATION`` or ``INTERPRETER`` for the
  exceptions Triton raises typed, found by class (through the class's MRO, so subclasses count),
  else None. ``caused_by(exc, kind)`` looks through the ``__cause__`` chain.
- ``resource_failure_text(message)``: the same question for a message that crossed a process
  boundary as text (see there).

This module sits at the bottom of the import graph: it imports nothing from tritune, nor torch or
Triton. Classes are recognised by module and qualified name, so classifying costs no import and
works in a process that never loaded Triton (the parent of the workers).
"""

from __future__ import annotations

import re

RESOURCES = "resources"  # OutOfResources: the launch asks for more than the GPU has
PTXAS = "ptxas"  # PTXASError: ptxas rejected the PTX Triton made
COMPILATION = "compilation"  # CompilationError and subclasses: Triton's front end rejected the kernel
INTERPRETER = "interpreter"  # InterpreterError: the kernel body raised under TRITON_INTERPRET=1

# Most specific first: the first class of an exception's MRO found here decides.
_TRITON_CLASSES = {
    "triton.runtime.errors.OutOfResources": RESOURCES,
    "triton.runtime.errors.PTXASError": PTXAS,
    "triton.compiler.errors.CompilationError": COMPILATION,
    "triton.runtime.errors.InterpreterError": INTERPRETER,
}
# The texts of the resource failures a launch configuration causes, each a phrase of one real
# message: the bare words "shared memory", "registers", "too many resources" once counted too,
# and a compile error that merely mentions shared memory then capped a knob it had nothing to do
# with. Matched against the lower-cased one-line message (``one_line``), so the ptxas phrases are
# the ones ``_ptxas_error`` keeps.
_RESOURCE_TEXT = re.compile("|".join([
    # Triton's OutOfResources.__str__: "out of resource: shared memory, Required: ..., Hardware limit: ..."
    r"out of resource",
    # CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, as Triton's launcher raises it: "Triton Error [CUDA]: too
    # many resources requested for launch" (registers per thread x threads exceed the SM's file)
    r"too many resources requested for launch",
    # ptxas: "ptxas error   : Entry function 'k' uses too much shared data (0x30000 bytes, 0xc000 max)"
    r"entry function '[^']*' uses too much shared data",
    # ptxas under a register cap (maxnreg) the kernel cannot fit: "ptxas fatal   : (C7600) Register
    # allocation failed with register count of '32'. Compile the program with a higher register target"
    r"register allocation failed with register count of",
]))
_PTXAS_LINE = re.compile(r"^ptxas .*?(line \d+); error\s*:\s*(.+)$")
# A ptxas error about the whole kernel has no line: "ptxas fatal   : (C7600) Register allocation ..."
_PTXAS_KERNEL_LINE = re.compile(r"^ptxas (?:error|fatal)\s*:\s*(.+)$")


class InputError(Exception):
    """A problem with what the user gave (a file, an option) whose message is the whole line."""


def one_line(exc: BaseException) -> str:
    """``Type: first line`` of ``exc`` (see the module doc); never raises, never spans lines."""
    if isinstance(exc, InputError):
        return _first_line(exc) or type(exc).__name__
    name = type(exc).__name__
    kind = compile_failure(exc)
    if kind == COMPILATION:
        return f"{name}: {_compilation_error(exc)}"
    if kind == PTXAS:
        return f"{name}: {_ptxas_error(_text(exc))}"
    if isinstance(exc, SyntaxError):
        return f"{name}: {exc.msg} (line {exc.lineno})"
    line = _first_line(exc)
    return f"{name}: {line}" if line else name


def compile_failure(exc: BaseException) -> str | None:
    """The kind of Triton compile failure ``exc`` itself is, by its class; None if it is none."""
    for cls in type(exc).__mro__:
        kind = _TRITON_CLASSES.get(f"{cls.__module__}.{cls.__qualname__}")
        if kind is not None:
            return kind
    return None


def caused_by(exc: BaseException, kind: str) -> bool:
    """Whether ``exc`` or an exception in its ``__cause__`` chain is a compile failure of ``kind``
    (a loader's ``raise LoadError(...) from OutOfResources(...)`` is still a resource failure)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        if compile_failure(link) == kind:
            return True
        link = link.__cause__
    return False


def resource_failure_text(message: str) -> bool:
    """Whether a failure message names an ``OutOfResources``.

    Only for messages that crossed a process boundary as text (a worker's ``Failure.message``,
    stored with the trial), where the exception object is gone: the worker's ``one_line`` keeps
    ``str(exc)``, which for an ``OutOfResources`` is Triton's own "out of resource: ..." (quoted
    too when another exception's message wraps it). The same limits reported by CUDA at launch
    and by ptxas at compile time count too, by the phrases of ``_RESOURCE_TEXT``. Anywhere the
    exception is at hand, ask ``caused_by(exc, RESOURCES)`` instead.
    """
    return _RESOURCE_TEXT.search(message.lower()) is not None


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:  # noqa: BLE001 - a broken __str__ must not hide the error it describes
        return ""


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in _text(exc).splitlines() if line.strip()]
    return lines[0] if lines else ""


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
    # else the first error about the whole kernel (the last, "Ptx assembly aborted", says nothing)
    for line in lines:
        match = _PTXAS_KERNEL_LINE.match(line)
        if match:
            return f"ptxas: {match.group(1)}"
    return (lines or ["ptxas failed"])[0]
