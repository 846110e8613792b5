"""Every third-party module the package imports, at module level or inside a function, is a runtime
dependency in pyproject.toml: `pip install .` (the README's set-up, the Dockerfile) installs only
those, so a module reachable only through the `test` extra fails in a real deployment."""

from __future__ import annotations

import ast
import importlib.metadata
import re
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def _imported_top_modules() -> set[str]:
    names: set[str] = set()
    for path in (ROOT / "guardhook").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                names.update(alias.name.split(".")[0] for alias in node.names)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
    return {n for n in names if n != "guardhook" and n not in sys.stdlib_module_names}


def _runtime_distributions() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return {_normalise(re.split(r"[<>=!~;\[ ]", spec, maxsplit=1)[0]) for spec in project["dependencies"]}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def test_every_third_party_import_is_a_runtime_dependency() -> None:
    declared = _runtime_distributions()
    owners = importlib.metadata.packages_distributions()
    missing = {}
    for module in sorted(_imported_top_modules()):
        distributions = {_normalise(d) for d in owners.get(module, [])}
        assert distributions, f"{module} is imported by guardhook but installed by no distribution"
        if not distributions & declared:
            missing[module] = sorted(distributions)
    assert not missing, f"imported by guardhook but only a test dependency (or none): {missing}"
