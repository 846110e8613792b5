"""Node lifecycle conditions (KEP-5683, gate NodeLifecycleConditions, kubernetes PR #139993) in the
notions of a draining node and a going pod (issue 37 item 4): `MaintenancePlanned` makes a node
draining (group-capacity warns when a scale-up fits only there; drain-plan --draining plans it);
`DrainInProgress`, `Drained`, `MaintenanceInProgress` and `GracefulNodeShutdownInProgress` make a
worker DELETE there a budgeted drain delete (issue 47: a condition never spends the budget itself;
only `GracefulNodeShutdownInProgress`, which the kubelet acts on alone, makes the node's pods going);
a maintenance condition left True on a node the scheduler has placed pods on since is stale and
ignored. The set is worker-delete's `drainConditions`. Reviews are the captured s01 / s07
re-aimed at the sample fleet (pod `llm-xl-G-W` on `gpu-node-(4G+W)`), conditions patched as a
maintenance controller writes them; each case with its control (the condition False,
absent, or not configured)."""

from __future__ import annotations

import copy
import json
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

from guardhook.cluster.going import DRAIN_CONDITIONS, GOING_CONDITIONS, Going, draining, stale_in_view
from guardhook.cluster.model import NodeRecord, PodRecord
from guardhook.cluster.view.static import view_from_objects
from guardhook.config import ConfigError, build_config
from guardhook.ledger import MemoryLedger
from guardhook.planning.drain import plan_drain

from gpu_cluster import lws_create, node_object

Objects = list[dict[str, Any]]
LIFECYCLE = list(DRAIN_CONDITIONS)
ADMIN_SET = [c for c in LIFECYCLE if c not in GOING_CONDITIONS]


def condition(
    node: str, kind: str, status: str = "True", since: str = "2026-12-05T03:00:00Z"
) -> Callable[[Objects], None]:
    """`kind` with `status` added to `node`'s status.conditions, as a maintenance controller
    patches node status (reason and message as KEP-5683 suggests: the actor and why), True since
    `since` (the fleet's pods were created on 2026-11-29)."""

    def edit(objects: Objects) -> None:
        conditions = find(objects, "Node", node).setdefault("status", {}).setdefault("conditions", [])
        conditions.append(
            {
                "type": kind,
                "status": status,
                "reason": "FirmwareUpgrade",
                "message": "set by example.com/maintenance-controller",
                "lastTransitionTime": since,
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
def test_pods_are_going_only_under_graceful_shutdown(kind: str) -> None:
    """The kubelet stops the pods of a node in graceful shutdown itself; under a maintenance
    condition the pods leave only through evictions and deletes the webhook budgets."""
    view = view_from_objects(fleet(condition("gpu-node-02", kind)))
    pod = PodRecord.from_object(find(fleet(), "Pod", "llm-xl-0-2"))
    why = Going(view).why(pod)
    if kind in GOING_CONDITIONS:
        assert why == f"node gpu-node-02 condition {kind}=True"
    else:
        assert why == ""
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


@pytest.mark.parametrize("kind", ADMIN_SET)
def test_a_worker_delete_on_a_node_under_a_maintenance_condition_is_a_budgeted_drain(kind: str) -> None:
    """The condition says the node is being emptied; it does not break the node's groups: the
    first delete is within the budget (and recorded), a second group's is 429."""
    ledger = MemoryLedger()
    eng = engine(fleet(condition("gpu-node-02", kind), condition("gpu-node-05", kind)), ledger=ledger)
    assert respond(eng, worker_delete("llm-xl-0-2", KARPENTER))["allowed"] is True
    assert [e.pod for e in ledger.entries(("serve", "llm-xl"))] == ["llm-xl-0-2"]
    assert respond(eng, worker_delete("llm-xl-1-1", KARPENTER))["status"]["code"] == 429


@pytest.mark.parametrize("kind", ADMIN_SET)
def test_a_drain_of_two_nodes_under_a_condition_gets_its_429_as_without_it(kind: str) -> None:
    """`kubectl drain --report-node-conditions` sets DrainInProgress on each node it drains: two
    nodes holding workers of groups 0 and 1 of one LWS, a budget of 1. The condition must not count
    the groups broken (that let both evictions through); the second group's eviction is 429, as it
    is for the same drain without the condition."""
    for edits in ((), (condition("gpu-node-03", kind), condition("gpu-node-07", kind))):
        eng = engine(fleet(*edits))
        assert respond(eng, eviction("llm-xl-0-3"))["allowed"] is True
        denied = respond(eng, eviction("llm-xl-1-3"))
        assert denied["allowed"] is False and denied["status"]["code"] == 429, (edits, denied)


def test_a_condition_spends_no_budget_before_any_eviction() -> None:
    eng = engine(fleet(condition("gpu-node-02", "DrainInProgress")))
    assert respond(eng, eviction("llm-xl-1-1"))["allowed"] is True  # group 0 is not counted broken


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


# ---- stale conditions: left True after the maintenance ------------------------------------------------

BEFORE_THE_PODS = "2026-11-20T00:00:00Z"  # the fleet's pods were created on 2026-11-29


@pytest.mark.parametrize("kind", ADMIN_SET)
def test_a_condition_older_than_the_pods_on_a_schedulable_node_is_stale_and_ignored(kind: str) -> None:
    """Left True on an uncordoned, untainted node whose pods were created after it: the groups there
    are not broken (evictions of other groups pass), and a single-worker DELETE there is the 403 it
    is on any node, not a budgeted drain."""
    objects = fleet(condition("gpu-node-02", kind, since=BEFORE_THE_PODS))
    view = view_from_objects(objects)
    assert draining(view.node("gpu-node-02"), view=view) == ""  # type: ignore[arg-type]
    stale = stale_in_view(view)
    assert [(s.node, s.condition, s.since_text) for s in stale] == [("gpu-node-02", kind, BEFORE_THE_PODS)]
    assert stale[0].pod == "serve/llm-xl-0-2"
    eng = engine(objects)
    assert respond(eng, eviction("llm-xl-1-1"))["allowed"] is True
    denied = respond(eng, worker_delete("llm-xl-0-2", KARPENTER))
    assert denied["allowed"] is False and denied["status"]["code"] == 403


@pytest.mark.parametrize(
    "edit",
    [
        lambda o: find(o, "Node", "gpu-node-02").setdefault("spec", {}).update(unschedulable=True),
        lambda o: (
            find(o, "Node", "gpu-node-02")
            .setdefault("spec", {})
            .update(taints=[{"key": "karpenter.sh/disrupted", "effect": "NoSchedule"}])
        ),
        lambda o: o.remove(find(o, "Pod", "llm-xl-0-2")),
    ],
    ids=["cordoned", "drain-taint", "no-pod"],
)
def test_control_a_condition_is_not_stale_on_a_cordoned_tainted_or_empty_node(edit: Any) -> None:
    objects = fleet(condition("gpu-node-02", "DrainInProgress", since=BEFORE_THE_PODS), edit)
    view = view_from_objects(objects)
    assert stale_in_view(view) == []
    assert draining(view.node("gpu-node-02"), view=view) != ""  # type: ignore[arg-type]


def test_control_a_condition_newer_than_the_pods_is_not_stale() -> None:
    view = view_from_objects(fleet(condition("gpu-node-02", "DrainInProgress")))
    assert stale_in_view(view) == []
    assert draining(view.node("gpu-node-02"), view=view) == "node condition DrainInProgress=True"  # type: ignore[arg-type]


def test_a_daemonset_pod_created_after_the_condition_is_no_evidence() -> None:
    def daemon_pod(objects: Objects) -> None:
        pod = copy.deepcopy(find(objects, "Pod", "llm-xl-0-2"))
        pod["metadata"].update(name="node-exporter-x", labels={}, creationTimestamp="2026-12-06T00:00:00Z")
        pod["metadata"]["ownerReferences"] = [
            {
                "apiVersion": "apps/v1",
                "kind": "DaemonSet",
                "name": "node-exporter",
                "uid": "u",
                "controller": True,
            }
        ]
        objects.append(pod)
        objects.remove(find(objects, "Pod", "llm-xl-0-2"))

    view = view_from_objects(fleet(condition("gpu-node-02", "DrainInProgress"), daemon_pod))
    assert stale_in_view(view) == []


def test_audit_and_drain_plan_name_a_stale_condition(tmp_path: Path) -> None:
    state = tmp_path / "state.yaml"
    objects = fleet(condition("gpu-node-05", "DrainInProgress", since=BEFORE_THE_PODS))
    state.write_text(yaml.safe_dump_all(objects))
    want = {
        "node": "gpu-node-05",
        "condition": "DrainInProgress",
        "since": BEFORE_THE_PODS,
        "pod": "serve/llm-xl-1-1",
    }
    for command in (["audit"], ["drain-plan", "gpu-node-05"]):
        base = [sys.executable, "-m", "guardhook", *command, "--cluster-state", str(state)]
        text = subprocess.run(base, capture_output=True, text=True, check=False)
        line = next(line for line in text.stdout.splitlines() if "is stale" in line)
        assert f"condition DrainInProgress=True since {BEFORE_THE_PODS}" in line, text.stdout
        assert "serve/llm-xl-1-1" in line
        out = subprocess.run([*base, "--format", "json"], capture_output=True, text=True, check=False)
        assert json.loads(out.stdout)["staleConditions"] == [want], out.stderr
    # drain-plan does not take the node as draining already (the condition is stale).
    assert plan_drain(objects, ["gpu-node-05"], {"maxDisruptedGroups": 1}).as_dict()["draining"] == {}
