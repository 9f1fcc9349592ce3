"""Why a job in a worker did not produce a value, as data: a kind, one line, and the detail.

Kinds, and what the worker does after each:

==================  ======================================================  ===================
kind                what happened                                           worker afterwards
==================  ======================================================  ===================
``compile_error``   Triton rejected the kernel: ``CompilationError`` (and   reused
                    subclasses), ``PTXASError``, ``OutOfResources``; a
                    ``SyntaxError``/``ImportError`` from a candidate's
                    source; under ``TRITON_INTERPRET=1`` an
                    ``InterpreterError`` that is not an index fault
``runtime_fault``   the kernel faulted on the device: "CUDA error",         killed: a CUDA fault
                    "illegal memory access", "misaligned address", ...;     corrupts the context
                    ``torch.AcceleratorError``; under the interpreter an
                    out-of-bounds ``IndexError``
``timeout``         the job ran past its limit                              killed
``crash``           the child process died (signal or exit code)            killed (it is dead)
``error``           any other exception raised by the job                   reused
``unsafe``          a stored variant's source fails the allowlist           reused
                    (``allowlist.sandbox.Unsafe``): refused before it ran
``wrong_result``    reserved for verification, which sets it                (not a worker kind)
==================  ======================================================  ===================

``baseline_out_of_bounds`` is reserved for verification too: the captured launch itself wrote
outside its tensors (a guard margin changed), so no candidate can be compared with it safely.
So is ``ghost``: a run of the candidate launched no kernel of its name, so its outputs came from
somewhere else (a torch fallback, a cached result; ``tritune.replay.launches``).

An exception may name its own kind with a ``failure_kind`` attribute (a class attribute does
it for a whole class). Wrapped exceptions are classified through their ``__cause__`` chain:
the first link with a specific kind decides, so a loader's ``raise LoadError(...) from
SyntaxError`` is still a ``compile_error``.

This module imports neither torch nor Triton: classes are recognised by module and name, Triton's
through ``tritune.errors``, which owns the classification of compile errors.
"""

from __future__ import annotations

import dataclasses
import traceback
from typing import Any

from tritune import errors
from tritune.model.failures import COMPILE_ERROR, CRASH, ERROR, KINDS, RUNTIME_FAULT, TIMEOUT

# After these the child process is not trusted again (a CUDA fault leaves the context unusable).
RESTART_KINDS = frozenset({RUNTIME_FAULT, TIMEOUT, CRASH})

DETAIL_LINES = 20
_MESSAGE_CHARS = 240

_FAULT_CLASSES = {"torch.AcceleratorError"}
# Lower case; matched against the exception's text, because a device fault has no type of its own
# (a RuntimeError): Triton's launcher says "Triton Error [CUDA]: an illegal memory access was
# encountered", torch says "CUDA error: ..." (torch's AcceleratorError is recognised by type).
_FAULT_TEXT = (
    "cuda error",
    "triton error [cuda]",
    "illegal memory access",
    "misaligned address",
    "unspecified launch failure",
    "an illegal instruction",
    "device-side assert",
)
_INTERPRETER_FILE = "triton/runtime/interpreter.py"


@dataclasses.dataclass(frozen=True)
class Failure:
    kind: str
    message: str  # one short line
    detail: str = ""  # traceback tail, then the child's output tail where there is one

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"unknown failure kind {self.kind!r}; expected one of {KINDS}")

    @property
    def restarts_worker(self) -> bool:
        return self.kind in RESTART_KINDS

    def to_json(self) -> dict[str, str]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> "Failure":
        return cls(kind=data["kind"], message=data["message"], detail=data.get("detail", ""))


def from_exception(exc: BaseException) -> Failure:
    """The failure a job's exception stands for, with its message and traceback tail."""
    return Failure(classify(exc), shorten(errors.one_line(exc)), traceback_tail(exc))


def classify(exc: BaseException) -> str:
    """The failure kind of ``exc``, looking through its ``__cause__`` chain (see module doc)."""
    seen: set[int] = set()
    link: BaseException | None = exc
    while link is not None and id(link) not in seen:
        seen.add(id(link))
        kind = _own_kind(link)
        if kind != ERROR:
            return kind
        link = link.__cause__
    return ERROR


def _own_kind(exc: BaseException) -> str:
    declared = getattr(exc, "failure_kind", None)
    if declared in KINDS:
        return declared
    names = _class_names(exc)
    if names & _FAULT_CLASSES or _has_fault_text(exc):
        return RUNTIME_FAULT
    triton_kind = errors.compile_failure(exc)
    if triton_kind == errors.INTERPRETER:
        # The interpreter wraps whatever the kernel body raised: an index error is an access out
        # of bounds (a fault on a GPU); anything else is a kernel a GPU compile would reject.
        return RUNTIME_FAULT if isinstance(exc.__cause__, IndexError) else COMPILE_ERROR
    if triton_kind is not None:  # CompilationError, PTXASError, OutOfResources
        return COMPILE_ERROR
    if isinstance(exc, IndexError) and _raised_in_interpreter(exc):
        return RUNTIME_FAULT
    if isinstance(exc, SyntaxError):
        return COMPILE_ERROR
    # A missing package is the environment's problem, not the candidate's.
    if isinstance(exc, ImportError) and not isinstance(exc, ModuleNotFoundError):
        return COMPILE_ERROR
    return ERROR


def _class_names(exc: BaseException) -> set[str]:
    return {f"{cls.__module__}.{cls.__qualname__}" for cls in type(exc).__mro__}


def _has_fault_text(exc: BaseException) -> bool:
    try:
        text = str(exc).lower()
    except Exception:  # noqa: BLE001 - a broken __str__ must not break classification
        return False
    return any(marker in text for marker in _FAULT_TEXT)


def _raised_in_interpreter(exc: BaseException) -> bool:
    frames = traceback.extract_tb(exc.__traceback__)
    return any(frame.filename.replace("\\", "/").endswith(_INTERPRETER_FILE) for frame in frames)


def shorten(text: str, limit: int = _MESSAGE_CHARS) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def traceback_tail(exc: BaseException, lines: int = DETAIL_LINES) -> str:
    text = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
    return "\n".join(text.rstrip("\n").splitlines()[-lines:])
