"""group-capacity on DRA devices from a real kube-apiserver (envtest: KUBEBUILDER_ASSETS holds etcd
and kube-apiserver). Skipped with the reason without the binaries, and when the server does not
serve resource.k8s.io/v1 (GA since Kubernetes 1.34; older servers had beta shapes, off by default).

No controllers and no DRA driver run: the test publishes ResourceSlices itself, as a driver's
kubelet plugin would, and writes a ResourceClaim's `status.allocation` as the scheduler would. The
live view (one reflector per kind) is then asked to judge `kubectl scale lws` requests (built from
the captured s29) on an LWS whose pods take GPUs only through a ResourceClaimTemplate.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from guardhook.admission.engine import Engine
from guardhook.cluster.kube_transport import live_view
from guardhook.cluster.sources import KUBECONFIG, Source
from guardhook.cluster.view.live import LiveView
from guardhook.policies.group_capacity import MODEL_ANNOTATION

from conftest import load_review
from envtest import ApiServer, api_server, requires_api_server

# One worker runs the whole module (pytest-xdist's loadgroup), so its module-scoped API server
# starts once, not once per worker.
pytestmark = [pytest.mark.envtest, requires_api_server, pytest.mark.xdist_group("test_dra_envtest")]

DRIVER = "gpu.example.com"
CLASS = "gpu.example.com"
NAMESPACE = "serve"
RESOURCE_V1 = "/apis/resource.k8s.io/v1"


def _wait(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """An API server holding two GPU nodes with 4 DRA devices each; skips when it does not serve
    resource.k8s.io/v1."""
    with api_server(tmp_path_factory.mktemp("dra-envtest")) as server:
        if server.request("GET", RESOURCE_V1).status_code != 200:
            pytest.skip("the API server does not serve resource.k8s.io/v1 (Kubernetes 1.34+); DRA not judged")
        _create_cluster(server)
        yield server


def _node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"kubernetes.io/hostname": name}},
    }


def _slice(node: str) -> dict[str, Any]:
    """The ResourceSlice a DRA driver publishes for `node`'s 4 GPUs (resource.k8s.io/v1)."""
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceSlice",
        "metadata": {"name": f"{node}-{DRIVER}"},
        "spec": {
            "driver": DRIVER,
            "nodeName": node,
            "pool": {"name": node, "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": f"gpu-{i}", "attributes": {"model": {"string": "H100"}}} for i in range(4)],
        },
    }


def _create_cluster(server: ApiServer) -> None:
    server.create(
        "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}
    )
    for name in ("gpu-0", "gpu-1"):
        server.create("/api/v1/nodes", _node(name))
        status = {
            "allocatable": {"cpu": "96", "memory": "2000Gi", "pods": "110"},
            "capacity": {"cpu": "96", "memory": "2000Gi", "pods": "110"},
            "conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "ready"}],
        }
        server.merge_patch(f"/api/v1/nodes/{name}/status", {"status": status})
        # TaintNodesAtCreation added node.kubernetes.io/not-ready:NoSchedule on CREATE; no node
        # lifecycle controller runs here to lift it, and an untolerated NoSchedule taint keeps the
        # capacity model off the node (TaintToleration). A PATCH is not re-tainted.
        untainted = server.merge_patch(f"/api/v1/nodes/{name}", {"spec": {"taints": None}})
        assert not untainted["spec"].get("taints"), untainted["spec"]
        server.create(f"{RESOURCE_V1}/resourceslices", _slice(name))
    server.create(
        f"{RESOURCE_V1}/deviceclasses",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "DeviceClass",
            "metadata": {"name": CLASS},
            "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{DRIVER}'"}}]},
        },
    )
    server.create(
        f"{RESOURCE_V1}/namespaces/{NAMESPACE}/resourceclaimtemplates",
        {
            "apiVersion": "resource.k8s.io/v1",
            "kind": "ResourceClaimTemplate",
            "metadata": {"name": "gpus-4", "namespace": NAMESPACE},
            "spec": {
                "spec": {
                    "devices": {
                        "requests": [{"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": 4}}]
                    }
                }
            },
        },
    )
    _create_lws(server)


def _create_lws(server: ApiServer) -> None:
    """LWS serve/llm: 1 group of 1 pod taking 4 GPUs through the ResourceClaimTemplate gpus-4."""
    container = {
        "name": "server",
        "image": "example.com/llm-server:1.0",
        "resources": {"requests": {"cpu": "8", "memory": "100Gi"}, "claims": [{"name": "gpus"}]},
    }
    template = {
        "spec": {
            "containers": [container],
            "resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "gpus-4"}],
        }
    }
    lws = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": NAMESPACE},
        "spec": {"replicas": 1, "leaderWorkerTemplate": {"size": 1, "workerTemplate": template}},
    }
    server.create(f"/apis/leaderworkerset.x-k8s.io/v1/namespaces/{NAMESPACE}/leaderworkersets", lws)


def _allocate_gpu0(server: ApiServer) -> None:
    """A claim holding all 4 GPUs of gpu-0, allocated as the scheduler writes it."""
    path = f"{RESOURCE_V1}/namespaces/{NAMESPACE}/resourceclaims"
    claim = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "training-0", "namespace": NAMESPACE},
        "spec": {
            "devices": {"requests": [{"name": "gpus", "exactly": {"deviceClassName": CLASS, "count": 4}}]}
        },
    }
    server.create(path, claim)
    allocation = {
        "devices": {
            "results": [
                {"request": "gpus", "driver": DRIVER, "pool": "gpu-0", "device": f"gpu-{i}"} for i in range(4)
            ]
        },
        "nodeSelector": {
            "nodeSelectorTerms": [
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["gpu-0"]}]}
            ]
        },
    }
    server.merge_patch(f"{path}/training-0/status", {"status": {"allocation": allocation}})


@pytest.fixture
def live(api: ApiServer) -> Iterator[LiveView]:
    running = live_view(Source(KUBECONFIG, (str(api.kubeconfig),)), stale_after_seconds=60).start()
    try:
        _wait(lambda: running.view.synced, 30, "the live view to list every kind")
        yield running
    finally:
        running.stop()


def _judge(live: LiveView, replicas: int) -> dict[str, Any]:
    """`kubectl scale lws llm --replicas=N` from 1 (the captured s29, re-aimed): N-1 new groups."""
    request = copy.deepcopy(load_review("s29-lws-scale-up-1.validating")["request"])
    request["name"] = "llm"
    request["namespace"] = NAMESPACE
    for side, count in (("object", replicas), ("oldObject", 1)):
        request[side]["metadata"].update(name="llm", namespace=NAMESPACE)
        request[side]["spec"]["replicas"] = count
    return dict(Engine(live.view, record=False).judge(request).response)


def test_a_scale_up_is_judged_on_the_devices_the_api_server_holds(api: ApiServer, live: LiveView) -> None:
    # Group 0 has no pods here (no LWS controller runs), so only the new groups ask for devices:
    # 4 GPUs each, of the 8 the two ResourceSlices publish.
    _wait(lambda: len(live.view.devices_by_node()) == 2, 20, "both ResourceSlices in the view")
    fits = _judge(live, 3)  # 2 new groups: 8 GPUs asked, 8 free
    assert fits["allowed"] is True, fits
    assert f"DeviceClass {CLASS}" in fits["auditAnnotations"][MODEL_ANNOTATION]
    over = _judge(live, 4)  # 3 new groups: 12 GPUs asked, 8 free
    assert over["allowed"] is False and "2 of 3 new groups" in over["status"]["message"], over

    _allocate_gpu0(api)  # the watch brings the allocation in: gpu-0's 4 GPUs are taken
    _wait(
        lambda: bool(live.view.claim_devices(NAMESPACE, "training-0")), 20, "the allocated claim in the view"
    )
    denied = _judge(live, 3)
    assert denied["allowed"] is False
    assert "1 of 2 new groups" in denied["status"]["message"]
    assert _judge(live, 2)["allowed"] is True  # gpu-1's 4 GPUs are still free

    deleted = api.request("DELETE", f"{RESOURCE_V1}/namespaces/{NAMESPACE}/resourceclaims/training-0")
    assert deleted.status_code == 200, deleted.text  # no finalizer: gone at once
    _wait(lambda: _judge(live, 3)["allowed"] is True, 20, "the freed devices to count again")


def test_the_live_view_lists_the_served_version(api: ApiServer, live: LiveView) -> None:
    reflector = live.reflectors["resourceslices"]
    assert reflector.stats.served is True
    served = getattr(reflector.transport, "served_version", lambda kind: "")("resourceslices")
    assert served == "resource.k8s.io/v1"
