"""Answers off the happy path, on the real server over TLS: an unknown path or a wrong method is a
JSON `Status` (never Flask's HTML page), the metrics port's errors are one line of text;
`Expect: 100-continue` gets one interim answer; an oversized body sent whole still gets its 400."""

from __future__ import annotations

import json
import re
import socket
import ssl
import time
from collections.abc import Callable

import pytest
import requests

from guardhook.admission.codec import MAX_BODY_BYTES

from conftest import Server, free_port, load_review

ENDPOINTS = "POST /validate, POST /mutate, GET /healthz, GET /readyz, GET /metrics"


def status_of(answer: requests.Response) -> dict:
    assert answer.headers["Content-Type"] == "application/json"
    assert "<" not in answer.text  # no HTML
    body = answer.json()
    assert (body["kind"], body["apiVersion"], body["status"]) == ("Status", "v1", "Failure")
    assert body["code"] == answer.status_code
    return body


@pytest.mark.parametrize(
    ("method", "path", "code", "message"),
    [
        ("GET", "/validate", 405, "GET /validate: method not allowed (/validate takes POST)"),
        ("PUT", "/mutate", 405, "PUT /mutate: method not allowed (/mutate takes POST)"),
        ("POST", "/healthz", 405, "POST /healthz: method not allowed (/healthz takes GET)"),
        ("GET", "/", 404, f"GET /: no such endpoint (served: {ENDPOINTS})"),
        ("POST", "/validating", 404, f"POST /validating: no such endpoint (served: {ENDPOINTS})"),
    ],
)
def test_unknown_paths_and_methods_get_a_json_status(
    server: Server, method: str, path: str, code: int, message: str
) -> None:
    answer = server.session.request(method, server.url + path, timeout=10)
    assert answer.status_code == code
    assert status_of(answer)["message"] == message
    if code == 405:
        assert "GET" in answer.headers["Allow"] or "POST" in answer.headers["Allow"]


def test_the_metrics_port_answers_errors_in_text(fresh_server: Callable[..., Server]) -> None:
    port = free_port()
    fresh_server("--metrics-port", str(port))
    for answer in (
        requests.get(f"http://127.0.0.1:{port}/healthz", timeout=10),
        requests.post(f"http://127.0.0.1:{port}/metrics", timeout=10),
    ):
        assert answer.status_code in (404, 405)
        assert answer.headers["Content-Type"].startswith("text/plain")
        assert answer.text.startswith(str(answer.status_code)) and "<" not in answer.text


def tls_connection(server: Server) -> ssl.SSLSocket:
    context = ssl.create_default_context(cafile=str(server.ca))
    host, port = server.url.removeprefix("https://").split(":")
    raw = socket.create_connection((host, int(port)), timeout=10)
    return context.wrap_socket(raw, server_hostname=host)


def read_answer(tls: ssl.SSLSocket) -> bytes:
    """Everything up to the end of the final response (Content-Length counted) or the close."""
    reply = b""
    while True:
        head, sep, rest = reply.rpartition(b"\r\n\r\n")
        final = [m for m in re.finditer(rb"HTTP/1\.1 ([2-5]\d\d)", reply)]
        if final and sep:
            length = re.search(rb"content-length: *(\d+)", reply[final[-1].start() :], re.I)
            if length and len(reply) - reply.index(b"\r\n\r\n", final[-1].start()) - 4 >= int(length[1]):
                return reply
        try:
            chunk = tls.recv(65536)
        except (ConnectionError, ssl.SSLError) as exc:
            raise AssertionError(f"connection broken before the answer was read: {exc!r}; {reply!r}") from exc
        if not chunk:
            return reply
        reply += chunk


def review_request(body: bytes, *headers: str) -> bytes:
    lines = ["POST /validate HTTP/1.1", "Host: localhost", "Content-Type: application/json"]
    lines += [f"Content-Length: {len(body)}", *headers]
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def test_expect_100_continue_is_answered_once(server: Server) -> None:
    body = json.dumps(load_review("s01-worker-delete.validating")).encode()
    with tls_connection(server) as tls:
        tls.sendall(review_request(body, "Expect: 100-continue"))
        interim = tls.recv(65536)
        assert interim == b"HTTP/1.1 100 Continue\r\n\r\n"
        tls.sendall(body)
        reply = read_answer(tls)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    assert b"100 Continue" not in reply  # the second one gunicorn used to send


def test_expect_100_continue_with_the_body_already_sent_gets_no_interim(server: Server) -> None:
    body = json.dumps(load_review("s01-worker-delete.validating")).encode()
    with tls_connection(server) as tls:
        tls.sendall(review_request(body, "Expect: 100-continue") + body)
        reply = read_answer(tls)
    assert reply.startswith(b"HTTP/1.1 200"), reply[:200]
    assert b"100 Continue" not in reply


def test_an_oversized_body_sent_whole_gets_the_400(server: Server) -> None:
    # A client that writes its whole body before reading (as most do) used to see the TLS
    # connection end (EOF or reset) instead of the answer: unread bytes made the close a reset.
    body = b"x" * (MAX_BODY_BYTES + 1)
    with tls_connection(server) as tls:
        tls.sendall(review_request(body) + body)
        reply = read_answer(tls)
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert b"cap" in reply and b"connection: close" in reply.lower()


def test_an_oversized_body_announced_with_expect_gets_the_400_instead_of_a_100(server: Server) -> None:
    with tls_connection(server) as tls:
        tls.sendall(review_request(b"x" * (MAX_BODY_BYTES + 1), "Expect: 100-continue"))
        reply = read_answer(tls)  # no body sent: the answer comes at once
    assert reply.startswith(b"HTTP/1.1 400"), reply[:200]
    assert b"100 Continue" not in reply


def raw_exchange(server: Server, data: bytes) -> bytes:
    """Send `data` on a fresh TLS connection and read the answer up to its end or the close."""
    with tls_connection(server) as tls:
        tls.sendall(data)
        return read_answer(tls)


def json_status_of(reply: bytes, code: int) -> dict:
    head, _, body = reply.partition(b"\r\n\r\n")
    assert head.startswith(f"HTTP/1.1 {code} ".encode()), reply[:300]
    assert b"content-type: application/json" in head.lower(), head
    assert b"<" not in body  # no HTML page
    status = json.loads(body)
    assert (status["kind"], status["status"], status["code"]) == ("Status", "Failure", code)
    return status


@pytest.mark.parametrize(
    ("request_bytes", "code", "words"),
    [
        (
            b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n"
            b"0\r\n\r\n",
            400,
            "Content-Length",
        ),
        (
            b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
            400,
            "Content-Length",
        ),
        (b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Length: -5\r\n\r\n", 400, "Content-Length"),
        (b"NOT A REQUEST LINE\r\nHost: x\r\n\r\n", 400, "invalid"),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: " + b"a" * 9000 + b"\r\n\r\n", 431, "too large"),
        (b"POST /validate HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", 400, "Transfer-Encoding"),
    ],
)
def test_protocol_errors_get_the_json_status(
    server: Server, request_bytes: bytes, code: int, words: str
) -> None:
    status = json_status_of(raw_exchange(server, request_bytes), code)
    assert words.lower() in status["message"].lower()


def test_a_gzip_body_gets_415_naming_the_coding(server: Server) -> None:
    import gzip

    body = gzip.compress(json.dumps(load_review("s01-worker-delete.validating")).encode())
    answer = server.post("/validate", body, headers={"Content-Encoding": "gzip"})
    assert answer.status_code == 415
    assert "Content-Encoding gzip is not supported" in status_of(answer)["message"]
    assert answer.headers["Accept-Encoding"] == "identity"
    # the connection stays usable: the next review on it is judged
    assert server.post("/validate", load_review("s01-worker-delete.validating")).status_code == 200


@pytest.mark.parametrize("declared", ["text/plain", "application/x-www-form-urlencoded", "application/yaml"])
def test_a_body_declared_as_not_json_gets_415_naming_its_type(server: Server, declared: str) -> None:
    # The API server sends application/json; a review declared as something else is not judged.
    review = json.dumps(load_review("s01-worker-delete.validating"))
    answer = server.post("/validate", review, headers={"Content-Type": declared})
    assert answer.status_code == 415
    assert f"Content-Type {declared} is not supported" in status_of(answer)["message"]
    assert answer.headers["Accept-Post"] == "application/json"
    assert server.post("/validate", review).status_code == 200  # the connection stays usable


@pytest.mark.parametrize(
    "declared", ["application/json", "application/json; charset=utf-8", "Application/JSON"]
)
def test_a_json_body_is_judged_with_or_without_parameters(server: Server, declared: str) -> None:
    review = json.dumps(load_review("s01-worker-delete.validating"))
    answer = server.post("/validate", review, headers={"Content-Type": declared})
    assert answer.status_code == 200 and answer.json()["response"]["allowed"] is False


@pytest.mark.parametrize("path", ["/validate", "/mutate", "/healthz", "/metrics"])
def test_options_gets_the_json_405(server: Server, path: str) -> None:
    answer = server.session.options(server.url + path, timeout=10)
    assert answer.status_code == 405
    assert "method not allowed" in status_of(answer)["message"]


def test_the_metrics_port_refuses_other_methods_with_405(fresh_server: Callable[..., Server]) -> None:
    port = free_port()
    fresh_server("--metrics-port", str(port))
    answer = requests.post(f"http://127.0.0.1:{port}/metrics", data=b"x" * 1000, timeout=10)
    assert answer.status_code == 405 and answer.headers["Allow"] == "GET"
    assert answer.text.startswith("405 POST is not allowed")


def _mistyped(edit: Callable[[dict], None]) -> dict:
    review = load_review("s01-worker-delete.validating")  # a worker DELETE: denied when judged
    edit(review["request"])
    return review


@pytest.mark.parametrize(
    ("edit", "path"),
    [
        (
            lambda r: r["oldObject"].__setitem__("metadata", "x"),
            "request.oldObject.metadata must be an object",
        ),
        (
            lambda r: r["oldObject"]["metadata"].__setitem__("labels", ["a"]),
            "request.oldObject.metadata.labels",
        ),
        (
            lambda r: r["oldObject"]["metadata"]["labels"].__setitem__("app", 5),
            "request.oldObject.metadata.labels[",
        ),
        (lambda r: r.__setitem__("operation", "FROB"), 'request.operation is "FROB"'),
        (lambda r: r.pop("operation"), "request.operation is missing"),
    ],
)
def test_a_mistyped_captured_review_gets_400_naming_the_field(
    server: Server, edit: Callable[[dict], None], path: str
) -> None:
    answer = server.post("/validate", _mistyped(edit))
    assert answer.status_code == 400, answer.text
    assert path in status_of(answer)["message"]


def test_a_request_cut_off_by_the_read_timeout_gets_its_408_and_no_reset(
    fresh_server: Callable[..., Server],
) -> None:
    # The 408 used to be followed by an abrupt close: bytes the client still sent then drew a reset.
    running = fresh_server("--request-timeout", "1", wait_ready=False)
    with tls_connection(running) as tls:
        tls.sendall(review_request(b"x" * 1000)[:-2] + b"\r\n\r\n" + b"x" * 10)  # the body stops short
        reply = read_answer(tls)
        status = json_status_of(reply, 408)
        assert "no complete request" in status["message"]
        tls.sendall(b"x" * 100)  # the rest arrives late: read and dropped, not answered with a reset
        time.sleep(0.3)  # a reset would be back by now, and fail the next write
        tls.sendall(b"x" * 100)
        try:
            end = tls.recv(1)
        except ssl.SSLEOFError:
            end = b""
    assert end == b""
