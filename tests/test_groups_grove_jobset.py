"""Grove PodCliqueSet replicas and JobSet Jobs as groups (guardhook.groups.grove, .jobset,
.podgangs): a pod resolves to its gang by its controller first and labels second, and evictions
are budgeted per PodCliqueSet / JobSet. Pods are the sample fleet's made over by each maker
(tests/maker_shapes); evictions are the captured s07 aimed at them."""

from __future__ import annotations

import copy
from typing import Any

import group_shapes as shapes
import maker_shapes as makers

from guardhook.admission.engine import Engine
from guardhook.cluster.model import PodRecord
from guardhook.config import build_config
from guardhook.groups import all_sets, maker_of, recreated_pods, resolve, resolve_object, snapshot
from guardhook.groups.grove import GROVE_MAKER, grove_member
from guardhook.groups.jobset import jobset_member
from guardhook.groups.ref import GROVE, JOBSET, SetRef
from guardhook.ledger import MemoryLedger

from conftest import load_review


def nodes() -> list:
    return [o for o in shapes.fleet() if o["kind"] == "Node"]


def engine(pods: list) -> Engine:
    return Engine(shapes.view(nodes() + pods), build_config({}), ledger=MemoryLedger())


def evict(eng: Engine, name: str, namespace: str) -> dict[str, Any]:
    return dict(eng.judge(shapes.eviction_request(name, namespace), "validate").response)


# Grove


def test_a_grove_pod_resolves_to_its_podcliqueset_replica() -> None:
    pods = makers.grove_pods()
    ref = resolve_object(shapes.view(pods), makers.named(pods, "disagg-1-decode-bbbbb"))
    assert ref is not None
    assert (ref.maker, ref.set, ref.key, ref.size, str(ref.rank), ref.restart) == (
        GROVE,
        SetRef("infer", "PodCliqueSet", "disagg"),
        "1",
        3,
        "member",
        (),
    )
    assert "Grove operator" in ref.recreator.describe()


def test_grove_labels_without_a_podclique_controller_make_no_member() -> None:
    pods = makers.grove_pods(replicas=1)
    pod = makers.named(pods, "disagg-0-decode-aaaaa")
    pod["metadata"]["ownerReferences"] = []
    assert grove_member(PodRecord.from_object(pod)) is None
    assert resolve_object(shapes.view(pods), pod) is None


def test_a_relabelled_grove_pod_stays_in_its_controllers_replica() -> None:
    pods = makers.grove_pods()
    pod = makers.named(pods, "disagg-0-decode-aaaaa")
    makers.set_label(pod, "grove.io/podcliqueset-replica-index", "2")
    view = shapes.view(pods)
    ref = resolve_object(view, pod)
    assert ref is not None and ref.key == "0"
    assert "its controller is PodClique disagg-0-decode" in ref.note()


def test_a_podcliqueset_name_holding_dash_digits_is_read_from_the_other_pods() -> None:
    pods = makers.grove_pods(pcs="llama-3-70b", replicas=2)
    pod = makers.named(pods, "llama-3-70b-1-prefill-aaaaa")
    makers.set_label(pod, "app.kubernetes.io/part-of", None)
    member = grove_member(PodRecord.from_object(pod), shapes.view(pods))
    assert member is not None and (member.pcs, member.replica) == ("llama-3-70b", "1")


def test_a_missing_clique_pod_below_the_highest_index_leaves_the_replica_broken() -> None:
    pods = [p for p in makers.grove_pods() if p["metadata"]["name"] != "disagg-2-decode-aaaaa"]
    view = shapes.view(pods)
    ref = resolve(view, PodRecord.from_object(makers.named(pods, "disagg-2-decode-bbbbb")))
    snap = snapshot(view, ref) if ref is not None else None
    assert ref is not None and snap is not None and ref.size == 3 and len(snap.pods[ref.key]) == 2
    assert ref.key in snap.broken


def test_grove_evictions_are_budgeted_per_podcliqueset() -> None:
    eng = engine(makers.grove_pods())
    first = evict(eng, "disagg-0-prefill-aaaaa", "infer")
    same_replica = evict(eng, "disagg-0-decode-bbbbb", "infer")
    other = evict(eng, "disagg-2-decode-aaaaa", "infer")
    assert (first["allowed"], same_replica["allowed"], other["allowed"]) == (True, True, False)
    assert other["status"]["code"] == 429
    message = other["status"]["message"]
    assert "would break group 2 of PodCliqueSet infer/disagg" in message
    assert "group 0 (eviction of disagg-0-prefill-aaaaa recorded" in message


def test_a_grove_replica_broken_in_the_view_fills_the_budget() -> None:
    pods = makers.grove_pods()
    makers.named(pods, "disagg-1-prefill-aaaaa")["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    eng = engine(pods)
    assert evict(eng, "disagg-1-decode-aaaaa", "infer")["allowed"] is True
    denied = evict(eng, "disagg-0-decode-aaaaa", "infer")
    assert denied["allowed"] is False
    assert "group 1 (terminating: disagg-1-prefill-aaaaa)" in denied["status"]["message"]


def test_the_budget_annotation_on_the_grove_pods_raises_b() -> None:
    eng = engine(makers.grove_pods(budget=2))
    picks = [evict(eng, f"disagg-{r}-prefill-aaaaa", "infer")["allowed"] for r in range(3)]
    assert picks == [True, True, False]


def test_two_podcliquesets_have_their_own_budgets() -> None:
    eng = engine(makers.grove_pods("a", replicas=2) + makers.grove_pods("b", replicas=2))
    assert evict(eng, "a-0-prefill-aaaaa", "infer")["allowed"] is True
    assert evict(eng, "b-0-prefill-aaaaa", "infer")["allowed"] is True
    assert evict(eng, "a-1-prefill-aaaaa", "infer")["allowed"] is False


def test_set_gangs_lists_every_replica_in_number_order() -> None:
    view = shapes.view(makers.grove_pods(replicas=3) + makers.grove_pods(replicas=12, pcs="wide"))
    assert [g.name for g in GROVE_MAKER.gangs(view, SetRef("infer", "PodCliqueSet", "disagg"))] == [
        "0",
        "1",
        "2",
    ]
    wide = [g.name for g in GROVE_MAKER.gangs(view, SetRef("infer", "PodCliqueSet", "wide"))]
    assert wide[:3] == ["0", "1", "2"] and wide[-2:] == ["10", "11"]


# JobSet


def test_a_jobset_pod_resolves_to_its_job() -> None:
    pods = makers.jobset_pods()
    ref = resolve_object(shapes.view(pods), makers.named(pods, "train-workers-1-0-xk2p9"))
    assert ref is not None
    assert (ref.maker, ref.set, ref.key, ref.size) == (
        JOBSET,
        SetRef("batch", "JobSet", "train"),
        "train-workers-1",
        2,
    )


def test_a_one_pod_job_is_no_group_unless_placed_exclusively() -> None:
    pods = makers.jobset_pods(parallelism=1)
    assert resolve_object(shapes.view(pods), pods[0]) is None
    eng = engine(pods)
    assert [evict(eng, p["metadata"]["name"], "batch")["allowed"] for p in pods] == [True, True, True]
    exclusive = makers.jobset_pods(parallelism=1, exclusive=True)
    ref = resolve_object(shapes.view(exclusive), exclusive[0])
    assert ref is not None and ref.key == "train-workers-0"


def test_a_job_with_its_second_pod_missing_counts_two_by_completion_index() -> None:
    pods = [p for p in makers.jobset_pods() if p["metadata"]["name"] != "train-workers-0-0-xk2p9"]
    view = shapes.view(pods)
    ref = resolve(view, PodRecord.from_object(makers.named(pods, "train-workers-0-1-xk2p9")))
    snap = snapshot(view, ref) if ref is not None else None
    assert ref is not None and snap is not None and (ref.size, len(snap.pods[ref.key])) == (2, 1)
    assert ref.key in snap.broken


def test_a_one_pod_job_is_a_group_when_the_failure_policy_restarts_the_whole_jobset() -> None:
    """A failurePolicy without a matching rule restarts the whole JobSet (RestartJobSet, the
    default action): one lost pod costs every Job, so each Job is a group, budgeted per JobSet."""
    pods = makers.jobset_pods(parallelism=1)
    restarting = makers.jobset_object(failure_policy={"maxRestarts": 3})
    ref = resolve_object(shapes.view([restarting, *pods]), pods[1])
    assert ref is not None and (ref.key, ref.size) == ("train-workers-1", 1)
    eng = engine([restarting, *pods])
    allowed = [evict(eng, p["metadata"]["name"], "batch")["allowed"] for p in pods]
    assert allowed == [True, False, False]


def test_a_one_pod_job_restarted_alone_or_failing_the_jobset_is_no_group() -> None:
    pods = makers.jobset_pods(parallelism=1)
    restart_job = {"rules": [{"name": "alone", "action": "RestartJob"}]}
    for jobset in (makers.jobset_object(), makers.jobset_object(failure_policy=restart_job)):
        assert resolve_object(shapes.view([jobset, *pods]), pods[0]) is None


def test_the_first_failure_rule_for_the_replicated_job_and_a_lost_pods_reason_decides() -> None:
    from guardhook.cluster.jobsets import JobSetRecord

    def record(*rules: dict[str, Any]) -> JobSetRecord:
        return JobSetRecord.from_object(makers.jobset_object(failure_policy={"rules": list(rules)}))

    other_job = {"name": "driver", "action": "FailJobSet", "targetReplicatedJobs": ["driver"]}
    other_reason = {"name": "deadline", "action": "RestartJob", "onJobFailureReasons": ["DeadlineExceeded"]}
    maybe = {"name": "oom", "action": "RestartJob", "onJobFailureMessagePatterns": [".*OOM.*"]}
    whole = {"name": "all", "action": "RestartJobSetAndIgnoreMaxRestarts"}
    assert "default action RestartJobSet" in record(other_job, other_reason).restarts_whole("workers")
    assert "default action RestartJobSet" in record(maybe).restarts_whole("workers")
    assert "rule all (RestartJobSetAndIgnoreMaxRestarts)" in record(maybe, whole).restarts_whole("workers")
    assert (
        record({"name": "one", "action": "RestartJob", "targetReplicatedJobs": ["workers"]}).restarts_whole(
            "workers"
        )
        == ""
    )
    assert JobSetRecord.from_object(makers.jobset_object()).restarts_whole("workers") == ""


def test_jobset_evictions_are_budgeted_per_jobset() -> None:
    eng = engine(makers.jobset_pods())
    first = evict(eng, "train-workers-0-0-xk2p9", "batch")
    same_job = evict(eng, "train-workers-0-1-xk2p9", "batch")
    other = evict(eng, "train-workers-2-1-xk2p9", "batch")
    assert (first["allowed"], same_job["allowed"], other["allowed"]) == (True, True, False)
    assert "would break group train-workers-2 of JobSet batch/train" in other["status"]["message"]


def test_a_relabelled_jobset_pod_is_placed_by_its_job_and_its_siblings() -> None:
    pods = makers.jobset_pods()
    pod = makers.named(pods, "train-workers-0-1-xk2p9")
    makers.set_label(pod, "jobset.sigs.k8s.io/job-index", "2")
    member = jobset_member(PodRecord.from_object(pod), shapes.view(pods))
    assert member is not None and member.job == "train-workers-0"
    assert "its controller is Job train-workers-0" in member.inconsistent


def test_a_plain_job_pod_is_no_jobset_member() -> None:
    pods = makers.jobset_pods(replicas=1)
    for pod in pods:
        pod["metadata"]["labels"] = {"batch.kubernetes.io/job-name": "train-workers-0"}
        pod["metadata"]["annotations"] = {}
    assert jobset_member(PodRecord.from_object(pods[0]), shapes.view(pods)) is None


def test_a_jobset_pod_relabelled_and_reannotated_is_placed_by_its_siblings() -> None:
    pods = makers.jobset_pods()
    pod = makers.named(pods, "train-workers-0-1-xk2p9")
    makers.set_label(pod, "jobset.sigs.k8s.io/job-index", "2")
    pod["metadata"]["annotations"]["jobset.sigs.k8s.io/job-index"] = "2"
    assert jobset_member(PodRecord.from_object(pod)) is None  # without the view, nothing agrees
    member = jobset_member(PodRecord.from_object(pod), shapes.view(pods))
    assert member is not None and member.job == "train-workers-0"


# worker-delete


def delete(eng: Engine, pod: dict, user: str = "kubernetes-admin") -> dict[str, Any]:
    request = shapes.delete_request(pod)
    request["userInfo"] = {"username": user, "groups": ["system:authenticated"]}
    return dict(eng.judge(request, "validate").response)


def test_deleting_one_pod_of_a_whole_grove_replica_is_denied_naming_the_gang() -> None:
    pods = makers.grove_pods()
    denied = delete(engine(pods), makers.named(pods, "disagg-1-decode-aaaaa"))
    assert denied["allowed"] is False and denied["status"]["code"] == 403
    message = denied["status"]["message"]
    assert "is a member of group 1 (3 pods) of PodCliqueSet infer/disagg, which is whole" in message
    assert "PodClique infer/disagg-1-decode" in message


def test_the_gang_controllers_delete_their_own_pods() -> None:
    grove = makers.grove_pods()
    jobset = makers.jobset_pods()
    eng = engine(grove + jobset)
    grove_operator = "system:serviceaccount:grove-system:grove-operator"
    jobset_controller = "system:serviceaccount:jobset-system:jobset-controller-manager"
    assert delete(eng, makers.named(grove, "disagg-0-decode-aaaaa"), grove_operator)["allowed"] is True
    assert delete(eng, makers.named(jobset, "train-workers-0-0-xk2p9"), jobset_controller)["allowed"] is True
    assert delete(eng, makers.named(jobset, "train-workers-0-0-xk2p9"))["allowed"] is False
    other = Engine(
        shapes.view(nodes() + grove),
        build_config({"policies": {"worker-delete": {"gangControllers": []}}}),
        ledger=MemoryLedger(),
    )
    assert delete(other, makers.named(grove, "disagg-0-decode-aaaaa"), grove_operator)["allowed"] is False


def test_deleting_from_a_broken_grove_replica_is_allowed() -> None:
    pods = makers.grove_pods()
    makers.named(pods, "disagg-1-prefill-aaaaa")["status"]["conditions"] = [
        {"type": "Ready", "status": "False"}
    ]
    assert delete(engine(pods), makers.named(pods, "disagg-1-decode-aaaaa"))["allowed"] is True


def test_deletes_of_grove_pods_on_a_cordoned_node_are_budgeted_per_podcliqueset() -> None:
    pods = makers.grove_pods()
    where = {p["metadata"]["name"]: p["spec"]["nodeName"] for p in pods}
    drained = {where["disagg-0-prefill-aaaaa"], where["disagg-2-prefill-aaaaa"]}
    fleet_nodes = nodes()
    for node in fleet_nodes:
        if node["metadata"]["name"] in drained:
            node.setdefault("spec", {})["unschedulable"] = True
    eng = Engine(shapes.view(fleet_nodes + pods), build_config({}), ledger=MemoryLedger())
    first = delete(eng, makers.named(pods, "disagg-0-prefill-aaaaa"))
    second = delete(eng, makers.named(pods, "disagg-2-prefill-aaaaa"))
    assert (first["allowed"], second["allowed"]) == (True, False)
    assert second["status"]["code"] == 429


# the group model's door


def test_grove_and_jobset_sets_snapshot_through_the_registry() -> None:
    grove = makers.grove_pods(budget=2)
    makers.named(grove, "disagg-1-prefill-aaaaa")["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    jobset = makers.jobset_pods()
    view = shapes.view(nodes() + grove + jobset)
    ref = resolve_object(view, makers.named(grove, "disagg-0-decode-aaaaa"))
    assert ref is not None and maker_of(ref) is GROVE_MAKER
    snap = snapshot(view, ref)
    assert snap is not None
    assert (snap.maker, snap.desired, sorted(snap.pods), snap.budget_annotation) == (
        "Grove",
        3,
        ["0", "1", "2"],
        "2",
    )
    assert dict(snap.broken) == {"1": "terminating: disagg-1-prefill-aaaaa"}
    assert snap.counts("2") and not snap.counts("3")
    assert snap.wording.group(snap.set, "1") == "group 1 of PodCliqueSet infer/disagg"
    found = {(maker.name, target) for maker, target in all_sets(view)}
    assert ("Grove", SetRef("infer", "PodCliqueSet", "disagg")) in found
    assert ("JobSet", SetRef("batch", "JobSet", "train")) in found
    assert recreated_pods(view, ref) == ()


def test_audit_lists_grove_and_jobset_gangs_beside_podgroups() -> None:
    """The gang table counts every gang maker's sets through the group model's door: a Grove
    PodCliqueSet's replicas and a JobSet's Jobs appear with the PodGroup columns."""
    import io
    import json

    from guardhook.commands.audit import audit, render_json, render_text
    from guardhook.commands.scan import Located
    from guardhook.config import default_config

    grove = makers.grove_pods()
    makers.named(grove, "disagg-2-decode-bbbbb")["metadata"]["deletionTimestamp"] = "2026-12-07T00:00:00Z"
    jobset = [p for p in makers.jobset_pods() if p["metadata"]["name"] != "train-workers-1-0-xk2p9"]
    gangs = shapes.gang_objects()
    objects = nodes() + grove + jobset + gangs
    result = audit([Located("cluster", o) for o in objects], default_config())
    rows = [(g.namespace, g.kind, g.name, g.maker, g.gangs, g.whole, g.broken_names) for g in result.gangs]
    assert rows == [
        ("batch", "JobSet", "train", "JobSet", 3, 2, ("train-workers-1",)),
        ("infer", "PodCliqueSet", "disagg", "Grove", 3, 2, ("2",)),
        ("train", "Workload", "train", "PodGroup", 3, 3, ()),
    ]
    text = io.StringIO()
    render_text(result, text)
    lines = text.getvalue().splitlines()
    heading = lines.index("Gangs per set:")
    assert lines[heading + 1].split() == ["NAMESPACE", "SET", "GANGS", "WHOLE", "BROKEN", "BROKEN-GANGS"]
    assert lines[heading + 3].split() == ["infer", "PodCliqueSet/disagg", "3", "2", "1", "2"]
    document = io.StringIO()
    render_json(result, document)
    assert json.loads(document.getvalue())["gangs"][0] == {
        "namespace": "batch",
        "kind": "JobSet",
        "name": "train",
        "maker": "JobSet",
        "gangs": 3,
        "whole": 2,
        "broken": 1,
        "brokenGangs": ["train-workers-1"],
    }


# pod-counted-scaler


def scaler(review: str, kind: str, name: str, **spec: Any) -> dict[str, Any]:
    """The captured HPA (s23) or ScaledObject (s25) aimed at Grove `kind` infer/`name`, with `spec`
    fields replaced."""
    request = copy.deepcopy(load_review(review)["request"])
    request["namespace"] = "infer"
    request["object"]["metadata"]["namespace"] = "infer"
    request["object"]["spec"]["scaleTargetRef"] = {
        "apiVersion": "grove.io/v1alpha1",
        "kind": kind,
        "name": name,
    }
    request["object"]["spec"].update(spec)
    return request


def judge(eng: Engine, request: dict[str, Any]) -> dict[str, Any]:
    return dict(eng.judge(request, "validate").response)


CPU = [
    {
        "type": "Resource",
        "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
    }
]
PER_REPLICA = [
    {
        "type": "External",
        "external": {
            "metric": {"name": "queue_depth"},
            "target": {"type": "AverageValue", "averageValue": "10"},
        },
    }
]
VALUE = [
    {
        "type": "External",
        "external": {"metric": {"name": "queue_depth"}, "target": {"type": "Value", "value": "10"}},
    }
]


def test_a_pod_counted_hpa_on_a_podcliqueset_is_denied() -> None:
    eng = engine(makers.grove_pods())
    captured = judge(eng, scaler("s23-hpa-lws.validating", "PodCliqueSet", "disagg"))  # a Pods metric
    assert captured["allowed"] is False
    message = captured["status"]["message"]
    assert message.startswith(
        "[pod-counted-scaler] HorizontalPodAutoscaler infer/llm-xl-hpa scales PodCliqueSet"
    )
    assert "Pods metric vllm_queue_depth" in message and "the view shows 3 pods in one" in message
    assert (
        judge(eng, scaler("s23-hpa-lws.validating", "PodCliqueSet", "disagg", metrics=CPU))["allowed"]
        is False
    )
    assert (
        judge(eng, scaler("s23-hpa-lws.validating", "PodCliqueSet", "disagg", metrics=VALUE))["allowed"]
        is False
    )
    assert (
        judge(eng, scaler("s23-hpa-lws.validating", "PodCliqueSet", "disagg", metrics=[]))["allowed"] is False
    )


def test_a_per_replica_hpa_on_a_podcliqueset_is_allowed() -> None:
    eng = engine(makers.grove_pods())
    assert judge(eng, scaler("s23-hpa-lws.validating", "PodCliqueSet", "disagg", metrics=PER_REPLICA))[
        "allowed"
    ]


def test_one_pod_replicas_count_pods_as_replicas() -> None:
    eng = engine(makers.grove_pods(cliques=(("solo", 1),)))
    assert (
        judge(eng, scaler("s23-hpa-lws.validating", "PodCliqueSet", "disagg", metrics=CPU))["allowed"] is True
    )


def test_keda_on_a_podcliquescalinggroup_is_judged_by_its_triggers() -> None:
    pods = makers.grove_pods()
    for pod in pods:  # the decode clique as PodCliqueScalingGroup disagg-<r>-sg replica 0's
        labels = pod["metadata"]["labels"]
        if "decode" in labels["grove.io/podclique"]:
            labels["grove.io/podcliquescalinggroup"] = "disagg-0-sg"
            labels["grove.io/podcliquescalinggroup-replica-index"] = labels[
                "grove.io/podcliqueset-replica-index"
            ]
    eng = engine(pods)
    prometheus = judge(eng, scaler("s25-keda-lws.validating", "PodCliqueScalingGroup", "disagg-0-sg"))
    assert prometheus["allowed"] is True  # metricType AverageValue by default: replicas
    cpu = [{"type": "cpu", "metricType": "Utilization", "metadata": {"value": "60"}}]
    denied = judge(
        eng, scaler("s25-keda-lws.validating", "PodCliqueScalingGroup", "disagg-0-sg", triggers=cpu)
    )
    assert denied["allowed"] is False and "KEDA cpu trigger" in denied["status"]["message"]
    value = [{"type": "prometheus", "metricType": "Value", "metadata": {"threshold": "10"}}]
    assert (
        judge(eng, scaler("s25-keda-lws.validating", "PodCliqueScalingGroup", "disagg-0-sg", triggers=value))[
            "allowed"
        ]
        is False
    )


# group-capacity: a Grove scale-up places whole gangs


def grove_scale(name: str, old: int, new: int, resource: str = "podcliquesets") -> dict[str, Any]:
    """The captured `kubectl scale lws` (s29, an autoscaling/v1 Scale UPDATE) aimed at Grove
    `resource` infer/`name`'s `/scale`, from `old` to `new` replicas."""
    request = copy.deepcopy(load_review("s29-lws-scale-up-1.validating")["request"])
    resource_ref = {"group": "grove.io", "version": "v1alpha1", "resource": resource}
    request.update(name=name, namespace="infer", resource=resource_ref, requestResource=resource_ref)
    for side, replicas in (("object", new), ("oldObject", old)):
        request[side]["metadata"].update(name=name, namespace="infer")
        request[side]["spec"]["replicas"] = replicas
        request[side]["status"] = {"replicas": old, "selector": f"app.kubernetes.io/part-of={name}"}
    return request


def clique(name: str, replicas: int, cpu: str, gpu: int) -> dict[str, Any]:
    """A PodCliqueSet clique template (grove.io/v1alpha1 PodCliqueTemplateSpec)."""
    requests: dict[str, Any] = {"cpu": cpu, "memory": "64Gi"}
    if gpu:
        requests["nvidia.com/gpu"] = str(gpu)
    container = {"name": "main", "image": "vllm/vllm-openai:v0.9.1", "resources": {"requests": requests}}
    return {
        "name": name,
        "spec": {"roleName": name, "replicas": replicas, "podSpec": {"containers": [container]}},
    }


def pcs_create(name: str, replicas: int) -> dict[str, Any]:
    """The captured LWS CREATE (s33) made a PodCliqueSet CREATE of infer/`name`: a router (no
    GPU), one 8-GPU prefill pod and a scaling group of two 4-GPU decode pods per replica."""
    request = copy.deepcopy(load_review("s33-lws-create-fits.validating")["request"])
    kind = {"group": "grove.io", "version": "v1alpha1", "kind": "PodCliqueSet"}
    resource_ref = {"group": "grove.io", "version": "v1alpha1", "resource": "podcliquesets"}
    request.update(
        name=name,
        namespace="infer",
        kind=kind,
        requestKind=kind,
        resource=resource_ref,
        requestResource=resource_ref,
    )
    template = {
        "cliques": [clique("router", 1, "2", 0), clique("prefill", 1, "90", 8), clique("decode", 1, "40", 4)],
        "podCliqueScalingGroups": [{"name": "dsg", "cliqueNames": ["decode"], "replicas": 2}],
    }
    request["object"] = {
        "apiVersion": "grove.io/v1alpha1",
        "kind": "PodCliqueSet",
        "metadata": {"name": name, "namespace": "infer"},
        "spec": {"replicas": replicas, "template": template},
    }
    return request


def capacity_engine(pods: list, gang_scheduled: str = "Deny") -> Engine:
    config = build_config({"policies": {"group-capacity": {"gangScheduled": gang_scheduled}}})
    return Engine(shapes.view(nodes() + pods), config, ledger=MemoryLedger())


def test_a_podcliqueset_scale_up_places_each_new_replica_as_one_gang() -> None:
    """9 of the 20 GPU nodes hold the 3 replicas (3 whole-GPU pods each): 3 more replicas fit on
    the 11 left, a 4th does not (it needs 3 nodes of its own, not 2)."""
    eng = capacity_engine(makers.grove_pods())
    assert judge(eng, grove_scale("disagg", 3, 6))["allowed"] is True
    denied = judge(eng, grove_scale("disagg", 3, 7))
    assert denied["allowed"] is False
    message = denied["status"]["message"]
    assert "PodCliqueSet infer/disagg scales from 3 to 7 replicas: 3 of 4 new replicas fit" in message
    assert "each is a gang of 3 pods placed whole: 2 decode (cpu 90" in message
    assert "pods read from the pods of its replica 0" in message


def test_a_grove_scale_up_that_does_not_fit_is_a_warning_when_grove_places_it() -> None:
    response = judge(capacity_engine(makers.grove_pods(), "Warn"), grove_scale("disagg", 3, 7))
    assert response["allowed"] is True
    assert any(
        "Grove's gang scheduling" in w and "3 of 4 new replicas fit" in w for w in response["warnings"]
    )


def test_a_podcliqueset_create_counts_every_clique_and_scaling_group_replica() -> None:
    """Per replica: 1 router (cpu only), 1 prefill (8 GPUs) and 2 decode (4 GPUs: the scaling
    group's 2 replicas of 1): a replica takes two of the 11 free GPU nodes, so 5 fit, not 6."""
    eng = capacity_engine(makers.grove_pods())
    assert judge(eng, pcs_create("other", 5))["allowed"] is True
    denied = judge(eng, pcs_create("other", 6))
    assert denied["allowed"] is False
    message = denied["status"]["message"]
    assert "scales from 0 to 6 replicas: 5 of 6 new replicas fit" in message
    assert "each is a gang of 4 pods placed whole: 1 router (cpu 2" in message
    assert "2 decode (cpu 40, memory 64Gi, nvidia.com/gpu 4)" in message
    assert "the next gang's decode find no room" in message
    assert "pods placed greedily" in message and "pods read from the PodCliqueSet's template" in message


def test_a_podcliquescalinggroup_scale_up_places_its_replicas_like_an_existing_one() -> None:
    pods = makers.grove_pods(replicas=2)
    for pod in pods:  # the decode clique as PodCliqueScalingGroup disagg-<r>-sg's replica 0
        labels = pod["metadata"]["labels"]
        if "decode" in labels["grove.io/podclique"]:
            labels["grove.io/podcliquescalinggroup"] = (
                f"disagg-{labels['grove.io/podcliqueset-replica-index']}-sg"
            )
            labels["grove.io/podcliquescalinggroup-replica-index"] = "0"
    eng = capacity_engine(pods)  # 6 of 20 GPU nodes used: 14 free, 2 per scaling-group replica
    assert judge(eng, grove_scale("disagg-0-sg", 1, 8, "podcliquescalinggroups"))["allowed"] is True
    denied = judge(eng, grove_scale("disagg-0-sg", 1, 9, "podcliquescalinggroups"))
    assert denied["allowed"] is False
    assert "7 of 8 new scaling-group replicas fit" in denied["status"]["message"]


def test_a_grove_scale_without_pods_in_the_view_is_not_checked() -> None:
    response = judge(capacity_engine([]), grove_scale("disagg", 3, 7))
    assert response["allowed"] is True
    assert any("has no pods in guardhook's view" in w for w in response["warnings"])


def test_drain_plan_lists_a_grove_replica_losing_a_pod_and_places_it_whole_again() -> None:
    """drain-plan reads gangs through the group model, whichever maker made them: a Grove replica
    losing its prefill pod on gpu-node-01 is listed under its PodCliqueSet, and its pods (found by
    resolving them, not by a PodGroup name) are re-placed whole on what is left."""
    from guardhook.planning.drain import plan_drain

    plan = plan_drain(nodes() + makers.grove_pods(), ["gpu-node-01"], {})
    assert [g.as_dict() for g in plan.gangs] == [
        {
            "namespace": "infer",
            "kind": "PodCliqueSet",
            "name": "disagg",
            "budget": 1,
            "losing": ["0"],
            "broken": [],
            "lost": 1,
            "rebuildable": 1,
            "short": "",
        }
    ]
