"""Security properties of the real server: TLS 1.2 and 1.3 only, and no object contents in the log
at the default level (INFO), whatever the review carries or however it is malformed."""

from __future__ import annotations

import contextlib
import copy
import json
import secrets
import socket
import ssl
import time

import pytest
import requests

from guardhook.admission.codec import MAX_BODY_BYTES

from conftest import Server, load_review


@pytest.mark.parametrize("version", [ssl.TLSVersion.TLSv1_2, ssl.TLSVersion.TLSv1_3])
def test_tls_1_2_and_1_3_are_served(server: Server, version: ssl.TLSVersion) -> None:
    context = ssl.create_default_context(cafile=str(server.ca))
    context.minimum_version = context.maximum_version = version
    host, port = server.url.removeprefix("https://").split(":")
    with (
        socket.create_connection((host, int(port)), timeout=5) as raw,
        context.wrap_socket(raw, server_hostname=host) as tls,
    ):
        assert (
            tls.version() == {ssl.TLSVersion.TLSv1_2: "TLSv1.2", ssl.TLSVersion.TLSv1_3: "TLSv1.3"}[version]
        )
        tls.sendall(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        assert tls.recv(1024).startswith(b"HTTP/1.1 200")


def carrying(secret: str, name: str) -> dict:
    """A captured review whose object carries `secret` in labels, annotations and data."""
    review = copy.deepcopy(load_review(name))
    request = review["request"]
    for key in ("object", "oldObject"):
        obj = request.get(key)
        if isinstance(obj, dict):
            metadata = obj.setdefault("metadata", {})
            metadata.setdefault("labels", {})["token"] = secret
            metadata.setdefault("annotations", {})["password"] = secret
            obj["data"] = {"password": secret}
    return review


def test_no_object_contents_in_the_log_at_info(server: Server) -> None:
    secret = "s3cr3t-" + secrets.token_hex(16)
    denied = server.post("/validate", carrying(secret, "s01-worker-delete.validating"))
    assert denied.json()["response"]["allowed"] is False  # judged, and the denial was decided
    assert server.post("/validate", carrying(secret, "s02-leader-delete.validating")).status_code == 200
    assert server.post("/mutate", carrying(secret, "s12-service-app-selector.mutating")).status_code == 200
    no_uid = carrying(secret, "s01-worker-delete.validating")
    del no_uid["request"]["uid"]
    assert server.post("/validate", no_uid).status_code == 400
    assert server.post("/validate", json.dumps(no_uid)[:-7]).status_code == 400  # truncated JSON
    assert server.post("/validate", b'{"x": "' + secret.encode() + b'\xff"}').status_code == 400
    oversized = carrying(secret, "s01-worker-delete.validating")
    oversized["request"]["oldObject"]["metadata"]["annotations"]["big"] = "x" * MAX_BODY_BYTES
    with contextlib.suppress(requests.ConnectionError):  # 400 and close before the client is done sending
        assert server.post("/validate", oversized).status_code == 400

    time.sleep(0.5)  # let the server flush its log
    log = server.log.read_text(errors="replace")
    assert "rejected a request body" in log  # INFO lines are in this log
    assert secret not in log
