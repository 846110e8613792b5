"""The Lease ledger against a real kube-apiserver (and etcd) from KUBEBUILDER_ASSETS: two replicas
racing on one LWS. Skipped, with the reason, when the binaries are not there."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from eviction_helpers import engine, evict_all, group_of, lws_view
from kubernetes import client

from guardhook.ledger.lease import LeaseLedger, lease_name

from conftest import free_port

ASSETS = os.environ.get("KUBEBUILDER_ASSETS", "")
TOKEN = "guardhook-envtest-token"
NAMESPACE = "guardhook-system"

pytestmark = [
    pytest.mark.envtest,
    pytest.mark.skipif(
        not (ASSETS and all((Path(ASSETS) / b).is_file() for b in ("kube-apiserver", "etcd"))),
        reason="needs KUBEBUILDER_ASSETS naming a folder with kube-apiserver and etcd",
    ),
]


def _write_service_account_key(folder: Path) -> tuple[Path, Path]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private, public = folder / "sa.key", folder / "sa.pub"
    private.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )
    )
    public.write_bytes(
        key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return private, public


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """etcd and kube-apiserver on 127.0.0.1; yields the API server's URL (token auth, AlwaysAllow)."""
    folder = tmp_path_factory.mktemp("envtest")
    etcd_port, peer_port, api_port = free_port(), free_port(), free_port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    logs = (folder / "etcd.log").open("wb"), (folder / "apiserver.log").open("wb")
    etcd = subprocess.Popen(
        [str(Path(ASSETS) / "etcd"), "--data-dir", str(folder / "etcd"), "--listen-client-urls", etcd_url,
         "--advertise-client-urls", etcd_url, "--listen-peer-urls", f"http://127.0.0.1:{peer_port}"],
        stdout=logs[0], stderr=subprocess.STDOUT,
    )  # fmt: skip
    private, public = _write_service_account_key(folder)
    (folder / "tokens.csv").write_text(f"{TOKEN},admin,admin,system:masters\n")
    apiserver = subprocess.Popen(
        [str(Path(ASSETS) / "kube-apiserver"), f"--etcd-servers={etcd_url}", f"--cert-dir={folder / 'certs'}",
         f"--secure-port={api_port}", "--bind-address=127.0.0.1", "--service-cluster-ip-range=10.0.0.0/24",
         "--authorization-mode=AlwaysAllow", f"--token-auth-file={folder / 'tokens.csv'}",
         f"--service-account-key-file={public}", f"--service-account-signing-key-file={private}",
         "--service-account-issuer=https://127.0.0.1", "--disable-admission-plugins=ServiceAccount"],
        stdout=logs[1], stderr=subprocess.STDOUT,
    )  # fmt: skip
    url = f"https://127.0.0.1:{api_port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                headers = {"Authorization": f"Bearer {TOKEN}"}
                if requests.get(url + "/readyz", headers=headers, verify=False, timeout=2).status_code == 200:
                    break
            except requests.RequestException:
                pass
            if time.monotonic() > deadline or apiserver.poll() is not None:
                pytest.fail(
                    f"kube-apiserver did not start:\n{(folder / 'apiserver.log').read_text()[-3000:]}"
                )
            time.sleep(0.5)
        yield url
    finally:
        for process in (apiserver, etcd):
            process.terminate()
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs:
            log.close()


def _api(url: str) -> client.ApiClient:
    configuration = client.Configuration()
    configuration.host = url
    configuration.verify_ssl = False
    configuration.api_key = {"authorization": f"Bearer {TOKEN}"}
    return client.ApiClient(configuration)


def test_two_replicas_racing_on_a_real_api_server_stay_within_the_budget(api_server: str) -> None:
    client.CoreV1Api(_api(api_server)).create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name=NAMESPACE))
    )
    replicas = [
        engine(lws_view(6, 2, budget=2), ledger=LeaseLedger(_api(api_server), NAMESPACE)) for _ in range(2)
    ]
    pods = [f"llm-{g}-1" for g in range(6)] * 2
    allowed = evict_all(replicas, pods)
    assert len({group_of(p) for p, ok in zip(pods, allowed, strict=True) if ok}) == 2
    lease = client.CoordinationV1Api(_api(api_server)).read_namespaced_lease(
        lease_name(("serve", "llm")), NAMESPACE
    )
    assert lease.metadata.annotations["guardhook.io/disruptions"].count('"group"') == 2
