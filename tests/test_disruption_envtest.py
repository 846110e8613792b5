"""group-taint and delete-based drains through a real kube-apiserver (etcd + kube-apiserver from
KUBEBUILDER_ASSETS) that calls a real `guardhook serve` through the ValidatingWebhookConfiguration
of manifests/base (clientConfig rewritten to `url:`): a node taint PATCH as `kubectl taint` sends
it, and `kubectl drain --disable-eviction`'s plain DELETEs. Skipped, with the reason, when the
binaries are not there.

A bare API server runs no controllers and no kubelets: a deleted pod bound to a node stays
terminating, and the fleet's statuses are the captured ones (created by test_envtest._create_fleet).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from kubernetes import client
from test_envtest import _create_fleet

from conftest import Server
from envtest import ApiServer, api_server, base_webhooks_calling, requires_api_server

# One worker runs the whole module (pytest-xdist's loadgroup), so its module-scoped API server
# starts once, not once per worker.
pytestmark = [pytest.mark.envtest, requires_api_server, pytest.mark.xdist_group("test_disruption_envtest")]

OWN_NAMESPACE = "guardhook-system"
MAINTENANCE = {"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"}


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    with api_server(tmp_path_factory.mktemp("envtest")) as running:
        _create_fleet(running.api_client())
        client.CoreV1Api(running.api_client()).create_namespace({"metadata": {"name": OWN_NAMESPACE}})
        yield running


@pytest.fixture
def guarded(api: ApiServer, fresh_server: Callable[..., Server]) -> Iterator[Server]:
    """guardhook serving the API server's view, registered with it as manifests/base says."""
    server = fresh_server("--kubeconfig", str(api.kubeconfig), "--namespace", OWN_NAMESPACE)
    with base_webhooks_calling(api, server.url, server.ca):
        yield server


def _eventually(check: Callable[[], bool], what: str, seconds: float = 30) -> None:
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.3)


def _patch(api: ApiServer, path: str, body: dict[str, Any], user: str | None = None) -> requests.Response:
    headers = {"Content-Type": "application/strategic-merge-patch+json"}
    if user:
        headers["Impersonate-User"] = user
    return api.session.patch(
        api.url + path + "?fieldManager=kubectl-taint", json=body, headers=headers, timeout=30
    )


def _set_ready(api: ApiServer, pod: str, ready: bool) -> None:
    core = client.CoreV1Api(api.api_client())
    current = core.read_namespaced_pod_status(pod, "serve")
    for condition in current.status.conditions:
        if condition.type == "Ready":
            condition.status = "True" if ready else "False"
    core.replace_namespaced_pod_status(pod, "serve", current)


def _taint(
    api: ApiServer, node: str, taints: list[dict[str, str]], user: str | None = None
) -> requests.Response:
    answer = _patch(api, f"/api/v1/nodes/{node}", {"spec": {"taints": taints or None}}, user)
    assert answer.status_code == 200, answer.text
    return answer


def test_a_node_taint_patch_is_warned_with_the_groups_it_breaks(api: ApiServer, guarded: Server) -> None:
    _set_ready(api, "llm-xl-0-1", False)  # group 0 broken: budget 1 spent
    try:

        def warned() -> bool:
            answer = _taint(api, "gpu-node-06", [MAINTENANCE])
            _taint(api, "gpu-node-06", [])
            return "[group-taint]" in answer.headers.get("Warning", "")

        # The API server picks up the webhook configuration and guardhook the not-Ready pod shortly.
        _eventually(warned, "the taint PATCH to carry group-taint's warning")
        answer = _taint(api, "gpu-node-06", [MAINTENANCE])
        warning = answer.headers["Warning"]
        assert "serve/llm-xl" in warning and "group 1 (llm-xl-1-2)" in warning
        assert answer.json()["spec"]["taints"][0]["effect"] == "NoExecute"  # Warn: admitted
        untainted = _taint(api, "gpu-node-06", [])
        assert "[group-taint]" not in untainted.headers.get("Warning", "")
        cordon = _patch(api, "/api/v1/nodes/gpu-node-10", {"spec": {"unschedulable": True}})
        assert cordon.status_code == 200 and "[group-taint]" not in cordon.headers.get("Warning", "")
        _patch(api, "/api/v1/nodes/gpu-node-10", {"spec": {"unschedulable": None}})
        # The node lifecycle / taint eviction controllers' identity is skipped by matchConditions.
        controller = _taint(
            api, "gpu-node-06", [MAINTENANCE], user="system:serviceaccount:kube-system:node-controller"
        )
        assert "[group-taint]" not in controller.headers.get("Warning", "")
        _taint(api, "gpu-node-06", [])
    finally:
        _set_ready(api, "llm-xl-0-1", True)


def test_delete_based_drain_within_and_over_the_budget(api: ApiServer, guarded: Server) -> None:
    def delete(pod: str, dry_run: bool = False) -> requests.Response:
        query = "?dryRun=All" if dry_run else ""
        return api.request("DELETE", f"/api/v1/namespaces/serve/pods/{pod}{query}")

    # A worker on a schedulable node: still denied, naming the leader with --cascade=foreground.
    # (dry runs while waiting: a real DELETE admitted before the webhook is active would stick)
    _eventually(lambda: delete("llm-xl-2-2", dry_run=True).status_code == 403, "worker-delete to deny")
    assert "--cascade=foreground" in delete("llm-xl-2-2", dry_run=True).json()["message"]
    for node in ("gpu-node-09", "gpu-node-13"):  # llm-xl-2-1 and llm-xl-3-1
        assert _patch(api, f"/api/v1/nodes/{node}", {"spec": {"unschedulable": True}}).status_code == 200
    _eventually(lambda: delete("llm-xl-2-1", dry_run=True).status_code == 200, "the view to see the cordon")
    assert delete("llm-xl-3-1", dry_run=True).status_code == 200  # the dry run recorded nothing
    first = delete("llm-xl-2-1")
    assert first.status_code == 200, first.text
    assert "[worker-delete]" in first.headers.get("Warning", "") and "drain" in first.headers["Warning"]
    second = delete("llm-xl-3-1")
    assert second.status_code == 429, second.text
    assert "group 2" in second.json()["message"]
