"""The licence (issue 22): Apache-2.0, as a LICENSE file and in the package metadata."""

from __future__ import annotations

import tomllib
from importlib.metadata import metadata

from conftest import REPO


def test_licence_file_is_the_apache_2_text() -> None:
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert text.lstrip().startswith("Apache License\n                           Version 2.0, January 2004")
    assert "END OF TERMS AND CONDITIONS" in text
    assert "http://www.apache.org/licenses/LICENSE-2.0" in text


def test_pyproject_and_installed_metadata_declare_apache_2() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["license"] == "Apache-2.0"
    assert project["license-files"] == ["LICENSE"]
    assert metadata("guardhook")["License-Expression"] == "Apache-2.0"
