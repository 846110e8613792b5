"""The sample fleet (LWS serve/llm-xl, 4 groups of 4) turned into the other ways a group is made:
an LWS with `groupIdentity: Hash` (lws KEP-898) and an LWS served by Kthena. The pods keep every
field the API server gave them; only the owner chain, names and labels change, as each maker
writes them."""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from guardhook.cluster.lws import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    GROUP_READY_GATE,
    LEADER_NAME_ANNOTATION,
    NAME_LABEL,
    SIZE_ANNOTATION,
    WORKER_INDEX_LABEL,
    hash_host,
)
from guardhook.cluster.view.static import embedded_fleet_objects, view_from_objects
from guardhook.cluster.view.store import ClusterView
from guardhook.wire import KubeObject

from conftest import load_review

LWS = "llm-xl"
REPLICA_SET = f"{LWS}-6b7f9d5c4d"
"""The ReplicaSet of the leader Deployment `llm-xl` (a pod-template-hash suffix)."""


def fleet() -> list[KubeObject]:
    return copy.deepcopy(embedded_fleet_objects())


def _lws_pods(objects: list[KubeObject], lws: str) -> list[KubeObject]:
    return [o for o in objects if o["kind"] == "Pod" and o["metadata"]["labels"].get(NAME_LABEL) == lws]


def _controller(kind: str, name: str, api_version: str = "apps/v1") -> dict[str, Any]:
    uid = hashlib.sha1(f"{kind}/{name}".encode()).hexdigest()
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def to_hash(objects: list[KubeObject], lws: str = LWS) -> dict[int, tuple[str, str]]:
    """Turn LWS `lws` into a Hash one in place: each group's key is the 40-character key its
    group-key label holds, set in group-index too; the leader is the ReplicaSet's pod
    `<rs>-<5 chars>` with the `group-ready` readiness gate (True) and the host name `<lws>-<key8>`;
    workers are `<leader>-<w>` of the worker StatefulSet named after the leader pod (lws
    pod_controller.go); the leader StatefulSet is gone. Returns ordinal -> (key, leader pod
    name)."""
    spec = next(o for o in objects if o["kind"] == "LeaderWorkerSet" and o["metadata"]["name"] == lws)["spec"]
    spec["groupIdentity"] = "Hash"
    groups: dict[int, tuple[str, str]] = {}
    pods = _lws_pods(objects, lws)
    for pod in pods:
        labels = pod["metadata"]["labels"]
        ordinal, key = int(labels[GROUP_INDEX_LABEL]), labels[GROUP_KEY_LABEL]
        groups[ordinal] = (key, f"{REPLICA_SET}-{key[-5:]}")
    for pod in pods:
        meta = pod["metadata"]
        labels = meta["labels"]
        key, leader = groups[int(labels[GROUP_INDEX_LABEL])]
        labels[GROUP_INDEX_LABEL] = key
        labels.pop("statefulset.kubernetes.io/pod-name", None)
        labels.pop("apps.kubernetes.io/pod-index", None)
        worker = int(labels[WORKER_INDEX_LABEL])
        if worker == 0:
            meta.update(
                name=leader,
                generateName=f"{REPLICA_SET}-",
                ownerReferences=[_controller("ReplicaSet", REPLICA_SET)],
            )
            labels["pod-template-hash"] = REPLICA_SET.rsplit("-", 1)[1]
            pod["spec"]["readinessGates"] = [{"conditionType": GROUP_READY_GATE}]
            pod["spec"]["hostname"] = hash_host(lws, key)
            pod["status"]["conditions"].append({"type": GROUP_READY_GATE, "status": "True"})
        else:
            sts = leader
            meta.update(
                name=f"{sts}-{worker}",
                generateName=f"{sts}-",
                ownerReferences=[_controller("StatefulSet", sts)],
            )
            meta["annotations"][LEADER_NAME_ANNOTATION] = leader
    objects[:] = [
        o for o in objects if not (o["kind"] == "StatefulSet" and o["metadata"]["name"].startswith(lws))
    ]
    return groups


def hash_worker(groups: dict[int, tuple[str, str]], ordinal: int, worker: int) -> str:
    """The name of worker `worker` of what was group `ordinal` before `to_hash`: `<leader>-<w>`."""
    return f"{groups[ordinal][1]}-{worker}"


def to_kthena(objects: list[KubeObject], lws: str = LWS) -> None:
    """Serve LWS `lws` by Kthena in place: ModelServing `lws` (owned by the LWS) owns the pods
    `<lws>-<g>-default-0-<i>`, labelled as Kthena's LWS-labels plugin labels them (group-key =
    sha1 of `<lws>-<g>`), with no size annotation and no StatefulSets."""
    for pod in _lws_pods(objects, lws):
        meta = pod["metadata"]
        labels = meta["labels"]
        group, worker = labels[GROUP_INDEX_LABEL], labels[WORKER_INDEX_LABEL]
        meta.update(
            name=f"{lws}-{group}-default-0-{worker}",
            ownerReferences=[_controller("ModelServing", lws, "workload.serving.volcano.sh/v1alpha1")],
        )
        meta.pop("generateName", None)
        for key in (
            "statefulset.kubernetes.io/pod-name",
            "apps.kubernetes.io/pod-index",
            "controller-revision-hash",
        ):
            labels.pop(key, None)
        labels[GROUP_KEY_LABEL] = hashlib.sha1(f"{lws}-{group}".encode()).hexdigest()
        labels["modelserving.volcano.sh/name"] = lws
        labels["modelserving.volcano.sh/group-name"] = f"{lws}-{group}"
        labels["modelserving.volcano.sh/role"] = "default"
        if worker == "0":
            labels["modelserving.volcano.sh/entry"] = "true"
        meta["annotations"].pop(SIZE_ANNOTATION, None)
        meta["annotations"].pop(LEADER_NAME_ANNOTATION, None)
    objects[:] = [
        o for o in objects if not (o["kind"] == "StatefulSet" and o["metadata"]["name"].startswith(lws))
    ]


def pod(objects: list[KubeObject], name: str) -> KubeObject:
    return next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == name)


def view(objects: list[KubeObject]) -> ClusterView:
    return view_from_objects(copy.deepcopy(objects))


def delete_request(pod_object: KubeObject) -> dict[str, Any]:
    """The captured worker DELETE (s01), aimed at `pod_object` (sent as its oldObject)."""
    request = copy.deepcopy(load_review("s01-worker-delete.validating")["request"])
    request["name"] = pod_object["metadata"]["name"]
    request["namespace"] = pod_object["metadata"]["namespace"]
    request["oldObject"] = copy.deepcopy(pod_object)
    return request


def eviction_request(name: str, namespace: str = "serve") -> dict[str, Any]:
    """The captured eviction (s07), aimed at pod `name`."""
    request = copy.deepcopy(load_review("s07-eviction-worker.validating")["request"])
    request["name"] = name
    request["namespace"] = namespace
    request["object"]["metadata"].update(name=name, namespace=namespace)
    return request


def gang_objects(
    groups: int = 3,
    size: int = 2,
    mode: str = "all",
    workload: str | None = "train",
    namespace: str = "train",
    budget: int | None = None,
) -> list[KubeObject]:
    """`groups` PodGroups `train-<g>` (scheduling.k8s.io/v1beta1, gang minCount `size`,
    disruptionMode `mode`, of Workload `workload` when given) with `size` running pods each, the
    pods made from the sample fleet's workers (node, resources, status kept) with their LWS
    labels and owner swapped for a Job's and `spec.schedulingGroup.podGroupName` set."""
    objects: list[KubeObject] = []
    workers = [
        o for o in fleet() if o["kind"] == "Pod" and o["metadata"]["labels"].get(WORKER_INDEX_LABEL) != "0"
    ]
    for g in range(groups):
        group: dict[str, Any] = {
            "apiVersion": "scheduling.k8s.io/v1beta1",
            "kind": "PodGroup",
            "metadata": {
                "name": f"train-{g}",
                "namespace": namespace,
                "uid": f"uid-pg-{g}",
                "annotations": {},
            },
            "spec": {
                "schedulingPolicy": {"gang": {"minCount": size}},
                "disruptionMode": {mode: {}},
            },
        }
        if workload is not None:
            group["spec"]["workloadRef"] = {"workloadName": workload, "templateName": "workers"}
        else:
            group["metadata"]["ownerReferences"] = [
                _controller("JobSet", "train", "jobset.x-k8s.io/v1alpha2")
            ]
        if budget is not None:
            group["metadata"]["annotations"]["guardhook.io/max-disrupted-groups"] = str(budget)
        objects.append(group)
        for i in range(size):
            pod = copy.deepcopy(workers[(g * size + i) % len(workers)])
            meta = pod["metadata"]
            name = f"train-{g}-{i}"
            meta.update(name=name, namespace=namespace, uid=f"uid-{name}", generateName=f"train-{g}-")
            meta["labels"] = {"app": "train", "batch.kubernetes.io/job-name": f"train-{g}"}
            meta["annotations"] = {}
            meta["ownerReferences"] = [_controller("Job", f"train-{g}", "batch/v1")]
            pod["spec"]["schedulingGroup"] = {"podGroupName": f"train-{g}"}
            objects.append(pod)
    return objects
