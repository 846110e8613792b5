"""Client authentication on the webhook port (`serve --client-ca-file/--client-cn`, issue 48):
only a caller with a certificate from the client CA, naming an allowed name, is judged; probes and
/metrics answer without one; without it, every allowed disruption is logged at INFO with its caller."""

from __future__ import annotations

import argparse
import datetime
import json
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest
import requests
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
from test_manifests import MANIFESTS, one

from guardhook.commands.argtypes import certificate_name
from guardhook.commands.main import build_parser
from guardhook.server.certs import (
    CertificateError,
    CertPaths,
    RotatingServerContext,
    generate,
    with_client_ca,
)
from guardhook.server.clientauth import NO_CERTIFICATE, certificate_names, client_auth

from conftest import Server, load_review, serve_refused
from kustomize_lite import render, user_overlay


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn)])


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


class ClientCA:
    """A CA that issues client certificates, as a cluster admin would make for kube-apiserver."""

    def __init__(self, folder: Path, cn: str = "client-ca") -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self.key = _key()
        now = datetime.datetime.now(datetime.UTC)
        self.cert = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(_name(cn))
            .public_key(self.key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .sign(self.key, hashes.SHA256())
        )
        self.file = folder / "client-ca.crt"
        self.file.write_bytes(self.cert.public_bytes(serialization.Encoding.PEM))

    def issue(self, cn: str, dns: tuple[str, ...] = ()) -> tuple[str, str]:
        """(cert file, key file) of a client certificate for `cn` (and DNS SANs `dns`)."""
        key = _key()
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(cn))
            .issuer_name(self.cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        )
        if dns:
            builder = builder.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in dns]), critical=False
            )
        cert = builder.sign(self.key, hashes.SHA256())
        stem = self.folder / f"{cn}-{len(dns)}"
        stem.with_suffix(".crt").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        stem.with_suffix(".key").write_bytes(_pem_key(key))
        return str(stem.with_suffix(".crt")), str(stem.with_suffix(".key"))


def post(server: Server, review: str, cert: tuple[str, str] | None) -> requests.Response:
    """POST a captured review to /validate with a fresh connection (a new TLS handshake)."""
    with requests.Session() as session:
        session.trust_env = False
        session.verify = str(server.ca)
        return session.post(
            server.url + "/validate", data=json.dumps(load_review(review)), cert=cert, timeout=10
        )


# ---- the real server ------------------------------------------------------------------------------


def test_a_review_without_a_client_certificate_is_refused_and_records_nothing(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    ca = ClientCA(tmp_path / "client")
    server = fresh_server("--client-ca-file", str(ca.file), "--client-cn", "kube-apiserver")
    apiserver = ca.issue("kube-apiserver")
    # A forged eviction from anyone who reaches the port: refused before it is judged.
    forged = post(server, "s07-eviction-worker.validating", None)
    assert forged.status_code == 401, forged.text
    assert "client certificate is required" in forged.json()["message"]
    # Nothing was recorded: the API server's real eviction of another group is allowed, not 429'd...
    real = post(server, "s08-eviction-other-group.validating", apiserver).json()["response"]
    assert real["allowed"] is True
    # ...and it was judged and recorded: the next group's eviction meets the spent budget.
    after = post(server, "s07-eviction-worker.validating", apiserver).json()["response"]
    assert after["allowed"] is False and after["status"]["code"] == 429
    assert "refused a review from 127.0.0.1" in server.logged("refused a review")


def test_a_review_without_a_certificate_is_refused_before_its_body_is_read(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    # Its body would otherwise be read and held first (up to 6 MiB, against the bound on bytes in
    # flight that the API server's reviews share); here only the headers are ever sent.
    ca = ClientCA(tmp_path / "client")
    server = fresh_server("--client-ca-file", str(ca.file), "--request-timeout", "60")
    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(server.ca))
    with context.wrap_socket(
        socket.create_connection((host, int(port)), timeout=30), server_hostname=host
    ) as sock:
        sock.sendall(b"POST /validate?timeout=10s HTTP/1.1\r\nHost: g\r\nContent-Length: 3145728\r\n\r\n")
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert answer.startswith(b"HTTP/1.1 401 ") and b"client certificate is required" in answer
    metrics = server.session.get(server.url + "/metrics", timeout=10).text
    assert 'guardhook_requests_refused_unread_total{code="401",reason="no-client-certificate"} 1.0' in metrics


def test_probes_and_metrics_answer_without_a_client_certificate(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    ca = ClientCA(tmp_path / "client")
    server = fresh_server("--client-ca-file", str(ca.file))
    for path in ("/healthz", "/readyz", "/metrics"):
        assert server.session.get(server.url + path, timeout=10).status_code == 200, path


def test_names_are_matched_against_the_cn_and_dns_sans(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    ca = ClientCA(tmp_path / "client")
    server = fresh_server("--client-ca-file", str(ca.file), "--client-cn", "webhook-caller.example")
    # The default name is not allowed once names are given.
    wrong = post(server, "s07-eviction-worker.validating", ca.issue("kube-apiserver"))
    assert wrong.status_code == 403 and "kube-apiserver" in wrong.json()["message"]
    by_san = post(server, "s08-eviction-other-group.validating", ca.issue("x", ("webhook-caller.example",)))
    assert by_san.status_code == 200 and by_san.json()["response"]["allowed"] is True


def test_a_certificate_of_another_ca_fails_the_handshake(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    ca = ClientCA(tmp_path / "client")
    other = ClientCA(tmp_path / "other")
    server = fresh_server("--client-ca-file", str(ca.file))
    with pytest.raises(requests.exceptions.SSLError):
        post(server, "s07-eviction-worker.validating", other.issue("kube-apiserver"))
    assert post(server, "s08-eviction-other-group.validating", ca.issue("kube-apiserver")).status_code == 200


def test_a_replaced_client_ca_file_is_followed_without_a_restart(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    ca = ClientCA(tmp_path / "client")
    server = fresh_server("--client-ca-file", str(ca.file))
    rotated = ClientCA(tmp_path / "rotated")
    ca.file.write_bytes(rotated.file.read_bytes())  # the kubelet swaps a Secret's files the same way
    answer = post(server, "s08-eviction-other-group.validating", rotated.issue("kube-apiserver"))
    assert answer.status_code == 200, answer.text
    with pytest.raises(requests.exceptions.SSLError):
        post(server, "s07-eviction-worker.validating", ca.issue("kube-apiserver"))


def test_without_client_auth_an_allowed_eviction_is_logged_at_info_with_its_caller(
    fresh_server: Callable[..., Server],
) -> None:
    server = fresh_server(log_format="json")
    request = load_review("s07-eviction-worker.validating")["request"]
    assert server.review("/validate", "s07-eviction-worker.validating")["allowed"] is True
    lines = [json.loads(line) for line in server.final_log().splitlines() if line.startswith("{")]
    allowed = [
        line for line in lines if line.get("policy") == "group-eviction" and line.get("outcome") == "allowed"
    ]
    assert len(allowed) == 1 and allowed[0]["level"] == "INFO"
    assert allowed[0]["uid"] == request["uid"]
    assert allowed[0]["user"] == request["userInfo"]["username"]
    assert allowed[0]["groups"] == request["userInfo"]["groups"]
    assert any("no client authentication" in line.get("msg", "") for line in lines)


# ---- the kustomize component ----------------------------------------------------------------------


def test_the_client_auth_component_mounts_the_ca_and_passes_the_flags(tmp_path: Path) -> None:
    overlay = user_overlay(
        tmp_path / "overlay",
        [MANIFESTS / "overlays" / "cert-manager"],
        [MANIFESTS / "components" / "client-auth"],
    )
    pod = one(render(overlay), "Deployment")["spec"]["template"]["spec"]
    args = [a.replace("$(POD_NAMESPACE)", "guardhook-system") for a in pod["containers"][0]["args"]]
    parsed = build_parser().parse_args(args)
    assert parsed.client_cn == ["kube-apiserver"]
    (mount,) = [m for m in pod["containers"][0]["volumeMounts"] if m["name"] == "client-ca"]
    assert Path(parsed.client_ca_file).parent == Path(mount["mountPath"]) and "subPath" not in mount
    (volume,) = [v for v in pod["volumes"] if v["name"] == "client-ca"]
    assert volume["secret"]["secretName"] == "guardhook-client-ca"
    assert "--client-ca-file" not in " ".join(
        one(render(MANIFESTS), "Deployment")["spec"]["template"]["spec"]["containers"][0]["args"]
    )


# ---- start-up and the parts ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--client-cn", "kube-apiserver"], "--client-cn needs --client-ca-file"),
        (["--client-ca-file", "missing.crt"], "missing.crt cannot be used as the client CA"),
        (["--client-ca-file", "."], "is a folder"),
    ],
)
def test_unusable_client_auth_flags_exit_2_with_one_line(tmp_path: Path, args: list[str], words: str) -> None:
    done = serve_refused(tmp_path, *args)
    assert done.returncode == 2, done.stderr
    assert words in done.stderr and "Traceback" not in done.stderr


def test_a_client_ca_file_holding_no_certificate_is_refused(tmp_path: Path) -> None:
    paths = generate(tmp_path / "certs", ["localhost"])
    empty = tmp_path / "empty.crt"
    empty.write_text("no certificate here\n")
    with pytest.raises(CertificateError, match="client CA"):
        with_client_ca(paths, empty)


def test_the_context_asks_for_a_certificate_but_lets_a_probe_without_one_through(tmp_path: Path) -> None:
    ca = ClientCA(tmp_path / "client")
    paths = with_client_ca(generate(tmp_path / "certs", ["localhost"]), ca.file)
    context = RotatingServerContext(paths).context()
    assert context.verify_mode == ssl.CERT_OPTIONAL
    assert RotatingServerContext(CertPaths(paths.folder)).context().verify_mode == ssl.CERT_NONE


@pytest.mark.parametrize("name", ["system:kube-apiserver", "kube-apiserver-kubelet-client"])
def test_a_cn_is_free_text(name: str) -> None:
    assert certificate_name(name) == name


@pytest.mark.parametrize("name", ["", " kube-apiserver", "a\nb"])
def test_an_empty_or_unprintable_name_is_refused(name: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        certificate_name(name)


def test_certificate_names_are_the_cn_and_the_dns_sans() -> None:
    cert = {
        "subject": ((("organizationName", "system:masters"),), (("commonName", "kube-apiserver"),)),
        "subjectAltName": (("DNS", "apiserver.example"), ("IP Address", "10.0.0.1")),
    }
    assert certificate_names(cert) == {"kube-apiserver", "apiserver.example"}
    assert client_auth([]).names == frozenset({"kube-apiserver"})


class PeerSocket:
    """What the app reads of gunicorn's socket: the verified peer certificate (None: none)."""

    def __init__(self, cert: dict[str, object] | None) -> None:
        self.cert = cert

    def getpeercert(self) -> dict[str, object] | None:
        return self.cert


def test_the_app_refuses_what_the_worker_let_through() -> None:
    # The worker refuses a review without a certificate by its request line; the app checks again
    # (401) and checks the names (403), from the socket gunicorn puts in the WSGI environ.
    auth = client_auth(["kube-apiserver"])
    assert auth.refusal({"gunicorn.socket": PeerSocket(None)}) == (401, NO_CERTIFICATE)
    assert auth.refusal({}) == (401, NO_CERTIFICATE)
    eve = {"subject": ((("commonName", "eve"),),)}
    code, reason = auth.refusal({"gunicorn.socket": PeerSocket(eve)}) or (0, "")
    assert code == 403 and "(eve)" in reason and "kube-apiserver" in reason
    apiserver = {"subject": ((("commonName", "kube-apiserver"),),)}
    assert auth.refusal({"gunicorn.socket": PeerSocket(apiserver)}) is None
