"""The chart's self-signed certificates across upgrades (issue 41): `helm template --dry-run=server`
against a stand-in API server on 127.0.0.1 that holds the `guardhook-tls` Secret of the previous
release, as `lookup` reads it on `helm upgrade`. Kept while not due; replaced within
`certs.selfSigned.renewBeforeDays` of expiry with the previous CA kept after the new one in the
Secret's ca.crt and in every caBundle; an incomplete Secret is replaced."""

from __future__ import annotations

import base64
import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import yaml
from cryptography import x509
from helm_chart import CHART, NAMESPACE, RELEASE, run_helm

Object = dict[str, Any]
SECRET_PATH = f"/api/v1/namespaces/{NAMESPACE}/secrets/guardhook-tls"
SERVED: dict[str, list[tuple[str, str, bool]]] = {
    "v1": [
        ("secrets", "Secret", True),
        ("namespaces", "Namespace", False),
        ("serviceaccounts", "ServiceAccount", True),
        ("configmaps", "ConfigMap", True),
        ("services", "Service", True),
        ("resourcequotas", "ResourceQuota", True),
    ],
    "apps/v1": [("deployments", "Deployment", True)],
    "batch/v1": [("jobs", "Job", True), ("cronjobs", "CronJob", True)],
    "policy/v1": [("poddisruptionbudgets", "PodDisruptionBudget", True)],
    "rbac.authorization.k8s.io/v1": [
        ("clusterroles", "ClusterRole", False),
        ("clusterrolebindings", "ClusterRoleBinding", False),
        ("roles", "Role", True),
        ("rolebindings", "RoleBinding", True),
    ],
    "admissionregistration.k8s.io/v1": [
        ("validatingwebhookconfigurations", "ValidatingWebhookConfiguration", False),
        ("mutatingwebhookconfigurations", "MutatingWebhookConfiguration", False),
    ],
}
"""The kinds the chart renders (without opt-in components), by group version, for discovery."""


def _resource_list(group_version: str) -> Object:
    resources = [
        {
            "name": n,
            "singularName": k.lower(),
            "namespaced": ns,
            "kind": k,
            "verbs": ["get", "list", "create"],
        }
        for n, k, ns in SERVED[group_version]
    ]
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


def _group_list() -> Object:
    groups = []
    for group_version in SERVED:
        if "/" in group_version:
            group, version = group_version.split("/")
            entry = {"groupVersion": group_version, "version": version}
            groups.append({"name": group, "versions": [entry], "preferredVersion": entry})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


class StandIn(BaseHTTPRequestHandler):
    """Discovery of the core group, GET of the one Secret the server holds (404 otherwise), and
    empty lists (Helm's release storage finds no earlier release)."""

    secret: Object | None = None
    objects: dict[str, Object] = {}  # noqa: RUF012 (each fixture's handler class gets its own)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, body: Object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        path = self.path.split("?")[0]
        if path == "/version":
            self._send(200, {"major": "1", "minor": "37", "gitVersion": "v1.37.0"})
        elif path == "/api":
            self._send(200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []})
        elif path == "/apis":
            self._send(200, _group_list())
        elif path == "/api/v1" or path.removeprefix("/apis/") in SERVED:
            self._send(200, _resource_list(path.removeprefix("/api/").removeprefix("/apis/")))
        elif path == SECRET_PATH and type(self).secret is not None:
            self._send(200, type(self).secret)
        elif path in type(self).objects:
            self._send(200, type(self).objects[path])
        elif path.endswith("/secrets"):
            self._send(200, {"kind": "SecretList", "apiVersion": "v1", "metadata": {}, "items": []})
        else:
            self._send(
                404,
                {
                    "kind": "Status",
                    "apiVersion": "v1",
                    "status": "Failure",
                    "reason": "NotFound",
                    "code": 404,
                },
            )


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[type[StandIn], Path]]:
    """A stand-in API server on a free port of 127.0.0.1 and a kubeconfig naming it."""
    handler = type("Handler", (StandIn,), {"secret": None, "objects": {}})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    url = f"http://127.0.0.1:{server.server_address[1]}"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "c",
            }
        )
    )
    try:
        yield handler, kubeconfig
    finally:
        server.shutdown()
        server.server_close()


def render(tmp_path: Path, kubeconfig: Path) -> tuple[Object, list[str]]:
    """The Secret and every entry's caBundle of a self-signed render that looks the cluster up."""
    values = {"certs": {"source": "self-signed"}}
    done = run_helm(
        "template", RELEASE, str(CHART), "--namespace", NAMESPACE, "--dry-run=server",
        "--disable-openapi-validation", "--kubeconfig", str(kubeconfig), values=values, tmp=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    objects = [doc for doc in yaml.safe_load_all(done.stdout) if doc]
    (secret,) = [o for o in objects if o["kind"] == "Secret"]
    bundles = [
        h["clientConfig"]["caBundle"]
        for o in objects
        if o["kind"].endswith("WebhookConfiguration")
        for h in o.get("webhooks") or []
    ]
    return secret, bundles


OWNER = {"meta.helm.sh/release-name": RELEASE, "meta.helm.sh/release-namespace": NAMESPACE}


def stored(secret: Object, not_after: int | None = None) -> Object:
    """`secret` as the API server returns it after Helm installed it (with `not_after` as its
    guardhook.io/not-after annotation when given)."""
    annotations = {**secret["metadata"]["annotations"], **OWNER}
    if not_after is not None:
        annotations["guardhook.io/not-after"] = str(not_after)
    metadata = {**secret["metadata"], "resourceVersion": "7", "uid": "u-1", "annotations": annotations}
    return {**secret, "metadata": metadata}


def test_first_install_makes_certificates(tmp_path: Path, api: tuple[type[StandIn], Path]) -> None:
    _handler, kubeconfig = api
    secret, bundles = render(tmp_path, kubeconfig)
    assert set(bundles) == {secret["data"]["ca.crt"]}
    assert base64.b64decode(secret["data"]["ca.crt"]).count(b"BEGIN CERTIFICATE") == 1


def test_upgrade_keeps_certificates_that_are_not_due(tmp_path: Path, api: tuple[type[StandIn], Path]) -> None:
    handler, kubeconfig = api
    first, _ = render(tmp_path, kubeconfig)
    handler.secret = stored(first)
    again, bundles = render(tmp_path, kubeconfig)
    assert again["data"] == first["data"]
    assert again["metadata"]["annotations"] == first["metadata"]["annotations"]  # the same expiry
    assert set(bundles) == {first["data"]["ca.crt"]}


def test_upgrade_within_renew_before_rotates_keeping_the_previous_ca(
    tmp_path: Path, api: tuple[type[StandIn], Path]
) -> None:
    handler, kubeconfig = api
    first, _ = render(tmp_path, kubeconfig)
    soon = int(time.time()) + 10 * 86400  # within the default renewBeforeDays (30)
    handler.secret = stored(first, not_after=soon)
    rotated, bundles = render(tmp_path, kubeconfig)
    assert rotated["data"]["tls.crt"] != first["data"]["tls.crt"]
    assert set(bundles) == {rotated["data"]["ca.crt"]}
    new_ca, old_ca = x509.load_pem_x509_certificates(base64.b64decode(rotated["data"]["ca.crt"]))
    assert old_ca == x509.load_pem_x509_certificate(base64.b64decode(first["data"]["ca.crt"]))
    x509.load_pem_x509_certificate(base64.b64decode(rotated["data"]["tls.crt"])).verify_directly_issued_by(
        new_ca
    )
    x509.load_pem_x509_certificate(base64.b64decode(first["data"]["tls.crt"])).verify_directly_issued_by(
        old_ca
    )
    # The next rotation keeps only the CA before it, not the one before that.
    handler.secret = stored(rotated, not_after=soon)
    third, _ = render(tmp_path, kubeconfig)
    newest, previous = x509.load_pem_x509_certificates(base64.b64decode(third["data"]["ca.crt"]))
    assert previous == new_ca and newest not in (new_ca, old_ca)


def test_an_incomplete_secret_is_replaced(tmp_path: Path, api: tuple[type[StandIn], Path]) -> None:
    handler, kubeconfig = api
    first, _ = render(tmp_path, kubeconfig)
    broken = stored(first)
    broken["data"] = {k: v for k, v in first["data"].items() if k != "tls.key"}
    handler.secret = broken
    again, bundles = render(tmp_path, kubeconfig)
    assert set(again["data"]) == {"ca.crt", "tls.crt", "tls.key"}
    assert again["data"]["tls.crt"] != first["data"]["tls.crt"]
    assert set(bundles) == {again["data"]["ca.crt"]}
