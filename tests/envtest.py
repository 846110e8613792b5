"""A real kube-apiserver and etcd from KUBEBUILDER_ASSETS (as controller-runtime's envtest runs
them), for tests that need the real API. No controllers run: objects stay as the test writes them.

`api_server(tmp)` yields an `ApiServer` with a kubeconfig (static bearer token, system:masters,
AlwaysAllow authorization) and a `requests` session for raw calls. Tests call `assets_or_skip()`
first, which skips with the reason when the binaries are not there.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa

TOKEN = "guardhook-envtest-token"


def assets_or_skip() -> Path:
    """The KUBEBUILDER_ASSETS folder; skips the test when it lacks kube-apiserver or etcd."""
    folder = Path(os.environ.get("KUBEBUILDER_ASSETS", ""))
    if not os.environ.get("KUBEBUILDER_ASSETS") or not all(
        (folder / binary).is_file() for binary in ("kube-apiserver", "etcd")
    ):
        pytest.skip("needs KUBEBUILDER_ASSETS naming a folder with kube-apiserver and etcd")
    return folder


def _port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ApiServer:
    url: str
    kubeconfig: Path
    session: requests.Session

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        answer = self.session.post(self.url + path, json=body, timeout=30)
        assert answer.status_code in (200, 201), answer.text
        return answer.json()

    def get(self, path: str) -> dict[str, Any]:
        answer = self.session.get(self.url + path, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/merge-patch+json"}
        answer = self.session.patch(self.url + path, data=json.dumps(body), headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()


def _sa_keys(folder: Path) -> tuple[Path, Path]:
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


@contextmanager
def api_server(tmp: Path) -> Iterator[ApiServer]:
    """Start etcd and kube-apiserver; stop both (by their own handles) afterwards."""
    assets = assets_or_skip()
    etcd_port, peer_port, api_port = _port(), _port(), _port()
    etcd_url = f"http://127.0.0.1:{etcd_port}"
    etcd = subprocess.Popen(
        [
            str(assets / "etcd"),
            f"--data-dir={tmp / 'etcd'}",
            f"--listen-client-urls={etcd_url}",
            f"--advertise-client-urls={etcd_url}",
            f"--listen-peer-urls=http://127.0.0.1:{peer_port}",
            "--unsafe-no-fsync=true",
        ],
        stdout=(tmp / "etcd.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    private, public = _sa_keys(tmp)
    tokens = tmp / "tokens.csv"
    tokens.write_text(f'{TOKEN},admin,admin,"system:masters"\n')
    url = f"https://127.0.0.1:{api_port}"
    apiserver = subprocess.Popen(
        [
            str(assets / "kube-apiserver"),
            f"--etcd-servers={etcd_url}",
            f"--cert-dir={tmp / 'certs'}",
            f"--secure-port={api_port}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            "--service-cluster-ip-range=10.0.0.0/24",
            "--authorization-mode=AlwaysAllow",
            f"--token-auth-file={tokens}",
            "--disable-admission-plugins=ServiceAccount",
            f"--service-account-issuer={url}",
            f"--service-account-key-file={public}",
            f"--service-account-signing-key-file={private}",
        ],
        stdout=(tmp / "apiserver.log").open("wb"),
        stderr=subprocess.STDOUT,
    )
    session = requests.Session()
    session.trust_env = False
    session.verify = False  # the API server's self-signed serving certificate
    session.headers["Authorization"] = f"Bearer {TOKEN}"
    kubeconfig = tmp / "kubeconfig"
    kubeconfig.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "envtest", "cluster": {"server": url, "insecure-skip-tls-verify": True}}
                ],
                "users": [{"name": "admin", "user": {"token": TOKEN}}],
                "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
                "current-context": "envtest",
            }
        )
    )
    try:
        _wait_ready(session, url, apiserver, tmp)
        yield ApiServer(url, kubeconfig, session)
    finally:
        for process in (apiserver, etcd):
            process.terminate()
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(session: requests.Session, url: str, apiserver: subprocess.Popen[bytes], tmp: Path) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if apiserver.poll() is not None:
            raise AssertionError("kube-apiserver exited:\n" + (tmp / "apiserver.log").read_text()[-4000:])
        try:
            if session.get(url + "/readyz", timeout=2).status_code == 200:
                return
        except requests.RequestException:
            pass
        time.sleep(0.25)
    raise AssertionError("kube-apiserver not ready in 60s:\n" + (tmp / "apiserver.log").read_text()[-4000:])
