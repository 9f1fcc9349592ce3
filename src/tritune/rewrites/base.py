"""What every source rewrite rule shares: the kernel's source as a value, the rewrite a rule
returns, and byte-exact text edits.

A rule (one module of this package, registered in ``tritune.rewrites.RULES``) looks at one
``@triton.jit`` function of a source file and returns the rewrites it can make, each legal by the
rule's own analysis, or none. It never guesses: a construct it does not understand makes it
return nothing (with the reason, for ``tritune rewrites``), never an unsafe edit. Rules edit the
file's text at the AST's exact byte offsets (``Edit``), so every byte outside the rewritten spans
stays as it was: comments, quotes, the other kernels of the file.

A rewrite is one of three classes, which choose how verification compares it with the baseline:

    exact       bitwise identical results (the same operations on the same values in the same
                order): verified ``bitwise``
    tolerance   the same computation in another order or precision class (``tl.dot`` for a
                broadcast-sum): verified against the tolerance table
    fast_math   less accurate by design: only with ``--fast-math``, max relative error 1e-4
    tf32        fp32 factors rounded to tf32 in a dot: only with ``--fast-math``, against its own
                tolerance entry (``verify.tolerances.TF32``)

``KernelSource.noalias`` is True when the rule may assume that distinct pointer parameters never
point into the same memory (no-alias specialization: the applier checks the live arguments'
address ranges before it uses such a variant); rules whose legality needs it say so in
``Rewrite.assumes``.
"""

from __future__ import annotations

import ast
import dataclasses
import difflib
from typing import Any, Iterable, Protocol

from tritune.model.variant import NOALIAS  # an assumption a rewrite may need (``Rewrite.assumes``)

EXACT, TOLERANCE, FAST_MATH, TF32 = "exact", "tolerance", "fast_math", "tf32"
CLASSES = (EXACT, TOLERANCE, FAST_MATH, TF32)
OPT_IN = (FAST_MATH, TF32)  # classes proposed only with --fast-math


class NotRewritable(ValueError):
    """The rule does not apply; the message says why (shown by ``tritune rewrites --why``)."""


@dataclasses.dataclass(frozen=True)
class Edit:
    """Replace bytes ``start:end`` of the UTF-8 source with ``text``."""

    start: int
    end: int
    text: str


@dataclasses.dataclass(frozen=True)
class Knob:
    """A tuning knob a rewrite introduces: one of the rule's parameters (``Rule.apply`` takes it
    moved to another of ``values``), which the search walks once the rewrite is accepted."""

    name: str
    default: Any
    values: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class Rewrite:
    rule: str            # the rule's registry name, e.g. "pipeline-loop"
    exact: str           # one of CLASSES
    why: str             # one line: why it is legal here
    source: str          # the whole file, rewritten
    params: dict = dataclasses.field(default_factory=dict)   # the rule's parameters (JSON values)
    knobs: tuple[Knob, ...] = ()  # knobs it introduced
    assumes: tuple[str, ...] = ()  # e.g. (NOALIAS,): valid only while the assumption holds
    grid: dict | None = None  # how the rewritten kernel is launched (``Variant.grid``); None: as written

    @property
    def name(self) -> str:
        """One line for logs and variant names: the rule and its parameters."""
        args = ", ".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        noalias = "[noalias]" if NOALIAS in self.assumes else ""
        return f"{self.rule}{noalias}" + (f"({args})" if args else "")

    def diff(self, before: str, path: str = "kernel.py") -> str:
        return "".join(difflib.unified_diff(before.splitlines(keepends=True), self.source.splitlines(keepends=True),
                                            fromfile=f"a/{path}", tofile=f"b/{path}"))

    def to_json(self, before: str | None = None, path: str = "kernel.py") -> dict:
        body = {"rule": self.rule, "exact": self.exact, "why": self.why, "params": self.params,
                "knobs": [dataclasses.asdict(k) for k in self.knobs], "assumes": list(self.assumes)}
        if self.grid is not None:
            body["grid"] = self.grid
        if before is not None:
            body["diff"] = self.diff(before, path)
        return body


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """One ``@triton.jit`` function of a source file, parsed once for every rule."""

    text: str
    kernel: str                      # the function's name
    tree: ast.Module
    function: ast.FunctionDef
    language: frozenset[str]         # names ``triton.language`` is bound to (``tl``)
    noalias: bool = False            # distinct pointer parameters may be assumed not to overlap
    launch: dict | None = None       # facts of a captured launch when known (grid, constexprs, dtypes)

    @classmethod
    def parse(cls, text: str, kernel: str, *, noalias: bool = False, launch: dict | None = None) -> "KernelSource":
        try:
            tree = ast.parse(text)
        except SyntaxError as error:
            raise NotRewritable(f"the source does not parse: {error.msg} (line {error.lineno})") from None
        found = [n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == kernel]
        if len(found) != 1:
            raise NotRewritable(f"{len(found)} functions named {kernel} in the source")
        return cls(text, kernel, tree, found[0], frozenset(language_names(tree)), noalias, launch)

    @property
    def params(self) -> list[str]:
        args = self.function.args
        return [a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]]

    def constexpr_params(self) -> set[str]:
        """Parameters annotated ``tl.constexpr`` (or ``constexpr``)."""
        args = self.function.args
        return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]
                if a.annotation is not None and (dotted(a.annotation) or "").split(".")[-1] == "constexpr"}

    def language_alias(self) -> str | None:
        """How the file names ``triton.language`` in code a rule writes (``tl`` as usually
        imported; ``triton.language`` after a plain ``import triton``), or None."""
        found = imports(self.tree)
        bound = [name for name, origin in found if origin == "triton.language"]
        if bound:
            return min(bound, key=len)
        return "triton.language" if ("triton", "triton") in found else None

    def is_language(self, node: ast.AST, attr: str) -> bool:
        """Whether ``node`` is ``tl.<attr>`` (under any name ``triton.language`` is bound to)."""
        name = dotted(node)
        return name is not None and "." in name and name.rsplit(".", 1)[0] in self.language \
            and name.rsplit(".", 1)[1] == attr

    def calls(self, attr: str, within: ast.AST | None = None) -> list[ast.Call]:
        """Every ``tl.<attr>(...)`` call in the function (or in ``within``), in source order."""
        found = [n for n in ast.walk(within or self.function)
                 if isinstance(n, ast.Call) and self.is_language(n.func, attr)]
        return sorted(found, key=lambda n: (n.lineno, n.col_offset))

    def segment(self, node: ast.AST) -> str:
        return ast.get_source_segment(self.text, node) or ""

    def span(self, node: ast.AST) -> tuple[int, int]:
        """Byte offsets of ``node`` in the UTF-8 text (ast columns are byte offsets)."""
        offsets = line_offsets(self.text.encode())
        return (offsets[node.lineno - 1] + node.col_offset, offsets[node.end_lineno - 1] + node.end_col_offset)

    def line_start(self, lineno: int) -> int:
        return line_offsets(self.text.encode())[lineno - 1]

    def indent_of(self, node: ast.stmt) -> str:
        line = self.text.encode()[self.line_start(node.lineno):].split(b"\n", 1)[0].decode()
        return line[: len(line) - len(line.lstrip())]

    def edit(self, edits: Iterable[Edit]) -> str:
        """The text with ``edits`` applied (they must not overlap); every other byte kept."""
        data = self.text.encode()
        ordered = sorted(edits, key=lambda e: (e.start, e.end))
        for before, after in zip(ordered, ordered[1:]):
            if after.start < before.end:
                raise ValueError(f"overlapping edits at bytes {before.start}-{before.end} and {after.start}")
        for e in reversed(ordered):
            data = data[: e.start] + e.text.encode() + data[e.end:]
        return data.decode()


class Rule(Protocol):
    name: str       # registry name, "pipeline-loop"
    exact: str      # its class (one of CLASSES); a rule whose rewrites differ sets each Rewrite's

    def rewrites(self, kernel: KernelSource) -> list[Rewrite]:
        """The rewrites this rule proposes for ``kernel``, most promising first (a handful: each
        costs a build, a verification and a timing); raises ``NotRewritable`` with the reason
        when there is none."""
        ...

    def apply(self, kernel: KernelSource, params: dict) -> Rewrite:
        """The rewrite with these parameters (one of ``rewrites()``'s with a knob moved: the
        search walks a rule's parameters the way it walks a launch config); ``NotRewritable``
        when they are not legal here."""
        ...


# ------------------------------------------------------------------------------ AST helpers

def dotted(node: ast.AST) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        base = dotted(node.value)
        return f"{base}.{node.attr}" if base else None
    return None


def language_names(tree: ast.Module) -> set[str]:
    """Names ``triton.language`` is bound to in the file (``tl`` unless imported otherwise)."""
    names = {"triton.language"}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {a.asname for a in node.names if a.name == "triton.language" and a.asname}
        elif isinstance(node, ast.ImportFrom) and node.module == "triton":
            names |= {a.asname or a.name for a in node.names if a.name == "language"}
    return names if len(names) > 1 else names | {"tl"}


def imports(tree: ast.Module) -> list[tuple[str, str]]:
    """(bound name, full dotted origin) for every import of the file; a relative import's origin
    starts with its dots (``from . import helpers`` -> ``.helpers``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.asname or a.name.split(".")[0], a.name if a.asname else a.name.split(".")[0])
                      for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = "." * node.level + (node.module or "")
            found += [(a.asname or a.name, f"{module}.{a.name}" if node.module else f"{module}{a.name}")
                      for a in node.names]
    return found


def imported_names(tree: ast.Module) -> set[str]:
    """Names the file binds to modules or to things imported from them."""
    return {name for name, _ in imports(tree)}


def line_offsets(data: bytes) -> list[int]:
    """Byte offset of each line start (ast columns are UTF-8 byte offsets)."""
    offsets, total = [0], 0
    for line in data.splitlines(keepends=True):
        total += len(line)
        offsets.append(total)
    return offsets


def keyword(call: ast.Call, name: str, position: int | None = None) -> ast.expr | None:
    """The argument ``name`` of ``call``, by keyword or at ``position``."""
    for kw in call.keywords:
        if kw.arg == name:
            return kw.value
    if position is not None and len(call.args) > position:
        return call.args[position]
    return None


def names_in(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
