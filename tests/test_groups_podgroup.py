"""Gangs of the Workload API (scheduling.k8s.io/v1beta1 PodGroups, KEP-5710 disruptionMode): a pod
of a `disruptionMode: all` PodGroup is a group member, and evictions are budgeted per Workload (or
the PodGroups' common controller owner). Pods are the sample fleet's, moved into PodGroups
(tests/group_shapes.gang_objects); evictions are the captured s07 aimed at them."""

from __future__ import annotations

import copy
from typing import Any

import group_shapes as shapes
import pytest
from test_manifests import MANIFESTS, _called

from guardhook.admission.engine import Engine
from guardhook.cluster.model import PodRecord
from guardhook.config import build_config
from guardhook.groups import resolve, resolve_object
from guardhook.groups.ref import POD_GROUP
from guardhook.ledger import MemoryLedger

from kustomize_lite import render


def engine(objects: list, ledger: MemoryLedger | None = None) -> Engine:
    return Engine(shapes.view(objects), build_config({}), ledger=ledger or MemoryLedger())


def evict(eng: Engine, name: str) -> dict[str, Any]:
    return dict(eng.judge(shapes.eviction_request(name, "train"), "validate").response)


def test_a_pod_of_an_all_mode_pod_group_resolves_to_its_gang_in_its_workload() -> None:
    objects = shapes.gang_objects()
    ref = resolve_object(shapes.view(objects), shapes.pod(objects, "train-1-0"))
    assert ref is not None
    assert (ref.maker, ref.key, ref.size, ref.restart, str(ref.rank)) == (
        POD_GROUP,
        "train-1",
        2,
        (),
        "member",
    )
    assert (ref.set.kind, ref.set.namespace, ref.set.name) == ("Workload", "train", "train")


def test_without_a_workload_the_set_is_the_common_controller_owner() -> None:
    objects = shapes.gang_objects(workload=None)
    ref = resolve_object(shapes.view(objects), shapes.pod(objects, "train-0-1"))
    assert ref is not None and (ref.set.kind, ref.set.name) == ("JobSet", "train")


def test_single_mode_pod_groups_are_no_groups() -> None:
    objects = shapes.gang_objects(mode="single")
    view = shapes.view(objects)
    assert resolve_object(view, shapes.pod(objects, "train-0-0")) is None
    eng = engine(objects)
    assert [evict(eng, f"train-{g}-0")["allowed"] for g in range(3)] == [True, True, True]


def test_gang_evictions_within_the_budget_and_over_it() -> None:
    eng = engine(shapes.gang_objects())
    first = evict(eng, "train-0-0")
    same_gang = evict(eng, "train-0-1")
    other = evict(eng, "train-2-1")
    assert (first["allowed"], same_gang["allowed"], other["allowed"]) == (True, True, False)
    message = other["status"]["message"]
    assert other["status"]["code"] == 429
    assert "would break PodGroup train/train-2 (disruptionMode all) of Workload train/train" in message
    assert "PodGroup train-0 (eviction of train-0-0 recorded" in message


def test_a_gang_already_broken_in_the_view_fills_the_budget() -> None:
    objects = shapes.gang_objects()
    shapes.pod(objects, "train-1-1")["metadata"]["deletionTimestamp"] = "2026-11-29T17:00:00Z"
    eng = engine(objects)
    assert evict(eng, "train-1-0")["allowed"] is True  # from the broken gang
    denied = evict(eng, "train-0-0")
    assert (
        denied["allowed"] is False
        and "PodGroup train-1 (terminating: train-1-1)" in denied["status"]["message"]
    )


def test_the_budget_annotation_on_the_pod_groups_raises_b() -> None:
    eng = engine(shapes.gang_objects(budget=2))
    assert [evict(eng, f"train-{g}-0")["allowed"] for g in range(3)] == [True, True, False]


def test_other_workloads_have_their_own_budget() -> None:
    first = shapes.gang_objects(workload="a", namespace="train")
    second = shapes.gang_objects(workload="b", namespace="train")
    for obj in second:  # the same shapes under other names
        meta = obj["metadata"]
        meta["name"] = meta["name"].replace("train-", "other-")
        meta["uid"] = "o" + meta["uid"]
        if obj["kind"] == "Pod":
            obj["spec"]["schedulingGroup"]["podGroupName"] = obj["spec"]["schedulingGroup"][
                "podGroupName"
            ].replace("train-", "other-")
    eng = engine(first + second)
    assert evict(eng, "train-0-0")["allowed"] is True
    assert evict(eng, "other-0-0")["allowed"] is True
    assert evict(eng, "train-1-0")["allowed"] is False


def test_a_record_resolves_as_its_object() -> None:
    objects = shapes.gang_objects()
    view = shapes.view(objects)
    record = PodRecord.from_object(shapes.pod(objects, "train-2-0"))
    assert resolve(view, record) == resolve_object(view, shapes.pod(objects, "train-2-0"))
    assert (
        view.pod("train", "train-2-0") is not None and view.pod("train", "train-2-0").pod_group == "train-2"
    )


def test_delete_based_drains_of_gang_members_are_budgeted_other_deletes_are_not() -> None:
    objects = shapes.gang_objects()
    nodes = {shapes.pod(objects, f"train-{g}-0")["spec"]["nodeName"] for g in (0, 1)}
    cordoned = [
        {"kind": "Node", "apiVersion": "v1", **node, "spec": {**node.get("spec", {}), "unschedulable": True}}
        for node in (o for o in shapes.fleet() if o["kind"] == "Node")
        if node["metadata"]["name"] in nodes
    ]
    others = [o for o in shapes.fleet() if o["kind"] == "Node" and o["metadata"]["name"] not in nodes]
    eng = engine(objects + cordoned + others)
    first = dict(eng.judge(shapes.delete_request(shapes.pod(objects, "train-0-0")), "validate").response)
    second = dict(eng.judge(shapes.delete_request(shapes.pod(objects, "train-1-0")), "validate").response)
    plain = dict(eng.judge(shapes.delete_request(shapes.pod(objects, "train-2-1")), "validate").response)
    # train-2-1 is on a node left schedulable: an ordinary delete of a member of a whole gang
    assert (first["allowed"], second["allowed"], plain["allowed"]) == (True, False, False)
    assert second["status"]["code"] == 429 and "from draining node" in second["status"]["message"]
    assert plain["status"]["code"] == 403


def delete(eng: Engine, objects: list, name: str, user: str = "kubernetes-admin") -> dict[str, Any]:
    request = shapes.delete_request(shapes.pod(objects, name))
    request["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    return dict(eng.judge(request, "validate").response)


def test_deleting_one_member_of_a_whole_gang_is_denied_with_advice() -> None:
    objects = shapes.gang_objects()
    denied = delete(engine(objects), objects, "train-1-0")
    assert denied["allowed"] is False and denied["status"]["code"] == 403
    message = denied["status"]["message"]
    assert "worker-delete" in message
    assert (
        "pod train/train-1-0 is a member of PodGroup train/train-1 (disruptionMode all, 2 pods) of "
        "Workload train/train, which is whole; deleting one member breaks the whole gang" in message
    )
    assert "evict its pods through the Eviction API" in message
    assert "through its controller (Job train/train-1)" in message


def _bare_gang(workload: str | None) -> list:
    """gang_objects with bare pods (no labels, no ownerReferences: made by hand, not by a Job),
    and without `workload` PodGroups of no owner either (each its own set)."""
    objects = shapes.gang_objects(workload=workload)
    for obj in objects:
        obj["metadata"].pop("ownerReferences", None)
        if obj["kind"] == "Pod":
            obj["metadata"].pop("labels", None)
    return objects


@pytest.mark.parametrize(
    ("workload", "of"),
    [("train", " of Workload train/train"), (None, "")],  # a PodGroup alone is its own set
)
def test_a_bare_member_of_a_whole_gang_reaches_worker_delete_and_is_denied(
    workload: str | None, of: str
) -> None:
    """A bare pod (no controller, no LWS label) naming a `disruptionMode: all` PodGroup is a gang
    member as any other (docs/policies.md, Workload API gangs): the API server sends its DELETE
    (worker-delete's matchConditions in manifests/base) and worker-delete denies it while the gang
    is whole, with no controller to name; once the gang is broken it is allowed."""
    objects = _bare_gang(workload)
    request = shapes.delete_request(shapes.pod(objects, "train-1-0"))
    (configuration,) = [
        o for o in render(MANIFESTS / "base") if o["kind"] == "ValidatingWebhookConfiguration"
    ]
    hook = next(h for h in configuration["webhooks"] if h["name"] == "worker-delete.guardhook.io")
    assert _called(hook, {"request": request}, identity_only=False)
    denied = dict(engine(objects).judge(request, "validate").response)
    assert denied["allowed"] is False and denied["status"]["code"] == 403
    message = denied["status"]["message"]
    assert (
        f"pod train/train-1-0 is a member of PodGroup train/train-1 (disruptionMode all, 2 pods){of}, "
        "which is whole; deleting one member breaks the whole gang" in message
    )
    assert "evict its pods through the Eviction API" in message and "through its controller" not in message
    shapes.pod(objects, "train-1-1")["metadata"]["deletionTimestamp"] = "2026-11-29T17:00:00Z"
    assert dict(engine(objects).judge(request, "validate").response)["allowed"] is True


def _deleted(objects: list, group: str) -> None:
    """PodGroup `group` of `objects` deleted: terminating, kept by the finalizer 1.37's
    PodGroupProtection admission puts on every PodGroup until its pods are gone."""
    meta = next(o for o in objects if o["kind"] == "PodGroup" and o["metadata"]["name"] == group)["metadata"]
    meta.update(
        deletionTimestamp="2026-11-29T17:00:00Z", finalizers=["scheduling.k8s.io/podgroup-protection"]
    )


@pytest.mark.parametrize("workload", ["train", None])
def test_the_members_of_a_gang_whose_pod_group_is_being_deleted_may_be_deleted(workload: str | None) -> None:
    """`kubectl delete -f` of a bare gang deletes its PodGroup (kept, terminating, by its finalizer)
    and then its pods: the gang is going as a whole, so its members' DELETEs are that removal, not
    one member breaking it; the other, whole gangs stay guarded."""
    objects = _bare_gang(workload)
    _deleted(objects, "train-1")
    eng = engine(objects)
    assert delete(eng, objects, "train-1-0")["allowed"] is True
    assert delete(eng, objects, "train-0-0")["allowed"] is False


def test_a_gang_whose_pod_group_is_being_deleted_fills_the_budget() -> None:
    objects = shapes.gang_objects()
    _deleted(objects, "train-1")
    eng = engine(objects)
    assert evict(eng, "train-1-0")["allowed"] is True  # from the gang going anyway
    denied = evict(eng, "train-0-0")
    assert (
        denied["allowed"] is False
        and "PodGroup train-1 (PodGroup being deleted)" in denied["status"]["message"]
    )


def test_members_of_a_broken_gang_and_of_single_mode_groups_may_be_deleted() -> None:
    objects = shapes.gang_objects()
    shapes.pod(objects, "train-1-1")["metadata"]["deletionTimestamp"] = "2026-11-29T17:00:00Z"
    eng = engine(objects)
    assert delete(eng, objects, "train-1-0")["allowed"] is True  # its gang is already broken
    assert delete(eng, objects, "train-0-0")["allowed"] is False  # another, whole gang
    single = shapes.gang_objects(mode="single")
    assert delete(engine(single), single, "train-0-0")["allowed"] is True


def _preempted(objects: list, name: str) -> None:
    """Mark pod `name` of `objects` for removal as the scheduler's preemption does
    (DisruptionTarget=True, reason PreemptionByScheduler)."""
    shapes.pod(objects, name)["status"]["conditions"].append(
        {
            "type": "DisruptionTarget",
            "status": "True",
            "reason": "PreemptionByScheduler",
            "lastTransitionTime": "2026-11-29T17:00:00Z",
        }
    )


def test_a_member_of_a_gang_doomed_by_another_members_disruption_may_be_deleted() -> None:
    """Fix: a gang with a member marked for removal (DisruptionTarget) is broken (design.md §1),
    as in its set's snapshot, so deleting another member costs nothing more; it was judged whole."""
    objects = shapes.gang_objects()
    _preempted(objects, "train-1-1")
    eng = engine(objects)
    assert delete(eng, objects, "train-1-0")["allowed"] is True
    assert delete(eng, objects, "train-0-0")["allowed"] is False  # another, whole gang


def test_a_gang_pod_whose_pod_group_the_view_does_not_hold_is_judged_as_any_pod() -> None:
    objects = shapes.gang_objects()
    pods_only = [o for o in objects if o["kind"] == "Pod"]
    assert delete(engine(pods_only), objects, "train-1-0")["allowed"] is True


@pytest.mark.parametrize("phase", ["Succeeded", "Failed"])
def test_a_finished_pod_of_a_whole_gang_may_be_deleted(phase: str) -> None:
    """`kubectl delete pod` of a gang's finished pod is clean-up: the gang's health does not count
    it, so the gang stays whole, and its running members stay guarded."""
    objects = shapes.gang_objects()
    finished = copy.deepcopy(shapes.pod(objects, "train-1-0"))
    finished["metadata"]["name"] = "train-1-9"
    finished["metadata"]["uid"] = "0d2c3b5e-9f1a-4c8e-b7d6-5a4e3f2d1c09"
    finished["status"]["phase"] = phase
    objects.append(finished)
    eng = engine(objects)
    assert delete(eng, objects, "train-1-9")["allowed"] is True
    assert delete(eng, objects, "train-1-0")["allowed"] is False


def test_a_gang_member_marked_for_disruption_may_be_deleted() -> None:
    objects = shapes.gang_objects()
    _preempted(objects, "train-1-0")
    assert delete(engine(objects), objects, "train-1-0", "system:kube-scheduler")["allowed"] is True


def test_an_exempt_requester_may_delete_a_gang_member() -> None:
    objects = shapes.gang_objects()
    jobset = "system:serviceaccount:jobset-system:jobset-controller-manager"
    config = build_config({"policies": {"worker-delete": {"exemptions": {"users": [jobset]}}}})
    eng = Engine(shapes.view(objects), config, ledger=MemoryLedger())
    assert delete(eng, objects, "train-1-0", jobset)["allowed"] is True
    assert delete(eng, objects, "train-1-0")["allowed"] is False


def test_the_job_controller_stopping_a_gang_may_delete_its_members_by_default() -> None:
    """A Job suspended by Kueue (or failed): the Job controller deletes every pod of the gang; a
    denial of one would leave the Job half-stopped. Other identities stay denied."""
    objects = shapes.gang_objects()
    eng = engine(objects)
    job_controller = "system:serviceaccount:kube-system:job-controller"
    assert delete(eng, objects, "train-1-0", job_controller)["allowed"] is True
    assert delete(eng, objects, "train-1-0", "system:serviceaccount:train:job-controller")["allowed"] is False


def audited(objects: list) -> Any:
    from guardhook.commands.audit import audit
    from guardhook.commands.scan import Located
    from guardhook.config import default_config

    return audit([Located("cluster", o) for o in objects], default_config())


def test_audit_counts_gangs_per_set_whole_and_broken() -> None:
    import io
    import json

    from guardhook.commands.audit import render_json, render_text

    objects = shapes.gang_objects()
    shapes.pod(objects, "train-1-1")["metadata"]["deletionTimestamp"] = "2026-11-29T17:00:00Z"
    single = shapes.gang_objects(mode="single", namespace="batch", workload="solo")
    result = audited(shapes.fleet() + objects + single)
    # one set: Workload train/train with 3 gangs, train-1 broken; the single-mode PodGroups are no gangs
    assert [g.as_dict() for g in result.gangs] == [
        {
            "namespace": "train",
            "kind": "Workload",
            "name": "train",
            "maker": "PodGroup",
            "gangs": 3,
            "whole": 2,
            "broken": 1,
            "brokenGangs": ["train-1"],
        }
    ]
    text = io.StringIO()
    render_text(result, text)
    lines = text.getvalue().splitlines()
    heading = lines.index("Gangs per set:")
    assert lines[heading + 2].split() == ["train", "Workload/train", "3", "2", "1", "train-1"]
    document = io.StringIO()
    render_json(result, document)
    assert json.loads(document.getvalue())["gangs"][0]["brokenGangs"] == ["train-1"]


def test_audit_of_a_cluster_without_gangs_prints_no_gang_table() -> None:
    import io

    from guardhook.commands.audit import render_text

    result = audited(shapes.fleet())
    text = io.StringIO()
    render_text(result, text)
    assert result.gangs == [] and "Gangs per set" not in text.getvalue()


def gang_drain(objects: list, *pods: str) -> Any:
    from guardhook.planning.drain import plan_drain

    nodes = [o for o in shapes.fleet() if o["kind"] == "Node"]
    order = [shapes.pod(objects, name)["spec"]["nodeName"] for name in pods]
    return plan_drain(nodes + objects, order, {"maxDisruptedGroups": 1})


def test_drain_plan_takes_gangs_in_waves_under_their_budget() -> None:
    import io

    from guardhook.commands.drain_plan import render_text

    objects = shapes.gang_objects()
    plan = gang_drain(objects, "train-0-0", "train-1-0")  # two nodes, one gang each
    assert [w.nodes for w in plan.waves] == [["gpu-node-01"], ["gpu-node-03"]]
    assert [str(g) for w in plan.waves for g in w.groups] == [
        "Workload train/train PodGroup train-0",
        "Workload train/train PodGroup train-1",
    ]
    assert [str(g) for g in plan.waves[1].waits_for] == ["Workload train/train PodGroup train-0"]
    assert [(r.pod, r.node) for r in plan.at_once] == [("train-1-0", "gpu-node-03")]
    assert (
        "would break PodGroup train-1 (disruptionMode all) of Workload train/train" in plan.at_once[0].reason
    )
    assert [g.as_dict() for g in plan.gangs] == [
        {
            "namespace": "train",
            "kind": "Workload",
            "name": "train",
            "budget": 1,
            "losing": ["train-0", "train-1"],
            "broken": [],
            "lost": 2,
            "rebuildable": 2,
            "short": "",
        }
    ]
    assert plan.as_dict()["waves"][0]["groups"] == [
        {"namespace": "train", "kind": "Workload", "set": "train", "podGroup": "train-0"}
    ]
    text = io.StringIO()
    render_text(plan, text)
    lines = text.getvalue().splitlines()
    assert "    train      Workload/train  1       2       0" in lines  # counts in the count columns
    assert "    train/Workload/train: losing train-0, train-1" in lines


def test_drain_plan_places_lost_gangs_whole_on_what_is_left_and_says_what_the_rest_lack() -> None:
    import io

    from guardhook.commands.drain_plan import render_text
    from guardhook.planning.drain import plan_drain

    objects = shapes.gang_objects()  # train-0 on gpu-node-01/02, train-1 on 03/05, train-2 on 06/07
    kept = {f"gpu-node-0{n}" for n in range(8)}
    nodes = [o for o in shapes.fleet() if o["kind"] == "Node" and o["metadata"]["name"] in kept]
    # Left after the drain: 02, 05 (freed by their lost gangs), 06, 07 (train-2): room for one gang.
    plan = plan_drain(nodes + objects, ["gpu-node-01", "gpu-node-03", "gpu-node-00", "gpu-node-04"], {})
    gang = plan.gangs[0]
    assert (gang.losing, gang.lost, gang.rebuildable) == (("train-0", "train-1"), 2, 1)
    assert gang.short == "train-1: short 1500Gi memory, 8 nvidia.com/gpu on 2 nodes" and not plan.ok
    text = io.StringIO()
    render_text(plan, text)
    assert (
        "  train/Workload/train: 2 gangs to place whole again, room for 1 (train-1: short" in text.getvalue()
    )
    roomy = plan_drain(nodes + objects, ["gpu-node-01", "gpu-node-03"], {})
    assert (roomy.gangs[0].rebuildable, roomy.gangs[0].short, roomy.ok) == (2, "", True)


def test_a_gang_of_mixed_pods_is_asked_for_the_largest_request_of_each_resource() -> None:
    import copy

    from guardhook.capacity import shape_of_template
    from guardhook.planning.rebuild import gang_demand

    objects = shapes.gang_objects(groups=1, size=3)
    pods = [o for o in objects if o["kind"] == "Pod"]
    small = copy.deepcopy(pods[2])
    small["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1", "memory": "2000Gi"}}
    demand = gang_demand("train", [pods[0], pods[1], small], size=4)
    assert (demand.size, demand.leader) == (4, shape_of_template(pods[0]))
    worker = demand.worker.request_map
    assert (worker["nvidia.com/gpu"], worker["memory"] >= 2000 * 2**30) == (8, True)
    assert worker["cpu"] == demand.leader.request_map["cpu"]  # 90 cpu, not the small pod's 1


def test_drain_plan_counts_a_gang_broken_now_against_the_budget() -> None:
    objects = shapes.gang_objects()
    shapes.pod(objects, "train-2-1")["metadata"]["deletionTimestamp"] = "2026-11-29T17:00:00Z"
    plan = gang_drain(objects, "train-0-0")
    assert plan.gangs[0].broken == ("train-2",) and plan.gangs[0].losing == ("train-0",)
    assert [str(g) for g in plan.waves[0].waits_for] == ["Workload train/train PodGroup train-2"]
    assert [r.pod for r in plan.at_once] == ["train-0-0"]


def test_drain_plan_single_mode_pod_groups_break_no_group() -> None:
    objects = shapes.gang_objects(mode="single")
    plan = gang_drain(objects, "train-0-0", "train-1-0")
    assert (len(plan.waves), plan.waves[0].groups, plan.gangs, plan.at_once) == (1, [], (), ())


def test_an_unseen_pod_of_the_one_gang_short_of_pods_is_recorded_against_it() -> None:
    objects = shapes.gang_objects()
    lagging = [o for o in objects if o["metadata"]["name"] != "train-1-1"]  # the view lags train-1-1
    ledger = MemoryLedger()
    assert evict(engine(lagging, ledger), "train-1-1")["allowed"] is True  # train-1 is broken in the view
    # the view catches up: train-1 looks whole, but the eviction just allowed keeps it counted
    denied = evict(engine(objects, ledger), "train-0-0")
    assert denied["allowed"] is False and denied["status"]["code"] == 429
    assert "PodGroup train-1 (eviction of train-1-1 recorded" in denied["status"]["message"]


def test_an_unseen_pod_is_allowed_when_no_gang_or_several_gangs_miss_pods() -> None:
    objects = shapes.gang_objects()
    assert evict(engine(objects), "train-9-9")["allowed"] is True  # every gang whole: no gang of its
    two_short = [o for o in objects if o["metadata"]["name"] not in ("train-1-1", "train-2-1")]
    ledger = MemoryLedger()
    assert evict(engine(two_short, ledger), "train-1-1")["allowed"] is True
    assert evict(engine(objects, ledger), "train-0-0")["allowed"] is True  # nothing was recorded


def workload(annotations: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "Workload",
        "metadata": {"name": "train", "namespace": "train", "uid": "uid-wl", "annotations": annotations},
        "spec": {"podGroupTemplates": [{"name": "workers"}]},
    }


def test_the_budget_annotation_on_the_workload_sets_its_gangs_budget() -> None:
    objects = shapes.gang_objects() + [workload({"guardhook.io/max-disrupted-groups": "2"})]
    eng = engine(objects)
    assert [evict(eng, f"train-{g}-0")["allowed"] for g in range(3)] == [True, True, False]


def test_the_workloads_annotation_wins_over_its_pod_groups() -> None:
    objects = shapes.gang_objects(budget=2) + [workload({"guardhook.io/max-disrupted-groups": "1"})]
    eng = engine(objects)
    assert [evict(eng, f"train-{g}-0")["allowed"] for g in range(2)] == [True, False]
    unreadable = shapes.gang_objects(budget=2) + [workload({"guardhook.io/max-disrupted-groups": "two"})]
    eng = engine(unreadable)  # an unreadable Workload annotation leaves the PodGroups' in force
    assert [evict(eng, f"train-{g}-0")["allowed"] for g in range(3)] == [True, True, False]


def namespace(name: str, guarded: bool) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": name}
    if guarded:
        labels["guardhook.io/guard-evictions"] = "true"
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def test_a_gang_namespace_whose_evictions_are_unguarded_is_a_gap_in_the_policy_report() -> None:
    from guardhook.commands.audit import policy_reports

    objects = shapes.fleet() + shapes.gang_objects()
    unguarded = audited([*objects, namespace("train", guarded=False)])
    gaps = [g for g in unguarded.gaps if g.name == "train"]
    assert [(g.kind, g.object_kind) for g in gaps] == [("evictions-unguarded", "Namespace")]
    assert gaps[0].message.endswith("(3 PodGroups with disruptionMode all)")
    report = next(r for r in policy_reports(unguarded, now=0) if r["metadata"]["namespace"] == "train")
    coverage = [(r["rule"], r["result"]) for r in report["results"] if r["policy"] == "coverage"]
    assert coverage == [("evictions-unguarded", "fail")]
    guarded = audited([*objects, namespace("train", guarded=True)])
    assert not [g for g in guarded.gaps if g.name == "train"]
