"""The import graph of pgfl drawn from the code (``ast``), and the layers it must respect.

Every ``import`` counts: at module level, inside functions and under ``TYPE_CHECKING``, so
a function-local import cannot hide a circle. ``python tests/import_graph.py`` prints each
module's floor and its imports, then any circle or import that goes up a floor;
``tests/test_structure.py`` asserts there is none. The floors are the layers drawn in
ARCHITECTURE.md: a module imports only from its own floor or below.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

#: Module (or package) prefix → floor; the longest matching prefix wins.
FLOORS = {
    "pgfl.validation": 1,
    "pgfl.rng": 1,
    "pgfl.files": 1,
    "pgfl.folders": 1,
    "pgfl.workers": 1,
    "pgfl.extras": 1,
    "pgfl.param": 1,
    "pgfl.general": 1,
    "pgfl.resources": 1,
    "pgfl.style": 1,
    "pgfl.topology": 2,
    "pgfl.data": 2,
    "pgfl.problems": 2,
    "pgfl.models": 2,
    "pgfl.privacy": 3,
    "pgfl.params": 4,
    "pgfl.engine": 5,
    "pgfl.plots": 5,
    "pgfl.experiments": 6,
    "pgfl.graphlearn": 6,
    "pgfl.bench": 6,
    "pgfl.backends": 7,
    "pgfl.deploy": 7,
    "pgfl.apps": 8,
    "pgfl.commands": 9,
    "pgfl.cli": 10,
    "pgfl": 11,
}


def modules(src: Path = SRC) -> dict[str, Path]:
    """Every module of the package by dotted name (a package by its ``__init__``)."""
    out = {}
    for path in sorted((src / "pgfl").rglob("*.py")):
        name = ".".join(path.relative_to(src).with_suffix("").parts)
        out[name.removesuffix(".__init__")] = path
    return out


def floor(module: str) -> int:
    """The floor of a module: its longest prefix in :data:`FLOORS`."""
    parts = module.split(".")
    for k in range(len(parts), 0, -1):
        if ".".join(parts[:k]) in FLOORS:
            return FLOORS[".".join(parts[:k])]
    raise KeyError(f"{module} has no floor in FLOORS")


def _resolve(name: str, mods: dict[str, Path]) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def imports(mods: dict[str, Path] | None = None) -> dict[str, set[str]]:
    """Module → the package's modules it imports (every import statement counts)."""
    mods = modules() if mods is None else mods
    edges: dict[str, set[str]] = defaultdict(set)
    for m, path in mods.items():
        base = m if path.name == "__init__.py" else m.rpartition(".")[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                stem = node.module or ""
                if node.level:
                    b = base
                    for _ in range(node.level - 1):
                        b = b.rpartition(".")[0]
                    stem = f"{b}.{node.module}" if node.module else b
                subs = [f"{stem}.{a.name}" for a in node.names]
                # ``from a.b import c``: the module a.b.c if c is one, else a.b itself
                targets = [t for t in subs if t in mods]
                targets += [stem] if any(t not in mods for t in subs) else []
            else:
                continue
            for t in targets:
                r = _resolve(t, mods) if t.startswith("pgfl") else None
                if r is not None and r != m:
                    edges[m].add(r)
    return dict(edges)


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]
    sys.setrecursionlimit(10000)

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(set(edges) | {w for ws in edges.values() for w in ws}):
        if v not in index:
            visit(v)
    return out


def upward(edges: dict[str, set[str]]) -> list[tuple[str, str]]:
    """Imports that go up a floor: ``(importer, imported)``.

    A package's ``__init__`` may import its own modules (its public face).
    """
    bad = []
    for m, targets in edges.items():
        for t in targets:
            if t.startswith(m + ".") or floor(t) <= floor(m):
                continue
            bad.append((m, t))
    return sorted(bad)


def main() -> None:
    edges = imports()
    for m in sorted(modules(), key=lambda m: (floor(m), m)):
        print(f"{floor(m):2d} {m}: {', '.join(sorted(edges.get(m, ())))}")
    for c in circles(edges):
        print("circle:", ", ".join(c))
    for m, t in upward(edges):
        print(f"upward: {m} (floor {floor(m)}) imports {t} (floor {floor(t)})")


if __name__ == "__main__":
    main()
