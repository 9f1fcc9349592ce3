"""The import graph follows the floors: a room (a folder of ``tritune``, or a top-level module)
imports only rooms below it, and no files import each other in a circle.

``FLOORS`` is the house plan, bottom first (docs/architecture.md draws it). Each import of a
``tritune`` module, at the top of a file or inside a function, is an arrow from the importing
file's room to the imported one's; the arrow must point to a room listed earlier (or the same
room). The one exception is the ``tritune`` package itself, a facade whose ``enable``/``disable``
load ``tritune.apply`` on first use. A new circle or an arrow that runs back up fails here, with
the files that make it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src" / "tritune"

FLOORS: tuple[tuple[str, ...], ...] = (
    ("config", "errors", "secrets", "version"),  # the ground: settings, error classes, scrubbing
    ("model",),  # the stage contracts: LaunchSpec, Variant, Trial, DecisionKey, Target, Timing, results
    ("kernel_facts", "ir", "_inductor_shim", "imports", "gpu", "resources", "boot"),  # kernels, IR, the machine
    ("passes", "rewrites", "compiler", "aliasing", "allowlist", "analyze"),  # IR passes, source rules, the allowlist
    ("capture",),  # the user's launches, as LaunchSpecs
    ("worker", "replay"),  # isolated processes (the jail), and rebuilding a launch as a variant
    ("bench", "verify", "profile", "store"),  # timing, checking, profiling, the decision store
    ("search", "arbiter", "apply", "report", "inductor"),  # proposals, judgement, run-time application
    ("llm",),  # the optional model family
    ("loop",),  # the optimization loop and its sessions
    ("generate",),  # fused kernels from a PyTorch spec
    ("commands", "cli", "__main__"),  # the command line
)
ROOMS = [room for floor in FLOORS for room in floor]
RANK = {room: index for index, room in enumerate(ROOMS)}
FACADE = "tritune"


def modules() -> dict[str, Path]:
    found = {}
    for path in SRC.rglob("*.py"):
        parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join(parts)] = path
    return found


def room(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else FACADE


def imports(module: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The tritune modules ``module`` imports, anywhere in the file (the closest known module of
    each dotted name: ``from tritune.store import DecisionStore`` is ``tritune.store``)."""
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]

    def closest(name: str) -> str | None:
        while name and name not in known:
            name = name.rpartition(".")[0]
        return name or None

    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = package
                for _ in range(node.level - 1):
                    parent = parent.rpartition(".")[0]
                base = f"{parent}.{base}" if base else parent
            names = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in known else base for alias in node.names]
        for name in names:
            if name == "tritune" or name.startswith("tritune."):
                target = closest(name)
                if target and target != module:
                    found.add(target)
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {module: imports(module, path, known) for module, path in known.items()}


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on.add(node)
        for other in sorted(edges.get(node, ())):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in on:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            part = []
            while True:
                other = stack.pop()
                on.discard(other)
                part.append(other)
                if other == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def test_every_room_is_on_a_floor():
    rooms = {room(module) for module in modules()} - {FACADE}
    assert sorted(rooms - set(ROOMS)) == [], "a new folder or top-level module: give it a floor in FLOORS"
    assert sorted(set(ROOMS) - rooms) == [], "FLOORS names a room that no longer exists"


def upward(edges: dict[str, set[str]]) -> list[str]:
    """The imports that run up a floor (the facade's own lazy ones aside)."""
    return sorted(f"{module} -> {target}" for module, targets in edges.items() if module != FACADE
                  for target in targets if room(target) != FACADE and RANK[room(target)] > RANK[room(module)])


def into_facade(edges: dict[str, set[str]]) -> list[str]:
    return sorted(f"{module} -> tritune" for module, targets in edges.items() if FACADE in targets)


def model_leaks(edges: dict[str, set[str]]) -> list[str]:
    """The model floor's imports of anything above the ground."""
    allowed = set(FLOORS[0]) | {"model"}
    return sorted(f"{module} -> {target}" for module, targets in edges.items() if room(module) == "model"
                  for target in targets if room(target) not in allowed)


def test_imports_only_run_down():
    assert upward(graph()) == []


def test_only_the_facade_is_imported_as_tritune():
    """``from tritune import x`` of anything but a module would load the facade from below."""
    assert into_facade(graph()) == []


def test_no_circles():
    assert circles(graph()) == []


def test_the_model_floor_imports_only_the_ground():
    assert model_leaks(graph()) == []


def test_the_checks_find_what_is_planted():
    planted = {"tritune.store.db": {"tritune.loop.kernel", "tritune.config"},  # up two floors
               "tritune.loop.kernel": {"tritune.store.db"},  # down: fine
               "tritune.model.key": {"tritune.secrets", "tritune.capture.spec"},  # the ground, and above it
               "tritune.report.load": {"tritune"},  # the facade from below
               "tritune": {"tritune.apply"}}  # the facade's own lazy import: fine
    assert upward(planted) == ["tritune.model.key -> tritune.capture.spec", "tritune.store.db -> tritune.loop.kernel"]
    assert model_leaks(planted) == ["tritune.model.key -> tritune.capture.spec"]
    assert into_facade(planted) == ["tritune.report.load -> tritune"]


@pytest.mark.parametrize("edges, expected", [
    ({"a": {"b"}, "b": {"a"}}, [["a", "b"]]),
    ({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}, [["a", "b", "c"]]),
    ({"a": {"b"}, "b": set()}, []),
])
def test_circles_are_found(edges, expected):
    assert circles(edges) == expected


def test_an_upward_import_is_found(tmp_path):
    """The graph reads lazy imports and relative ones: planted in a copy of two files."""
    package = tmp_path / "tritune"
    (package / "store").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "store" / "__init__.py").write_text("")
    (package / "store" / "db.py").write_text("def f():\n    from ..loop import kernel\n")
    (package / "loop").mkdir()
    (package / "loop" / "__init__.py").write_text("")
    (package / "loop" / "kernel.py").write_text("from tritune.store import db\n")
    known = {"tritune": package / "__init__.py", "tritune.store": package / "store" / "__init__.py",
             "tritune.store.db": package / "store" / "db.py", "tritune.loop": package / "loop" / "__init__.py",
             "tritune.loop.kernel": package / "loop" / "kernel.py"}
    edges = {module: imports(module, path, known) for module, path in known.items()}
    assert edges["tritune.store.db"] == {"tritune.loop.kernel"}
    assert edges["tritune.loop.kernel"] == {"tritune.store.db"}
    assert circles(edges) == [["tritune.loop.kernel", "tritune.store.db"]]
    assert upward(edges) == ["tritune.store.db -> tritune.loop.kernel"]


LONGEST = 100  # lines of one function, its decorators aside: one that needs more is several steps, each with a name


def long_functions(text: str, where: str = "") -> list[str]:
    return [f"{where}{node.name}: {node.end_lineno - node.lineno + 1} lines" for node in ast.walk(ast.parse(text))
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            and node.end_lineno - node.lineno + 1 > LONGEST]


def test_no_function_is_longer_than_a_page():
    found = [line for path in sorted(SRC.rglob("*.py"))
             for line in long_functions(path.read_text(encoding="utf-8"), f"{path.relative_to(SRC)}:")]
    assert found == []


def test_a_long_function_is_found():
    def text(lines: int) -> str:
        return "class C:\n    def f(self):\n" + "        x = 1\n" * (lines - 1)

    assert long_functions(text(LONGEST)) == []
    assert long_functions(text(LONGEST + 1)) == ["f: 101 lines"]
