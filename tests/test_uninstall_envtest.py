"""`guardhook uninstall` against a real kube-apiserver (issue 22): the webhook configurations as
rendered, a per-group PDB guardhook wrote, a leader held by the readiness gate and the Deployment;
afterwards none of them blocks a drain or holds the leader, and the user's own PDB is untouched."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from test_manifests import MANIFESTS

from guardhook.commands.main import main
from guardhook.groups.ready import GATE

from conftest import FIXTURES
from envtest import ApiServer, api_server, requires_api_server
from kustomize_lite import render

pytestmark = [pytest.mark.envtest, requires_api_server]
PDBS = "/apis/policy/v1/namespaces/serve/poddisruptionbudgets"


def _leader() -> dict[str, Any]:
    pods = yaml.safe_load((FIXTURES / "fleet" / "pods.yaml").read_text())["items"]
    (pod,) = [copy.deepcopy(p) for p in pods if p["metadata"]["name"] == "llm-xl-0"]
    meta = pod["metadata"]
    for field in ("uid", "resourceVersion", "creationTimestamp", "managedFields", "ownerReferences"):
        meta.pop(field, None)
    pod.pop("status", None)
    pod["spec"]["readinessGates"] = [{"conditionType": GATE}]
    return pod


def _pdb(name: str, labels: dict[str, str]) -> dict[str, Any]:
    selector = {"matchLabels": {"leaderworkerset.sigs.k8s.io/name": "llm-xl"}}
    return {"metadata": {"name": name, "labels": labels}, "spec": {"minAvailable": 4, "selector": selector}}


@pytest.fixture
def api(tmp_path: Any) -> Iterator[ApiServer]:
    (tmp_path / "api").mkdir()
    with api_server(tmp_path / "api") as server:
        server.create("/api/v1/namespaces", {"metadata": {"name": "serve"}})
        server.create("/api/v1/namespaces", {"metadata": {"name": "guardhook-system"}})
        server.create("/api/v1/namespaces/serve/pods", _leader())
        condition = {
            "type": GATE,
            "status": "False",
            "reason": "WorkerNotReady",
            "message": "WorkerNotReady: x",
        }
        server.merge_patch(
            "/api/v1/namespaces/serve/pods/llm-xl-0/status", {"status": {"conditions": [condition]}}
        )
        server.create(PDBS, _pdb("llm-xl-group-0", {"app.kubernetes.io/managed-by": "guardhook"}))
        server.create(PDBS, _pdb("serving-budget", {"team": "serving"}))
        objects = render(MANIFESTS)
        (deployment,) = [o for o in objects if o["kind"] == "Deployment"]
        server.create("/apis/apps/v1/namespaces/guardhook-system/deployments", deployment)
        for obj in objects:
            if obj["kind"].endswith("WebhookConfiguration"):
                kind = obj["kind"].lower()
                server.create(f"/apis/admissionregistration.k8s.io/v1/{kind}s", obj)
        yield server


def test_uninstall_on_a_real_api_server(api: ApiServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["uninstall", "--kubeconfig", str(api.kubeconfig)]) == 0, capsys.readouterr().out
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        assert api.get(f"/apis/admissionregistration.k8s.io/v1/{kind}")["items"] == []
    assert [p["metadata"]["name"] for p in api.get(PDBS)["items"]] == ["serving-budget"]
    deployment = api.get("/apis/apps/v1/namespaces/guardhook-system/deployments/guardhook")
    assert deployment["spec"]["replicas"] == 0
    pod = api.get("/api/v1/namespaces/serve/pods/llm-xl-0")
    (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == GATE]
    assert (condition["status"], condition["reason"]) == ("True", "GuardhookUninstalled")
    assert main(["uninstall", "--kubeconfig", str(api.kubeconfig), "--dry-run"]) == 0
    assert "4. no held readiness gate" in capsys.readouterr().out


def test_uninstall_after_the_release_went_without_hooks_leaves_nothing(
    api: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    """`helm uninstall --no-hooks` (or Argo CD before v3.3) deletes the release's objects — webhook
    configurations, Deployment — and nothing else (issue 49): `guardhook uninstall` run by hand
    afterwards deletes the per-group PDB and releases the held leader, and a second run finds
    nothing left."""
    for kind in ("validatingwebhookconfigurations", "mutatingwebhookconfigurations"):
        answer = api.request("DELETE", f"/apis/admissionregistration.k8s.io/v1/{kind}/guardhook")
        assert answer.status_code == 200, answer.text
    answer = api.request("DELETE", "/apis/apps/v1/namespaces/guardhook-system/deployments/guardhook")
    assert answer.status_code == 200, answer.text
    assert main(["uninstall", "--kubeconfig", str(api.kubeconfig)]) == 0, capsys.readouterr().out
    assert [p["metadata"]["name"] for p in api.get(PDBS)["items"]] == ["serving-budget"]
    pod = api.get("/api/v1/namespaces/serve/pods/llm-xl-0")
    (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == GATE]
    assert (condition["status"], condition["reason"]) == ("True", "GuardhookUninstalled")
    capsys.readouterr()
    assert main(["uninstall", "--kubeconfig", str(api.kubeconfig)]) == 0  # exit 1 while anything is left
    assert main(["uninstall", "--kubeconfig", str(api.kubeconfig), "--dry-run"]) == 0
    out = capsys.readouterr().out
    assert "4. no held readiness gate" in out, out
