"""A bare member of a Workload API gang through a real kube-apiserver (etcd + kube-apiserver from
KUBEBUILDER_ASSETS, gate `GenericWorkload` and `scheduling.k8s.io/v1beta1` on, as a 1.37 cluster
with the Workload API runs them) that calls a real `guardhook serve` through the
ValidatingWebhookConfiguration of manifests/base (clientConfig rewritten to `url:`). The API server
evaluates worker-delete's matchConditions itself (its CEL compiler, type checker and cost limits):
a DELETE of a pod with no controller and no LWS label that names a `disruptionMode: all` PodGroup in
`spec.schedulingGroup.podGroupName` must reach guardhook and be denied while the gang is whole.
Skipped, with the reason, when the binaries are not there.

The gang is tests/group_shapes.gang_objects' (pods made from the sample fleet's workers, statuses
kept), made bare. A bare API server runs no scheduler or kubelet: pods keep the status written here.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from typing import Any

import group_shapes as shapes
import pytest
import requests
from test_envtest import _fresh

from conftest import Server
from envtest import ApiServer, api_server, base_webhooks_calling, requires_api_server

# One worker runs the whole module (pytest-xdist's loadgroup), so its module-scoped API server
# starts once, not once per worker.
pytestmark = [pytest.mark.envtest, requires_api_server, pytest.mark.xdist_group("test_gang_delete_envtest")]

OWN_NAMESPACE = "guardhook-system"
NAMESPACE = "train"
POD_GROUPS = f"/apis/scheduling.k8s.io/v1beta1/namespaces/{NAMESPACE}/podgroups"
PODS = f"/api/v1/namespaces/{NAMESPACE}/pods"
WORKLOAD_API = ("--feature-gates=GenericWorkload=true", "--runtime-config=scheduling.k8s.io/v1beta1=true")
"""The Workload API: beta and off by default in 1.37 (gate GenericWorkload, kube-apiserver -h)."""
LONER = "loner"
"""A bare pod naming no PodGroup: no group, so worker-delete is not even called for it."""


def _bare_gang() -> list[dict[str, Any]]:
    """One `disruptionMode: all` PodGroup `train-0` (gang minCount 2, of no Workload and no owner)
    and its two pods with neither labels nor ownerReferences, plus LONER (no schedulingGroup)."""
    objects = shapes.gang_objects(groups=1, workload=None)
    for obj in objects:
        obj["metadata"].pop("ownerReferences", None)
        if obj["kind"] == "Pod":
            obj["metadata"].pop("labels", None)
            obj["metadata"].pop("generateName", None)
    loner = copy.deepcopy(shapes.pod(objects, "train-0-1"))
    loner["metadata"]["name"] = LONER
    del loner["spec"]["schedulingGroup"]
    return [*objects, loner]


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with api_server(tmp_path_factory.mktemp("envtest"), WORKLOAD_API) as running:
        for namespace in (NAMESPACE, OWN_NAMESPACE):
            running.create("/api/v1/namespaces", {"metadata": {"name": namespace}})
        for obj in _bare_gang():
            if obj["kind"] == "PodGroup":
                running.create(POD_GROUPS, _fresh(obj, {}))
                continue
            made = running.create(PODS, _fresh(obj, {}))
            # what the pod's node reported when it ran: Running, Ready
            running.merge_patch(f"{PODS}/{made['metadata']['name']}/status", {"status": obj["status"]})
        yield running


@pytest.fixture
def guarded(api: ApiServer, fresh_server: Callable[..., Server]) -> Iterator[Server]:
    """guardhook serving the API server's view, registered with it as manifests/base says."""
    server = fresh_server("--kubeconfig", str(api.kubeconfig), "--namespace", OWN_NAMESPACE)
    with base_webhooks_calling(api, server.url, server.ca):
        yield server


def _delete(api: ApiServer, pod: str) -> requests.Response:
    """A dry-run DELETE (judged as a real one, records nothing, leaves the pod for the next test)."""
    return api.request("DELETE", f"{PODS}/{pod}?dryRun=All")


def _eventually(check: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def test_the_api_server_keeps_the_pods_scheduling_group(api: ApiServer) -> None:
    """The control: with the gate on, the API server stores `spec.schedulingGroup` (a gated field
    is dropped when the gate is off, and then nothing below would test the new condition)."""
    pod = api.get(f"{PODS}/train-0-0")
    assert pod["spec"]["schedulingGroup"] == {"podGroupName": "train-0"}
    assert "ownerReferences" not in pod["metadata"] and not pod["metadata"].get("labels")
    group = api.get(f"{POD_GROUPS}/train-0")
    assert group["spec"]["disruptionMode"] == {"all": {}}


def test_deleting_a_bare_member_of_a_whole_gang_is_denied(api: ApiServer, guarded: Server) -> None:
    # The API server picks up the webhook configuration and guardhook its view shortly.
    _eventually(lambda: _delete(api, "train-0-0").status_code == 403, "worker-delete to deny")
    answer = _delete(api, "train-0-0").json()
    assert answer["message"].startswith('admission webhook "worker-delete.guardhook.io" denied')
    assert (
        "pod train/train-0-0 is a member of PodGroup train/train-0 (disruptionMode all, 2 pods), "
        "which is whole" in answer["message"]
    )
    assert _delete(api, LONER).status_code == 200  # a bare pod of no gang


def test_once_its_pod_group_is_deleted_the_gang_may_be_deleted(api: ApiServer, guarded: Server) -> None:
    """`kubectl delete -f` of the gang: the PodGroup first, kept terminating by the API server's
    PodGroupProtection finalizer until its pods are gone; then its pods, which guardhook allows
    (the gang is going as a whole). Last in the module: the PodGroup stays terminating."""
    _eventually(lambda: _delete(api, "train-0-0").status_code == 403, "worker-delete to deny")
    assert api.request("DELETE", f"{POD_GROUPS}/train-0").status_code == 200
    group = api.get(f"{POD_GROUPS}/train-0")
    assert group["metadata"]["deletionTimestamp"]
    assert group["metadata"]["finalizers"] == ["scheduling.k8s.io/podgroup-protection"]
    _eventually(lambda: _delete(api, "train-0-0").status_code == 200, "the view to see the PodGroup go")
    assert _delete(api, "train-0-1").status_code == 200
