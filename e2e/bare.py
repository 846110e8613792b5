"""Bare API server mode: etcd and kube-apiserver from `KUBEBUILDER_ASSETS` (the envtest
convention) on 127.0.0.1, the LWS CRD and the sample fleet created in them, `guardhook serve` on
the host, and the webhook configurations of manifests/base registered with `url:` client configs.

No controllers or kubelets run: the fleet's statuses are written as captured, and a pod that a
test evicts is put back by `restore_fleet`.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import requests
import yaml

from cluster import REPO, Cluster, eventually, webhooks_answering

sys.path.insert(0, str(REPO / "tests"))  # the API server launcher is shared with the unit tests

from envtest import FIXTURES, ApiServer, api_server, free_port, missing_binaries  # noqa: E402

FLEET_ORDER = ("nodes", "leaderworkersets", "statefulsets", "pods", "services")
NOISE = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink")
OWN_NAMESPACE = "guardhook-system"
FLEET_NAMESPACE = "serve"


def missing_assets(env: Mapping[str, str] = os.environ) -> str | None:
    """Why bare mode cannot run (None when it can): KUBEBUILDER_ASSETS unset, a binary absent, no
    kubectl, or no fixtures."""
    reason = missing_binaries(env)
    if reason is not None:
        return reason
    if shutil.which("kubectl") is None:
        return "kubectl is not on PATH"
    if not (FIXTURES / "fleet").is_dir() or not (FIXTURES / "crds").is_dir():
        return f"no fleet/ and crds/ in {FIXTURES} (set GUARDHOOK_FIXTURES)"
    return None


def url_client_configs(
    configurations: list[dict[str, Any]], base_url: str, ca_pem: bytes
) -> list[dict[str, Any]]:
    """The webhook configurations with every `clientConfig.service` replaced by
    `url: <base_url><service.path>` and the caBundle set to `ca_pem`; cert-manager annotations dropped."""
    bundle = base64.b64encode(ca_pem).decode()
    rewritten = []
    for configuration in configurations:
        configuration = copy.deepcopy(configuration)
        configuration["metadata"].pop("annotations", None)
        for hook in configuration["webhooks"]:
            path = hook["clientConfig"]["service"].get("path", "/")
            hook["clientConfig"] = {"url": base_url + path, "caBundle": bundle}
        rewritten.append(configuration)
    return rewritten


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
    obj = copy.deepcopy(obj)
    for key in NOISE:
        obj["metadata"].pop(key, None)
    obj["metadata"].pop("generateName", None)
    spec = obj.get("spec") or {}
    if obj["kind"] == "Service":
        spec.pop("clusterIPs", None)
        if spec.get("clusterIP") != "None":
            spec.pop("clusterIP", None)
    return obj


def _collection(obj: dict[str, Any]) -> str:
    """The REST collection path of an object."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural = {"LeaderWorkerSet": "leaderworkersets"}.get(kind, kind.lower() + "s")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    namespace = obj["metadata"].get("namespace")
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"


def create_with_status(api: ApiServer, captured: dict[str, Any]) -> None:
    """Create one fleet object, then write its captured status through the status subresource and
    (a Node) put back its captured taints."""
    collection = _collection(captured)
    created = api.request("POST", collection, _strip(captured))
    if created.status_code not in (200, 201):
        raise RuntimeError(f"create {collection}/{captured['metadata']['name']}: {created.text}")
    if "status" in captured:
        body = created.json()
        body["status"] = captured["status"]
        path = f"{collection}/{captured['metadata']['name']}/status"
        updated = api.request("PUT", path, body)
        if updated.status_code != 200:
            raise RuntimeError(f"status of {path}: {updated.text}")
        created = updated
    if captured["kind"] == "Node":
        restore_taints(api, captured, created.json())


def restore_taints(api: ApiServer, captured: dict[str, Any], stored: dict[str, Any]) -> None:
    """Give a created Node back the taints of its dump. The API server's TaintNodesAtCreation
    admission plugin (enabled with TaintNodesByCondition) adds `node.kubernetes.io/not-ready:
    NoSchedule` to every Node at CREATE only; on a real cluster the node lifecycle controller
    removes it once the node is Ready, but no controller runs here, so the fleet's Ready nodes
    would stay unschedulable. An UPDATE is not re-tainted by the plugin."""
    wanted = (captured.get("spec") or {}).get("taints") or []
    spec = stored.setdefault("spec", {})
    if (spec.get("taints") or []) == wanted:
        return
    if wanted:
        spec["taints"] = wanted
    else:
        spec.pop("taints", None)
    path = f"{_collection(captured)}/{captured['metadata']['name']}"
    updated = api.request("PUT", path, stored)
    if updated.status_code != 200:
        raise RuntimeError(f"taints of {path}: {updated.text}")


def fleet_objects() -> Iterator[dict[str, Any]]:
    for name in FLEET_ORDER:
        listing = yaml.safe_load((FIXTURES / "fleet" / f"{name}.yaml").read_text())
        yield from listing["items"]


def restore_fleet(api: ApiServer) -> None:
    """Re-create any fleet pod a test deleted (no controller does it here), with its status."""
    for captured in fleet_objects():
        if captured["kind"] != "Pod":
            continue
        path = f"{_collection(captured)}/{captured['metadata']['name']}"
        if api.request("GET", path).status_code == 404:
            create_with_status(api, captured)


def _serve(folder: Path, kubeconfig: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = free_port()
    certs = folder / "guardhook-certs"
    log = (folder / "guardhook.log").open("wb")
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    process = subprocess.Popen(
        [sys.executable, "-m", "guardhook", "serve", "--host", "127.0.0.1", "--port", str(port)]
        + ["--cert-dir", str(certs), "--kubeconfig", str(kubeconfig), "--namespace", OWN_NAMESPACE]
        + ["--sync-leader-services"],  # as every shipped overlay runs it
        stdout=log,
        stderr=subprocess.STDOUT,
        env=env,
        cwd=REPO,
    )
    url = f"https://127.0.0.1:{port}"

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(
                f"guardhook serve exited {process.returncode}: {(folder / 'guardhook.log').read_text()}"
            )
        if not (certs / "ca.crt").exists():
            return False
        try:
            return requests.get(url + "/readyz", verify=str(certs / "ca.crt"), timeout=2).status_code == 200
        except requests.RequestException:
            return False

    eventually(ready, 60, "guardhook serve /readyz", interval=0.3)
    return process, url, certs / "ca.crt"


@contextmanager
def bare_cluster() -> Iterator[Cluster]:
    """Start everything described in the module docstring; stop it all on exit."""
    folder = Path(tempfile.mkdtemp(prefix="guardhook-e2e-"))
    with ExitStack() as stack:
        api = stack.enter_context(api_server(folder))  # with the CRDs of fixtures/crds
        cluster = Cluster(
            kubeconfig=api.kubeconfig,
            mode="bare",
            namespace=FLEET_NAMESPACE,
            lws="llm-xl",
            groups=4,
            size=4,
            worker_labels={"app": "llm-xl"},
            restore=lambda: restore_fleet(api),
        )
        cluster.must("create", "namespace", OWN_NAMESPACE)
        cluster.must("create", "namespace", FLEET_NAMESPACE)
        cluster.must("label", "namespace", FLEET_NAMESPACE, "guardhook.io/guard-evictions=true")
        for captured in fleet_objects():
            create_with_status(api, captured)

        process, url, ca = _serve(folder, api.kubeconfig)

        def stop_guardhook() -> None:
            process.terminate()
            process.wait(timeout=30)

        stack.callback(stop_guardhook)
        rendered = cluster.must("kustomize", str(REPO / "manifests" / "base"))
        configurations = [
            doc
            for doc in yaml.safe_load_all(rendered)
            if doc and doc["kind"].endswith("WebhookConfiguration")
        ]
        for configuration in url_client_configs(configurations, url, ca.read_bytes()):
            cluster.must("create", "-f", "-", stdin=json.dumps(configuration))
        eventually(lambda: webhooks_answering(cluster), 60, "the webhooks to answer through the API server")
        yield cluster
    shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":  # manual use: python e2e/bare.py, then point kubectl at the printed kubeconfig
    reason = missing_assets()
    if reason:
        sys.exit(f"bare mode cannot run: {reason}")
    with bare_cluster() as running:
        print(f"export KUBECONFIG={running.kubeconfig}  # Ctrl-C to stop", flush=True)
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            pass
