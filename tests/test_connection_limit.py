"""New connections at `--max-connections` (issue 53), on the real `guardhook serve` over real TLS on
127.0.0.1: a new connection is accepted at once and makes room by closing the oldest *idle*
kept-alive connection (one, with a FIN), never one with a request in flight; and a client that
reads a `Connection: close` answer but closes its end late does not hold up other connections
(gunicorn's gthread waited for that client's FIN, up to 2 s, with its event loop blocked). Bounded:
a limit of 8 connections, each test a few seconds; the assertions are about which connection was
closed and in what order, not time. bench/probes.py measures the latency at 1,000 connections."""

from __future__ import annotations

import json
import os
import ssl
from pathlib import Path

from test_http_edges import read_answer, review_request, tls_connection

from conftest import Server, load_review, start_server

LIMIT = 8


def ask(tls: ssl.SSLSocket, path: str = "/healthz", close: bool = False) -> bytes:
    """GET `path` on `tls` and read the answer."""
    extra = "Connection: close\r\n" if close else ""
    tls.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n".encode())
    return read_answer(tls)


def ended(tls: ssl.SSLSocket) -> bool:
    """Whether the server closed this idle connection (a clean end of stream, waited for)."""
    tls.settimeout(10)
    try:
        return tls.recv(1) == b""
    except ssl.SSLEOFError:
        return True


def probe(server: Server, path: str = "/healthz") -> bytes:
    """A kubelet-style probe: a new connection, one request with `Connection: close`."""
    with tls_connection(server) as tls:
        return ask(tls, path, close=True)


def fill(server: Server, count: int) -> list[ssl.SSLSocket]:
    """`count` kept-alive connections, each with one request answered, oldest first."""
    server.session.close()  # its pooled connection would be one more idle one
    idle = []
    for _ in range(count):
        tls = tls_connection(server)
        assert ask(tls).startswith(b"HTTP/1.1 200")
        idle.append(tls)
    return idle


def test_a_new_connection_at_the_limit_closes_the_oldest_idle_one_only(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--max-connections", str(LIMIT))
    idle = fill(server, LIMIT)  # all of them idle: gthread alone kept `threads` fewer
    try:
        for path in ("/healthz", "/readyz"):
            assert probe(server, path).startswith(b"HTTP/1.1 200")
            oldest = idle.pop(0)
            assert ended(oldest)  # the oldest idle connection made room, closed with a FIN
            oldest.close()  # as a client does once it sees the close
            for tls in idle:  # every other one is still open and served
                assert ask(tls).startswith(b"HTTP/1.1 200")
            idle.append(tls_connection(server))  # back at the limit: the next probe makes room again
            assert ask(idle[-1]).startswith(b"HTTP/1.1 200")
    finally:
        for tls in idle:
            tls.close()
        server.stop()


def test_room_is_never_made_by_closing_a_connection_with_a_request_in_flight(tmp_path: Path) -> None:
    server = start_server(tmp_path, "--max-connections", str(LIMIT), "--request-timeout", "30")
    server.session.close()
    silent = tls_connection(server)  # the oldest connection: handshake done, no request yet
    idle = fill(server, LIMIT - 1)
    body = json.dumps(load_review("s01-worker-delete.validating")).encode()
    half = len(body) // 2
    reading = idle[0]  # the oldest kept-alive one starts its next request: it is being read now
    reading.sendall(review_request(body) + body[:half])
    try:
        assert probe(server).startswith(b"HTTP/1.1 200")
        assert ended(idle[1])  # the oldest *idle* connection was closed instead
        reading.sendall(body[half:])
        assert read_answer(reading).startswith(b"HTTP/1.1 200")  # its request was answered
        assert ask(silent).startswith(b"HTTP/1.1 200")  # the one that had sent nothing is open too
        for tls in idle[2:]:
            assert ask(tls).startswith(b"HTTP/1.1 200")
    finally:
        for tls in [silent, *idle]:
            tls.close()
        server.stop()


def worker_pid(master: int) -> int:
    """The pid of the gunicorn worker forked by `master` (one worker)."""
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == master:
                return int(entry)
    raise AssertionError(f"no worker process under {master}")


def holds(pid: int, local_port: int, peer_port: int) -> bool:
    """Whether process `pid` still has the TCP socket local_port <-> peer_port open (the kernel's
    table of sockets, matched to the process's descriptors by inode)."""
    inodes = set()
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        local, peer, inode = int(fields[1].split(":")[1], 16), int(fields[2].split(":")[1], 16), fields[9]
        if (local, peer) == (local_port, peer_port) and inode in inodes:
            return True
    return False


def test_a_client_closing_late_after_connection_close_holds_up_no_other(tmp_path: Path) -> None:
    server = start_server(tmp_path)
    server.session.close()
    port = int(server.url.rsplit(":", 1)[1])
    worker = worker_pid(server.process.pid)
    lingering = tls_connection(server)
    try:
        # Answered with Connection: close; the client reads the answer and keeps its end open.
        assert ask(lingering, close=True).startswith(b"HTTP/1.1 200")
        assert probe(server).startswith(b"HTTP/1.1 200")
        # The probe was accepted, read and answered while the server still held the lingering
        # connection open (reading what it might still send): before, the worker's event loop
        # waited for that client's FIN (up to 2 s) and then closed it, and only then accepted the probe.
        assert holds(worker, port, lingering.getsockname()[1])
        assert ended(lingering)  # and it was closed gracefully: a FIN came first
    finally:
        lingering.close()
        server.stop()
