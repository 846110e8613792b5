"""Every policy through a real API server: kubectl delete, the eviction API, Service/PDB/HPA/LWS
create, kubectl scale. Non-destructive checks use server-side dry runs (judged the same as real
requests); the eviction budget test runs last and restores the fleet."""

from __future__ import annotations

import json
from typing import Any

import pytest

from cluster import LWS_NAME_LABEL, Cluster, pod_image

GROUP_INDEX = "leaderworkerset.sigs.k8s.io/group-index"
WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"


def denied_by(done: Any, policy: str) -> bool:
    """Whether kubectl failed because guardhook's `policy` denied the request."""
    return done.returncode != 0 and "denied the request" in done.stderr and f"[{policy}]" in done.stderr


def lws_object(cluster: Cluster, name: str, cpu: str, **template: Any) -> dict[str, Any]:
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": name},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                **template,
                "workerTemplate": {
                    "metadata": {"labels": {"app": name}},
                    "spec": {
                        "containers": [
                            {
                                "name": "pause",
                                "image": pod_image(),
                                "resources": {"requests": {"cpu": cpu}},
                            }
                        ]
                    },
                },
            },
        },
    }


# worker-delete


def test_deleting_a_worker_of_a_whole_group_is_denied_naming_the_leader(cluster: Cluster) -> None:
    done = cluster.kubectl("delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--dry-run=server")
    assert denied_by(done, "worker-delete"), done.stderr
    assert cluster.leader(0) in done.stderr


def test_deleting_a_leader_is_allowed(cluster: Cluster) -> None:
    done = cluster.kubectl("delete", "pod", cluster.leader(0), "-n", cluster.namespace, "--dry-run=server")
    assert done.returncode == 0, done.stderr


def test_the_lws_controller_is_skipped_by_match_conditions(cluster: Cluster) -> None:
    # system:masters lets RBAC pass in bare mode too; matchConditions look at the username only.
    done = cluster.kubectl(
        "delete", "pod", cluster.worker(1), "-n", cluster.namespace, "--dry-run=server",
        f"--as={LWS_CONTROLLER}", "--as-group=system:masters",
    )  # fmt: skip
    assert done.returncode == 0, done.stderr


# leader-service


def test_a_service_selecting_workers_is_pinned_to_leaders(cluster: Cluster) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "e2e-traffic"},
        "spec": {"selector": dict(cluster.worker_labels), "ports": [{"port": 8000}]},
    }
    done = cluster.dry_run_create(service)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["spec"]["selector"] == {**cluster.worker_labels, WORKER_INDEX: "0"}


def test_a_headless_service_is_left_alone(cluster: Cluster) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "e2e-discovery"},
        "spec": {"clusterIP": "None", "selector": dict(cluster.worker_labels)},
    }
    done = cluster.dry_run_create(service)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["spec"]["selector"] == cluster.worker_labels


# group-pdb


def pdb(selector: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "e2e-budget"},
        "spec": {"minAvailable": 1, "selector": {"matchLabels": selector}},
    }


def test_a_pdb_across_groups_is_denied(cluster: Cluster) -> None:
    assert denied_by(cluster.dry_run_create(pdb({LWS_NAME_LABEL: cluster.lws})), "group-pdb")


def test_a_per_group_pdb_is_allowed(cluster: Cluster) -> None:
    done = cluster.dry_run_create(pdb({LWS_NAME_LABEL: cluster.lws, GROUP_INDEX: "0"}))
    assert done.returncode == 0, done.stderr


# pod-counted-scaler


def hpa(api_version: str, kind: str, name: str) -> dict[str, Any]:
    target = {"apiVersion": "apps/v1" if kind == "StatefulSet" else "leaderworkerset.x-k8s.io/v1"}
    body: dict[str, Any] = {
        "apiVersion": api_version,
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "e2e-hpa"},
        "spec": {
            "scaleTargetRef": {**target, "kind": kind, "name": name},
            "minReplicas": 1,
            "maxReplicas": 4,
        },
    }
    if api_version == "autoscaling/v1":
        body["spec"]["targetCPUUtilizationPercentage"] = 80
    return body


@pytest.mark.parametrize("api_version", ["autoscaling/v2", "autoscaling/v1"])
def test_an_hpa_on_a_worker_statefulset_is_denied_in_either_version(
    cluster: Cluster, api_version: str
) -> None:
    # autoscaling/v1 reaches the webhook converted to v2 (matchPolicy: Equivalent).
    done = cluster.dry_run_create(hpa(api_version, "StatefulSet", cluster.leader(0)))
    assert denied_by(done, "pod-counted-scaler"), done.stderr


def test_an_hpa_on_the_leaderworkerset_is_allowed(cluster: Cluster) -> None:
    done = cluster.dry_run_create(hpa("autoscaling/v2", "LeaderWorkerSet", cluster.lws))
    assert done.returncode == 0, done.stderr


def test_a_keda_scaledobject_on_a_worker_statefulset_is_denied(cluster: Cluster) -> None:
    if cluster.kubectl("get", "crd", "scaledobjects.keda.sh").returncode != 0:
        pytest.skip("no scaledobjects.keda.sh CRD in this cluster")
    scaled = {
        "apiVersion": "keda.sh/v1alpha1",
        "kind": "ScaledObject",
        "metadata": {"name": "e2e-keda"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "StatefulSet", "name": cluster.leader(0)}
        },
    }
    assert denied_by(cluster.dry_run_create(scaled), "pod-counted-scaler")


def test_kubectl_scale_of_a_worker_statefulset_is_denied(cluster: Cluster) -> None:
    done = cluster.kubectl(
        "scale", "statefulset", cluster.leader(0), "-n", cluster.namespace, "--replicas=9", "--dry-run=server"
    )
    assert denied_by(done, "pod-counted-scaler"), done.stderr


def test_patching_a_worker_statefulset_replicas_is_denied(cluster: Cluster) -> None:
    done = cluster.kubectl(
        "patch",
        "statefulset",
        cluster.leader(0),
        "-n",
        cluster.namespace,
        "--dry-run=server",
        "--type=merge",
        "-p",
        '{"spec":{"replicas":9}}',
    )
    assert denied_by(done, "pod-counted-scaler"), done.stderr


# group-capacity and group-spec


def test_kubectl_scale_lws_beyond_capacity_is_denied(cluster: Cluster) -> None:
    done = cluster.kubectl(
        "scale",
        "leaderworkerset",
        cluster.lws,
        "-n",
        cluster.namespace,
        f"--replicas={cluster.groups + 40}",
        "--dry-run=server",
    )
    assert denied_by(done, "group-capacity"), done.stderr


def test_kubectl_scale_lws_by_one_group_that_fits_is_allowed(cluster: Cluster) -> None:
    done = cluster.kubectl(
        "scale",
        "leaderworkerset",
        cluster.lws,
        "-n",
        cluster.namespace,
        f"--replicas={cluster.groups + 1}",
        "--dry-run=server",
    )
    assert done.returncode == 0, done.stderr


def test_creating_an_lws_no_node_can_host_is_denied(cluster: Cluster) -> None:
    assert denied_by(cluster.dry_run_create(lws_object(cluster, "e2e-too-big", "100000")), "group-capacity")


def test_an_lws_with_restart_policy_none_is_allowed_with_a_warning(cluster: Cluster) -> None:
    done = cluster.dry_run_create(lws_object(cluster, "e2e-lint", "10m", restartPolicy="None"))
    assert done.returncode == 0, done.stderr
    assert "Warning: [group-spec]" in done.stderr


# group-eviction (real evictions: last, and the fleet is restored afterwards)


def test_dry_run_evictions_are_judged_but_never_recorded(cluster: Cluster) -> None:
    for group in range(cluster.groups):
        done = cluster.evict(cluster.worker(group), dry_run=True, grace_period=0)
        assert done.returncode == 0, done.stderr  # each alone fits the budget of one group


def test_evictions_whose_body_is_a_dry_run_spend_no_budget(cluster: Cluster) -> None:
    """What `kubectl drain --dry-run=server` sends: each group's eviction passes (none recorded),
    and a real eviction afterwards is not refused for them (issue 47)."""
    cluster.wait_budget_free()
    try:
        for group in range(cluster.groups):
            done = cluster.evict(cluster.worker(group), body_dry_run=True, grace_period=0)
            assert done.returncode == 0, done.stderr
        real = cluster.evict(cluster.worker(1), grace_period=0)
        assert real.returncode == 0, real.stderr
    finally:
        cluster.restore()


def test_a_second_group_eviction_gets_429_until_the_first_group_is_back(cluster: Cluster) -> None:
    cluster.wait_budget_free()
    try:
        first = cluster.evict(cluster.worker(0), grace_period=0)
        assert first.returncode == 0, first.stderr
        second = cluster.evict(cluster.worker(1), grace_period=0)
        assert second.returncode != 0
        assert "[group-eviction]" in second.stderr
        assert "TooManyRequests" in second.stderr or "429" in second.stderr  # so kubectl drain retries
        if cluster.mode == "bare":  # no controller tears the broken group down here
            again = cluster.evict(cluster.worker(0, index=cluster.size - 1), grace_period=0)
            assert again.returncode == 0, again.stderr  # a group already broken may lose more pods
    finally:
        cluster.restore()
