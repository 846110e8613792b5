"""Answers off the happy path, on the real server over TLS: an unknown path or a wrong method is a
JSON `Status` (never Flask's HTML page), the metrics port's errors are one line of text."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import requests

from conftest import Server, free_port

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
        assert answer.status_code in (404, 501)
        assert answer.headers["Content-Type"].startswith("text/plain")
        assert answer.text.startswith(str(answer.status_code)) and "<" not in answer.text
