"""Where the documentation lives and GitHub's heading anchors, for the tests that read it."""

from __future__ import annotations

import re
from pathlib import Path

from conftest import REPO

README = REPO / "README.md"
DOCS = REPO / "docs"


def pages() -> list[Path]:
    """The README and every page under docs/."""
    return [README, *sorted(DOCS.glob("*.md"))]


def prose_lines(path: Path) -> list[str]:
    """The lines of a Markdown file outside fenced code blocks (``` ... ```)."""
    lines, fenced = [], False
    for line in path.read_text().splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(title: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation but - and _ dropped, spaces to -."""
    return re.sub(r"[^\w\- ]", "", title.strip().lower()).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file; a repeated heading gets -1, -2, ... as on GitHub."""
    seen: dict[str, int] = {}
    found = set()
    for line in prose_lines(path):
        if match := re.match(r"#{1,6} (.*)", line):
            base = slug(match.group(1))
            count = seen.get(base, 0)
            seen[base] = count + 1
            found.add(base if count == 0 else f"{base}-{count}")
    return found


def section(path: Path, heading: str) -> str:
    """The text under one heading (any level) up to the next heading of the same or a higher level."""
    text = path.read_text()
    level = len(heading) - len(heading.lstrip("#"))
    match = re.search(rf"^{re.escape(heading)}\n(.*?)(?=^#{{1,{level}}} |\Z)", text, re.M | re.S)
    assert match, f"{path.name} has no section {heading!r}"
    return match.group(1)
