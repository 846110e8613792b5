"""Group readiness against a real kube-apiserver (and etcd) from KUBEBUILDER_ASSETS: the API server
calls `guardhook serve` through the component's mutating webhook entry, stores the leader with the
readiness gate (the StatefulSet controller's identity, impersonated, creates it), and stores the
reconciler's pods/status patch next to the kubelet-owned conditions. Skipped, with the reason,
when the binaries are not there."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from guardhook.groups.ready import GATE, OPT_IN_ANNOTATION

from conftest import REPO, clean_env, start_server
from envtest import ApiServer, api_server, requires_api_server, wait_for

pytestmark = [pytest.mark.envtest, requires_api_server]

P = "leaderworkerset.sigs.k8s.io/"
PODS = "/api/v1/namespaces/serve/pods"
STS_CONTROLLER = "system:serviceaccount:kube-system:statefulset-controller"
COMPONENT = REPO / "manifests" / "components" / "group-readiness"


def _pod(name: str, worker: int) -> dict[str, Any]:
    labels = {P + "name": "small", P + "group-index": "0", P + "worker-index": str(worker)}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "serve", "labels": labels, "annotations": {P + "size": "2"}},
        "spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]},
    }


def _webhook_configuration(url: str, ca_pem: bytes) -> dict[str, Any]:
    """The component's webhook entry, pointed at `url` (the API server cannot resolve Services)."""
    [op] = yaml.safe_load((COMPONENT / "webhook.yaml").read_text())
    hook = copy.deepcopy(op["value"])
    hook["clientConfig"] = {"url": url + "/mutate", "caBundle": base64.b64encode(ca_pem).decode()}
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "guardhook-group-readiness-test"},
        "webhooks": [hook],
    }


def _condition(api: ApiServer, name: str, kind: str) -> dict[str, Any] | None:
    pod = api.get(f"{PODS}/{name}")
    return next((c for c in pod.get("status", {}).get("conditions", []) if c["type"] == kind), None)


def _set_status(api: ApiServer, name: str, **conditions: str) -> None:
    """Write pod conditions as the kubelet would (the API server runs no kubelet here): a strategic
    merge patch of pods/status, so PodStatus.conditions merges by `type` and guardhook's condition
    stays (a JSON merge patch would replace the whole list)."""
    status = {"phase": "Running", "conditions": [{"type": k, "status": v} for k, v in conditions.items()]}
    answer = api.session.patch(
        f"{api.url}{PODS}/{name}/status",
        json={"status": status},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
        timeout=30,
    )
    assert answer.status_code == 200, answer.text


def test_the_api_server_stores_the_gated_leader_and_the_condition_patch(tmp_path: Path) -> None:
    with api_server(tmp_path / "api") as api:
        for namespace in ("serve", "guardhook-system"):
            api.create(
                "/api/v1/namespaces",
                {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
            )
        lws = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": {"name": "small", "namespace": "serve", "annotations": {OPT_IN_ANNOTATION: "true"}},
            "spec": {
                "replicas": 1,
                "leaderWorkerTemplate": {
                    "size": 2,
                    "workerTemplate": {"spec": {"containers": [{"name": "c", "image": "example.com/c:1"}]}},
                },
            },
        }
        lws_path = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/serve/leaderworkersets"
        wait_for(  # Established can precede the CRD being served by a moment
            lambda: api.request("POST", lws_path, lws).status_code in (200, 201),
            30,
            "the LWS CRD to be served",
        )
        server = start_server(
            tmp_path / "serve",
            "--kubeconfig",
            str(api.kubeconfig),
            "--namespace",
            "guardhook-system",
            "--sync-group-readiness",
            env=clean_env(tmp_path),
        )
        try:
            api.create(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                _webhook_configuration(server.url, server.ca.read_bytes()),
            )

            def gated_dry_run() -> bool:  # the API server picks the configuration up asynchronously
                answer = api.request("POST", f"{PODS}?dryRun=All", _pod("small-0", 0))
                return answer.status_code == 201 and bool(answer.json()["spec"].get("readinessGates"))

            wait_for(gated_dry_run, 30, "the API server to call the group-readiness webhook")
            created = api.session.post(
                api.url + PODS,
                json=_pod("small-0", 0),
                headers={"Impersonate-User": STS_CONTROLLER},
                timeout=30,
            )
            assert created.status_code == 201, created.text
            assert created.json()["spec"]["readinessGates"] == [{"conditionType": GATE}]
            worker = api.create(PODS, _pod("small-0-1", 1))
            assert "readinessGates" not in worker["spec"]

            _set_status(api, "small-0", Ready="False", ContainersReady="True")
            _set_status(api, "small-0-1", Ready="True", ContainersReady="True")
            ready = wait_for(
                lambda: (c := _condition(api, "small-0", GATE)) and c["status"] == "True" and c,
                30,
                "the reconciler to set the condition True",
            )
            assert ready["reason"] == "GroupWhole" and ready["lastTransitionTime"]
            assert _condition(api, "small-0", "ContainersReady")["status"] == "True"  # merged by type

            _set_status(api, "small-0-1", Ready="False", ContainersReady="False")
            broken = wait_for(
                lambda: (c := _condition(api, "small-0", GATE)) and c["status"] == "False" and c,
                30,
                "the reconciler to set the condition False",
            )
            assert broken["message"] == "WorkerNotReady: small-0-1"
            assert _condition(api, "small-0-1", GATE) is None  # workers are never written
            lease = api.get(
                "/apis/coordination.k8s.io/v1/namespaces/guardhook-system/leases/guardhook-group-readiness"
            )
            assert lease["spec"]["holderIdentity"]
        finally:
            server.stop()
