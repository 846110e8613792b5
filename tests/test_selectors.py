"""Label selectors: object and string forms."""

from __future__ import annotations

import pytest

from guardhook.cluster.selectors import SelectorError, from_label_selector, from_map, matches, parse

LABELS = {"app": "llm", "tier": "gpu"}


def test_match_labels_and_expressions() -> None:
    selector = from_label_selector(
        {
            "matchLabels": {"app": "llm"},
            "matchExpressions": [
                {"key": "tier", "operator": "In", "values": ["gpu", "tpu"]},
                {"key": "canary", "operator": "DoesNotExist"},
                {"key": "zone", "operator": "NotIn", "values": ["a"]},
            ],
        }
    )
    assert matches(selector, LABELS)
    assert not matches(selector, {**LABELS, "canary": "1"})


def test_empty_selector_matches_everything_and_null_nothing() -> None:
    assert matches(from_label_selector({}), LABELS)
    assert not matches(from_label_selector(None), LABELS)


def test_string_form() -> None:
    selector = parse("app=llm, tier in (gpu,tpu),!canary,zone!=a,app")
    assert matches(selector, LABELS)
    assert not matches(parse("app==other"), LABELS)
    assert not matches(parse("tier notin (gpu)"), LABELS)


def test_service_selector_map() -> None:
    assert matches(from_map({"app": "llm"}), LABELS)
    assert not matches(from_map({"app": "llm", "role": "leader"}), LABELS)


@pytest.mark.parametrize("bad", ["a=b,(", "=x"])
def test_unparsable_strings_raise(bad: str) -> None:
    with pytest.raises(SelectorError):
        parse(bad)


def test_unknown_operator_raises() -> None:
    with pytest.raises(SelectorError):
        from_label_selector({"matchExpressions": [{"key": "a", "operator": "Near"}]})
