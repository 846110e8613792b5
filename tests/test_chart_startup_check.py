"""The chart's post-install check (issue 49), as cert-manager's startupapicheck and Gatekeeper's
post-install probe: a post-install/post-upgrade hook Job that waits until guardhook answers a
review with the certificate its webhook configuration's caBundle trusts, so `helm install` returns
only once the webhook works. It runs where the chart's other pods run, as guardhook's own
ServiceAccount (which may read the webhook configurations), within timeoutSeconds."""

from __future__ import annotations

import base64
import json
import os
import ssl
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from helm_chart import NAMESPACE, is_hook, template

from guardhook.server.certs import generate

Object = dict[str, Any]


def _job(objects: list[Object]) -> Object:
    (job,) = [o for o in objects if o["kind"] == "Job" and o["metadata"]["name"] == "guardhook-startup-check"]
    return job


def test_a_hook_job_waits_until_the_webhook_answers(tmp_path: Path) -> None:
    values = {
        "startupCheck": {"timeoutSeconds": 120},
        "tolerations": [{"key": "dedicated", "operator": "Exists"}],
    }
    objects = template(tmp_path, values)
    job = _job(objects)
    assert is_hook(job)
    annotations = job["metadata"]["annotations"]
    assert annotations["helm.sh/hook"] == "post-install,post-upgrade"
    assert "hook-succeeded" in annotations["helm.sh/hook-delete-policy"]  # a failed one stays to read
    assert job["spec"]["activeDeadlineSeconds"] == 150 and job["spec"]["backoffLimit"] == 0
    pod = job["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == "guardhook"
    assert pod["tolerations"] == values["tolerations"]
    assert pod["nodeSelector"] == {"kubernetes.io/os": "linux"}
    assert "priorityClassName" not in pod  # a short check: the cluster's default class
    assert (
        job["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/name"] != "guardhook"
    )  # not a webhook pod
    (container,) = pod["containers"]
    script = container["args"][0]
    compile(script, "startup-check", "exec")  # the script is Python that parses
    assert 'namespace, seconds = "guardhook-system", 120' in script
    assert "validatingwebhookconfigurations/guardhook" in script and "caBundle" in script
    # guardhook's ServiceAccount may read that configuration
    (view,) = [o for o in objects if o["kind"] == "ClusterRole" and o["metadata"]["name"] == "guardhook-view"]
    assert any(
        "validatingwebhookconfigurations" in rule["resources"] and "get" in rule["verbs"]
        for rule in view["rules"]
    )


def test_it_can_be_turned_off(tmp_path: Path) -> None:
    objects = template(tmp_path, {"startupCheck": {"enabled": False}})
    assert not [o for o in objects if o["metadata"]["name"] == "guardhook-startup-check"]


class _StandIn(BaseHTTPRequestHandler):
    """The API server's GET of the ValidatingWebhookConfiguration guardhook and guardhook's POST
    /validate, on one TLS port of 127.0.0.1 (its certificate names guardhook.<namespace>.svc)."""

    bundle = ""
    answered: list[str] = []  # noqa: RUF012 (one test)

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _send(self, code: int, body: Object) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        assert self.headers["Authorization"] == "Bearer token"
        hooks = [{"name": "worker-delete.guardhook.io", "clientConfig": {"caBundle": type(self).bundle}}]
        self._send(200, {"kind": "ValidatingWebhookConfiguration", "webhooks": hooks})

    def do_POST(self) -> None:
        review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).answered.append(review["request"]["operation"])
        self._send(200, {**review, "response": {"uid": review["request"]["uid"], "allowed": True}})


def _script(objects: list[Object], name: str, kind: str = "Job") -> str:
    (found,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    spec = found["spec"]["template"]["spec"] if kind == "Job" else found["spec"]
    (container,) = spec["containers"]
    return str(container["args"][0])


@pytest.fixture
def stand_in(tmp_path: Path) -> Iterator[tuple[Path, int]]:
    """The stand-in over TLS, and a folder with its ca.crt and a token, as a pod's would be."""
    paths = generate(tmp_path / "tls", [f"guardhook.{NAMESPACE}.svc", "127.0.0.1"])
    (tmp_path / "account").mkdir()
    (tmp_path / "account" / "ca.crt").write_bytes(paths.ca.read_bytes())
    (tmp_path / "account" / "token").write_text("token\n")
    handler = type(
        "Handler", (_StandIn,), {"bundle": base64.b64encode(paths.ca.read_bytes()).decode(), "answered": []}
    )
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(paths.cert, paths.key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield tmp_path, server.server_address[1]
    finally:
        server.shutdown()
        server.server_close()


def _run(script: str, folder: Path, port: int) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "KUBERNETES_SERVICE_HOST": "127.0.0.1",
        "KUBERNETES_SERVICE_PORT": str(port),
        "GUARDHOOK_SERVICE_HOST": "127.0.0.1",  # as the kubelet sets it: no cluster DNS needed
        "GUARDHOOK_SERVICE_PORT": str(port),
    }
    return subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, env=env, cwd=folder
    )


def test_the_check_passes_once_guardhook_answers_with_the_trusted_certificate(
    tmp_path: Path, stand_in: tuple[Path, int]
) -> None:
    folder, port = stand_in
    script = _script(template(tmp_path, {"startupCheck": {"timeoutSeconds": 20}}), "guardhook-startup-check")
    script = script.replace("/var/run/secrets/kubernetes.io/serviceaccount", str(folder / "account"))
    done = _run(script, folder, port)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "guardhook answers" in done.stdout


def test_the_check_fails_after_its_timeout_when_the_certificate_is_not_trusted(
    tmp_path: Path, stand_in: tuple[Path, int]
) -> None:
    folder, port = stand_in
    other = generate(tmp_path / "other", ["x"])
    script = _script(template(tmp_path, {"startupCheck": {"timeoutSeconds": 10}}), "guardhook-startup-check")
    script = script.replace("/var/run/secrets/kubernetes.io/serviceaccount", str(folder / "account"))
    # the caBundle names another CA than the one that signed guardhook's certificate
    script = script.replace("base64.b64decode(bundle).decode()", repr(other.ca.read_text()))
    done = _run(script, folder, port)
    assert done.returncode != 0
    assert (
        "guardhook did not answer within 10 s" in done.stderr and "CERTIFICATE_VERIFY_FAILED" in done.stderr
    )


def test_helm_test_reaches_the_service_without_cluster_dns(
    tmp_path: Path, stand_in: tuple[Path, int]
) -> None:
    folder, port = stand_in
    script = _script(template(tmp_path), "guardhook-test-review", kind="Pod")
    script = script.replace("/certs/ca.crt", str(folder / "account" / "ca.crt"))
    done = _run(script, folder, port)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "guardhook answered the review" in done.stdout
