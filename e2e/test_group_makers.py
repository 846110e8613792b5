"""Group makers beyond LWS Ordinal on the real 1.37 cluster (issue 36): a Hash-mode LWS drained with
`kubectl drain` under a budget of 1 (its pods made by e2e/hash_standin.py, as LWS main makes them),
and a Workload API gang (scheduling.k8s.io/v1beta1 PodGroups, disruptionMode all; served with the
GenericWorkload gate) evicted group by group. Kubeconfig mode only; each test skips, saying why,
when the cluster lacks what it needs."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from hash_standin import GROUP_KEY, WORKER_INDEX, HashStandin, hash_lws

from cluster import LWS_NAME_LABEL, Cluster, eventually, pod_image, skip_or_fail

POD_SPEC = {
    "terminationGracePeriodSeconds": 1,
    "containers": [{"name": "c", "image": pod_image(), "resources": {"requests": {"cpu": "10m"}}}],
}


def _need_cluster_mode(cluster: Cluster) -> None:
    if cluster.mode != "cluster":
        pytest.skip("needs a cluster with controllers and kubelets (GUARDHOOK_E2E_KUBECONFIG)")


def _groups_broken(cluster: Cluster, lws: str, groups: int, size: int) -> int:
    """Groups of Hash LWS `lws` not whole now: `groups` minus the keys with `size` Ready pods that
    carry every label LWS gives at admission (the stand-in labels a worker's index after it is
    created, the one step it does later than LWS)."""
    out = cluster.must("get", "pods", "-n", cluster.namespace, "-l", f"{LWS_NAME_LABEL}={lws}", "-o", "json")
    ready: dict[str, int] = {}
    for pod in json.loads(out)["items"]:
        key = pod["metadata"].get("labels", {}).get(GROUP_KEY)
        conditions = {c["type"]: c["status"] for c in pod.get("status", {}).get("conditions", [])}
        labelled = key and WORKER_INDEX in pod["metadata"].get("labels", {})
        if labelled and not pod["metadata"].get("deletionTimestamp") and conditions.get("Ready") == "True":
            ready[key] = ready.get(key, 0) + 1
    return groups - sum(1 for count in ready.values() if count >= size)


def test_a_hash_lws_is_drained_one_group_at_a_time(cluster: Cluster) -> None:
    _need_cluster_mode(cluster)
    name, groups, size = "e2e-hash", 2, 2
    lws = hash_lws(name, groups, size, POD_SPEC)
    lws["metadata"]["annotations"] = {"guardhook.io/max-disrupted-groups": "1"}
    cluster.must("apply", "-n", cluster.namespace, "-f", "-", stdin=json.dumps(lws))
    served = cluster.must("get", "lws", name, "-n", cluster.namespace, "-o", "jsonpath={.spec.groupIdentity}")
    if served != "Hash":
        cluster.kubectl("delete", "lws", name, "-n", cluster.namespace, "--wait=false")
        skip_or_fail("the LWS CRD on this cluster has no spec.groupIdentity (LWS main's CRD is needed)")
    standin = HashStandin(cluster, name, size, POD_SPEC)
    standin.start(groups)
    try:
        eventually(
            lambda: _groups_broken(cluster, name, groups, size) == 0, 300, "whole Hash groups", interval=2
        )
        out = cluster.must(
            "get", "pods", "-n", cluster.namespace, "-l", f"{LWS_NAME_LABEL}={name}", "-o", "json"
        )
        nodes = sorted({p["spec"]["nodeName"] for p in json.loads(out)["items"]})
        worst, stop = [0], threading.Event()

        def watch() -> None:
            while not stop.wait(0.5):
                worst[0] = max(worst[0], _groups_broken(cluster, name, groups, size))

        watcher = threading.Thread(target=watch, daemon=True)
        watcher.start()
        try:
            # One node: a drained group cannot come back while its node is cordoned, so the drain
            # must hold the second group back (429) until its timeout; that is the budget at work.
            drain = cluster.kubectl(
                "drain",
                *nodes,
                "--ignore-daemonsets",
                "--delete-emptydir-data",
                "--force",
                f"--pod-selector={LWS_NAME_LABEL}={name}",
                "--timeout=40s",
                timeout=120,
            )
        finally:
            stop.set()
            watcher.join(timeout=10)
            cluster.kubectl("uncordon", *nodes)
        evicted = drain.stdout.count("evicted")
        assert evicted >= 1, drain.stdout + drain.stderr
        assert worst[0] <= 1, f"{worst[0]} Hash groups were broken at once under a budget of 1"
        if len(nodes) == 1:
            assert "[group-eviction]" in drain.stderr, drain.stderr
    finally:
        standin.stop()
        cluster.kubectl("delete", "deployment,lws", name, "-n", cluster.namespace, "--wait=false")


def _pod_group(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1beta1",
        "kind": "PodGroup",
        "metadata": {"name": name},
        "spec": {
            "workloadRef": {"workloadName": "e2e-gangs", "templateName": "workers"},
            "schedulingPolicy": {"gang": {"minCount": 2}},
            "disruptionMode": {"all": {}},
        },
    }


def _gang_pod(group: str, index: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": f"{group}-{index}", "labels": {"app": "e2e-gangs"}},
        "spec": {**POD_SPEC, "schedulingGroup": {"podGroupName": group}},
    }


def test_a_pod_group_gang_is_evicted_group_by_group(cluster: Cluster) -> None:
    _need_cluster_mode(cluster)
    if cluster.kubectl("get", "podgroups.v1beta1.scheduling.k8s.io", "-n", cluster.namespace).returncode != 0:
        pytest.skip("scheduling.k8s.io/v1beta1 PodGroups are not served (GenericWorkload gate off?)")
    groups = ["e2e-gang-0", "e2e-gang-1"]
    objects = [_pod_group(g) for g in groups] + [_gang_pod(g, i) for g in groups for i in range(2)]
    manifest = json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    cluster.must("apply", "-n", cluster.namespace, "-f", "-", stdin=manifest)
    try:

        def running() -> bool:
            out = cluster.must("get", "pods", "-n", cluster.namespace, "-l", "app=e2e-gangs", "-o", "json")
            items = json.loads(out)["items"]
            ready = [
                p
                for p in items
                if any(
                    c["type"] == "Ready" and c["status"] == "True"
                    for c in p.get("status", {}).get("conditions", [])
                )
            ]
            return len(ready) == 4

        eventually(running, 300, "both gangs Ready", interval=2)
        time.sleep(2)  # the view sees them Ready
        first = cluster.evict("e2e-gang-0-0")
        assert first.returncode == 0, first.stderr
        second = cluster.evict("e2e-gang-1-0")
        assert second.returncode != 0 and "[group-eviction]" in second.stderr
        assert "PodGroup" in second.stderr
        same = cluster.evict("e2e-gang-0-1")  # the broken gang may lose the rest
        assert same.returncode == 0, same.stderr
        # gang 0 back whole (bare pods: recreated by the test once the evicted ones are gone, since an
        # apply while they terminate only updates them): then gang 1 may go
        eventually(
            lambda: (
                not cluster.must(
                    "get",
                    "pods",
                    "-n",
                    cluster.namespace,
                    "-l",
                    "app=e2e-gangs",
                    "-o",
                    "name",
                    "--ignore-not-found",
                ).count("e2e-gang-0-")
            ),
            120,
            "gang 0's evicted pods gone",
            interval=2,
        )
        cluster.must(
            "apply",
            "-n",
            cluster.namespace,
            "-f",
            "-",
            stdin=json.dumps(
                {"apiVersion": "v1", "kind": "List", "items": [_gang_pod(groups[0], i) for i in range(2)]}
            ),
        )
        eventually(running, 300, "gang 0 whole again", interval=2)
        eventually(
            lambda: cluster.evict("e2e-gang-1-0").returncode == 0,
            180,
            "gang 1's eviction allowed",
            interval=5,
        )
    finally:
        # The PodGroups first: a gang whose PodGroup is being deleted is broken, so worker-delete
        # (which the bare pods reach by their schedulingGroup) allows their DELETEs once the view
        # has seen it; until then a whole gang's are denied, hence the retries.
        pod_groups = {"apiVersion": "v1", "kind": "List", "items": [_pod_group(g) for g in groups]}
        cluster.kubectl(
            "delete", "-n", cluster.namespace, "-f", "-", "--wait=false", stdin=json.dumps(pod_groups)
        )
        eventually(
            lambda: (
                cluster.kubectl(
                    "delete", "pods", "-n", cluster.namespace, "-l", "app=e2e-gangs", "--wait=false"
                ).returncode
                == 0
            ),
            60,
            "the gangs' pods deleted",
            interval=2,
        )
