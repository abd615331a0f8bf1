"""The package's import graph: every import of one of its own modules, at module top or inside a function.

``python tests/support/import_graph.py`` prints the circles (modules that import each other, directly or through
others) and the imports that go against the layers; ``tests/test_layers.py`` asserts there are none.
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

PACKAGE = "spark_connect_bridge"
ROOT = Path(__file__).resolve().parents[2] / PACKAGE

# Each top-level folder (or module) of the package and its layer: a module may import its own layer and those below.
LAYERS = {
    "errors": 0, "version": 0,
    "core": 1, "jvm": 1,
    "config": 2,
    "converters": 3, "transforms": 3,
    "connectors": 4,
    "engine": 5,
    "bus": 6,
    "runtime": 7, "rest": 7,
    "cli": 8, "docs": 8,
}


def modules() -> dict[str, Path]:
    out = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports(name: str, path: Path, known: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports (anywhere in it except under ``if TYPE_CHECKING``)."""
    is_package = path.name == "__init__.py"
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.If) and "TYPE_CHECKING" in ast.unparse(child.test):
                continue
            if isinstance(child, ast.ImportFrom):
                if child.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    module = ".".join(base + ([child.module] if child.module else []))
                else:
                    module = child.module or ""
                for alias in child.names:
                    target = f"{module}.{alias.name}" if f"{module}.{alias.name}" in known else module
                    if target.startswith(PACKAGE) and target != name:
                        found.add(target)
            elif isinstance(child, ast.Import):
                found.update(a.name for a in child.names if a.name.startswith(PACKAGE + ".") and a.name != name)
            visit(child)

    visit(ast.parse(path.read_text()))
    return found


def graph() -> dict[str, set[str]]:
    known = modules()
    return {name: {t for t in imports(name, path, known) if t in known} for name, path in known.items()}


def circles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in g[v]:
            if w not in index:
                connect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(10_000)
    for v in g:
        if v not in index:
            connect(v)
    return found


def layer(module: str) -> int | None:
    parts = module.split(".")
    return LAYERS.get(parts[1]) if len(parts) > 1 else None


def against_layers(g: dict[str, set[str]]) -> list[str]:
    """Imports of a higher layer (or of the package root) from a lower one."""
    out = []
    for module, targets in sorted(g.items()):
        mine = layer(module)
        if mine is None:  # the package root: the public facade
            continue
        for target in sorted(targets):
            theirs = layer(target)
            if theirs is None or theirs > mine:
                out.append(f"{module} -> {target}")
    return out


if __name__ == "__main__":
    g = graph()
    for group in circles(g):
        print("circle:", ", ".join(group))
    for line in against_layers(g):
        print("against the layers:", line)
