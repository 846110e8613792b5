"""The real `guardhook serve` (gunicorn, TLS) on 127.0.0.1, spoken to by a verifying HTTPS client."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from pathlib import Path

import pytest
import requests

from guardhook.admission.codec import MAX_BODY_BYTES

from conftest import Server, load_review, start_server


def test_generated_certificate_is_verified_against_its_ca(server: Server) -> None:
    assert server.session.get(server.url + "/healthz", timeout=5).text == "ok\n"
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(server.url + "/healthz", timeout=5)  # system CAs do not trust it


def test_readyz_is_200_on_the_embedded_fleet(server: Server) -> None:
    assert server.session.get(server.url + "/readyz", timeout=5).status_code == 200


def test_worker_delete_is_denied_and_leader_delete_allowed(server: Server) -> None:
    denied = server.review("/validate", "s01-worker-delete.validating")
    assert denied["allowed"] is False
    assert denied["status"]["code"] == 403
    assert denied["status"]["message"].startswith("[worker-delete]")
    assert "llm-xl-0" in denied["status"]["message"]
    assert server.review("/validate", "s02-leader-delete.validating")["allowed"] is True


def test_answer_echoes_uid_and_version(server: Server) -> None:
    body = load_review("s01-worker-delete.validating")
    body["apiVersion"] = "admission.k8s.io/v1beta1"
    body["request"]["uid"] = "uid-under-test"
    answer = server.post("/validate", body).json()
    assert answer["apiVersion"] == "admission.k8s.io/v1beta1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == "uid-under-test"


@pytest.mark.parametrize(
    "body",
    [
        b"{}",
        b"not json",
        b"[]",
        b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1"}',
        b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"operation":"DELETE"}}',
        b'{"kind":"Pod","apiVersion":"v1","request":{"uid":"x"}}',
        b"\xff\xfe\xfa",
        b"",
    ],
)
def test_malformed_bodies_get_400_with_a_reason(server: Server, body: bytes) -> None:
    answer = server.post("/validate", body)
    assert answer.status_code == 400
    assert answer.json()["message"]
    assert answer.json()["kind"] == "Status" and answer.json()["status"] == "Failure"
    assert answer.json()["code"] == 400


def test_mutate_allows_a_delete_with_no_patch(server: Server) -> None:
    response = server.review("/mutate", "s01-worker-delete.mutating")
    assert response["allowed"] is True
    assert "patch" not in response


def test_200_requests_over_one_kept_alive_connection(server: Server) -> None:
    context = ssl.create_default_context(cafile=str(server.ca))
    host, port = server.url.removeprefix("https://").split(":")
    connection = http.client.HTTPSConnection(host, int(port), context=context, timeout=10)
    body = json.dumps(load_review("s01-worker-delete.validating"))
    connection.connect()
    first_socket = connection.sock
    for _ in range(200):
        connection.request("POST", "/validate", body, {"Content-Type": "application/json"})
        answer = connection.getresponse()
        assert answer.status == 200
        assert json.loads(answer.read())["response"]["allowed"] is False
    assert connection.sock is first_socket  # never reconnected
    connection.close()


def test_oversized_body_gets_400_and_the_connection_is_closed(server: Server) -> None:
    context = ssl.create_default_context(cafile=str(server.ca))
    host, port = server.url.removeprefix("https://").split(":")
    with (
        socket.create_connection((host, int(port)), timeout=10) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        header = (
            f"POST /validate HTTP/1.1\r\nHost: {host}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {MAX_BODY_BYTES + 1}\r\n\r\n"
        )
        tls.sendall(header.encode())
        tls.sendall(b"x" * 4096)  # the rest is never sent: the server must not wait for it
        reply = b""
        while chunk := tls.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 400")
    assert b"cap" in reply


def test_generated_certificate_names_localhost_and_dns_flags(tmp_path: Path) -> None:
    running = start_server(tmp_path, "--dns", "guardhook.example.svc")
    try:
        from cryptography import x509

        cert = x509.load_pem_x509_certificate((running.cert_dir / "tls.crt").read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert "localhost" in names.get_values_for_type(x509.DNSName)
        assert "guardhook.example.svc" in names.get_values_for_type(x509.DNSName)
        assert [str(ip) for ip in names.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    finally:
        running.stop()


def test_tls_below_1_2_is_refused(server: Server) -> None:
    context = ssl.create_default_context(cafile=str(server.ca))
    context.minimum_version = ssl.TLSVersion.TLSv1
    context.maximum_version = ssl.TLSVersion.TLSv1_1
    host, port = server.url.removeprefix("https://").split(":")
    with pytest.raises(ssl.SSLError), socket.create_connection((host, int(port)), timeout=5) as raw:
        context.wrap_socket(raw, server_hostname=host)
