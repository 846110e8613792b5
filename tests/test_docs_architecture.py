"""docs/architecture.md's layer diagram is the import-linter layers contract of pyproject.toml:
the same packages, in the same rows, in the same order (and pyproject points at that page)."""

from __future__ import annotations

import re
import tomllib

from docs_helpers import DOCS, section

from conftest import REPO


def documented_layers() -> list[str]:
    """The diagram's first column, continuation lines (indented) joined to their row."""
    block = section(DOCS / "architecture.md", "## Layers").split("```")[1]
    rows: list[str] = []
    for line in block.strip("\n").splitlines():
        cell = line[:22].strip()
        if line.startswith("  ") and rows:
            rows[-1] += " " + cell
        else:
            rows.append(cell)
    return [" | ".join(p.strip() for p in row.split("|") if p.strip()) for row in rows]


def test_the_diagram_lists_the_layers_of_the_contract() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())
    (layers,) = [c for c in config["tool"]["importlinter"]["contracts"] if c["type"] == "layers"]
    expected = [re.sub(r"guardhook\.", "", layer) for layer in layers["layers"]]
    assert documented_layers() == expected


def test_pyproject_points_at_a_page_that_exists() -> None:
    text = (REPO / "pyproject.toml").read_text()
    assert "DEVELOPERS.md" not in text
    assert "docs/architecture.md" in text and (DOCS / "architecture.md").exists()
