"""Policy `group-spec`: an unreadable `guardhook.io/serving-pods` annotation is a warning."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from guardhook.admission.engine import Engine
from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.policies.group_spec import lint

from conftest import load_review

CLEAN = yaml.safe_load((Path(__file__).parent / "manifests" / "per-group-pdb" / "lws.yaml").read_text())
ANNOTATION = "guardhook.io/serving-pods"


def annotated(value: str) -> LeaderWorkerSet:
    obj = copy.deepcopy(CLEAN)
    obj["metadata"].setdefault("annotations", {})[ANNOTATION] = value
    return LeaderWorkerSet(obj)


@pytest.mark.parametrize("value", ["leaders", "all"])
def test_readable_values_are_clean(value: str) -> None:
    assert lint(annotated(value), 300) == []


@pytest.mark.parametrize("value", ["All", "every", "", "true"])
def test_unreadable_values_are_a_finding_naming_what_they_count_as(value: str) -> None:
    [finding] = lint(annotated(value), 300)
    assert f'{ANNOTATION}: "{value}"' in finding
    assert '"leaders" is used instead' in finding


def test_captured_lws_create_with_an_unreadable_value_is_allowed_with_the_warning() -> None:
    request = copy.deepcopy(load_review("s33-lws-create-fits.validating")["request"])
    request["object"]["metadata"].setdefault("annotations", {})[ANNOTATION] = "data-parallel"
    response = Engine(embedded_fleet_view(), record=False).judge(request).response
    assert response["allowed"] is True
    assert [w for w in response["warnings"] if w.startswith("[group-spec]") and ANNOTATION in w]
