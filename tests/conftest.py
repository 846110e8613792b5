"""Shared test fixtures: the captured API-server traffic and a real `guardhook serve` on 127.0.0.1."""

from __future__ import annotations

import gc
import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from envtest import wait_for

REPO = Path(__file__).resolve().parents[1]
FIXTURES = Path(os.environ.get("GUARDHOOK_FIXTURES", REPO.parent / "shared" / "fixtures"))
REVIEWS = FIXTURES / "reviews"


@pytest.fixture(autouse=True)
def _no_ambient_cluster(monkeypatch: pytest.MonkeyPatch) -> None:
    """No test judges against the cluster of the shell that runs pytest (e.g. a real cluster's
    `$KUBECONFIG` exported by realcluster/env.sh): tests that need one pass it explicitly."""
    for name in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST", "KUBERNETES_SERVICE_PORT"):
        monkeypatch.delenv(name, raising=False)


def load_review(name: str) -> dict[str, Any]:
    """One captured AdmissionReview body from ../shared/fixtures/reviews (name with or without .json)."""
    if not name.endswith(".json"):
        name += ".json"
    return json.loads((REVIEWS / name).read_text())


def expected_answers() -> dict[str, Any]:
    return json.loads((FIXTURES / "expected.json").read_text())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def clean_env(home: Path) -> dict[str, str]:
    """The environment for a server that must use the embedded fleet: no kubeconfig anywhere."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(home)
    return env


def serve_refused(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run `guardhook serve --host 127.0.0.1 --port 0 --cert-dir <home>/certs *args` to its exit,
    for a start it refuses before binding (else it would serve on any free port until the timeout);
    the environment is clean_env(home)."""
    command = [sys.executable, "-m", "guardhook", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--cert-dir", str(home / "certs"), *args]
    return subprocess.run(command, capture_output=True, text=True, env=clean_env(home), cwd=REPO, timeout=60)


@dataclass
class Server:
    """A running `guardhook serve`: its base URL, CA file, process, and a verifying HTTPS session."""

    url: str
    ca: Path
    cert_dir: Path
    process: subprocess.Popen[bytes]
    session: requests.Session
    log: Path

    def post(self, path: str, body: Any, **kwargs: Any) -> requests.Response:
        data = body if isinstance(body, bytes | str) else json.dumps(body)
        return self.session.post(self.url + path, data=data, timeout=10, **kwargs)

    def review(self, path: str, name: str) -> dict[str, Any]:
        """POST a captured review and return its `response` (asserting HTTP 200)."""
        answer = self.post(path, load_review(name))
        assert answer.status_code == 200, answer.text
        return answer.json()["response"]

    def logged(self, text: str, within: float = 10.0) -> str:
        """The log once it holds `text`, waiting up to `within` seconds: serve writes its lines
        from a background thread in batches (guardhook.server.asynclog), so a line logged before
        an answer may reach the file after it. Fails with the log when `text` never comes."""

        def holding() -> str:
            written = self.log.read_text()
            return written if text in written else ""

        try:
            return str(wait_for(holding, within, repr(text)))
        except AssertionError as exc:
            raise AssertionError(f"{exc} in the log:\n{self.log.read_text()}") from None

    def final_log(self) -> str:
        """The whole log after stopping the server (its writer drains the queue at exit): what a
        check that a line was *not* logged must read."""
        self.stop()
        return self.log.read_text()

    def stop(self) -> None:
        """SIGTERM and wait. The session's kept-alive connections are closed first: the server
        would otherwise keep each open for its shutdown linger (readahead.SHUTDOWN_LINGER_SECONDS
        and CLOSE_DRAIN_SECONDS), seconds every test would wait for nothing. A socket closed by the
        pool stays open while a response in a reference cycle still holds its file, hence the
        collection."""
        self.session.close()
        gc.collect()
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def start_server(
    tmp: Path,
    *extra: str,
    env: dict[str, str] | None = None,
    wait_ready: bool = True,
    log_format: str | None = None,
    stdout: int | None = None,
) -> Server:
    """Start `guardhook serve` on a free 127.0.0.1 port with certificates generated into tmp/certs
    (with `--log-format log_format` when given). Its output goes to tmp/serve.log, or to `stdout`
    (e.g. subprocess.PIPE) when given."""
    tmp.mkdir(parents=True, exist_ok=True)
    port = free_port()
    cert_dir = tmp / "certs"
    log = tmp / "serve.log"
    formats = ["--log-format", log_format] if log_format else []
    args = [sys.executable, "-m", "guardhook", *formats, "serve", "--host", "127.0.0.1", "--port", str(port)]
    args += ["--cert-dir", str(cert_dir), "--threads", "4", *extra]
    with log.open("wb") as out:
        target = out if stdout is None else stdout
        process = subprocess.Popen(args, stdout=target, stderr=subprocess.STDOUT, env=env or clean_env(tmp))
    session = requests.Session()
    session.trust_env = False  # REQUESTS_CA_BUNDLE in the environment would override session.verify
    server = Server(f"https://127.0.0.1:{port}", cert_dir / "ca.crt", cert_dir, process, session, log)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AssertionError(f"guardhook serve exited {process.returncode}:\n{log.read_text()}")
        if server.ca.exists():
            session.verify = str(server.ca)
            try:
                answer = session.get(server.url + "/healthz", timeout=2)
                if answer.status_code == 200 and (not wait_ready or _ready(server)):
                    return server
            except requests.RequestException:
                pass
        time.sleep(0.1)
    server.stop()
    raise AssertionError(f"guardhook serve did not become ready:\n{log.read_text()}")


def _ready(server: Server) -> bool:
    return server.session.get(server.url + "/readyz", timeout=2).status_code == 200


@pytest.fixture(scope="session")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """One guardhook server on the embedded sample fleet for the session (read-only tests)."""
    running = start_server(tmp_path_factory.mktemp("server"))
    yield running
    running.stop()


@pytest.fixture
def fresh_server(tmp_path: Path) -> Iterator[Callable[..., Server]]:
    """Start servers with extra flags; each is stopped after the test."""
    started: list[Server] = []

    def start(*extra: str, **kwargs: Any) -> Server:
        running = start_server(tmp_path / f"s{len(started)}", *extra, **kwargs)
        started.append(running)
        return running

    yield start
    for running in started:
        running.stop()
