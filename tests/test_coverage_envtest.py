"""Coverage against a real kube-apiserver (issue 22): with the ClusterRole the manifests ship, a
live view of guardhook's ServiceAccount reads Namespaces and the webhook configurations (which the
API server validates as rendered by the self-managed overlay) and finds the unguarded LWS
namespace; with a role lacking those rules the view still syncs and reports them unchecked."""

from __future__ import annotations

import copy
import json
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from test_manifests import MANIFESTS

from guardhook.cluster.coverage import (
    EVICTIONS_UNGUARDED,
    WEBHOOK_CONDITIONS_ADDED,
    WEBHOOK_CONDITIONS_DIFFER,
    WEBHOOK_UNREACHABLE,
    coverage_gaps,
    unchecked,
)
from guardhook.cluster.kube_transport import KubeTransport
from guardhook.cluster.view.live import LiveView
from guardhook.cluster.view.store import NAMESPACES, WEBHOOK_KINDS, ClusterView
from guardhook.commands.main import main

from conftest import FIXTURES
from envtest import WEBHOOKS, ApiServer, api_server, requires_api_server
from kustomize_lite import render

# One worker runs the whole module (pytest-xdist's loadgroup), so its module-scoped API server
# starts once, not once per worker.
pytestmark = [pytest.mark.envtest, requires_api_server, pytest.mark.xdist_group("test_coverage_envtest")]
OWN = "guardhook-system"


def _lws() -> dict[str, Any]:
    (lws,) = yaml.safe_load((FIXTURES / "fleet" / "leaderworkersets.yaml").read_text())["items"]
    lws = copy.deepcopy(lws)
    for field in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        lws["metadata"].pop(field, None)
    lws.pop("status", None)
    return lws


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[ApiServer, x509.Certificate]]:
    """A real API server holding namespace serve (not opted in) with an LWS, guardhook's namespace,
    ServiceAccount and shipped RBAC, and the self-managed overlay's webhook configurations."""
    folder = tmp_path_factory.mktemp("coverage-envtest")
    manifests = folder / "manifests"
    shutil.copytree(MANIFESTS, manifests, ignore=shutil.ignore_patterns("certs", "ca-bundle.*.yaml"))
    assert main(["certs", "--patch-manifests", str(manifests)]) == 0
    overlay = manifests / "overlays" / "self-managed"
    serving = x509.load_pem_x509_certificate((overlay / "certs" / "tls.crt").read_bytes())
    objects = render(overlay)
    (folder / "api").mkdir()
    with api_server(folder / "api") as api:
        api.create("/api/v1/namespaces", {"metadata": {"name": "serve"}})
        api.create("/apis/leaderworkerset.x-k8s.io/v1/namespaces/serve/leaderworkersets", _lws())
        for obj in objects:
            if obj["kind"] in ("Namespace", "ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
                api.create(_collection(obj), obj)
        for obj in objects:  # last: from here on the API server calls them (Ignore, or not in scope)
            if obj["kind"].endswith("WebhookConfiguration"):
                api.create(_collection(obj), obj)
        yield api, serving


def _collection(obj: dict[str, Any]) -> str:
    group, _, version = obj["apiVersion"].rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    plural = obj["kind"].lower() + ("es" if obj["kind"].endswith("s") else "s")
    namespace = obj["metadata"].get("namespace")
    return f"{base}/namespaces/{namespace}/{plural}" if namespace else f"{base}/{plural}"


def _service_account_token(api: ApiServer, name: str) -> str:
    from kubernetes import client

    token = client.CoreV1Api(api.api_client()).create_namespaced_service_account_token(
        name, OWN, {"spec": {"expirationSeconds": 3600}}
    )
    return str(token.status.token)


def _service_account_client(api: ApiServer, name: str) -> Any:
    from kubernetes import client

    configuration = client.Configuration()
    configuration.host = api.url
    configuration.verify_ssl = False
    configuration.api_key = {"authorization": f"Bearer {_service_account_token(api, name)}"}
    return lambda: client.ApiClient(configuration)


def _service_account_kubeconfig(api: ApiServer, name: str, path: Path) -> Path:
    cluster = {"server": api.url, "insecure-skip-tls-verify": True}
    user = {"token": _service_account_token(api, name)}
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "envtest", "cluster": cluster}],
                "users": [{"name": name, "user": user}],
                "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": name}}],
                "current-context": "envtest",
            }
        )
    )
    return path


def _synced_view(make_client: Any) -> tuple[ClusterView, LiveView]:
    view = ClusterView(source="envtest")
    live = LiveView(view, lambda: KubeTransport(make_client())).start()
    deadline = time.monotonic() + 60
    while not view.synced and time.monotonic() < deadline:
        time.sleep(0.1)
    assert view.synced and not view.is_stale()
    return view, live


def test_the_shipped_cluster_role_lets_the_view_read_what_coverage_needs(
    cluster: tuple[ApiServer, x509.Certificate],
) -> None:
    api, serving = cluster
    view, live = _synced_view(_service_account_client(api, "guardhook"))
    try:
        assert view.readable(NAMESPACES) and all(view.readable(kind) for kind in WEBHOOK_KINDS)
        assert unchecked(view) == []
        gaps = coverage_gaps(view, serving_cert=serving)
        assert [(g.kind, g.name) for g in gaps if g.severe] == [(EVICTIONS_UNGUARDED, "serve")]
        assert [g for g in gaps if g.kind == WEBHOOK_UNREACHABLE] == []
        assert len(view.webhook_configurations()) == 2
    finally:
        live.stop()


def test_stored_match_conditions_compare_as_shipped_and_an_older_one_is_a_gap(
    cluster: tuple[ApiServer, x509.Certificate],
) -> None:
    """The API server stores the configuration as given (folded CEL): the shipped one gives no
    condition gap, nor does a reformatted copy; a copy with the older lws-pod-delete-or-relabel
    (before bare gang pods were sent) gives one, naming the entry."""
    from test_coverage_conditions import CONDITION, OLD_EXPRESSION, WORKER_DELETE

    api, serving = cluster
    stored = api.get(f"{WEBHOOKS}/guardhook")
    (hook,) = [h for h in stored["webhooks"] if h["name"] == WORKER_DELETE]
    names = {"guardhook-old": OLD_EXPRESSION}
    for condition in hook["matchConditions"]:
        if condition["name"] == CONDITION:
            names["guardhook-reformatted"] = "\n  ".join(condition["expression"].split(" "))
    for name, expression in names.items():
        copied = copy.deepcopy(hook)
        for condition in copied["matchConditions"]:
            if condition["name"] == CONDITION:
                condition["expression"] = expression
        copied["namespaceSelector"] = {"matchLabels": {"guardhook.io/never": "true"}}  # calls nothing
        api.create(WEBHOOKS, {"metadata": {"name": name}, "webhooks": [copied]})
    view, live = _synced_view(_service_account_client(api, "guardhook"))
    try:
        deadline = time.monotonic() + 30
        while len(view.webhook_configurations()) < 4 and time.monotonic() < deadline:
            time.sleep(0.1)
        kinds = (WEBHOOK_CONDITIONS_DIFFER, WEBHOOK_CONDITIONS_ADDED)
        gaps = [(g.kind, g.name) for g in coverage_gaps(view, serving_cert=serving) if g.kind in kinds]
        assert gaps == [(WEBHOOK_CONDITIONS_DIFFER, f"guardhook-old/{WORKER_DELETE}")]
    finally:
        live.stop()
        for name in names:
            api.request("DELETE", f"{WEBHOOKS}/{name}")


def test_without_the_coverage_rules_the_view_syncs_and_says_what_it_did_not_check(
    cluster: tuple[ApiServer, x509.Certificate],
) -> None:
    api, _ = cluster
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "guardhook-view-old"},
    }
    shipped = api.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/guardhook-view")
    coverage_resources = {"namespaces", "validatingwebhookconfigurations", "mutatingwebhookconfigurations"}
    role["rules"] = [r for r in shipped["rules"] if not set(r["resources"]) & coverage_resources]
    api.create("/apis/rbac.authorization.k8s.io/v1/clusterroles", role)
    api.create("/api/v1/namespaces/guardhook-system/serviceaccounts", {"metadata": {"name": "old"}})
    binding = {
        "metadata": {"name": "guardhook-view-old"},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "guardhook-view-old",
        },
        "subjects": [{"kind": "ServiceAccount", "name": "old", "namespace": OWN}],
    }
    api.create("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", binding)
    time.sleep(1)  # RBAC caches settle
    view, live = _synced_view(_service_account_client(api, "old"))
    try:
        assert not view.readable(NAMESPACES) and not any(view.readable(kind) for kind in WEBHOOK_KINDS)
        assert len(unchecked(view)) == 2
        assert coverage_gaps(view) == []  # nothing claimed that cannot be seen
    finally:
        live.stop()


def test_audit_as_admin_reports_the_gap(
    cluster: tuple[ApiServer, x509.Certificate], capsys: pytest.CaptureFixture[str]
) -> None:
    api, _ = cluster
    assert main(["audit", "--kubeconfig", str(api.kubeconfig)]) == 0
    out = capsys.readouterr().out
    assert "[evictions-unguarded] namespace serve lacks the label guardhook.io/guard-evictions=true" in out
    assert "[webhook-unreachable]" not in out


def test_audit_and_drain_plan_as_guardhooks_service_account_are_refused_no_list(
    cluster: tuple[ApiServer, x509.Certificate], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Run in the cluster as guardhook's ServiceAccount, with the shipped ClusterRole, neither
    command meets a 403 (HorizontalPodAutoscalers, ScaledObjects and InferencePools were)."""
    api, _ = cluster
    kubeconfig = str(_service_account_kubeconfig(api, "guardhook", tmp_path / "kubeconfig"))
    assert main(["audit", "--kubeconfig", kubeconfig, "--format", "json"]) == 0
    notes = json.loads(capsys.readouterr().out)["notes"]
    assert [note for note in notes if "HTTP 403" in note] == []
    assert any("InferencePool" in note and "not served" in note for note in notes)  # no CRD: a 404
    assert main(["drain-plan", "--kubeconfig", kubeconfig, "--draining"]) == 0
    assert "HTTP 403" not in capsys.readouterr().err
