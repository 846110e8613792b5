"""Gangs read from their pods on the real 1.37 cluster (issue 51): a JobSet replica (one Job of a
replicatedJob, its pods run as one) and a Grove PodCliqueSet replica, each evicted under a budget of
1 as `kubectl drain` evicts (the Eviction API): the first gang's eviction is allowed, the second's
gets 429 while the first is broken, and is allowed once the first is whole again.

Neither maker's controller runs here. The test installs minimal CRDs (schemas that keep any field)
and is the stand-in controller: it creates the JobSet's Jobs as the JobSet controller does (the
real Job controller makes their pods), and the Grove pods as the PodClique controller does, with
the owner chains and labels those controllers set (read from kubernetes-sigs/jobset
pkg/controllers/jobset_controller.go labelAndAnnotateObject and api/jobset/v1alpha2/
jobset_types.go; ai-dynamo/grove operator/api/common/labels.go and operator/internal/controller/
podclique/components/pod/pod.go). A CRD the cluster already has (a real install) is used and
left in place. Kubeconfig mode only: each test skips, saying why, elsewhere.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cluster import Cluster, eventually, pod_image, skip_or_fail

BUDGET = {"guardhook.io/max-disrupted-groups": "1"}
POD_SPEC: dict[str, Any] = {
    "terminationGracePeriodSeconds": 1,
    "containers": [{"name": "c", "image": pod_image(), "resources": {"requests": {"cpu": "10m"}}}],
}


def _need_cluster_mode(cluster: Cluster) -> None:
    if cluster.mode != "cluster":
        pytest.skip("needs a cluster with controllers and kubelets (GUARDHOOK_E2E_KUBECONFIG)")


def _crd(group: str, version: str, kind: str, plural: str) -> dict[str, Any]:
    """A namespaced CRD serving `kind` at `group/version` whose schema keeps any field."""
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"kind": kind, "listKind": f"{kind}List", "plural": plural, "singular": kind.lower()},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}
                    },
                }
            ],
        },
    }


def _install_crds(cluster: Cluster, crds: list[dict[str, Any]]) -> list[str]:
    """Create the CRDs the cluster lacks and wait until each is established; returns the names of
    those created (the ones to delete afterwards)."""
    created = []
    for crd in crds:
        name = crd["metadata"]["name"]
        if cluster.kubectl("get", "crd", name).returncode == 0:
            continue
        done = cluster.kubectl("create", "-f", "-", stdin=json.dumps(crd))
        if done.returncode != 0:
            _remove_crds(cluster, created)
            skip_or_fail(f"cannot create CRD {name}: {done.stderr.strip()}")
        created.append(name)
    for name in created:
        cluster.must("wait", "--for=condition=Established", f"crd/{name}", "--timeout=60s", timeout=90)
    return created


def _remove_crds(cluster: Cluster, names: list[str]) -> None:
    """Delete the CRDs `names` (their objects with them) and wait until they are gone: the next test
    may create them again, which a terminating CRD refuses."""
    for name in names:
        cluster.kubectl("delete", "crd", name, "--wait=true", "--timeout=120s", timeout=150)


def _owner(obj: dict[str, Any], api_version: str, kind: str) -> dict[str, Any]:
    """A controller ownerReference to the created object `obj` (its name and uid)."""
    return {
        "apiVersion": api_version,
        "kind": kind,
        "name": obj["metadata"]["name"],
        "uid": obj["metadata"]["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def _create(cluster: Cluster, obj: dict[str, Any]) -> dict[str, Any]:
    """Create `obj` in the test namespace; returns it as the API server stored it."""
    out = cluster.must("create", "-n", cluster.namespace, "-o", "json", "-f", "-", stdin=json.dumps(obj))
    created: dict[str, Any] = json.loads(out)
    return created


def _ready_pods(cluster: Cluster, selector: str) -> list[str]:
    """Names of the pods matching `selector` that are Ready and not terminating."""
    out = cluster.must("get", "pods", "-n", cluster.namespace, "-l", selector, "-o", "json")
    return sorted(
        p["metadata"]["name"]
        for p in json.loads(out)["items"]
        if not p["metadata"].get("deletionTimestamp")
        and any(
            c["type"] == "Ready" and c["status"] == "True" for c in p.get("status", {}).get("conditions", [])
        )
    )


def _pods_of(cluster: Cluster, selector: str) -> list[str]:
    """Names of the live (not terminating) pods matching `selector`."""
    out = cluster.must("get", "pods", "-n", cluster.namespace, "-l", selector, "-o", "json")
    return sorted(
        p["metadata"]["name"] for p in json.loads(out)["items"] if not p["metadata"].get("deletionTimestamp")
    )


@pytest.fixture
def cordoned(cluster: Cluster) -> Iterator[list[str]]:
    """Every node cordoned for the test (uncordoned after it): a Job's replacement pod then waits
    Pending, so its gang stays broken until the test uncordons, as on a node being drained."""
    _need_cluster_mode(cluster)
    nodes = cluster.must("get", "nodes", "-o", "name").split()
    try:
        yield nodes
    finally:
        cluster.kubectl("uncordon", *nodes)


# --- JobSet -----------------------------------------------------------------------------------------

JOBSET_GROUP, JOBSET_VERSION = "jobset.x-k8s.io", "v1alpha2"
JOBSET_API = f"{JOBSET_GROUP}/{JOBSET_VERSION}"


def _jobset_marks(namespace: str, jobset: str, rjob: str, replicas: int, index: int) -> dict[str, str]:
    """The labels (and, the same keys and values, annotations) the JobSet controller puts on a Job
    and its pod template (jobset_controller.go labelAndAnnotateObject; jobHashKey is the SHA-1 of
    `<namespace>/<job name>`)."""
    job = f"{jobset}-{rjob}-{index}"
    return {
        "jobset.sigs.k8s.io/jobset-name": jobset,
        "jobset.sigs.k8s.io/replicatedjob-name": rjob,
        "jobset.sigs.k8s.io/restart-attempt": "0",
        "jobset.sigs.k8s.io/replicatedjob-replicas": str(replicas),
        "jobset.sigs.k8s.io/global-replicas": str(replicas),
        "jobset.sigs.k8s.io/job-index": str(index),
        "jobset.sigs.k8s.io/job-key": hashlib.sha1(f"{namespace}/{job}".encode()).hexdigest(),
        "jobset.sigs.k8s.io/job-global-index": str(index),
    }


def _job_spec(pods: int) -> dict[str, Any]:
    """A Job of `pods` pods that run together. pause exits 0 on the SIGTERM of an eviction, so an
    evicted pod counts as a completion: with completions to spare (and no completion index, whose
    highest value would then grow) the Job controller replaces it, as it replaces a failed pod of
    a training Job."""
    return {
        "parallelism": pods,
        "completions": 1000,
        "backoffLimit": 100,
        "template": {
            "metadata": {"annotations": dict(BUDGET)},
            "spec": {**POD_SPEC, "restartPolicy": "Never"},
        },
    }


def _job(jobset: dict[str, Any], rjob: str, replicas: int, index: int, pods: int) -> dict[str, Any]:
    """Job `index` of replicatedJob `rjob` as the JobSet controller creates it: named
    `<jobset>-<rjob>-<index>` (placement.GenJobName), controlled by the JobSet, its marks on the
    Job and its pod template."""
    name, namespace = jobset["metadata"]["name"], jobset["metadata"]["namespace"]
    marks = _jobset_marks(namespace, name, rjob, replicas, index)
    spec = _job_spec(pods)
    template = spec["template"]["metadata"]
    template["labels"] = dict(marks)
    template["annotations"] = {**template["annotations"], **marks}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": f"{name}-{rjob}-{index}",
            "labels": dict(marks),
            "annotations": dict(marks),
            "ownerReferences": [_owner(jobset, JOBSET_API, "JobSet")],
        },
        "spec": spec,
    }


def _held_back(cluster: Cluster, pod: str) -> bool:
    """Whether guardhook refuses `pod`'s eviction for its group budget now: a dry run (which spends
    nothing) denied by group-eviction."""
    done = cluster.evict(pod, dry_run=True)
    return done.returncode != 0 and "[group-eviction]" in done.stderr


# Two ways a JobSet Job is a group (guardhook.groups.jobset): its pods run as one (parallelism 2), or
# it is one pod whose failure restarts the whole JobSet (a failurePolicy with no rules: the default
# action RestartJobSet), which guardhook reads from the JobSet itself (the view's JobSet watch, on a
# CRD installed after guardhook started: picked up by its retry of kinds not served).
JOBSET_CASES = {
    "parallel-pods": (2, None),
    "restart-whole": (1, {"maxRestarts": 3}),
}


@pytest.mark.timeout(600)  # pods Ready, the JobSet kind picked up, a replacement placed, the ledger
@pytest.mark.parametrize("case", sorted(JOBSET_CASES))
def test_a_jobset_replica_is_evicted_one_at_a_time(cluster: Cluster, cordoned: list[str], case: str) -> None:
    pods, failure_policy = JOBSET_CASES[case]
    name, rjob, replicas = f"e2e-js-{case}", "workers", 2
    created = _install_crds(cluster, [_crd(JOBSET_GROUP, JOBSET_VERSION, "JobSet", "jobsets")])
    selector = f"jobset.sigs.k8s.io/jobset-name={name}"
    spec: dict[str, Any] = {
        "replicatedJobs": [{"name": rjob, "replicas": replicas, "template": {"spec": _job_spec(pods)}}]
    }
    if failure_policy is not None:
        spec["failurePolicy"] = failure_policy
    try:
        jobset = _create(
            cluster, {"apiVersion": JOBSET_API, "kind": "JobSet", "metadata": {"name": name}, "spec": spec}
        )
        # the stand-in JobSet controller: its Jobs; the Job controller makes their pods
        for index in range(replicas):
            _create(cluster, _job(jobset, rjob, replicas, index, pods))
        eventually(
            lambda: len(_ready_pods(cluster, selector)) == replicas * pods, 300, "both Jobs' pods Ready", 2
        )
        job0, job1 = (f"{name}-{rjob}-{i}" for i in range(replicas))
        first = _pods_of(cluster, f"job-name={job0}")[0]
        second = _pods_of(cluster, f"job-name={job1}")[0]
        time.sleep(2)  # the view sees them Ready
        # the Job controller's replacement for the evicted pod waits on the cordoned node: Job 0 stays broken
        cluster.must("cordon", *cordoned)
        done = cluster.evict(first)
        assert done.returncode == 0, done.stderr
        # until the Job controller's replacement exists a one-pod Job has no pod, and its JobSet reaches
        # guardhook's view within its retry of a kind not served (the CRD is new): dry runs until held
        eventually(lambda: _held_back(cluster, second), 120, f"Job {job1}'s eviction held back", 3)
        held = cluster.evict(second)
        assert held.returncode != 0, f"Job {job1}'s pod was evicted while Job {job0} was broken"
        assert "[group-eviction]" in held.stderr, held.stderr
        assert "JobSet" in held.stderr, held.stderr
        # Job 0 whole again (its replacement placed): then Job 1 may go
        cluster.must("uncordon", *cordoned)
        eventually(
            lambda: len(_ready_pods(cluster, f"job-name={job0}")) == pods, 300, f"Job {job0} whole again", 2
        )
        eventually(lambda: cluster.evict(second).returncode == 0, 180, f"Job {job1}'s eviction allowed", 5)
    finally:
        # the garbage collector takes the Jobs and their pods with the JobSet
        cluster.kubectl("delete", "jobsets.jobset.x-k8s.io", name, "-n", cluster.namespace, "--wait=false")
        _remove_crds(cluster, created)


# --- Grove ------------------------------------------------------------------------------------------

GROVE_GROUP, GROVE_VERSION = "grove.io", "v1alpha1"
GROVE_API = f"{GROVE_GROUP}/{GROVE_VERSION}"


def _grove_pod(pcs: str, replica: int, clique: dict[str, Any], index: int) -> dict[str, Any]:
    """Pod `index` of PodClique `clique` (replica `replica` of PodCliqueSet `pcs`) as the PodClique
    controller creates it: controlled by the PodClique, with its labels (pod.go getLabels;
    labels.go). The scheduling gate `grove.io/podgang-pending-creation` it also sets is left out:
    no PodGang controller runs here to lift it."""
    name = clique["metadata"]["name"]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{index}",
            "labels": {
                "app.kubernetes.io/managed-by": "grove-operator",
                "app.kubernetes.io/part-of": pcs,
                "grove.io/podclique": name,
                "grove.io/podcliqueset-replica-index": str(replica),
                "grove.io/podclique-pod-index": str(index),
                "grove.io/podgang": f"{pcs}-{replica}",
            },
            "annotations": dict(BUDGET),
            "ownerReferences": [_owner(clique, GROVE_API, "PodClique")],
        },
        "spec": POD_SPEC,
    }


@pytest.mark.timeout(600)
def test_a_grove_replica_is_evicted_one_at_a_time(cluster: Cluster) -> None:
    _need_cluster_mode(cluster)
    pcs, role, replicas, size = "e2e-pcs", "worker", 2, 2
    created = _install_crds(
        cluster,
        [
            _crd(GROVE_GROUP, GROVE_VERSION, "PodCliqueSet", "podcliquesets"),
            _crd(GROVE_GROUP, GROVE_VERSION, "PodClique", "podcliques"),
        ],
    )
    selector = f"app.kubernetes.io/part-of={pcs}"
    try:
        template = {
            "cliques": [
                {"name": role, "annotations": dict(BUDGET), "spec": {"replicas": size, "podSpec": POD_SPEC}}
            ]
        }
        owner = _create(
            cluster,
            {
                "apiVersion": GROVE_API,
                "kind": "PodCliqueSet",
                "metadata": {"name": pcs},
                "spec": {"replicas": replicas, "template": template},
            },
        )
        # the stand-in operator: a PodClique `<pcs>-<r>-<clique>` per replica, owned by the
        # PodCliqueSet (namegen.go GeneratePodCliqueName), and its pods
        cliques = [
            _create(
                cluster,
                {
                    "apiVersion": GROVE_API,
                    "kind": "PodClique",
                    "metadata": {
                        "name": f"{pcs}-{r}-{role}",
                        "labels": {
                            "app.kubernetes.io/managed-by": "grove-operator",
                            "app.kubernetes.io/part-of": pcs,
                        },
                        "ownerReferences": [_owner(owner, GROVE_API, "PodCliqueSet")],
                    },
                    "spec": {"replicas": size, "podSpec": POD_SPEC},
                },
            )
            for r in range(replicas)
        ]
        for r, clique in enumerate(cliques):
            for i in range(size):
                _create(cluster, _grove_pod(pcs, r, clique, i))
        eventually(
            lambda: len(_ready_pods(cluster, selector)) == replicas * size, 300, "both replicas Ready", 2
        )
        time.sleep(2)  # the view sees them Ready
        done = cluster.evict(f"{pcs}-0-{role}-0")
        assert done.returncode == 0, done.stderr
        held = cluster.evict(f"{pcs}-1-{role}-0")
        assert held.returncode != 0, "replica 1's pod was evicted while replica 0 was broken"
        assert "[group-eviction]" in held.stderr, held.stderr
        assert "PodCliqueSet" in held.stderr, held.stderr
        same = cluster.evict(f"{pcs}-0-{role}-1")  # the broken replica may lose the rest
        assert same.returncode == 0, same.stderr
        # replica 0 whole again: the stand-in operator recreates its pods once the evicted ones are gone
        replica0 = f"grove.io/podclique={pcs}-0-{role}"
        eventually(
            lambda: not cluster.must("get", "pods", "-n", cluster.namespace, "-l", replica0, "-o", "name"),
            120,
            "replica 0's evicted pods gone",
            2,
        )
        for i in range(size):
            _create(cluster, _grove_pod(pcs, 0, cliques[0], i))
        eventually(lambda: len(_ready_pods(cluster, replica0)) == size, 300, "replica 0 whole again", 2)
        eventually(
            lambda: cluster.evict(f"{pcs}-1-{role}-0").returncode == 0, 180, "replica 1's eviction allowed", 5
        )
    finally:
        # the garbage collector takes the PodCliques and their pods with the PodCliqueSet
        cluster.kubectl("delete", "podcliquesets.grove.io", pcs, "-n", cluster.namespace, "--wait=false")
        _remove_crds(cluster, created)
