"""Client authentication with a real kube-apiserver (from KUBEBUILDER_ASSETS) configured as
docs/operations.md says: an AdmissionConfiguration whose webhook plugins name a kubeconfig with
the API server's client certificate. Its evictions are judged; a forged review sent without a
certificate is refused and records nothing. Skipped, with the reason, without the binaries."""

from __future__ import annotations

import base64
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_client_auth import ClientCA, post

from conftest import Server, load_review
from envtest import api_server, requires_api_server, wait_for

pytestmark = [pytest.mark.envtest, requires_api_server]


def admission_configuration(folder: Path, webhook_host: str, cert: tuple[str, str]) -> Path:
    """The API server's AdmissionConfiguration and the kubeconfig it names, as docs/operations.md
    shows them: the user entry is named after the host (and port) the API server calls."""
    kubeconfig = folder / "guardhook-kubeconfig.yaml"
    user = {"client-certificate": cert[0], "client-key": cert[1]}
    kubeconfig.write_text(
        yaml.safe_dump(
            {"apiVersion": "v1", "kind": "Config", "users": [{"name": webhook_host, "user": user}]}
        )
    )
    plugins = [
        {
            "name": name,
            "configuration": {
                "apiVersion": "apiserver.config.k8s.io/v1",
                "kind": "WebhookAdmissionConfiguration",
                "kubeConfigFile": str(kubeconfig),
            },
        }
        for name in ("ValidatingAdmissionWebhook", "MutatingAdmissionWebhook")
    ]
    config = folder / "admission-configuration.yaml"
    config.write_text(
        yaml.safe_dump(
            {"apiVersion": "apiserver.config.k8s.io/v1", "kind": "AdmissionConfiguration", "plugins": plugins}
        )
    )
    return config


def eviction_webhook(server: Server) -> dict[str, Any]:
    return {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "guardhook"},
        "webhooks": [
            {
                "name": "group-eviction.guardhook.io",
                "clientConfig": {
                    "url": server.url + "/validate",
                    "caBundle": base64.b64encode(server.ca.read_bytes()).decode(),
                },
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods/eviction"],
                        "scope": "Namespaced",
                    }
                ],
                "failurePolicy": "Fail",
                "sideEffects": "NoneOnDryRun",
                "admissionReviewVersions": ["v1"],
                "timeoutSeconds": 10,
            }
        ],
    }


def eviction(name: str, dry_run: bool = False) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "policy/v1",
        "kind": "Eviction",
        "metadata": {"name": name, "namespace": "serve"},
    }
    if dry_run:
        body["deleteOptions"] = {"dryRun": ["All"]}
    return body


def pod(name: str) -> dict[str, Any]:
    """A pod of the sample fleet's name (guardhook judges from its own view, the sample fleet)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "serve"},
        "spec": {"containers": [{"name": "main", "image": "example.local/pause:3.9"}]},
    }


def judged(server: Server) -> int:
    """Reviews the server judged and answered 200 on /validate (its metrics)."""
    metrics = server.session.get(server.url + "/metrics", timeout=10).text
    found = re.search(r'guardhook_requests_total\{code="200",endpoint="validate"\} (\d+)', metrics)
    return int(found.group(1)) if found else 0


def test_the_api_server_is_judged_with_its_certificate_and_a_forged_review_records_nothing(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    ca = ClientCA(tmp_path / "client")
    server = fresh_server("--client-ca-file", str(ca.file))
    host = server.url.removeprefix("https://")
    config = admission_configuration(tmp_path, host, ca.issue("kube-apiserver"))
    forged_pod = load_review("s07-eviction-worker.validating")["request"]["name"]
    other_pod = load_review("s08-eviction-other-group.validating")["request"]["name"]
    with api_server(tmp_path / "envtest", [f"--admission-control-config-file={config}"]) as api:
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serve"}}
        api.create("/api/v1/namespaces", namespace)
        for name in (forged_pod, other_pod):  # an eviction reaches admission only for a pod that exists
            api.create("/api/v1/namespaces/serve/pods", pod(name))
        hooks = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"
        api.create(hooks, eviction_webhook(server))
        evict = "/api/v1/namespaces/serve/pods/{}/eviction"

        def dry_run_judged() -> int:
            api.request("POST", evict.format(other_pod), eviction(other_pod, dry_run=True))
            return judged(server)

        # Until the API server has loaded the entry: dry runs (never recorded) until one is judged.
        wait_for(dry_run_judged, 30, "the API server calling guardhook with its client certificate")
        # A forged eviction review from anyone who reaches the port: refused, recorded nowhere...
        assert post(server, "s07-eviction-worker.validating", None).status_code == 401
        # ...so the API server's eviction of another group is allowed, not 429'd...
        allowed = api.request("POST", evict.format(other_pod), eviction(other_pod))
        assert allowed.status_code == 201, allowed.text
        # ...and recorded: the group the forged review named may no longer go.
        denied = api.request("POST", evict.format(forged_pod), eviction(forged_pod))
        assert denied.status_code == 429, denied.text
        assert "group-eviction" in denied.text
