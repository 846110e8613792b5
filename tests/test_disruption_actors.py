"""worker-delete and group-eviction against the other actors that disrupt a group: pods already
marked DisruptionTarget / TerminationTarget, Kueue's controller, delete-based drains of cordoned
nodes, and the restart advice. Judged by the engine (no HTTP) on views derived from the fleet."""

from __future__ import annotations

from typing import Any

import pytest
from eviction_helpers import engine, eviction, find, fleet_objects, judge

from guardhook.admission.engine import Engine
from guardhook.cluster.view.store import NODES, PODS, ClusterView
from guardhook.config import DEFAULT_EXEMPT_USERS, build_config
from guardhook.ledger import LedgerError, MemoryLedger

from conftest import load_review
from helpers import fleet_view, request_of

REASONS = [
    ("DisruptionTarget", "PreemptionByScheduler", "system:kube-scheduler"),
    ("DisruptionTarget", "DeletionByTaintManager", "system:serviceaccount:kube-system:node-controller"),
    (
        "DisruptionTarget",
        "DeletionByDeviceTaintManager",
        "system:serviceaccount:kube-system:device-taint-eviction-controller",
    ),
    ("DisruptionTarget", "DeletionByPodGC", "system:serviceaccount:kube-system:pod-garbage-collector"),
    ("DisruptionTarget", "TerminationByKubelet", "system:node:gpu-node-02"),
    ("DisruptionTarget", "EvictionByEvictionAPI", "kubernetes-admin"),
    ("TerminationTarget", "StoppedByKueue", "kubernetes-admin"),
]


def worker_delete(user: str = "kubernetes-admin") -> dict[str, Any]:
    """s01 (admin deletes worker llm-xl-0-2 of whole group 0, on gpu-node-02) as `user`."""
    request = request_of(load_review("s01-worker-delete.validating"))
    request["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    return request


def mark(pod: dict[str, Any], condition: str, reason: str, status: str = "True") -> None:
    pod["status"]["conditions"].append(
        {"type": condition, "status": status, "reason": reason, "lastTransitionTime": "2026-12-01T10:00:00Z"}
    )


def cordoned(*nodes: str, edit: Any = None) -> ClusterView:
    """The fleet with `nodes` unschedulable (as `kubectl cordon` leaves them)."""

    def apply(objects: list[dict[str, Any]]) -> None:
        for name in nodes:
            find(objects, "Node", name)["spec"]["unschedulable"] = True
        if edit is not None:
            edit(objects)

    return fleet_view(apply)


def drain_delete(pod: str, node: str, dry_run: bool = False) -> dict[str, Any]:
    """s01 re-aimed at fleet worker `pod` (its stored object, uid included, as `oldObject`), which
    the fleet binds to `node`: what `kubectl drain --disable-eviction` sends."""
    request = worker_delete()
    request["name"] = pod
    request["oldObject"] = find(fleet_objects(), "Pod", pod)
    assert request["oldObject"]["spec"]["nodeName"] == node
    request["dryRun"] = dry_run
    return request


def verdict(request: dict[str, Any], view: ClusterView | None = None, **kwargs: Any) -> dict[str, Any]:
    eng = kwargs.pop("eng", None) or Engine(view or fleet_view(), **kwargs)
    return dict(eng.judge(request, "validate").response)


# ---- 1. the pod is already a disruption target --------------------------------------------------


@pytest.mark.parametrize(("condition", "reason", "user"), REASONS)
def test_delete_of_a_marked_worker_is_allowed_with_an_audit_annotation(
    condition: str, reason: str, user: str
) -> None:
    request = worker_delete(user)
    mark(request["oldObject"], condition, reason)
    answer = verdict(request)
    assert answer["allowed"] is True
    if build_config({}).exemptions.exempts(request["userInfo"], "serve"):
        return  # node-controller, pod GC, kubelets: exempt before any policy runs
    note = answer["auditAnnotations"]["worker-delete-disruption-target"]
    assert f"{condition}=True (reason {reason})" in note and user in note


@pytest.mark.parametrize(("condition", "reason", "user"), REASONS)
def test_a_non_exempt_user_deleting_a_marked_worker_is_allowed_too(
    condition: str, reason: str, user: str
) -> None:
    request = worker_delete("system:serviceaccount:ops:cleanup-bot")
    mark(request["oldObject"], condition, reason)
    answer = verdict(request)
    assert answer["allowed"] is True
    assert "cleanup-bot" in answer["auditAnnotations"]["worker-delete-disruption-target"]


def test_a_false_disruption_condition_changes_nothing() -> None:
    request = worker_delete()
    mark(request["oldObject"], "DisruptionTarget", "PreemptionByScheduler", status="False")
    answer = verdict(request)
    assert answer["allowed"] is False and "auditAnnotations" not in answer


def test_delete_without_old_object_reads_the_condition_from_the_view() -> None:
    request = worker_delete()
    request["oldObject"] = None
    view = fleet_view(
        lambda objs: mark(find(objs, "Pod", "llm-xl-0-2"), "DisruptionTarget", "DeletionByPodGC")
    )
    assert verdict(request, view)["allowed"] is True
    assert verdict(request)["allowed"] is False


@pytest.mark.parametrize(("condition", "reason", "user"), REASONS)
def test_eviction_of_a_marked_pod_is_allowed_and_recorded_nowhere(
    condition: str, reason: str, user: str
) -> None:
    view = fleet_view(lambda objs: mark(find(objs, "Pod", "llm-xl-1-1"), condition, reason))
    eng = engine(view)
    answer = judge(eng, eviction("llm-xl-1-1"))
    assert answer["allowed"] is True
    assert f"{condition}=True" in answer["auditAnnotations"]["group-eviction-disruption-target"]
    assert eng.ledger.entries(("serve", "llm-xl")) == ()


@pytest.mark.parametrize(("condition", "reason", "user"), REASONS)
def test_a_marked_pod_is_going_so_its_group_uses_the_budget(condition: str, reason: str, user: str) -> None:
    # The marked pod is going (guardhook.cluster.going): group 1 is broken for the budget (1), so
    # breaking group 0 too is 429, naming the mark.
    view = fleet_view(lambda objs: mark(find(objs, "Pod", "llm-xl-1-1"), condition, reason))
    answer = judge(engine(view), eviction("llm-xl-0-3"))
    assert answer["status"]["code"] == 429
    assert f"group 1 (going: llm-xl-1-1 (marked {condition}/{reason}))" in answer["status"]["message"]


def test_eviction_of_an_unmarked_pod_over_the_budget_is_still_429() -> None:
    eng = engine(fleet_view())
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    assert judge(eng, eviction("llm-xl-1-1"))["status"]["code"] == 429


# ---- 2. Kueue's controller ----------------------------------------------------------------------


@pytest.mark.parametrize("user", ["system:serviceaccount:kueue-system:kueue-controller-manager"])
def test_kueue_controller_is_exempt_by_default(user: str) -> None:
    assert verdict(worker_delete(user))["allowed"] is True
    eng = engine(fleet_view())
    assert judge(eng, eviction("llm-xl-0-3"))["allowed"] is True
    stop = eviction("llm-xl-1-1")
    stop["userInfo"] = {"username": user}
    assert judge(eng, stop)["allowed"] is True


def test_a_lookalike_of_kueue_is_not_exempt() -> None:
    # Exact by default (issue 20): another Helm release is named in exemptions.users.
    assert "system:serviceaccount:kueue-system:kueue-controller-manager" in DEFAULT_EXEMPT_USERS
    for user in (
        "system:serviceaccount:team:kueue-controller-manager-x",
        "system:serviceaccount:queues:my-release-kueue-controller-manager",
    ):
        assert verdict(worker_delete(user))["allowed"] is False, user


def test_kueue_stopping_a_whole_group_by_another_identity_deletes_every_pod() -> None:
    # Kueue marks every pod TerminationTarget=True, then deletes them one by one; a denial would
    # leave the group half deleted. Here the deleter is not exempt, so the condition must carry it.
    for worker in (1, 2, 3):
        request = drain_delete(f"llm-xl-2-{worker}", f"gpu-node-{8 + worker:02d}")
        mark(request["oldObject"], "TerminationTarget", "StoppedByKueue")
        request["userInfo"] = {"username": "system:serviceaccount:other:queue-manager"}
        assert verdict(request)["allowed"] is True


# ---- 3. delete-based drains -------------------------------------------------------------------


def test_admin_delete_on_a_schedulable_node_is_still_denied() -> None:
    answer = verdict(worker_delete(), cordoned("gpu-node-05"))
    assert answer["allowed"] is False and answer["status"]["code"] == 403


def test_drain_delete_within_budget_is_allowed_with_a_warning_and_recorded() -> None:
    ledger = MemoryLedger()
    eng = Engine(cordoned("gpu-node-02"), ledger=ledger)
    answer = verdict(worker_delete(), eng=eng)
    assert answer["allowed"] is True
    (warning,) = answer["warnings"]
    assert warning.startswith("[worker-delete]") and "cordoned node gpu-node-02" in warning
    assert "group 0" in warning
    assert [(e.group, e.pod) for e in ledger.entries(("serve", "llm-xl"))] == [("0", "llm-xl-0-2")]


def test_drain_delete_over_budget_is_429_naming_the_groups_down() -> None:
    eng = Engine(cordoned("gpu-node-02", "gpu-node-05"), ledger=MemoryLedger())
    assert verdict(drain_delete("llm-xl-0-2", "gpu-node-02"), eng=eng)["allowed"] is True
    denied = verdict(drain_delete("llm-xl-1-1", "gpu-node-05"), eng=eng)
    assert denied["allowed"] is False
    assert denied["status"]["code"] == 429 and denied["status"]["reason"] == "TooManyRequests"
    message = denied["status"]["message"]
    assert message.startswith("[worker-delete]") and "group 0 (delete of llm-xl-0-2" in message


def test_drains_and_evictions_share_one_budget() -> None:
    eng = Engine(cordoned("gpu-node-05"), ledger=MemoryLedger())
    assert verdict(eviction("llm-xl-0-3"), eng=eng)["allowed"] is True
    assert verdict(drain_delete("llm-xl-1-1", "gpu-node-05"), eng=eng)["status"]["code"] == 429


def test_drain_of_an_already_broken_group_goes_freely() -> None:
    view = cordoned("gpu-node-02", edit=lambda objs: objs.remove(find(objs, "Pod", "llm-xl-1-1")))
    answer = verdict(worker_delete(), view, ledger=MemoryLedger())
    assert answer["allowed"] is False  # group 1 broken, budget 1 spent: group 0 may not go too
    assert "group 1 (3 of 4 pods exist)" in answer["status"]["message"]
    request = drain_delete("llm-xl-1-2", "gpu-node-06")
    view.upsert(NODES, {**_node("gpu-node-06"), "spec": {"unschedulable": True}})
    assert verdict(request, view, ledger=MemoryLedger())["allowed"] is True


def test_a_dry_run_drain_is_judged_the_same_and_records_nothing() -> None:
    ledger = MemoryLedger()
    eng = Engine(cordoned("gpu-node-02", "gpu-node-05"), ledger=ledger)
    dry = drain_delete("llm-xl-0-2", "gpu-node-02", dry_run=True)
    assert verdict(dry, eng=eng)["allowed"] is True
    assert ledger.entries(("serve", "llm-xl")) == ()
    assert verdict(drain_delete("llm-xl-1-1", "gpu-node-05"), eng=eng)["allowed"] is True  # nothing held
    assert verdict(dry, eng=eng)["status"]["code"] == 429  # now judged against the real drain


def test_offline_review_records_nothing() -> None:
    ledger = MemoryLedger()
    eng = Engine(cordoned("gpu-node-02"), ledger=ledger, record=False)
    assert verdict(worker_delete(), eng=eng)["allowed"] is True
    assert ledger.entries(("serve", "llm-xl")) == ()


def test_budget_annotation_and_parameter_apply_to_drains() -> None:
    view = cordoned("gpu-node-02", "gpu-node-05")
    config = build_config({"policies": {"worker-delete": {"maxDisruptedGroups": 2}}})
    eng = Engine(view, config, ledger=MemoryLedger())
    assert verdict(drain_delete("llm-xl-0-2", "gpu-node-02"), eng=eng)["allowed"] is True
    assert verdict(drain_delete("llm-xl-1-1", "gpu-node-05"), eng=eng)["allowed"] is True


def test_unreachable_ledger_denies_a_drain_with_429() -> None:
    class Broken(MemoryLedger):
        def update(self, key: Any, plan: Any) -> Any:
            raise LedgerError("lease conflict")

    answer = verdict(worker_delete(), cordoned("gpu-node-02"), ledger=Broken())
    assert answer["status"]["code"] == 429 and "ledger" in answer["status"]["message"]


def test_stale_view_denies_a_drain() -> None:
    view = cordoned("gpu-node-02")
    view.mark_broken(PODS, now=0.0)
    answer = verdict(worker_delete(), view, ledger=MemoryLedger())
    assert answer["allowed"] is False


# ---- 4. the restart advice ------------------------------------------------------------------


def test_denial_names_the_leader_with_foreground_cascade() -> None:
    message = verdict(worker_delete())["status"]["message"]
    assert "kubectl delete pod -n serve llm-xl-0 --cascade=foreground" in message


def test_leader_delete_with_background_propagation_stays_allowed() -> None:
    request = request_of(load_review("s02-leader-delete.validating"))
    assert request["options"]["propagationPolicy"] == "Background"
    assert verdict(request, cordoned("gpu-node-00"))["allowed"] is True


def _node(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}}
