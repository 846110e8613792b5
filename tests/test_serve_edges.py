"""The webhook port's edges a new user met (issue 50 item 10): plain HTTP to the HTTPS port gets
Go's 400 and a log line, `--port 0` takes a port the OS chooses and logs it, a file given as
`--cert-dir` and a corrupt key are named plainly."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from guardhook.server.certs import CertPaths, generate, pair_problem

from conftest import REPO, Server, clean_env, load_review

GO_WORDS = "Client sent an HTTP request to an HTTPS server"


def plain_http(server: Server, request: bytes) -> bytes:
    """Send `request` unencrypted to the server's HTTPS port; everything it answers until it closes."""
    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    return answer


def test_plain_http_gets_gos_400_and_a_log_line_not_a_reset(server: Server) -> None:
    answer = plain_http(server, b"GET /healthz HTTP/1.1\r\nHost: guardhook\r\n\r\n")
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 400 ") and b"Connection: close" in head
    assert json.loads(body)["message"] == GO_WORDS
    assert re.search(r"plain HTTP from 127\.0\.0\.1:\d+ on the HTTPS port", server.logged("plain HTTP from"))
    # a review sent in the clear (a whole body) gets the same, and TLS clients are still served
    review = json.dumps(load_review("s01-worker-delete.validating")).encode()
    post = b"POST /validate HTTP/1.1\r\nHost: g\r\nContent-Type: application/json\r\n"
    post += b"Content-Length: %d\r\n\r\n%s" % (len(review), review)
    assert GO_WORDS.encode() in plain_http(server, post)
    assert server.session.get(server.url + "/healthz", timeout=10).status_code == 200
    metrics = server.session.get(server.url + "/metrics", timeout=10).text
    counted = re.search(
        r'guardhook_requests_refused_unread_total\{code="400",reason="plain-http"\} (\d+)', metrics
    )
    assert counted and int(counted.group(1)) >= 2


def test_port_0_listens_on_a_port_the_os_chooses_and_logs_it(tmp_path: Path) -> None:
    log = tmp_path / "serve.log"
    command = [sys.executable, "-m", "guardhook", "serve", "--host", "127.0.0.1", "--port", "0"]
    command += ["--cert-dir", str(tmp_path / "certs"), "--threads", "2"]
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=clean_env(tmp_path))
    try:
        port = 0
        deadline = time.monotonic() + 30
        while not port and time.monotonic() < deadline and process.poll() is None:
            found = re.search(r"Listening at: https://127\.0\.0\.1:(\d+)", log.read_text())
            port = int(found.group(1)) if found else 0
            time.sleep(0.1)
        assert port > 0, log.read_text()
        answer = requests.get(
            f"https://127.0.0.1:{port}/healthz", verify=str(tmp_path / "certs" / "ca.crt"), timeout=10
        )
        assert answer.status_code == 200
    finally:
        process.terminate()
        process.wait(timeout=30)


def run(tmp_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "guardhook", *args],
        capture_output=True,
        text=True,
        env=clean_env(tmp_path),
        cwd=REPO,
        timeout=60,
    )


@pytest.mark.parametrize("command", [["serve", "--port", "1", "--cert-dir"], ["certs", "--out"]])
def test_a_file_given_as_the_certificate_folder_is_named_a_file(tmp_path: Path, command: list[str]) -> None:
    file = tmp_path / "certs.pem"
    file.write_text("a file\n")
    done = run(tmp_path, *command, str(file))
    assert done.returncode == 2, done.stderr
    assert f"{file} is a file, not a folder" in done.stderr
    assert "File exists" not in done.stderr and "Traceback" not in done.stderr


def test_a_corrupt_keys_message_is_whole_words(tmp_path: Path) -> None:
    paths = generate(tmp_path, ["localhost"])
    pem = paths.key.read_text().splitlines()
    paths.key.write_text("\n".join([pem[0], pem[1][:40], pem[-1]]) + "\n")  # cut short
    problem = pair_problem(CertPaths(tmp_path))
    assert problem.startswith(f"{paths.key} is not an unencrypted PEM private key (")
    # the fault itself, not cryptography's preamble cut at 120 characters mid-word
    assert "short data" in problem and problem.endswith("bytes))"), problem
    done = run(tmp_path, "serve", "--port", "1", "--cert-dir", str(tmp_path))
    assert done.returncode == 2 and "short data" in done.stderr and "Traceback" not in done.stderr
