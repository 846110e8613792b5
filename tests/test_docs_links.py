"""Every relative link and #anchor in README.md and docs/*.md resolves: the file exists and, for a
Markdown page, the anchor is one of its headings (GitHub's slugs). Links inside code are not links."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from docs_helpers import DOCS, README, anchors, pages, prose_lines, slug

from conftest import REPO

LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def links(path: Path) -> list[str]:
    """The link targets of a page, code spans removed first."""
    found = []
    for line in prose_lines(path):
        found += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return found


def broken(path: Path) -> list[str]:
    bad = []
    for target in links(path):
        if re.match(r"[a-z]+:", target):  # https:, mailto:
            continue
        file, _, anchor = target.partition("#")
        dest = (path.parent / file).resolve() if file else path
        if not dest.exists():
            bad.append(f"{target}: no such file")
        elif anchor and (dest.suffix != ".md" or anchor not in anchors(dest)):
            bad.append(f"{target}: no such heading")
    return bad


@pytest.mark.parametrize("page", pages(), ids=lambda p: str(p.relative_to(REPO)))
def test_every_relative_link_and_anchor_resolves(page: Path) -> None:
    assert not broken(page)


def test_the_readme_links_every_page_of_the_docs() -> None:
    linked = {t.partition("#")[0] for t in links(README)}
    assert {f"docs/{p.name}" for p in DOCS.glob("*.md")} <= linked


def test_the_checker_finds_a_broken_anchor_and_a_missing_file(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    (tmp_path / "other.md").write_text("# Other\n\n## A `b`: c (d)\n\n## A `b`: c (d)\n")
    page.write_text(
        "# T\n\n[ok](other.md#a-b-c-d) [ok2](other.md#a-b-c-d-1) [self](#t) [web](https://x.io/#y)\n"
        "[bad](other.md#nope) [gone](missing.md) `[code](nope.md)`\n"
        "```\n[fenced](nope.md)\n# not a heading\n```\n"
    )
    assert broken(page) == ["other.md#nope: no such heading", "missing.md: no such file"]
    assert slug("Logs: the decision log and `--log-format`") == "logs-the-decision-log-and---log-format"
