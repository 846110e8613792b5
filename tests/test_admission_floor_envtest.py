"""The exported floor on a real kube-apiserver (issue 40), with no guardhook at all: the API server
accepts the ValidatingAdmissionPolicies, compiles their CEL (an expression that did not compile
would fail every matched request: failurePolicy Fail) and enforces them in process. A worker
delete is refused naming the leader; a leader delete and the LWS controller's and garbage
collector's deletes pass; an LWS-wide PDB is refused, a per-group one passes; an LWS with
restartPolicy None gets the group-spec warnings. Deletes are dry runs (judged as real ones).
Needs KUBEBUILDER_ASSETS (skips without)."""

from __future__ import annotations

import copy
import time
from collections.abc import Iterator
from typing import Any

import pytest
import requests
import yaml

from guardhook.config import default_config
from guardhook.floor.export import export_floor

from conftest import FIXTURES, load_review
from envtest import ApiServer, api_server, requires_api_server

# One worker runs the whole module (pytest-xdist's loadgroup), so its module-scoped API server
# starts once, not once per worker.
pytestmark = [
    pytest.mark.envtest,
    requires_api_server,
    pytest.mark.xdist_group("test_admission_floor_envtest"),
]
PODS = "/api/v1/namespaces/serve/pods"
PDBS = "/apis/policy/v1/namespaces/serve/poddisruptionbudgets"
LWSS = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/serve/leaderworkersets"
ADMISSION = "/apis/admissionregistration.k8s.io/v1"
GARBAGE_COLLECTOR = "system:serviceaccount:kube-system:generic-garbage-collector"
LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"


def _stored(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    for field in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        obj["metadata"].pop(field, None)
    return obj


def _fleet_pods() -> list[dict[str, Any]]:
    return list(yaml.safe_load((FIXTURES / "fleet" / "pods.yaml").read_text())["items"])


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """A real API server holding the sample fleet's pods (Ready, as the kubelets left them) and the
    exported floor, once its policies are type-checked."""
    folder = tmp_path_factory.mktemp("floor-envtest")
    with api_server(folder) as api:
        api.create("/api/v1/namespaces", {"metadata": {"name": "serve"}})
        for pod in _fleet_pods():
            created = api.create(PODS, {k: v for k, v in _stored(pod).items() if k != "status"})
            path = f"{PODS}/{created['metadata']['name']}/status"
            api.merge_patch(path, {"status": pod["status"]})
        for obj in export_floor(default_config()).objects:
            plural = (
                "validatingadmissionpolicies"
                if obj["kind"] == "ValidatingAdmissionPolicy"
                else ("validatingadmissionpolicybindings")
            )
            api.create(f"{ADMISSION}/{plural}", obj)
        yield api


def _delete(api: ApiServer, pod: str, user: str = "") -> requests.Response:
    headers = {"Impersonate-User": user, "Impersonate-Group": "system:masters"} if user else {}
    return api.session.delete(f"{api.url}{PODS}/{pod}?dryRun=All", headers=headers, timeout=30)


def _until(check: Any, seconds: float = 60) -> Any:
    deadline = time.monotonic() + seconds
    while True:
        found = check()
        if found or time.monotonic() > deadline:
            return found
        time.sleep(0.5)


def test_a_worker_delete_is_refused_by_the_floor_naming_the_leader(api: ApiServer) -> None:
    # A list holds the answer: a 403 Response is itself falsy.
    found = _until(lambda: [r for r in [_delete(api, "llm-xl-0-2")] if r.status_code == 403])
    assert found, _delete(api, "llm-xl-0-2").text
    message = found[0].json()["message"]
    assert "ValidatingAdmissionPolicy 'guardhook-floor-worker-delete'" in message
    assert "kubectl delete pod -n serve llm-xl-0 --cascade=foreground" in message


@pytest.mark.parametrize(
    ("pod", "user"), [("llm-xl-1", ""), ("llm-xl-1-1", GARBAGE_COLLECTOR), ("llm-xl-1-2", LWS_CONTROLLER)]
)
def test_leader_and_exempt_deletes_pass_the_floor(api: ApiServer, pod: str, user: str) -> None:
    _until(lambda: _delete(api, "llm-xl-0-2").status_code == 403)  # the floor is in force
    answer = _delete(api, pod, user)
    assert answer.status_code == 200, answer.text


def test_an_lws_wide_pdb_is_refused_and_a_per_group_one_passes(api: ApiServer) -> None:
    wide = load_review("s18-pdb-lws-wide.validating")["request"]["object"]
    per_group = load_review("s19-pdb-per-group.validating")["request"]["object"]

    def create(pdb: dict[str, Any]) -> requests.Response:
        return api.session.post(f"{api.url}{PDBS}?dryRun=All", json=_stored(pdb), timeout=30)

    refused = _until(lambda: [r for r in [create(wide)] if r.status_code == 403])
    assert refused and "ValidatingAdmissionPolicy 'guardhook-floor-group-pdb'" in refused[0].json()["message"]
    assert create(per_group).status_code == 201


def test_an_lws_that_restarts_pods_alone_gets_the_group_spec_warnings(api: ApiServer) -> None:
    lws = _stored(load_review("s35-lws-restart-none.validating")["request"]["object"])

    def warnings() -> list[str]:
        answer = api.session.post(f"{api.url}{LWSS}?dryRun=All", json=lws, timeout=30)
        assert answer.status_code == 201, answer.text
        return [
            w for w in answer.headers.get("Warning", "").split("299 - ") if "guardhook-floor-group-spec" in w
        ]

    found = _until(lambda: len(warnings()) >= 2 and warnings())
    assert found and any("restartPolicy None" in w for w in found)
    assert any("no readinessProbe" in w for w in found)


def test_the_live_view_reports_the_floor_in_sync_and_audit_says_so(
    api: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    from guardhook.cluster.coverage import floor_layer
    from guardhook.cluster.kube_transport import KubeTransport
    from guardhook.cluster.view.live import LiveView
    from guardhook.cluster.view.store import ClusterView
    from guardhook.commands.main import main

    view = ClusterView(source="envtest")
    live = LiveView(view, lambda: KubeTransport(api.api_client())).start()
    try:
        assert _until(lambda: view.synced, 60)
        assert floor_layer(view, export_floor(default_config()).digest).state == "in-sync"
    finally:
        live.stop()
    assert main(["audit", "--kubeconfig", str(api.kubeconfig)]) == 0
    assert "Admission-policy floor: installed, bound, in sync" in capsys.readouterr().out


def test_uninstall_deletes_the_floor_and_the_worker_delete_goes_through(
    api: ApiServer, capsys: pytest.CaptureFixture[str]
) -> None:
    # Last in this module: it takes the floor away.
    assert main_uninstall(api) == 0, capsys.readouterr().out
    for plural in ("validatingadmissionpolicies", "validatingadmissionpolicybindings"):
        assert api.get(f"{ADMISSION}/{plural}")["items"] == []
    assert _until(lambda: _delete(api, "llm-xl-0-2").status_code == 200)


def main_uninstall(api: ApiServer) -> int:
    from guardhook.commands.main import main

    return main(["uninstall", "--kubeconfig", str(api.kubeconfig)])
