"""Shipping (issue 15 items 12-14): the rendered manifests send Services to /validate in the
leader-service Deny mode, mount --config from a watched ConfigMap, and the opt-in NetworkPolicy
admits webhook calls on 8443 and Prometheus on the metrics port only."""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes
import pytest
import requests
import yaml
from test_manifests import MANIFESTS, _called, by_kind, canonical, one, rules_of, to_model

from guardhook.admission.engine import Engine
from guardhook.cluster.view.static import embedded_fleet_view
from guardhook.config import load_config

from conftest import Server, free_port, load_review
from kustomize_lite import render, user_overlay

Object = dict[str, Any]
SERVICE_REQUESTS = {("", "v1", "services", "CREATE"), ("", "v1", "services", "UPDATE")}
POOL_REQUESTS = {
    (group, version, "inferencepools", op)
    for group, version in (
        ("inference.networking.k8s.io", "v1"),
        ("inference.networking.x-k8s.io", "v1alpha2"),
    )
    for op in ("CREATE", "UPDATE")
}


def with_components(tmp_path: Path, *components: str) -> list[Object]:
    """Render the default (cert-manager) install with `components` added, as a user's overlay."""
    overlay = user_overlay(
        tmp_path / "overlay",
        [MANIFESTS / "overlays" / "cert-manager"],
        [MANIFESTS / "components" / c for c in components],
    )
    return render(overlay)


def hooks(objects: list[Object]) -> list[Object]:
    found = []
    for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        for config in by_kind(objects, kind):
            found += [{**hook, "_kind": kind} for hook in config.get("webhooks") or []]
    return found


def config_of(objects: list[Object], tmp_path: Path) -> Any:
    """The guardhook Config the rendered ConfigMap holds, loaded as `serve --config` loads it."""
    text = one(objects, "ConfigMap", "guardhook-config")["data"]["config.yaml"]
    path = tmp_path / "config.yaml"
    path.write_text(text)
    return load_config(path)


def container(objects: list[Object]) -> Object:
    return one(objects, "Deployment")["spec"]["template"]["spec"]["containers"][0]


# --- item 12: leader-service with actions [Deny] ----------------------------------------------


def test_default_install_sends_services_to_mutate_only(tmp_path: Path) -> None:
    reaching = [h for h in hooks(render(MANIFESTS)) if rules_of(h) >= SERVICE_REQUESTS]
    assert [(h["_kind"], h["clientConfig"]["service"]["path"]) for h in reaching] == [
        ("MutatingWebhookConfiguration", "/mutate")
    ]
    assert config_of(render(MANIFESTS), tmp_path).settings("leader-service").actions == ("Mutate",)


def test_deny_mode_sends_services_to_validate_and_sets_the_action(tmp_path: Path) -> None:
    objects = with_components(tmp_path, "leader-service-deny")
    reaching = [h for h in hooks(objects) if rules_of(h) & SERVICE_REQUESTS]
    assert len(reaching) == 1
    (hook,) = reaching
    assert hook["_kind"] == "ValidatingWebhookConfiguration"
    assert rules_of(hook) == SERVICE_REQUESTS | POOL_REQUESTS
    assert hook["clientConfig"]["service"] == {
        "name": "guardhook",
        "namespace": "guardhook-system",
        "path": "/validate",
        "port": 443,
    }
    assert hook["failurePolicy"] == "Ignore" and hook["sideEffects"] == "None"
    excluded = hook["namespaceSelector"]["matchExpressions"][0]
    assert {"kube-system", "guardhook-system"} <= set(excluded["values"])
    assert one(objects, "MutatingWebhookConfiguration")["webhooks"] == []
    # cert-manager still injects the CA into the configuration that now holds the entry.
    validating = one(objects, "ValidatingWebhookConfiguration")
    assert validating["metadata"]["annotations"]["cert-manager.io/inject-ca-from"]
    config = config_of(objects, tmp_path)
    assert config.settings("leader-service").actions == ("Deny",)

    # The API server would call it for a user's Service write, not for the LWS controller's...
    review = load_review("s12-service-app-selector.validating")
    assert _called(hook, review)
    lws_controller = load_review("s12-service-app-selector.validating")
    lws_controller["request"]["userInfo"]["username"] = (
        "system:serviceaccount:lws-system:lws-controller-manager"
    )
    assert not _called(hook, lws_controller)
    # ...and /validate, with the rendered configuration, refuses the Service that routes to workers.
    verdict = Engine(embedded_fleet_view(), config).judge(review["request"], "validate")
    assert verdict.response["allowed"] is False
    assert verdict.response["status"]["message"].startswith("[leader-service]")
    assert (
        Engine(embedded_fleet_view(), config).judge(review["request"], "mutate").response.get("patch") is None
    )


# --- item 13: --config from a ConfigMap, watched ----------------------------------------------


def test_config_comes_from_a_configmap_mounted_as_a_directory(tmp_path: Path) -> None:
    objects = render(MANIFESTS)
    pod = one(objects, "Deployment")["spec"]["template"]["spec"]
    args = container(objects)["args"]
    flag = next(a for a in args if a.startswith("--config="))
    path = Path(flag.removeprefix("--config="))
    mount = next(m for m in container(objects)["volumeMounts"] if m["mountPath"] == str(path.parent))
    assert "subPath" not in mount and mount["readOnly"] is True  # a subPath mount never sees updates
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    configmap = one(objects, "ConfigMap", volume["configMap"]["name"])
    assert path.name in configmap["data"]
    assert configmap["metadata"]["namespace"] == "guardhook-system"
    config_of(objects, tmp_path)  # the shipped document validates
    api = kubernetes.client.ApiClient()
    assert api.sanitize_for_serialization(to_model(api, configmap, "V1ConfigMap")) == configmap


def test_manifests_log_json(tmp_path: Path) -> None:
    args = container(render(MANIFESTS))["args"]
    assert args.index("--log-format=json") < args.index("serve")  # a global flag


# --- item 14: NetworkPolicy -------------------------------------------------------------------


def test_network_policy_admits_webhook_calls_and_prometheus_only(tmp_path: Path) -> None:
    assert by_kind(render(MANIFESTS), "NetworkPolicy") == []  # opt-in
    objects = with_components(tmp_path, "network-policy")
    policy = one(objects, "NetworkPolicy", "guardhook")
    deployment = one(objects, "Deployment")
    assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    assert policy["spec"]["podSelector"]["matchLabels"] == deployment["spec"]["selector"]["matchLabels"]
    assert policy["spec"]["policyTypes"] == ["Ingress"]
    ports = {p["name"]: p["containerPort"] for p in container(objects)["ports"]}
    service = one(objects, "Service", "guardhook")
    assert service["spec"]["ports"][0]["targetPort"] == "https"
    webhook, scrape = policy["spec"]["ingress"]
    assert [p["port"] for p in webhook["ports"]] == [ports["https"]]
    assert [p["port"] for p in scrape["ports"]] == [ports["metrics"]]
    assert f"--metrics-port={ports['metrics']}" in container(objects)["args"]
    (peer,) = scrape["from"]  # only Prometheus pods, in one namespace
    assert peer["podSelector"]["matchLabels"] == {"app.kubernetes.io/name": "prometheus"}
    assert peer["namespaceSelector"]["matchLabels"]
    api = kubernetes.client.ApiClient()
    assert api.sanitize_for_serialization(to_model(api, policy, "V1NetworkPolicy")) == policy


@pytest.mark.parametrize("path", ["/metrics"])
def test_metrics_port_serves_metrics_only(fresh_server: Callable[..., Server], path: str) -> None:
    port = free_port()
    server = fresh_server("--metrics-port", str(port))
    server.review("/validate", "s01-worker-delete.validating")
    answer = requests.get(f"http://127.0.0.1:{port}{path}", timeout=10)
    assert answer.status_code == 200 and answer.headers["Content-Type"].startswith("text/plain")
    assert 'guardhook_requests_total{code="200",endpoint="validate"}' in answer.text
    assert "guardhook_cluster_view_synced 1.0" in answer.text  # refreshed before rendering
    # another method: 405 with `Allow: GET` (the metrics port serves GET only)
    assert requests.post(f"http://127.0.0.1:{port}/validate", timeout=10).status_code in (404, 405)
    assert requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10).status_code == 404


# --- issue 48: leader-service-sync with namespaced RBAC -------------------------------------------


def _namespaced_sync(tmp_path: Path) -> Path:
    """The default (cert-manager) install with the namespaced leader-service-sync in place of the
    cluster-wide one, as a user's overlay."""
    return user_overlay(
        tmp_path / "overlay",
        [MANIFESTS / "base"],
        [
            MANIFESTS / "components" / "cert-manager",
            MANIFESTS / "components" / "leader-service-sync" / "namespaced",
        ],
    )


def test_namespaced_leader_service_sync_patches_only_in_its_namespaces(tmp_path: Path) -> None:
    objects = render(_namespaced_sync(tmp_path))
    writes = [
        (o["kind"], o["metadata"].get("namespace"))
        for o in objects
        if o["kind"] in ("ClusterRole", "Role")
        and any("patch" in r.get("verbs", []) and "services" in r.get("resources", []) for r in o["rules"])
    ]
    assert writes == [("Role", "serve")]  # no ClusterRole may patch Services
    binding = one(objects, "RoleBinding", "guardhook-leader-service-sync")
    assert binding["metadata"]["namespace"] == "serve"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "guardhook", "namespace": "guardhook-system"}
    ]
    assert "--sync-leader-services" in container(objects)["args"]
    # The reconciler is confined to the namespaces the Roles cover.
    assert config_of(objects, tmp_path).settings("leader-service").params["syncNamespaces"] == ["serve"]


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kubectl_kustomize_renders_the_namespaced_sync_alike(tmp_path: Path) -> None:
    folder = _namespaced_sync(tmp_path)
    printed = subprocess.run(
        ["kubectl", "kustomize", str(folder)], capture_output=True, text=True, timeout=60
    )
    assert printed.returncode == 0, printed.stderr
    assert canonical(render(folder)) == canonical(list(yaml.safe_load_all(printed.stdout)))
