"""`serve --health-port`: /healthz and /readyz over plain HTTP on a port of their own (issue 53),
answered while the webhook port is at its connection ceiling with connections that never send a
request (where the webhook port's own probes wait for one of them to time out)."""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

import pytest
import requests

from guardhook.commands import main as cli

from conftest import FIXTURES, Server, free_port


def test_the_health_port_answers_the_probes_only(fresh_server: Callable[..., Server]) -> None:
    port = free_port()
    server = fresh_server("--health-port", str(port))
    for path, body in (("/healthz", "ok\n"), ("/readyz", "ready\n")):
        answer = requests.get(f"http://127.0.0.1:{port}{path}", timeout=10)
        assert (answer.status_code, answer.text) == (200, body)
        assert answer.headers["Content-Type"] == "text/plain; charset=utf-8"
        same = server.session.get(server.url + path, timeout=10)  # the webhook port answers the same
        assert (same.status_code, same.text, same.headers["Content-Type"]) == (
            200,
            body,
            answer.headers["Content-Type"],
        )
    other = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10)
    assert other.status_code == 404 and other.text.startswith("404 only /healthz, /readyz is served")
    refused = requests.post(f"http://127.0.0.1:{port}/healthz", data=b"x", timeout=10)
    assert refused.status_code == 405 and refused.headers["Allow"] == "GET"


def test_probes_on_the_health_port_never_wait_behind_the_webhook_ports_connections(
    fresh_server: Callable[..., Server],
) -> None:
    # --max-connections connections that never send a byte fill the webhook port: gthread stops
    # accepting there until one of them times out (--request-timeout 60), so a probe sent to it
    # waits; the health port answers at once.
    limit, port = 12, free_port()
    server = fresh_server(
        "--health-port", str(port), "--max-connections", str(limit), "--request-timeout", "60"
    )
    server.session.close()  # its pooled connection would be one more
    host, webhook = server.url.removeprefix("https://").split(":")
    silent = [socket.create_connection((host, int(webhook)), timeout=10) for _ in range(limit + 4)]
    try:
        with socket.create_connection((host, int(webhook)), timeout=10) as probe:
            probe.settimeout(1.0)
            with pytest.raises(TimeoutError):  # the webhook port: no handshake, no answer
                probe.sendall(b"\x16\x03\x01\x00")  # the start of a TLS record
                probe.recv(1)
        for path in ("/healthz", "/readyz"):
            answer = requests.get(f"http://127.0.0.1:{port}{path}", timeout=2)
            assert answer.status_code == 200
    finally:
        for sock in silent:
            sock.close()


def test_serve_refuses_the_health_port_on_another_ports_number(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port, other = str(free_port()), str(free_port())
    offline = ["--cluster-state", str(FIXTURES / "fleet"), "--cert-dir", str(tmp_path / "certs")]
    assert cli.main(["serve", *offline, "--host", "127.0.0.1", "--port", port, "--health-port", port]) == 2
    assert f"--port and --health-port must differ (both {port})" in capsys.readouterr().err
    argv = ["--port", port, "--metrics-port", other, "--health-port", other]
    assert cli.main(["serve", *offline, "--host", "127.0.0.1", *argv]) == 2
    assert f"--metrics-port and --health-port must differ (both {other})" in capsys.readouterr().err
