"""No import cycle among guardhook's modules, package `__init__` modules included (issue 47).

import-linter's `acyclic_siblings` contract (pyproject.toml) sees the cycles between sibling
packages and modules; it does not see a module that imports its own package by name — `from
guardhook.groups import kthena` inside `guardhook/groups/lws.py` runs through
`guardhook/groups/__init__.py`, which re-exports `resolve`, which imports `lws` again. This test
reads each module's import statements (the names as written, so such an import counts as one of
the package) and fails on any cycle, naming it."""

from __future__ import annotations

import ast
from pathlib import Path

import guardhook

ROOT = Path(guardhook.__file__).parent


def module_name(path: Path) -> str:
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(path): path for path in sorted(ROOT.rglob("*.py"))}


def imported(name: str, path: Path, known: set[str]) -> set[str]:
    """The guardhook modules `name` (at `path`) names in its import statements, at any depth (a
    function-local import runs too): `import a.b` names a.b, `from a import b` names a (whose
    `__init__` runs and hands b out) and a.b when b is a module."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return {m for m in found if m in known and m != name}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_package_inits_included() -> None:
    known = modules()
    graph = {name: imported(name, path, set(known)) for name, path in known.items()}
    assert cycles(graph) == []


def test_the_cycle_finder_sees_a_module_importing_its_own_package() -> None:
    graph = {
        "guardhook.groups": {"guardhook.groups.resolve"},
        "guardhook.groups.resolve": {"guardhook.groups.lws"},
        "guardhook.groups.lws": {"guardhook.groups", "guardhook.groups.kthena"},
        "guardhook.groups.kthena": set(),
    }
    assert cycles(graph) == [["guardhook.groups", "guardhook.groups.lws", "guardhook.groups.resolve"]]
