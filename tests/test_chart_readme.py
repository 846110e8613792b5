"""charts/guardhook/README.md's table lists every value of values.yaml with its default (issue
49): a leaf is a value whose schema entry has no `properties` to descend into, or an empty map."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from typing import Any

import yaml
from helm_chart import CHART


def leaves(value: Any, schema: dict[str, Any], path: list[str]) -> Iterator[tuple[str, Any]]:
    if isinstance(value, dict) and value and "properties" in schema:
        for key, sub in value.items():
            yield from leaves(sub, schema["properties"].get(key, {}), [*path, key])
    else:
        yield ".".join(path), value


def documented() -> dict[str, str]:
    """The table's rows: value -> its default, as written."""
    text = (CHART / "README.md").read_text().split("## Every value", 1)[1].split("\n## ", 1)[0]
    return dict(re.findall(r"^\| `([^`]+)` \| `([^`]*)` \|", text, re.M))


def test_the_readme_table_lists_every_value_with_its_default() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    schema = json.loads((CHART / "values.schema.json").read_text())
    expected = dict(leaves(values, schema, []))
    rows = documented()
    assert sorted(set(expected) - set(rows)) == [], "values missing from charts/guardhook/README.md"
    assert sorted(set(rows) - set(expected)) == [], "rows for values that do not exist"
    for name, default in expected.items():
        assert json.loads(rows[name]) == default, name
