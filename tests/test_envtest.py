"""guardhook against a real kube-apiserver + etcd (the envtest convention: KUBEBUILDER_ASSETS names
a folder holding both binaries). Skipped with the reason when they are absent.

A bare API server runs no controllers, so the sample fleet is created object by object with its
status written through the status subresource and ownerReference uids re-linked to the new objects.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import FIXTURES, Server
from envtest import api_server, requires_api_server

# One worker runs the whole module (pytest-xdist's loadgroup), so its module-scoped API server
# starts once, not once per worker.
pytestmark = [pytest.mark.envtest, requires_api_server, pytest.mark.xdist_group("test_envtest")]


def _wait(condition: Callable[[], bool], seconds: float, what: str) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except Exception:
            pass
        time.sleep(0.2)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def apiserver(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """etcd and kube-apiserver on 127.0.0.1 (the LWS CRD installed) holding the sample fleet; yields
    an admin kubeconfig."""
    with api_server(tmp_path_factory.mktemp("envtest")) as api:
        _create_fleet(api.api_client())
        yield api.kubeconfig


def _fleet(kind: str) -> list[dict[str, Any]]:
    doc = yaml.safe_load((FIXTURES / "fleet" / f"{kind}.yaml").read_text())
    return list(doc["items"])


def _fresh(obj: dict[str, Any], uids: dict[str, str]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    meta = obj["metadata"]
    for field in ("uid", "resourceVersion", "creationTimestamp", "generation", "managedFields"):
        meta.pop(field, None)
    for ref in meta.get("ownerReferences") or []:
        ref["uid"] = uids[ref["uid"]]
    obj.pop("status", None)
    return obj


def _owners_made(obj: dict[str, Any], uids: dict[str, str]) -> bool:
    return all(ref["uid"] in uids for ref in obj["metadata"].get("ownerReferences") or [])


def _create_fleet(api: Any) -> None:
    from kubernetes import client

    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    core.create_namespace({"metadata": {"name": "serve"}})
    for node in _fleet("nodes"):
        created = core.create_node(_fresh(node, {}))
        core.patch_node_status(created.metadata.name, {"status": node["status"]})
        # The API server's TaintNodesAtCreation plugin added node.kubernetes.io/not-ready:NoSchedule
        # on CREATE; no node lifecycle controller runs here to lift it. Back to the dump's taints
        # (the plugin does not act on a PATCH). A dict body goes as a strategic merge patch, and
        # Node.spec.taints has no merge key: the list is replaced.
        core.patch_node(created.metadata.name, {"spec": {"taints": node["spec"].get("taints") or []}})
    uids: dict[str, str] = {}
    pending = [("lws", o) for o in _fleet("leaderworkersets")]
    pending += [("sts", o) for o in _fleet("statefulsets")] + [("pod", o) for o in _fleet("pods")]
    pending += [("svc", o) for o in _fleet("services")]
    while pending:
        ready = [
            (k, o)
            for k, o in pending
            if all(r["uid"] in uids for r in o["metadata"].get("ownerReferences") or [])
        ]
        assert ready, "ownerReferences that point nowhere"
        for kind, obj in ready:
            pending.remove((kind, obj))
            body, ns, name = _fresh(obj, uids), obj["metadata"]["namespace"], obj["metadata"]["name"]
            if kind == "lws":
                made = custom.create_namespaced_custom_object(
                    "leaderworkerset.x-k8s.io", "v1", ns, "leaderworkersets", body
                )
                uid = made["metadata"]["uid"]
            elif kind == "sts":
                uid = apps.create_namespaced_stateful_set(ns, body).metadata.uid
            elif kind == "pod":
                uid = core.create_namespaced_pod(ns, body).metadata.uid
                core.patch_namespaced_pod_status(name, ns, {"status": obj["status"]})
            else:
                if body["spec"].get("clusterIP") != "None":  # keep a headless Service headless
                    body["spec"].pop("clusterIP", None)
                    body["spec"].pop("clusterIPs", None)
                uid = core.create_namespaced_service(ns, body).metadata.uid
            uids[obj["metadata"]["uid"]] = uid


def test_serve_syncs_from_a_real_api_server_and_follows_changes(
    apiserver: Path, fresh_server: Callable[..., Server]
) -> None:
    from kubernetes import client, config

    server = fresh_server("--kubeconfig", str(apiserver))  # returns once /readyz is 200
    denied = server.review("/validate", "s01-worker-delete.validating")
    assert denied["allowed"] is False and "llm-xl-0" in denied["status"]["message"]
    core = client.CoreV1Api(config.new_client_from_config(config_file=str(apiserver)))
    pod = core.read_namespaced_pod_status("llm-xl-0-2", "serve")
    for condition in pod.status.conditions:
        if condition.type == "Ready":
            condition.status = "False"
    core.replace_namespaced_pod_status("llm-xl-0-2", "serve", pod)
    _wait(
        lambda: server.review("/validate", "s01-worker-delete.validating")["allowed"] is True,
        20,
        "the view to follow the pod turning not-Ready",
    )
