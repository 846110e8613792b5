"""`leader-service` against a real kube-apiserver (and etcd) from KUBEBUILDER_ASSETS: the API server
calls `guardhook serve` through the default install's mutating entry for Services and for
InferencePools of both APIs, and stores each selector pinned to leaders (the v1 pool's after its
CRD's schema validation of matchLabels). The pool CRDs are small stand-ins declaring the selector
schema of gateway-api-inference-extension (api/v1: matchLabels, 1-64 entries, required;
apix/v1alpha2: a required map); the rest of the spec is preserved unvalidated. Skipped, with the
reason, when the binaries are not there."""

from __future__ import annotations

import base64
import copy
from pathlib import Path
from typing import Any

import pytest
import yaml
from pool_helpers import POOL_VERSIONS, pool_spec

from conftest import REPO, clean_env, start_server
from envtest import api_server, install_crds, requires_api_server, wait_for

pytestmark = [pytest.mark.envtest, requires_api_server]

WORKER_INDEX = "leaderworkerset.sigs.k8s.io/worker-index"
MUTATING = REPO / "manifests" / "base" / "mutating-webhook.yaml"
APPROVAL = {
    "v1": "https://github.com/kubernetes-sigs/gateway-api-inference-extension/pull/1173",
    "v1alpha2": "unapproved, experimental-only",
}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string", "maxLength": 63}}


def _pool_crd(version: str) -> dict[str, Any]:
    group, api_version = POOL_VERSIONS[version]
    if version == "v1":
        selector = {
            "type": "object",
            "required": ["matchLabels"],
            "properties": {"matchLabels": {**STRING_MAP, "minProperties": 1, "maxProperties": 64}},
        }
    else:
        selector = STRING_MAP
    spec_schema = {
        "type": "object",
        "required": ["selector"],
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"selector": selector},
    }
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        # *.k8s.io groups are protected: the CRDs carry the approval annotation as upstream's do
        "metadata": {
            "name": f"inferencepools.{group}",
            "annotations": {"api-approved.kubernetes.io": APPROVAL[version]},
        },
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {
                "kind": "InferencePool",
                "listKind": "InferencePoolList",
                "plural": "inferencepools",
                "singular": "inferencepool",
            },
            "versions": [
                {
                    "name": api_version,
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "required": ["spec"],
                            "properties": {"spec": spec_schema},
                        }
                    },
                }
            ],
        },
    }


def _webhook_configuration(url: str, ca_pem: bytes) -> dict[str, Any]:
    """The base install's leader-service entry, pointed at `url` (the API server cannot resolve Services)."""
    configuration = copy.deepcopy(yaml.safe_load(MUTATING.read_text()))
    configuration["metadata"]["name"] = "guardhook-leader-service-test"
    for hook in configuration["webhooks"]:
        hook["clientConfig"] = {"url": url + "/mutate", "caBundle": base64.b64encode(ca_pem).decode()}
    return configuration


def _lws() -> dict[str, Any]:
    container = {"name": "c", "image": "example.com/c:1"}
    return {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "llm", "namespace": "serve"},
        "spec": {
            "replicas": 2,
            "leaderWorkerTemplate": {
                "size": 2,
                "leaderTemplate": {
                    "metadata": {"labels": {"app": "llm"}},
                    "spec": {"containers": [container]},
                },
                "workerTemplate": {
                    "metadata": {"labels": {"app": "llm"}},
                    "spec": {"containers": [container]},
                },
            },
        },
    }


def _pool(version: str) -> dict[str, Any]:
    group, api_version = POOL_VERSIONS[version]
    return {
        "apiVersion": f"{group}/{api_version}",
        "kind": "InferencePool",
        "metadata": {"name": f"llm-{version}", "namespace": "serve"},
        "spec": pool_spec(version, {"app": "llm"}),
    }


def _selector(stored: dict[str, Any]) -> dict[str, str]:
    selector = stored["spec"]["selector"]
    return (
        dict(selector.get("matchLabels", selector)) if stored["kind"] == "InferencePool" else dict(selector)
    )


def test_the_api_server_stores_services_and_pools_pinned_to_leaders(tmp_path: Path) -> None:
    (tmp_path / "api").mkdir()
    with api_server(tmp_path / "api") as api:
        crds = tmp_path / "crds"
        crds.mkdir()
        (crds / "pools.yaml").write_text(yaml.safe_dump_all([_pool_crd(v) for v in POOL_VERSIONS]))
        install_crds(api, crds)
        api.create(
            "/api/v1/namespaces", {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "serve"}}
        )
        lws_path = "/apis/leaderworkerset.x-k8s.io/v1/namespaces/serve/leaderworkersets"
        wait_for(lambda: api.request("POST", lws_path, _lws()).status_code in (200, 201), 30, "the LWS CRD")
        server = start_server(
            tmp_path / "serve", "--kubeconfig", str(api.kubeconfig), env=clean_env(tmp_path)
        )
        try:
            api.create(
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                _webhook_configuration(server.url, server.ca.read_bytes()),
            )
            service = {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "llm", "namespace": "serve"},
                "spec": {"selector": {"app": "llm"}, "ports": [{"port": 8000}]},
            }
            services = "/api/v1/namespaces/serve/services"

            def pinned_dry_run() -> bool:  # the API server and guardhook's view catch up asynchronously
                answer = api.request("POST", services + "?dryRun=All", service)
                return answer.status_code == 201 and WORKER_INDEX in answer.json()["spec"]["selector"]

            wait_for(pinned_dry_run, 30, "the API server to call the leader-service webhook")
            objects = [(services, service)] + [
                (
                    f"/apis/{POOL_VERSIONS[v][0]}/{POOL_VERSIONS[v][1]}/namespaces/serve/inferencepools",
                    _pool(v),
                )
                for v in POOL_VERSIONS
            ]
            for path, obj in objects:
                stored = api.create(path, obj)
                assert _selector(stored) == {"app": "llm", WORKER_INDEX: "0"}, obj["kind"]
                again = api.get(f"{path}/{obj['metadata']['name']}")
                assert _selector(again) == {"app": "llm", WORKER_INDEX: "0"}
        finally:
            server.stop()
