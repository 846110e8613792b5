"""Faults against the real `guardhook serve` on 127.0.0.1: stalled clients, SIGTERM under load,
certificates replaced under load. Each test is bounded in count and time and stops by itself."""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from guardhook.server.certs import generate
from guardhook.server.tlssock import IO_TIMEOUT_SECONDS

from conftest import Server, load_review

BODY = json.dumps(load_review("s01-worker-delete.validating")).encode()
HEADERS = {"Content-Type": "application/json"}


def address(server: Server) -> tuple[str, int]:
    host, port = server.url.removeprefix("https://").split(":")
    return host, int(port)


def client_context(*ca_files: Path) -> ssl.SSLContext:
    context = ssl.create_default_context()
    context.load_verify_locations(cadata="".join(path.read_text() for path in ca_files))
    return context


def assert_denied_review(status: int, payload: bytes) -> None:
    """A complete, well-formed answer to the s01 worker delete."""
    assert status == 200, payload[:300]
    assert json.loads(payload)["response"]["allowed"] is False


# --- a client that sends half a request and stalls -------------------------------------------


def stall_after_headers_start(server: Server) -> ssl.SSLSocket:
    """A TLS connection that sent part of a request line and headers, then nothing."""
    host, port = address(server)
    raw = socket.create_connection((host, port), timeout=30)
    tls = client_context(server.ca).wrap_socket(raw, server_hostname=host)
    tls.sendall(b"POST /validate HTTP/1.1\r\nHost: x\r\nContent-Le")
    return tls


def stall_in_handshake(server: Server) -> socket.socket:
    """A TCP connection that sent the first bytes of a TLS record, then nothing."""
    raw = socket.create_connection(address(server), timeout=30)
    raw.sendall(b"\x16\x03\x01\x02\x00\x01\x00")
    return raw


def seconds_until_closed(sock: socket.socket) -> float:
    """Block until the server closes `sock` (or 30 s pass); return how long that took."""
    started = time.monotonic()
    try:
        while sock.recv(4096):
            pass
    except (OSError, ssl.SSLError):
        pass
    return time.monotonic() - started


def timed_review(server: Server) -> float:
    started = time.monotonic()
    answer = server.post("/validate", BODY)
    assert_denied_review(answer.status_code, answer.content)
    return time.monotonic() - started


def test_stalled_clients_are_cut_off_and_others_are_served(server: Server) -> None:
    # The session server runs 4 request threads; 3 stalled clients hold 3 of them.
    stalled: list[socket.socket] = [stall_after_headers_start(server), stall_after_headers_start(server)]
    stalled.append(stall_in_handshake(server))
    time.sleep(0.5)  # let the server pick them up
    try:
        assert timed_review(server) < IO_TIMEOUT_SECONDS / 2  # served while they stall
        waited = [seconds_until_closed(sock) for sock in stalled]
        assert all(w < IO_TIMEOUT_SECONDS + 5 for w in waited), waited  # each cut off by the timeout
    finally:
        for sock in stalled:
            sock.close()


def test_more_stalled_clients_than_threads_delay_others_only_up_to_the_timeout(server: Server) -> None:
    stalled = [stall_after_headers_start(server) for _ in range(6)]  # 6 > the 4 threads
    time.sleep(0.5)
    try:
        assert timed_review(server) < 2 * IO_TIMEOUT_SECONDS + 5
    finally:
        for sock in stalled:
            sock.close()
    assert timed_review(server) < IO_TIMEOUT_SECONDS / 2


def test_a_client_stalling_mid_body_gets_a_408_and_is_closed(server: Server) -> None:
    host, port = address(server)
    with (
        socket.create_connection((host, port), timeout=30) as raw,
        client_context(server.ca).wrap_socket(raw, server_hostname=host) as tls,
    ):
        tls.sendall(
            f"POST /validate HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(BODY)}\r\n\r\n".encode()
            + BODY[:100]
        )
        started = time.monotonic()
        reply = b""
        while chunk := tls.recv(65536):
            reply += chunk
    assert reply.startswith(b"HTTP/1.1 408")  # cut off by --request-timeout before any thread reads it
    assert time.monotonic() - started < IO_TIMEOUT_SECONDS + 5
    assert "Traceback" not in server.log.read_text()  # closed quietly, not as a server error


# --- load helpers -----------------------------------------------------------------------------


@dataclass
class Tally:
    """Outcomes of a load run. `unanswered` is any request that was written to an established
    connection but got no complete 200 answer: that is a failed request."""

    answered: int = 0
    not_connected: int = 0
    unanswered: list[str] = field(default_factory=list)
    peer_certs: list[tuple[float, bytes]] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


def keepalive_client(server: Server, context: ssl.SSLContext, stop: threading.Event, tally: Tally) -> None:
    """Post reviews over kept-alive connections until `stop`, reconnecting when the server closes."""
    host, port = address(server)
    while not stop.is_set():
        connection = http.client.HTTPSConnection(host, port, context=context, timeout=15)
        try:
            connection.connect()
        except OSError:
            with tally.lock:
                tally.not_connected += 1
            time.sleep(0.05)
            continue
        try:
            while not stop.is_set():
                connection.request("POST", "/validate", BODY, HEADERS)
                answer = connection.getresponse()
                assert_denied_review(answer.status, answer.read())
                with tally.lock:
                    tally.answered += 1
                if answer.will_close:
                    break
        except (OSError, http.client.HTTPException, AssertionError, ValueError) as exc:
            with tally.lock:
                tally.unanswered.append(repr(exc))
        finally:
            connection.close()


def run_clients(target: Callable[[threading.Event], None], count: int) -> tuple[threading.Event, list]:
    stop = threading.Event()
    threads = [threading.Thread(target=target, args=(stop,), daemon=True) for _ in range(count)]
    for thread in threads:
        thread.start()
    return stop, threads


# --- SIGTERM during load ----------------------------------------------------------------------


def test_sigterm_during_load_drains_and_fails_no_request(fresh_server: Callable[..., Server]) -> None:
    running = fresh_server()
    host, port = address(running)
    context = client_context(running.ca)
    tally = Tally()
    stop, threads = run_clients(lambda s: keepalive_client(running, context, s, tally), 4)

    # One request in flight across the signal: headers and half the body before, the rest after.
    slow = http.client.HTTPSConnection(host, port, context=context, timeout=15)
    slow.putrequest("POST", "/validate")
    slow.putheader("Content-Type", "application/json")
    slow.putheader("Content-Length", str(len(BODY)))
    slow.endheaders()
    slow.send(BODY[: len(BODY) // 2])

    time.sleep(1.5)
    before = tally.answered
    running.process.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    slow.send(BODY[len(BODY) // 2 :])
    answer = slow.getresponse()
    assert_denied_review(answer.status, answer.read())

    assert running.process.wait(timeout=30) == 0
    stop.set()
    for thread in threads:
        thread.join(timeout=20)
    assert before > 0
    assert tally.unanswered == []
    assert tally.not_connected > 0  # after the drain, new connections are refused, not half-served


# --- certificate files replaced during load ---------------------------------------------------


def one_request_per_connection(
    server: Server, context: ssl.SSLContext, stop: threading.Event, tally: Tally
) -> None:
    """A fresh TLS connection per request, recording the certificate each one was served with."""
    host, port = address(server)
    while not stop.is_set():
        connection = http.client.HTTPSConnection(host, port, context=context, timeout=15)
        try:
            connection.connect()
            started = time.monotonic()
            cert = connection.sock.getpeercert(binary_form=True) or b""
            connection.request("POST", "/validate", BODY, {**HEADERS, "Connection": "close"})
            answer = connection.getresponse()
            assert_denied_review(answer.status, answer.read())
            with tally.lock:
                tally.answered += 1
                tally.peer_certs.append((started, cert))
        except (OSError, http.client.HTTPException, AssertionError, ValueError) as exc:
            with tally.lock:
                tally.unanswered.append(repr(exc))
        finally:
            connection.close()


def pem_to_der(path: Path) -> bytes:
    return ssl.PEM_cert_to_DER_cert(path.read_text())


def test_certificates_replaced_during_load(fresh_server: Callable[..., Server], tmp_path: Path) -> None:
    running = fresh_server()
    new = generate(tmp_path / "new", ["localhost", "127.0.0.1"])
    context = client_context(running.ca, new.ca)  # a client trusting both, as during a CA rollover
    old_cert, new_cert = pem_to_der(running.cert_dir / "tls.crt"), pem_to_der(new.cert)

    # A kept-alive connection opened before the rotation keeps working after it.
    host, port = address(running)
    kept = http.client.HTTPSConnection(host, port, context=context, timeout=15)
    kept.request("POST", "/validate", BODY, HEADERS)
    answer = kept.getresponse()
    assert_denied_review(answer.status, answer.read())

    tally = Tally()
    stop, threads = run_clients(lambda s: one_request_per_connection(running, context, s, tally), 3)
    time.sleep(1.5)
    # Replace key then certificate, each by rename, as a Secret volume or cert-manager would.
    os.replace(new.key, running.cert_dir / "tls.key")
    os.replace(new.cert, running.cert_dir / "tls.crt")
    replaced = time.monotonic()
    time.sleep(2.0)
    stop.set()
    for thread in threads:
        thread.join(timeout=20)

    kept.request("POST", "/validate", BODY, HEADERS)
    answer = kept.getresponse()
    assert_denied_review(answer.status, answer.read())
    kept.close()

    assert tally.unanswered == []
    before = [cert for when, cert in tally.peer_certs if when < replaced]
    after = [cert for when, cert in tally.peer_certs if when > replaced + 0.5]
    assert before and set(before) == {old_cert}
    assert after and set(after) == {new_cert}
