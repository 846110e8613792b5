"""guardhook against a real kube-apiserver + etcd (the envtest convention: KUBEBUILDER_ASSETS names
a folder holding both binaries). Skipped with the reason when they are absent.

A bare API server runs no controllers, so the sample fleet is created object by object with its
status written through the status subresource and ownerReference uids re-linked to the new objects.
"""

from __future__ import annotations

import copy
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import FIXTURES, Server, free_port

ASSETS = os.environ.get("KUBEBUILDER_ASSETS", "")
BINARIES = ("kube-apiserver", "etcd")
MISSING = [b for b in BINARIES if not (ASSETS and (Path(ASSETS) / b).is_file())]

pytestmark = [
    pytest.mark.envtest,
    pytest.mark.skipif(
        bool(MISSING),
        reason=f"needs {' and '.join(MISSING)} in KUBEBUILDER_ASSETS "
        f"({ASSETS or 'unset'}); not obtainable from the package registries here",
    ),
]

TOKEN = "guardhook-envtest-token"


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
    """etcd and kube-apiserver on 127.0.0.1; yields an admin kubeconfig."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    tmp = tmp_path_factory.mktemp("envtest")
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    (tmp / "sa.key").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    (tmp / "tokens.csv").write_text(f'{TOKEN},admin,admin,"system:masters"\n')
    etcd = subprocess.Popen(
        [
            str(Path(ASSETS) / "etcd"),
            "--data-dir",
            str(tmp / "etcd"),
            "--listen-client-urls",
            f"http://127.0.0.1:{etcd_port}",
            "--advertise-client-urls",
            f"http://127.0.0.1:{etcd_port}",
            "--listen-peer-urls",
            f"http://127.0.0.1:{peer_port}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    api = subprocess.Popen(
        [
            str(Path(ASSETS) / "kube-apiserver"),
            f"--etcd-servers=http://127.0.0.1:{etcd_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={api_port}",
            f"--cert-dir={tmp / 'certs'}",
            f"--token-auth-file={tmp / 'tokens.csv'}",
            "--authorization-mode=RBAC",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--service-account-issuer=https://127.0.0.1",
            f"--service-account-key-file={tmp / 'sa.key'}",
            f"--service-account-signing-key-file={tmp / 'sa.key'}",
            "--disable-admission-plugins=ServiceAccount",
            "--allow-privileged=true",
        ],
        stdout=subprocess.DEVNULL,
        stderr=(tmp / "apiserver.log").open("wb"),
    )
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "envtest",
                        "cluster": {
                            "server": f"https://127.0.0.1:{api_port}",
                            "insecure-skip-tls-verify": True,
                        },
                    }
                ],
                "users": [{"name": "admin", "user": {"token": TOKEN}}],
                "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
                "current-context": "envtest",
            }
        )
    )
    try:
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=str(kubeconfig))
        _wait(lambda: client.CoreV1Api(api_client).list_namespace() is not None, 60, "the API server")
        _create_fleet(api_client)
        yield kubeconfig
    finally:
        for process in (api, etcd):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


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
    from kubernetes import client, utils

    utils.create_from_yaml(api, str(FIXTURES / "crds" / "leaderworkerset.x-k8s.io_leaderworkersets.yaml"))
    core, apps, custom = client.CoreV1Api(api), client.AppsV1Api(api), client.CustomObjectsApi(api)
    ext = client.ApiextensionsV1Api(api)
    _wait(
        lambda: any(
            c.type == "Established" and c.status == "True"
            for c in ext.read_custom_resource_definition(
                "leaderworkersets.leaderworkerset.x-k8s.io"
            ).status.conditions
        ),
        30,
        "the LWS CRD",
    )
    core.create_namespace({"metadata": {"name": "serve"}})
    for node in _fleet("nodes"):
        created = core.create_node(_fresh(node, {}))
        core.patch_node_status(created.metadata.name, {"status": node["status"]})
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
