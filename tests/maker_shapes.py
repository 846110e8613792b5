"""Pods of the sample fleet made over as a Grove PodCliqueSet's and a JobSet's would be: every
field the API server gave them is kept (node, resources, status); the owner chain, names, labels
and annotations are those each maker writes (grove operator/internal/controller/podclique/
components/pod/pod.go getLabels, operator/api/common/namegen.go; jobset pkg/controllers/
jobset_controller.go labelAndAnnotateObject, pkg/util/placement GenJobName)."""

from __future__ import annotations

import copy
from typing import Any

from group_shapes import _controller, fleet

from guardhook.cluster.lws import WORKER_INDEX_LABEL
from guardhook.wire import KubeObject


def _workers() -> list[KubeObject]:
    """The fleet's worker pods (12: 4 groups of 3), the raw material of the shapes below."""
    return [
        o for o in fleet() if o["kind"] == "Pod" and o["metadata"]["labels"].get(WORKER_INDEX_LABEL) != "0"
    ]


def _made(
    source: KubeObject, namespace: str, name: str, labels: dict, annotations: dict, owner: dict
) -> KubeObject:
    pod = copy.deepcopy(source)
    meta = pod["metadata"]
    meta.update(name=name, namespace=namespace, uid=f"uid-{name}")
    meta["labels"] = labels
    meta["annotations"] = annotations
    meta["ownerReferences"] = [owner]
    return pod


def grove_pods(
    pcs: str = "disagg",
    replicas: int = 3,
    cliques: tuple[tuple[str, int], ...] = (("prefill", 1), ("decode", 2)),
    namespace: str = "infer",
    budget: int | None = None,
) -> list[KubeObject]:
    """PodCliqueSet `pcs` with `replicas` replicas of the PodCliques `cliques` (name, pods): pod i
    of clique c in replica r is `<pcs>-<r>-<c>-<5 chars>` (generateName `<podclique>-`), controlled
    by PodClique `<pcs>-<r>-<c>`, with the base PodGang `<pcs>-<r>`."""
    sources = _workers()
    pods: list[KubeObject] = []
    for r in range(replicas):
        for clique, count in cliques:
            podclique = f"{pcs}-{r}-{clique}"
            for i in range(count):
                labels = {
                    "app.kubernetes.io/managed-by": "grove-operator",
                    "app.kubernetes.io/part-of": pcs,
                    "app.kubernetes.io/component": "pcs-podclique",
                    "grove.io/podclique": podclique,
                    "grove.io/podcliqueset-replica-index": str(r),
                    "grove.io/podgang": f"{pcs}-{r}",
                    "grove.io/podclique-pod-index": str(i),
                    "grove.io/pod-template-hash": "5d8f7c9b6",
                }
                annotations = {} if budget is None else {"guardhook.io/max-disrupted-groups": str(budget)}
                source = sources[len(pods) % len(sources)]
                name = f"{podclique}-{'abcde'[i % 5] * 5}"
                owner = _controller("PodClique", podclique, "grove.io/v1alpha1")
                pods.append(_made(source, namespace, name, labels, annotations, owner))
    return pods


def jobset_pods(
    jobset: str = "train",
    replicated_job: str = "workers",
    replicas: int = 3,
    parallelism: int = 2,
    namespace: str = "batch",
    exclusive: bool = False,
) -> list[KubeObject]:
    """JobSet `jobset` with replicatedJob `replicated_job` of `replicas` Indexed Jobs of
    `parallelism` pods: Job `<jobset>-<rjob>-<i>` (controller of its pods), pod
    `<job>-<completion index>-<5 chars>`."""
    sources = _workers()
    pods: list[KubeObject] = []
    for i in range(replicas):
        job = f"{jobset}-{replicated_job}-{i}"
        for c in range(parallelism):
            marks = {
                "jobset.sigs.k8s.io/jobset-name": jobset,
                "jobset.sigs.k8s.io/jobset-uid": "uid-jobset",
                "jobset.sigs.k8s.io/replicatedjob-name": replicated_job,
                "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
                "jobset.sigs.k8s.io/job-index": str(i),
                "jobset.sigs.k8s.io/restart-attempt": "0",
                "batch.kubernetes.io/job-name": job,
                "batch.kubernetes.io/job-completion-index": str(c),
            }
            annotations = dict(marks)
            if exclusive:
                annotations["alpha.jobset.sigs.k8s.io/exclusive-topology"] = "cloud.google.com/gke-nodepool"
            source = sources[len(pods) % len(sources)]
            owner = _controller("Job", job, "batch/v1")
            pods.append(_made(source, namespace, f"{job}-{c}-xk2p9", dict(marks), annotations, owner))
    return pods


def named(pods: list[KubeObject], name: str) -> KubeObject:
    return next(p for p in pods if p["metadata"]["name"] == name)


def set_label(pod: KubeObject, key: str, value: Any) -> None:
    """Set (or, with None, remove) label `key` of `pod`, as a tenant's edit would."""
    labels = pod["metadata"]["labels"]
    if value is None:
        labels.pop(key, None)
    else:
        labels[key] = value


def jobset_object(
    jobset: str = "train",
    replicated_job: str = "workers",
    replicas: int = 3,
    namespace: str = "batch",
    failure_policy: dict[str, Any] | None = None,
) -> KubeObject:
    """JobSet `jobset` (jobset.x-k8s.io/v1alpha2, api/jobset/v1alpha2/jobset_types.go) with one
    replicatedJob of `replicas` Jobs, and `spec.failurePolicy` when given."""
    spec: dict[str, Any] = {
        "replicatedJobs": [
            {
                "name": replicated_job,
                "replicas": replicas,
                "template": {"spec": {"parallelism": 1, "completions": 1, "backoffLimit": 0}},
            }
        ],
    }
    if failure_policy is not None:
        spec["failurePolicy"] = failure_policy
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": jobset, "namespace": namespace, "uid": "uid-jobset"},
        "spec": spec,
    }
