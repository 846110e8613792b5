"""Issue 48, item 4: a tenant's `guardhook.io/max-disrupted-groups: "0"` blocked every drain of the
nodes its groups run on, unremarked. It is now a finding of `check` and `audit` (group-spec), and the
cluster admin's group-eviction `minMaxDisruptedGroups` is a floor the annotation cannot go below:
B = max(annotation, minimum). Evictions are the captured s07 one, against the sample fleet."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.commands.main import main
from guardhook.config import build_config

from conftest import load_review
from helpers import find, request_of

BUDGET = "guardhook.io/max-disrupted-groups"


def fleet_with_budget(value: str) -> list[dict[str, Any]]:
    objects = copy.deepcopy(embedded_fleet_objects())
    find(objects, "LeaderWorkerSet", "llm-xl")["metadata"].setdefault("annotations", {})[BUDGET] = value
    return objects


def evict(objects: list[dict[str, Any]], policies: dict[str, Any] | None = None) -> dict[str, Any]:
    config = build_config({"policies": policies or {}})
    engine = Engine(view_from_objects(objects), config, record=False)
    return dict(engine.judge(request_of(load_review("s07-eviction-worker.validating")), "validate").response)


def test_a_zero_budget_refuses_every_eviction_of_a_whole_group() -> None:
    response = evict(fleet_with_budget("0"))
    assert (response["allowed"], response["status"]["code"]) == (False, 429)


@pytest.mark.parametrize("minimum", [1, 2])
def test_the_cluster_minimum_raises_a_tenants_zero(minimum: int) -> None:
    policies = {"group-eviction": {"minMaxDisruptedGroups": minimum}}
    assert evict(fleet_with_budget("0"), policies)["allowed"] is True
    assert evict(fleet_with_budget("3"), policies)["allowed"] is True  # above it: the annotation's


def test_the_minimum_is_named_when_it_decides() -> None:
    # Group 1 broken and the minimum 1 over an annotation of 0: the 429 says where B came from.
    objects = fleet_with_budget("0")
    pod = find(objects, "Pod", "llm-xl-1-2")
    for condition in pod["status"]["conditions"]:
        if condition["type"] == "Ready":
            condition["status"] = "False"
    response = evict(objects, {"group-eviction": {"minMaxDisruptedGroups": 1}})
    assert response["status"]["code"] == 429
    assert "minMaxDisruptedGroups" in response["status"]["message"]


def test_the_minimum_must_be_a_whole_number() -> None:
    with pytest.raises(ValueError, match="minMaxDisruptedGroups"):
        build_config({"policies": {"group-eviction": {"minMaxDisruptedGroups": "one"}}})


def _lws_file(tmp_path: Path, value: str) -> Path:
    path = tmp_path / "state.yaml"
    path.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": fleet_with_budget(value)}))
    return path


def test_check_finds_a_zero_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    main(["check", str(_lws_file(tmp_path, "0"))])
    out = capsys.readouterr().out
    assert f'[group-spec] {BUDGET}: "0" lets no group be disrupted' in out
    main(["check", str(_lws_file(tmp_path, "1"))])
    assert "lets no group be disrupted" not in capsys.readouterr().out


def test_audit_finds_a_zero_budget(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["audit", "--cluster-state", str(_lws_file(tmp_path, "0"))]) == 0
    out = capsys.readouterr().out
    assert f'LeaderWorkerSet serve/llm-xl: Warn [group-spec] {BUDGET}: "0" lets no group be disrupted' in out


def test_the_minimum_raises_a_gangs_zero_too() -> None:
    # A Workload API gang's PodGroups annotated "0" (tests/group_shapes): the same minimum applies.
    import group_shapes as shapes

    from guardhook.ledger import MemoryLedger

    def first_eviction(policies: dict[str, Any]) -> dict[str, Any]:
        view = shapes.view(shapes.gang_objects(budget=0))
        engine = Engine(view, build_config({"policies": policies}), ledger=MemoryLedger())
        return dict(engine.judge(shapes.eviction_request("train-0-0", "train"), "validate").response)

    assert first_eviction({})["allowed"] is False
    assert first_eviction({"group-eviction": {"minMaxDisruptedGroups": 1}})["allowed"] is True
