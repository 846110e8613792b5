"""Node lifecycle conditions (KEP-5683, gate NodeLifecycleConditions, kubernetes PR #139993) in the
notions of a draining node and a going pod (issue 37 item 4): `MaintenancePlanned` makes a node
draining (group-capacity warns when a scale-up fits only there; drain-plan --draining plans it);
`DrainInProgress`, `Drained`, `MaintenanceInProgress` and `GracefulNodeShutdownInProgress` make a
worker DELETE there a budgeted drain delete and its pods going. The set is worker-delete's
`drainConditions`. Reviews are the captured s01 / s07 re-aimed at the sample fleet (pod
`llm-xl-G-W` on `gpu-node-(4G+W)`), conditions patched as a maintenance controller writes them;
each case with its control (the condition False, absent, or not configured)."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from eviction_helpers import eviction, find
from test_capacity_models import judge
from test_draining_going import KARPENTER, engine, fleet, respond, worker_delete

from guardhook.cluster.going import GOING_CONDITIONS, Going, draining
from guardhook.cluster.model import NodeRecord, PodRecord
from guardhook.cluster.view.static import view_from_objects
from guardhook.config import ConfigError, build_config
from guardhook.ledger import MemoryLedger
from guardhook.planning.drain import plan_drain

from gpu_cluster import lws_create, node_object

Objects = list[dict[str, Any]]
LIFECYCLE = ["MaintenancePlanned", *GOING_CONDITIONS]


def condition(node: str, kind: str, status: str = "True") -> Callable[[Objects], None]:
    """`kind` with `status` added to `node`'s status.conditions, as a maintenance controller
    patches node status (reason and message as KEP-5683 suggests: the actor and why)."""

    def edit(objects: Objects) -> None:
        conditions = find(objects, "Node", node).setdefault("status", {}).setdefault("conditions", [])
        conditions.append(
            {
                "type": kind,
                "status": status,
                "reason": "FirmwareUpgrade",
                "message": "set by example.com/maintenance-controller",
                "lastTransitionTime": "2026-12-05T03:00:00Z",
            }
        )

    return edit


def test_node_records_keep_their_true_conditions_but_ready() -> None:
    objects = fleet(condition("gpu-node-02", "DrainInProgress"), condition("gpu-node-02", "Drained", "False"))
    record = NodeRecord.from_object(find(objects, "Node", "gpu-node-02"))
    assert record.conditions == ("DrainInProgress",) and record.ready


@pytest.mark.parametrize("kind", LIFECYCLE)
def test_every_lifecycle_condition_makes_a_node_draining(kind: str) -> None:
    assert draining(
        NodeRecord.from_object(find(fleet(condition("gpu-node-02", kind)), "Node", "gpu-node-02"))
    ) == (f"node condition {kind}=True")
    control = NodeRecord.from_object(
        find(fleet(condition("gpu-node-02", kind, "False")), "Node", "gpu-node-02")
    )
    assert draining(control) == ""


@pytest.mark.parametrize("kind", LIFECYCLE)
def test_pods_are_going_under_a_drain_condition_but_not_a_planned_maintenance(kind: str) -> None:
    view = view_from_objects(fleet(condition("gpu-node-02", kind)))
    pod = PodRecord.from_object(find(fleet(), "Pod", "llm-xl-0-2"))
    why = Going(view).why(pod)
    if kind == "MaintenancePlanned":
        assert why == ""
    else:
        assert why == f"node gpu-node-02 condition {kind}=True"
    assert Going(view_from_objects(fleet(condition("gpu-node-02", kind, "False")))).why(pod) == ""


# ---- worker-delete: the maintenance controller's delete is a budgeted drain -----------------------


def test_a_worker_delete_on_a_maintenance_planned_node_is_a_budgeted_drain() -> None:
    ledger = MemoryLedger()
    objects = fleet(
        condition("gpu-node-02", "MaintenancePlanned"), condition("gpu-node-05", "MaintenancePlanned")
    )
    eng = engine(objects, ledger=ledger)
    first = respond(eng, worker_delete("llm-xl-0-2", KARPENTER))
    assert first["allowed"] is True, first
    assert "draining node gpu-node-02 (node condition MaintenancePlanned=True)" in first["warnings"][0]
    assert [(e.group, e.pod) for e in ledger.entries(("serve", "llm-xl"))] == [("0", "llm-xl-0-2")]
    second = respond(eng, worker_delete("llm-xl-1-1", KARPENTER))
    assert second["allowed"] is False and second["status"]["code"] == 429


def test_a_worker_delete_on_a_drain_in_progress_node_is_allowed_its_group_already_going() -> None:
    """Under DrainInProgress the node's pods are going: their group counts as broken already (in
    every budget), so deleting its worker is the drain going on, not a new disruption."""
    eng = engine(fleet(condition("gpu-node-02", "DrainInProgress")))
    assert respond(eng, worker_delete("llm-xl-0-2", KARPENTER))["allowed"] is True
    assert respond(eng, eviction("llm-xl-1-1"))["status"]["code"] == 429  # group 0 is down already


def test_control_the_same_delete_without_the_condition_is_a_single_worker_403() -> None:
    for edit in (lambda objects: None, condition("gpu-node-02", "DrainInProgress", "False")):
        denied = respond(engine(fleet(edit)), worker_delete("llm-xl-0-2", KARPENTER))
        assert denied["allowed"] is False and denied["status"]["code"] == 403


def test_drain_conditions_are_configurable() -> None:
    objects = fleet(condition("gpu-node-02", "MaintenancePlanned"))
    raw = {"policies": {"worker-delete": {"drainConditions": ["example.com/Decommissioning"]}}}
    assert respond(engine(objects, raw), worker_delete("llm-xl-0-2"))["status"]["code"] == 403
    custom = fleet(condition("gpu-node-02", "example.com/Decommissioning"))
    assert respond(engine(custom, raw), worker_delete("llm-xl-0-2"))["allowed"] is True
    with pytest.raises(ConfigError, match="drainConditions"):
        build_config({"policies": {"worker-delete": {"drainConditions": [""]}}})


def test_an_eviction_while_another_group_drains_under_a_condition_is_429_naming_it() -> None:
    objects = fleet(condition("gpu-node-06", "GracefulNodeShutdownInProgress"))
    denied = respond(engine(objects), eviction("llm-xl-0-3"))
    assert denied["status"]["code"] == 429
    assert "node gpu-node-06 condition GracefulNodeShutdownInProgress=True" in denied["status"]["message"]
    assert respond(engine(fleet(condition("gpu-node-06", "MaintenancePlanned"))), eviction("llm-xl-0-3"))[
        "allowed"
    ]


# ---- drain-plan --draining ----------------------------------------------------------------------------


def test_drain_plan_plans_nodes_with_a_maintenance_condition() -> None:
    objects = fleet(
        condition("gpu-node-02", "MaintenancePlanned"), condition("gpu-node-06", "DrainInProgress", "False")
    )
    plan = plan_drain(objects, None, {"maxDisruptedGroups": 1}).as_dict()
    assert plan["draining"] == {"gpu-node-02": "node condition MaintenancePlanned=True"}
    assert plan["nodes"] == ["gpu-node-02"]
    assert plan_drain(objects, None, {"maxDisruptedGroups": 1}, (), ()).as_dict()["nodes"] == []


def test_drain_plan_cli_reads_drain_conditions(tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    state.write_text(yaml.safe_dump_all(fleet(condition("gpu-node-05", "MaintenancePlanned"))))
    config = tmp_path / "config.yaml"

    def run(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "guardhook",
                "drain-plan",
                "--draining",
                "--cluster-state",
                str(state),
                *extra,
            ],
            capture_output=True,
            text=True,
            check=False,
        )

    assert "gpu-node-05" in run().stdout
    config.write_text("policies:\n  worker-delete:\n    drainConditions: [DrainInProgress]\n")
    assert "gpu-node-05" not in run("--config", str(config)).stdout


# ---- group-capacity: a scale-up that fits only on a node about to go -------------------------------


def _nodes(conditions: dict[str, str]) -> Objects:
    out = []
    for i in range(3):
        obj = node_object(f"n{i}", {"cpu": "96", "memory": "2000Gi", "pods": "110", "nvidia.com/gpu": "8"})
        if f"n{i}" in conditions:
            obj["status"]["conditions"].append({"type": conditions[f"n{i}"], "status": "True"})
        out.append(obj)
    return out


def test_a_scale_up_that_fits_only_on_a_maintenance_planned_node_is_warned() -> None:
    response = judge(_nodes({"n2": "MaintenancePlanned"}), lws_create(replicas=3, size=1))
    assert response["allowed"] is True
    assert any(
        "fit only with cordoned, NotReady or draining nodes" in w for w in response.get("warnings", [])
    )


def test_control_the_same_scale_up_with_room_elsewhere_or_no_condition_is_silent() -> None:
    assert not judge(_nodes({}), lws_create(replicas=3, size=1)).get("warnings")
    assert not judge(_nodes({"n2": "MaintenancePlanned"}), lws_create(replicas=2, size=1)).get("warnings")
