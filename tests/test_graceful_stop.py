"""The shutdown sequence of guardhook.server.readahead, on the real server over TLS: keep-alive
clients sending reviews across a SIGTERM to the master see every request they wrote answered (the
answers after the signal with `Connection: close`), no connection reset, and an idle connection
closed cleanly (FIN) after the linger; the server exits 0. Bounded: 8 clients, ~10 s."""

from __future__ import annotations

import json
import select
import signal
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from test_http_edges import read_answer, review_request, tls_connection

from guardhook.server.readahead import SHUTDOWN_LINGER_SECONDS

from conftest import Server, load_review, start_server

CLIENTS = 8
LIMIT_SECONDS = 20.0


@dataclass
class Client:
    """What one keep-alive client saw."""

    answers: list[tuple[float, int, bool]] = field(default_factory=list)
    """(when read, HTTP status, whether it said Connection: close)"""
    errors: list[str] = field(default_factory=list)
    closed_idle: int = 0
    refused: bool = False


def closed_by_server(tls: ssl.SSLSocket) -> bool:
    """Whether the server closed this idle connection (readable with nothing to read), as Go's
    transport notices it in its background read before reusing a connection."""
    readable, _, _ = select.select([tls], [], [], 0)
    if not readable:
        return False
    try:
        return tls.recv(1) == b""
    except (ssl.SSLError, OSError):
        return True


def keep_sending(server: Server, body: bytes, client: Client, stop: threading.Event) -> None:
    tls: ssl.SSLSocket | None = None
    deadline = time.monotonic() + LIMIT_SECONDS
    while not stop.is_set() and time.monotonic() < deadline:
        if tls is not None and closed_by_server(tls):
            client.closed_idle += 1
            tls.close()
            tls = None
        if tls is None:
            try:
                tls = tls_connection(server)
            except ConnectionRefusedError:
                client.refused = True  # the listening socket is gone: expected after the signal
                return
            except OSError as exc:
                client.errors.append(f"connect: {exc!r}")
                return
        try:
            tls.sendall(review_request(body) + body)
            reply = read_answer(tls)
        except (AssertionError, OSError) as exc:
            client.errors.append(repr(exc)[:300])
            return
        if not reply:
            client.errors.append("a written request got no answer (end of stream)")
            return
        close = b"connection: close" in reply.split(b"\r\n\r\n", 1)[0].lower()
        client.answers.append((time.monotonic(), int(reply[9:12]), close))
        if close:
            tls.close()
            tls = None
        time.sleep(0.02)


def test_keep_alive_clients_across_sigterm_see_no_reset(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    body = json.dumps(load_review("s01-worker-delete.validating")).encode()
    clients = [Client() for _ in range(CLIENTS)]
    stop = threading.Event()
    threads = [threading.Thread(target=keep_sending, args=(server, body, c, stop)) for c in clients]
    idle = tls_connection(server)  # opened, used once, then left idle across the signal
    idle.sendall(review_request(body) + body)
    assert read_answer(idle).startswith(b"HTTP/1.1 200")
    try:
        for thread in threads:
            thread.start()
        time.sleep(1.0)
        signalled = time.monotonic()
        server.process.send_signal(signal.SIGTERM)
        idle.settimeout(SHUTDOWN_LINGER_SECONDS + 10)
        try:
            end = idle.recv(1)  # the idle connection: a clean end of stream after the linger
        except ssl.SSLEOFError:
            end = b""
        closed_after = time.monotonic() - signalled
        assert server.process.wait(timeout=30) == 0
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=LIMIT_SECONDS)
        idle.close()
        server.stop()
    assert end == b""
    assert closed_after >= SHUTDOWN_LINGER_SECONDS - 1.0  # closed last, after the linger
    assert [c.errors for c in clients if c.errors] == []  # no reset, no request left unanswered
    for client in clients:
        assert client.answers and all(status == 200 for _, status, _ in client.answers)
        after = [close for when, _, close in client.answers if when > signalled + 0.5]
        assert all(after)  # every answer after the signal closes its connection
        assert client.refused or any(close for _, _, close in client.answers)
