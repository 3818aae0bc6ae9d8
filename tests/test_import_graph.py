"""No import cycle in python/aotgrad: the doors (api, dynamo, backends, inductor) sit above the
orchestrator (program), which sits above the stages; nothing imports back up.

The test reads the modules' import statements (no import runs): every ``import`` and
``from ... import`` of an aotgrad module at module level, ``if TYPE_CHECKING:`` blocks
excepted (they never run).
"""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "python" / "aotgrad"


def _modules() -> dict[str, Path]:
    out = {}
    for path in PACKAGE.rglob("*.py"):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _module_level(tree: ast.Module) -> list[ast.stmt]:
    """Statements that run at import: the top level, into if/try blocks (not functions,
    classes' methods, or ``if TYPE_CHECKING:``)."""
    out: list[ast.stmt] = []
    todo = list(tree.body)
    while todo:
        stmt = todo.pop()
        out.append(stmt)
        if isinstance(stmt, ast.If):
            if not (isinstance(stmt.test, ast.Name) and stmt.test.id == "TYPE_CHECKING"):
                todo += stmt.body
            todo += stmt.orelse
        elif isinstance(stmt, ast.Try):
            todo += stmt.body + stmt.orelse + stmt.finalbody
            for handler in stmt.handlers:
                todo += handler.body
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for stmt in _module_level(ast.parse(path.read_text())):
        if isinstance(stmt, ast.Import):
            found |= {a.name for a in stmt.names if a.name in modules}
        elif isinstance(stmt, ast.ImportFrom):
            if stmt.level:
                base = package.split(".")[: len(package.split(".")) - (stmt.level - 1)]
                source = ".".join(base + ([stmt.module] if stmt.module else []))
            else:
                source = stmt.module or ""
            for alias in stmt.names:
                sub = f"{source}.{alias.name}"
                if sub in modules:
                    found.add(sub)
                elif source in modules and alias.name != "_rust":
                    found.add(source)
    return found - {name}


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}  # 1: on the path, 2: done
    path: list[str] = []

    def visit(u: str) -> list[str] | None:
        state[u] = 1
        path.append(u)
        for v in sorted(graph[u]):
            if state.get(v) == 1:
                return [*path[path.index(v) :], v]
            if v not in state and (found := visit(v)):
                return found
        path.pop()
        state[u] = 2
        return None

    for u in sorted(graph):
        if u not in state and (found := visit(u)):
            return found
    return None


def test_no_import_cycle_in_the_package() -> None:
    modules = _modules()
    assert "aotgrad.api" in modules and "aotgrad.program" in modules
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    cycle = _cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_the_doors_sit_above_the_orchestrator() -> None:
    modules = _modules()
    graph = {name: _imports(name, path, modules) for name, path in modules.items()}
    assert "aotgrad.program" in graph["aotgrad.api"]
    assert "aotgrad.program" in graph["aotgrad.dynamo"]
    below = {"aotgrad.program", "aotgrad.trace", "aotgrad.table", "aotgrad.split", "aotgrad.cache"}
    doors = {"aotgrad.api", "aotgrad.dynamo", "aotgrad.backends", "aotgrad.inductor"}
    for name in graph:
        if name in below or name.startswith("aotgrad.trace."):
            assert not graph[name] & doors, f"{name} imports a door: {graph[name] & doors}"
