"""Kubernetes 1.37 behaviours of issue 37 on a real cluster (../shared/realcluster with v1.37
binaries; the lead runs them): ResourceSlices with shared counter sets written as a DRA driver
publishes them and a ResourceClaim the real scheduler allocates, then an LWS scale-up judged
against them; a pod-level `pods/resize` of a running LWS pod; node lifecycle conditions patched
onto a node's status as a maintenance controller writes them. Each test skips when the server
does not serve what it needs (an older server, a feature gate off), and cleans up what it made.

    GUARDHOOK_E2E_KUBECONFIG=$KUBECONFIG .venv/bin/pytest -q e2e/test_kubernetes_137.py
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from cluster import LWS_NAME_LABEL, Cluster, eventually, pod_image

DRIVER = "e2e.guardhook.io"
GPU_CLASS = "e2e-full-gpu"
MIG_CLASS = "e2e-mig-1g"


def served(cluster: Cluster, field: str) -> bool:
    """Whether the server's OpenAPI knows `field` (`kubectl explain`), e.g. a 1.36+ field."""
    return cluster.kubectl("explain", field).returncode == 0


def node_of(cluster: Cluster, pod: str) -> str:
    return cluster.must("get", "pod", pod, "-n", cluster.namespace, "-o", "jsonpath={.spec.nodeName}").strip()


def apply(cluster: Cluster, *objects: dict[str, Any]) -> None:
    cluster.must(
        "apply", "-f", "-", stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)})
    )


def delete(cluster: Cluster, *objects: dict[str, Any]) -> None:
    cluster.kubectl(
        "delete",
        "--ignore-not-found",
        "--wait=false",
        "-f",
        "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": list(objects)}),
    )


# ---- partitionable devices: counter sets and a claim the scheduler allocates ------------------------


def _counters(memory: str, slices: range) -> dict[str, Any]:
    return {"memory": {"value": memory}, **{f"memory-slice-{i}": {"value": "1"} for i in slices}}


def _dra_objects(node: str) -> list[dict[str, Any]]:
    """A DeviceClass per kind of device and the two slices a DynamicMIG-style driver publishes on
    1.35+ (counters apart from devices): one GPU `gpu-0` consuming every counter of its set and
    two 1g partitions consuming one memory slice each (NVIDIA k8s-dra-driver-gpu partitions.go)."""
    pool = {"name": node, "generation": 1, "resourceSliceCount": 2}
    counter_set = "gpu-0-counter-set"
    devices = [
        {
            "name": "gpu-0",
            "attributes": {"type": {"string": "gpu"}},
            "capacity": {"memory": {"value": "16Gi"}},
            "consumesCounters": [{"counterSet": counter_set, "counters": _counters("16Gi", range(2))}],
        },
        *(
            {
                "name": f"gpu-0-mig-1g8gb-19-{start}",
                "attributes": {"type": {"string": "mig"}},
                "capacity": {"memory": {"value": "8Gi"}},
                "consumesCounters": [
                    {"counterSet": counter_set, "counters": _counters("8Gi", range(start, start + 1))}
                ],
            }
            for start in range(2)
        ),
    ]
    base = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceSlice"}
    classes = [
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": name},
            "spec": {
                "selectors": [
                    {
                        "cel": {
                            "expression": f"device.driver == '{DRIVER}' && "
                            f"device.attributes['{DRIVER}'].type == '{kind}'"
                        }
                    }
                ]
            },
        }
        for name, kind in ((GPU_CLASS, "gpu"), (MIG_CLASS, "mig"))
    ]
    return [
        *classes,
        {
            **base,
            "metadata": {"name": f"{node}-e2e-counters"},
            "spec": {
                "driver": DRIVER,
                "nodeName": node,
                "pool": pool,
                "sharedCounters": [{"name": counter_set, "counters": _counters("16Gi", range(2))}],
            },
        },
        {
            **base,
            "metadata": {"name": f"{node}-e2e-devices"},
            "spec": {"driver": DRIVER, "nodeName": node, "pool": pool, "devices": devices},
        },
    ]


def _claim_and_pod(cluster: Cluster, node: str) -> list[dict[str, Any]]:
    """A claim for one 1g partition and a pod using it, pinned to `node`: the scheduler allocates
    the claim when it binds the pod (no kubelet plugin runs, so the pod itself never starts)."""
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "e2e-mig", "namespace": cluster.namespace},
        "spec": {"devices": {"requests": [{"name": "mig", "exactly": {"deviceClassName": MIG_CLASS}}]}},
    }
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "e2e-mig-user", "namespace": cluster.namespace},
        "spec": {
            "nodeSelector": {"kubernetes.io/hostname": node},
            "resourceClaims": [{"name": "mig", "resourceClaimName": "e2e-mig"}],
            "containers": [
                {
                    "name": "pause",
                    "image": pod_image(),
                    "resources": {"claims": [{"name": "mig"}]},
                }
            ],
        },
    }
    return [claim, pod]


def _lws_needing_a_whole_gpu(cluster: Cluster) -> dict[str, Any]:
    template = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "e2e-full-gpu", "namespace": cluster.namespace},
        "spec": {
            "spec": {"devices": {"requests": [{"name": "gpu", "exactly": {"deviceClassName": GPU_CLASS}}]}}
        },
    }
    apply(cluster, template)
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "e2e-whole-gpu", "namespace": cluster.namespace},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 1,
                "workerTemplate": {
                    "spec": {
                        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "e2e-full-gpu"}],
                        "containers": [
                            {
                                "name": "pause",
                                "image": pod_image(),
                                "resources": {"requests": {"cpu": "10m"}, "claims": [{"name": "gpu"}]},
                            }
                        ],
                    }
                },
            },
        },
    }


@pytest.fixture
def counter_sets(cluster: Cluster) -> Iterator[str]:
    if not served(cluster, "resourceslices.spec.sharedCounters") or not served(
        cluster, "resourceslices.spec.devices.consumesCounters"
    ):
        pytest.skip("the server does not serve partitionable devices (KEP-4815: DRAPartitionableDevices)")
    node = node_of(cluster, cluster.worker(0))
    objects = _dra_objects(node)
    apply(cluster, *objects)
    yield node
    delete(cluster, *_claim_and_pod(cluster, node))
    delete(cluster, *objects)
    cluster.kubectl(
        "delete", "resourceclaimtemplate", "e2e-full-gpu", "-n", cluster.namespace, "--ignore-not-found"
    )


def test_a_partition_the_scheduler_allocated_keeps_the_whole_gpu_from_a_scale_up(
    cluster: Cluster, counter_sets: str
) -> None:
    lws = _lws_needing_a_whole_gpu(cluster)
    before = cluster.dry_run_create(lws)
    assert before.returncode == 0, before.stderr  # control: the whole GPU is free
    claim_and_pod = _claim_and_pod(cluster, counter_sets)
    apply(cluster, *claim_and_pod)

    def allocated() -> bool:
        done = cluster.kubectl(
            "get",
            "resourceclaim",
            "e2e-mig",
            "-n",
            cluster.namespace,
            "-o",
            "jsonpath={.status.allocation.devices.results[*].device}",
        )
        return done.returncode == 0 and "mig" in done.stdout

    eventually(allocated, 60, "the scheduler to allocate a 1g partition")
    after = cluster.dry_run_create(lws)
    assert after.returncode != 0 and "[group-capacity]" in after.stderr, after.stderr
    assert "counter rule" in after.stderr


# ---- pod-level in-place resize of a running LWS pod -----------------------------------------------------


@pytest.fixture
def pod_level_lws(cluster: Cluster) -> Iterator[str]:
    if not served(cluster, "pods.spec.resources"):
        pytest.skip("the server does not serve pod-level resources (KEP-2837)")
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "e2e-podlevel", "namespace": cluster.namespace},
        "spec": {
            "replicas": 1,
            "leaderWorkerTemplate": {
                "size": 2,
                "restartPolicy": "RecreateGroupOnPodRestart",
                "workerTemplate": {
                    "spec": {
                        "resources": {
                            "requests": {"cpu": "50m", "memory": "32Mi"},
                            "limits": {"memory": "64Mi"},
                        },
                        "terminationGracePeriodSeconds": 1,
                        "containers": [
                            {
                                "name": "pause",
                                "image": pod_image(),
                                "resizePolicy": [
                                    {"resourceName": "cpu", "restartPolicy": "NotRequired"},
                                    {"resourceName": "memory", "restartPolicy": "RestartContainer"},
                                ],
                            }
                        ],
                    }
                },
            },
        },
    }
    apply(cluster, lws)
    worker = "e2e-podlevel-0-1"

    def running() -> bool:
        done = cluster.kubectl(
            "get", "pod", worker, "-n", cluster.namespace, "-o", "jsonpath={.status.phase}"
        )
        return done.stdout.strip() == "Running"

    eventually(running, 180, "the pod-level LWS worker to run")
    yield worker
    delete(cluster, lws)


def _resize(cluster: Cluster, pod: str, resources: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return cluster.kubectl(
        "patch",
        "pod",
        pod,
        "-n",
        cluster.namespace,
        "--subresource",
        "resize",
        "--type",
        "merge",
        "-p",
        json.dumps({"spec": {"resources": resources}}),
        "--dry-run=server",
    )


def test_a_pod_level_memory_resize_restarting_an_inheriting_container_is_a_group_disruption(
    cluster: Cluster, pod_level_lws: str
) -> None:
    done = _resize(cluster, pod_level_lws, {"limits": {"memory": "96Mi"}})
    if done.returncode != 0 and "resize" in done.stderr and "[group-resize]" not in done.stderr:
        pytest.skip(f"the server refuses pod-level resize (KEP-5419 gate off?): {done.stderr.strip()}")
    assert done.returncode == 0, done.stderr  # within the budget (a dry run records nothing)
    assert "[group-resize]" in done.stderr and "inherited from the pod-level spec.resources" in done.stderr
    control = _resize(cluster, pod_level_lws, {"requests": {"cpu": "60m", "memory": "32Mi"}})
    assert control.returncode == 0 and "[group-resize]" not in control.stderr, control.stderr


# ---- node lifecycle conditions patched as a maintenance controller writes them ------------------------


def _condition(cluster: Cluster, node: str, kind: str, status: str) -> None:
    patch = {
        "status": {
            "conditions": [{"type": kind, "status": status, "reason": "E2E", "message": "guardhook e2e"}]
        }
    }
    cluster.must(
        "patch", "node", node, "--subresource", "status", "--type", "strategic", "-p", json.dumps(patch)
    )


@pytest.fixture
def maintenance_planned(cluster: Cluster) -> Iterator[str]:
    node = node_of(cluster, cluster.worker(0))
    _condition(cluster, node, "MaintenancePlanned", "True")
    yield node
    _condition(cluster, node, "MaintenancePlanned", "False")


def test_a_worker_delete_on_a_maintenance_planned_node_is_a_budgeted_drain(
    cluster: Cluster, maintenance_planned: str
) -> None:
    done = cluster.kubectl("delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--dry-run=server")
    assert done.returncode == 0, done.stderr
    assert "node condition MaintenancePlanned=True" in done.stderr, done.stderr
    plan = subprocess.run(
        [
            sys.executable,
            "-m",
            "guardhook",
            "drain-plan",
            "--kubeconfig",
            str(cluster.kubeconfig),
            "--draining",
            "--format",
            "json",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (
        json.loads(plan.stdout)["draining"].get(maintenance_planned)
        == "node condition MaintenancePlanned=True"
    )


def test_control_without_the_condition_the_worker_delete_is_denied(cluster: Cluster) -> None:
    node = node_of(cluster, cluster.worker(0))
    _condition(cluster, node, "MaintenancePlanned", "False")
    done = cluster.kubectl("delete", "pod", cluster.worker(0), "-n", cluster.namespace, "--dry-run=server")
    assert done.returncode != 0 and "[worker-delete]" in done.stderr


def test_a_drain_under_drain_in_progress_still_gets_its_429(cluster: Cluster) -> None:
    """`kubectl drain --report-node-conditions` sets DrainInProgress on the node it drains: the
    condition must not count the node's groups as broken (that let every group's eviction through);
    the second group's eviction is 429 as without it (issue 47)."""
    cluster.wait_budget_free()
    node = node_of(cluster, cluster.worker(0))
    _condition(cluster, node, "DrainInProgress", "True")
    try:
        first = cluster.evict(cluster.worker(0))
        assert first.returncode == 0, first.stderr
        second = cluster.evict(cluster.worker(1))
        assert second.returncode != 0 and "[group-eviction]" in second.stderr, second.stderr
    finally:
        _condition(cluster, node, "DrainInProgress", "False")
        cluster.restore()


def test_kubectl_drain_dry_run_server_then_a_real_eviction(cluster: Cluster) -> None:
    """`kubectl drain --dry-run=server` evicts every pod of the node with `deleteOptions.dryRun`
    (admission sees `request.dryRun: false`): it finishes, and spends nothing — the real eviction
    that follows is allowed (issue 47)."""
    cluster.wait_budget_free()
    node = node_of(cluster, cluster.worker(0))
    drained = cluster.kubectl(
        "drain",
        node,
        "--dry-run=server",
        "--ignore-daemonsets",
        "--delete-emptydir-data",
        "--force",
        f"--pod-selector={LWS_NAME_LABEL}={cluster.lws}",
        "--timeout=90s",
        timeout=120,
    )
    assert drained.returncode == 0, drained.stderr
    try:
        real = cluster.evict(cluster.worker(1))
        assert real.returncode == 0, real.stderr
    finally:
        cluster.restore()
