"""A real kube-apiserver and etcd from KUBEBUILDER_ASSETS (as controller-runtime's envtest runs
them) on 127.0.0.1, with the CRDs of `fixtures/crds` installed and Established. No controllers
run: objects stay as the test writes them. The one launcher for the unit tests and e2e/bare.py.

`api_server(folder)` yields an `ApiServer`: its URL, an admin kubeconfig (static bearer token in
system:masters, RBAC authorization), raw authenticated calls and a `kubernetes` ApiClient. Test
modules mark themselves with `requires_api_server`, which skips with the reason when the binaries
are not there (`missing_binaries()` says why).

Imported from tests/ (on pytest's path) and e2e/ (bare.py adds tests/ to sys.path), so it imports
nothing of either suite's conftest.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import secrets
import socket
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import requests
import urllib3
import yaml
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from kubernetes import client

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GUARDHOOK_FIXTURES", REPO.parent / "shared" / "fixtures"))
BINARIES = ("etcd", "kube-apiserver")
CRDS = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions"
START_SECONDS = 60


def missing_binaries(env: Mapping[str, str] = os.environ) -> str | None:
    """Why no API server can be started (None when it can): KUBEBUILDER_ASSETS unset, or a binary
    in it absent or not executable."""
    folder = env.get("KUBEBUILDER_ASSETS")
    if not folder:
        return "KUBEBUILDER_ASSETS is not set"
    absent = [name for name in BINARIES if not os.access(Path(folder) / name, os.X_OK)]
    if absent:
        return f"KUBEBUILDER_ASSETS={folder} has no executable {' or '.join(absent)}"
    return None


REQUIRE_ENV = "GUARDHOOK_REQUIRE_API_SERVER"


def _required_but_missing(env: Mapping[str, str] = os.environ) -> str | None:
    """Why the envtest tests cannot run although `GUARDHOOK_REQUIRE_API_SERVER=1` says they must
    (.ci/run sets it after building the cluster binaries), or None."""
    missing = missing_binaries(env)
    if env.get(REQUIRE_ENV) == "1" and missing:
        return f"{REQUIRE_ENV}=1 but {missing}"
    return None


if _required_but_missing():
    # A collection error, not a skip: CI must never pass the envtest tests by skipping them.
    raise RuntimeError(_required_but_missing())

requires_api_server = pytest.mark.skipif(
    missing_binaries() is not None,
    reason=f"needs kube-apiserver and etcd from KUBEBUILDER_ASSETS ({missing_binaries()}); "
    "not obtainable from the package registries here",
)


def free_port() -> int:
    """A TCP port free on 127.0.0.1 at the time of the call."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@dataclass
class ApiServer:
    """A running API server: `url` (https, self-signed), `token` (system:masters), `kubeconfig`
    (insecure-skip-tls-verify) and `folder` (its data and logs)."""

    url: str
    token: str
    kubeconfig: Path
    folder: Path
    session: requests.Session

    def request(self, method: str, path: str, body: Any = None) -> requests.Response:
        """One authenticated call; returns the response whatever its status."""
        return self.session.request(method, self.url + path, json=body, timeout=30)

    def create(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        """POST `body` to the collection `path`; the created object. Asserts 200/201."""
        answer = self.request("POST", path, body)
        assert answer.status_code in (200, 201), answer.text
        return answer.json()

    def get(self, path: str) -> dict[str, Any]:
        answer = self.request("GET", path)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def merge_patch(self, path: str, body: dict[str, Any]) -> dict[str, Any]:
        headers = {"Content-Type": "application/merge-patch+json"}
        answer = self.session.patch(self.url + path, data=json.dumps(body), headers=headers, timeout=30)
        assert answer.status_code == 200, answer.text
        return answer.json()

    def api_client(self) -> client.ApiClient:
        """A `kubernetes` ApiClient of its own, authenticated as the admin."""
        configuration = client.Configuration()
        configuration.host = self.url
        configuration.verify_ssl = False  # the self-signed serving certificate, on 127.0.0.1
        configuration.api_key = {"authorization": f"Bearer {self.token}"}
        return client.ApiClient(configuration)


@contextmanager
def api_server(folder: Path, extra_args: Sequence[str] = ()) -> Iterator[ApiServer]:
    """Start etcd and kube-apiserver (with `extra_args` appended to its flags) with their data and
    logs in `folder`, wait for /readyz and install the fixtures' CRDs; stop both (by their own
    handles) afterwards. `folder` (and its parents) are created when missing. Raises RuntimeError
    when the binaries are missing or the server does not come up within START_SECONDS."""
    reason = missing_binaries()
    if reason is not None:
        raise RuntimeError(f"cannot start an API server: {reason}")
    folder.mkdir(parents=True, exist_ok=True)
    assets = Path(os.environ["KUBEBUILDER_ASSETS"])
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)  # self-signed, on 127.0.0.1
    etcd_url, api_port = f"http://127.0.0.1:{free_port()}", free_port()
    url = f"https://127.0.0.1:{api_port}"
    token = secrets.token_hex(16)
    with ExitStack() as stack:
        etcd = _spawn(
            stack,
            folder / "etcd.log",
            [
                str(assets / "etcd"),
                f"--data-dir={folder / 'etcd'}",
                f"--listen-client-urls={etcd_url}",
                f"--advertise-client-urls={etcd_url}",
                f"--listen-peer-urls=http://127.0.0.1:{free_port()}",
                "--unsafe-no-fsync=true",
            ],
        )
        key = _service_account_key(folder / "sa.key")
        tokens = folder / "tokens.csv"
        _create(tokens).write_text(f'{token},admin,admin,"system:masters"\n')
        apiserver = _spawn(
            stack,
            folder / "kube-apiserver.log",
            [
                str(assets / "kube-apiserver"),
                f"--etcd-servers={etcd_url}",
                f"--cert-dir={folder / 'certs'}",
                "--bind-address=127.0.0.1",
                "--advertise-address=127.0.0.1",
                f"--secure-port={api_port}",
                "--service-cluster-ip-range=10.0.0.0/24",
                f"--service-account-issuer={url}",
                f"--service-account-key-file={key}",
                f"--service-account-signing-key-file={key}",
                f"--token-auth-file={tokens}",
                "--authorization-mode=RBAC",
                "--allow-privileged=true",
                "--disable-admission-plugins=ServiceAccount",
                # 1.37 refuses a loopback advertise address with the endpoint reconciler; nothing
                # here reads the kubernetes Service endpoints.
                "--endpoint-reconciler-type=none",
                *extra_args,
            ],
        )
        session = requests.Session()
        session.trust_env = False
        session.verify = False
        session.headers["Authorization"] = f"Bearer {token}"
        api = ApiServer(url, token, _write_kubeconfig(folder / "kubeconfig", url, token), folder, session)

        def ready() -> bool:
            for process, name in ((etcd, "etcd"), (apiserver, "kube-apiserver")):
                if process.poll() is not None:
                    tail = (folder / f"{name}.log").read_text(errors="replace")[-4000:]
                    raise RuntimeError(f"{name} exited {process.returncode}:\n{tail}")
            try:
                return api.request("GET", "/readyz").status_code == 200
            except requests.RequestException:
                return False

        _wait(ready, START_SECONDS, f"kube-apiserver /readyz (logs in {folder})")
        install_crds(api)
        yield api


WEBHOOKS = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations"


@contextmanager
def base_webhooks_calling(api: ApiServer, url: str, ca: Path) -> Iterator[dict[str, Any]]:
    """manifests/base's ValidatingWebhookConfiguration registered with `api`, every entry calling
    `url` plus its path and trusting the CA file `ca` (a guardhook the test serves), deleted at
    the end. Yields the configuration created; the API server compiles and cost-checks every
    matchCondition when it creates it."""
    from kustomize_lite import render  # the tests' kustomize; only the tests that register need it

    (configuration,) = [
        o for o in render(REPO / "manifests" / "base") if o["kind"] == "ValidatingWebhookConfiguration"
    ]
    configuration = copy.deepcopy(configuration)
    bundle = base64.b64encode(ca.read_bytes()).decode()
    for hook in configuration["webhooks"]:
        path = hook["clientConfig"]["service"]["path"]
        hook["clientConfig"] = {"url": url + path, "caBundle": bundle}
    api.create(WEBHOOKS, configuration)
    try:
        yield configuration
    finally:
        api.request("DELETE", f"{WEBHOOKS}/{configuration['metadata']['name']}")


def install_crds(api: ApiServer, folder: Path = FIXTURES / "crds") -> None:
    """Create every CustomResourceDefinition in `folder`'s YAML files and wait until each is
    Established and each served version lists (200). Raises RuntimeError when one is refused or
    not served within 30 s."""
    if not folder.is_dir():
        raise RuntimeError(f"no CRDs to install: {folder} is not a folder (set GUARDHOOK_FIXTURES)")
    names, collections = [], []
    for path in sorted(folder.glob("*.yaml")):
        for crd in yaml.safe_load_all(path.read_text()):
            if not crd:
                continue
            answer = api.request("POST", CRDS, crd)
            if answer.status_code not in (200, 201):
                raise RuntimeError(f"create CRD from {path.name}: {answer.text}")
            names.append(crd["metadata"]["name"])
            spec = crd["spec"]
            for version in spec["versions"]:
                if version.get("served", True):
                    collections.append(f"/apis/{spec['group']}/{version['name']}/{spec['names']['plural']}")

    def established(name: str) -> bool:
        answer = api.request("GET", f"{CRDS}/{name}")
        conditions = answer.json().get("status", {}).get("conditions") if answer.status_code == 200 else None
        return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions or [])

    for name in names:
        _wait(partial(established, name), 30, f"CRD {name} to be Established")
    # Established is a condition the API server sets; its handler for the custom resources may
    # still answer 404 for a moment after it, so wait until each served version lists.
    for collection in collections:
        _wait(lambda c=collection: api.request("GET", c).status_code == 200, 30, f"{collection} to be served")


def _spawn(stack: ExitStack, log_path: Path, args: list[str]) -> subprocess.Popen[bytes]:
    """Start `args` logging to `log_path` (its folder created when missing); `stack` stops it and
    closes the log."""
    log = stack.enter_context(_create(log_path).open("wb"))
    process = subprocess.Popen(args, stdout=log, stderr=subprocess.STDOUT)
    stack.callback(_stop, process)
    return process


def _create(path: Path) -> Path:
    """`path` once its parent folder exists: every file this helper writes goes through here, so
    no caller has to prepare a folder first."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return path


def _stop(process: subprocess.Popen[bytes]) -> None:
    process.terminate()
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def _service_account_key(path: Path) -> Path:
    """An RSA key in PKCS#8 PEM at `path`: the API server signs and verifies tokens with it."""
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    _create(path).write_bytes(pem)
    return path


def _write_kubeconfig(path: Path, url: str, token: str) -> Path:
    cluster = {"server": url, "insecure-skip-tls-verify": True}
    _create(path).write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "envtest", "cluster": cluster}],
                "users": [{"name": "admin", "user": {"token": token}}],
                "contexts": [{"name": "envtest", "context": {"cluster": "envtest", "user": "admin"}}],
                "current-context": "envtest",
            }
        )
    )
    return path


def wait_for(check: Callable[[], Any], seconds: float, what: str) -> Any:
    """Poll `check` every 0.2 s until it returns something truthy, and return that; raises
    AssertionError naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.2)
    raise AssertionError(f"timed out after {seconds}s waiting for {what}")


_wait = wait_for
