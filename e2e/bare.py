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
import secrets
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import requests
import urllib3
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

from cluster import REPO, Cluster, eventually, webhooks_answering

FIXTURES = Path(os.environ.get("GUARDHOOK_FIXTURES", REPO.parent / "shared" / "fixtures"))
BINARIES = ("etcd", "kube-apiserver")
FLEET_ORDER = ("nodes", "leaderworkersets", "statefulsets", "pods", "services")
NOISE = ("uid", "resourceVersion", "creationTimestamp", "managedFields", "generation", "selfLink")
OWN_NAMESPACE = "guardhook-system"
FLEET_NAMESPACE = "serve"


def missing_assets(env: dict[str, str] | os._Environ[str] = os.environ) -> str | None:
    """Why bare mode cannot run (None when it can): KUBEBUILDER_ASSETS unset, or a binary absent."""
    folder = env.get("KUBEBUILDER_ASSETS")
    if not folder:
        return "KUBEBUILDER_ASSETS is not set"
    absent = [name for name in BINARIES if not os.access(Path(folder) / name, os.X_OK)]
    if absent:
        return f"KUBEBUILDER_ASSETS={folder} has no executable {' or '.join(absent)}"
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


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


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


class BareApiServer:
    """etcd + kube-apiserver in a temporary folder; `kubeconfig` authenticates as system:masters."""

    def __init__(self, assets: Path, folder: Path) -> None:
        self.assets = assets
        self.folder = folder
        self.port = _free_port()
        self.token = secrets.token_hex(16)
        self.kubeconfig = folder / "kubeconfig"
        self.processes: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> None:
        etcd_port, peer_port = _free_port(), _free_port()
        self._spawn(
            "etcd",
            [
                str(self.assets / "etcd"),
                f"--data-dir={self.folder / 'etcd'}",
                f"--listen-client-urls=http://127.0.0.1:{etcd_port}",
                f"--advertise-client-urls=http://127.0.0.1:{etcd_port}",
                f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            ],
        )
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        sa_key = self.folder / "sa.key"
        sa_key.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
            )
        )
        tokens = self.folder / "tokens.csv"
        tokens.write_text(f'{self.token},e2e-admin,e2e-admin,"system:masters"\n')
        self._spawn(
            "kube-apiserver",
            [
                str(self.assets / "kube-apiserver"),
                f"--etcd-servers=http://127.0.0.1:{etcd_port}",
                f"--cert-dir={self.folder / 'apiserver-certs'}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={self.port}",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--service-account-issuer={self.url}",
                f"--service-account-key-file={sa_key}",
                f"--service-account-signing-key-file={sa_key}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                "--disable-admission-plugins=ServiceAccount",
            ],
        )
        self.kubeconfig.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [
                        {"name": "bare", "cluster": {"server": self.url, "insecure-skip-tls-verify": True}}
                    ],
                    "users": [{"name": "admin", "user": {"token": self.token}}],
                    "contexts": [{"name": "bare", "context": {"cluster": "bare", "user": "admin"}}],
                    "current-context": "bare",
                }
            )
        )
        eventually(self._ready, 60, "kube-apiserver /readyz", interval=0.5)

    def _spawn(self, name: str, args: list[str]) -> None:
        log = (self.folder / f"{name}.log").open("wb")
        self.processes.append(subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT))

    def _ready(self) -> bool:
        for process in self.processes:
            if process.poll() is not None:
                raise RuntimeError(f"{process.args[0]} exited {process.returncode}; logs in {self.folder}")
        try:
            answer = self.request("GET", "/readyz")
        except requests.RequestException:
            return False
        return answer.status_code == 200

    def request(self, method: str, path: str, body: Any = None) -> requests.Response:
        """One authenticated call to the API server (its serving certificate is self-signed)."""
        urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # self-signed, on 127.0.0.1
        return requests.request(
            method,
            self.url + path,
            json=body,
            headers={"Authorization": f"Bearer {self.token}"},
            verify=False,
            timeout=30,
        )

    def stop(self) -> None:
        for process in reversed(self.processes):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _collection(obj: dict[str, Any]) -> str:
    """The REST collection path of an object."""
    api_version, kind = obj["apiVersion"], obj["kind"]
    plural = {"LeaderWorkerSet": "leaderworkersets"}.get(kind, kind.lower() + "s")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    namespace = obj["metadata"].get("namespace")
    return f"{prefix}/namespaces/{namespace}/{plural}" if namespace else f"{prefix}/{plural}"


def create_with_status(api: BareApiServer, captured: dict[str, Any]) -> None:
    """Create one fleet object, then write its captured status through the status subresource."""
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


def fleet_objects() -> Iterator[dict[str, Any]]:
    for name in FLEET_ORDER:
        listing = yaml.safe_load((FIXTURES / "fleet" / f"{name}.yaml").read_text())
        yield from listing["items"]


def restore_fleet(api: BareApiServer) -> None:
    """Re-create any fleet pod a test deleted (no controller does it here), with its status."""
    for captured in fleet_objects():
        if captured["kind"] != "Pod":
            continue
        path = f"{_collection(captured)}/{captured['metadata']['name']}"
        if api.request("GET", path).status_code == 404:
            create_with_status(api, captured)


def _serve(folder: Path, kubeconfig: Path) -> tuple[subprocess.Popen[bytes], str, Path]:
    port = _free_port()
    certs = folder / "guardhook-certs"
    log = (folder / "guardhook.log").open("wb")
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    process = subprocess.Popen(
        [sys.executable, "-m", "guardhook", "serve", "--host", "127.0.0.1", "--port", str(port)]
        + ["--cert-dir", str(certs), "--kubeconfig", str(kubeconfig), "--namespace", OWN_NAMESPACE],
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
        api = BareApiServer(Path(os.environ["KUBEBUILDER_ASSETS"]), folder)
        stack.callback(api.stop)
        api.start()
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
        crds = FIXTURES / "crds"
        cluster.must("create", "-f", str(crds))  # the LWS CRD is too large for client-side apply
        cluster.must("wait", "--for=condition=Established", "crd", "--all", "--timeout=60s")
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
