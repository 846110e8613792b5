"""`helm test` (issue 49): the chart's test Pod sends one AdmissionReview to the installed webhook.
Its script, as rendered, runs here against a real `guardhook serve` on 127.0.0.1 whose certificate
names the in-cluster Service (the connection alone is pointed at 127.0.0.1), verifying the CA."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from helm_chart import NAMESPACE, is_hook, template

from conftest import Server

Object = dict[str, Any]
SERVICE = f"guardhook.{NAMESPACE}.svc"


def _test_pod(objects: list[Object]) -> Object:
    (pod,) = [o for o in objects if is_hook(o) and o["metadata"]["annotations"]["helm.sh/hook"] == "test"]
    return pod


def _run(script: str, server: Server) -> subprocess.CompletedProcess[str]:
    """Run the Pod's script with the certificate file mounted where the server's CA is, and every
    connection to the Service going to the server's port instead (names and TLS unchanged)."""
    port = int(server.url.rsplit(":", 1)[1])
    redirect = (
        "import socket\n"
        "_connect = socket.create_connection\n"
        f"socket.create_connection = lambda address, *a, **k: _connect(('127.0.0.1', {port}), *a, **k)\n"
    )
    body = script.replace("/certs/ca.crt", str(server.ca))
    return subprocess.run([sys.executable, "-c", redirect + body], capture_output=True, text=True, timeout=60)


def test_helm_test_sends_one_review_to_the_webhook(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    pod = _test_pod(template(tmp_path))
    (container,) = pod["spec"]["containers"]
    assert container["command"] == ["python3", "-c"]
    assert pod["spec"]["volumes"][0]["secret"]["secretName"] == "guardhook-tls"
    server = fresh_server("--dns", SERVICE, "--namespace", NAMESPACE)
    done = _run(container["args"][0], server)
    assert done.returncode == 0, done.stderr
    assert "guardhook answered the review (allowed: True)" in done.stdout


def test_helm_test_fails_when_the_webhook_answers_something_else(
    tmp_path: Path, fresh_server: Callable[..., Server]
) -> None:
    (container,) = _test_pod(template(tmp_path))["spec"]["containers"]
    server = fresh_server("--dns", SERVICE, "--namespace", NAMESPACE)
    broken = container["args"][0].replace('"/validate"', '"/no-such-path"')
    done = _run(broken, server)
    assert done.returncode != 0
    assert "guardhook answered 404" in done.stderr


def test_helm_test_can_be_left_out(tmp_path: Path) -> None:
    objects = template(tmp_path, {"helmTest": {"enabled": False}})
    assert not [o for o in objects if is_hook(o) and o["metadata"]["annotations"]["helm.sh/hook"] == "test"]
