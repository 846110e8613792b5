"""The server-wide bound on request-body bytes held at once (issue 48 item 4): past it a request
is answered 503 with Retry-After, the server stays up and judges, and the bytes are let go once
the requests holding them are answered."""

from __future__ import annotations

import json
import selectors
import socket
import ssl
from collections.abc import Callable
from pathlib import Path

import pytest

from guardhook.commands.argtypes import byte_size
from guardhook.server.bodybudget import NO_LIMIT_DEFAULT, default_budget, memory_limit

from conftest import Server, load_review

MIB = 1024 * 1024
DECLARED = 3 * MIB
"""Each large request's body: two fit in the 8 MiB bound of these tests, a third does not."""


def connect(server: Server) -> ssl.SSLSocket:
    host, port = server.url.removeprefix("https://").rsplit(":", 1)
    context = ssl.create_default_context(cafile=str(server.ca))
    return context.wrap_socket(socket.create_connection((host, int(port)), timeout=30), server_hostname=host)


def head(length: int) -> bytes:
    return (
        b"POST /validate HTTP/1.1\r\nHost: guardhook\r\nContent-Type: application/json\r\n"
        b"Content-Length: %d\r\n\r\n" % length
    )


def answer(sock: ssl.SSLSocket, data: bytes = b"") -> bytes:
    """The whole answer to one request (`data`: what of it was read already)."""
    while b"\r\n\r\n" not in data:
        data += sock.recv(65536)
    header, _, body = data.partition(b"\r\n\r\n")
    lines = header.lower().split(b"\r\n")
    length = int(next(line.split(b":")[1] for line in lines if line.startswith(b"content-length")))
    while len(body) < length:
        body += sock.recv(65536)
    return header + b"\r\n\r\n" + body


def first_answers(socks: list[ssl.SSLSocket], count: int) -> dict[ssl.SSLSocket, bytes]:
    """The first `count` of `socks` the server answers, each with its answer (the others stay
    unanswered: waiting for the rest of their bodies). A socket may turn readable with TLS session
    tickets alone, so readable is not answered until application bytes come."""
    answered: dict[ssl.SSLSocket, bytes] = {}
    with selectors.DefaultSelector() as selector:
        for sock in socks:
            selector.register(sock, selectors.EVENT_READ)
        while len(answered) < count:
            ready = selector.select(timeout=30)
            assert ready, f"only {len(answered)} of the {count} answers expected came"
            for key, _ in ready:
                sock = key.fileobj
                assert isinstance(sock, ssl.SSLSocket)
                sock.setblocking(False)
                try:
                    data = sock.recv(65536)
                except ssl.SSLWantReadError:
                    continue
                finally:
                    sock.settimeout(30)
                selector.unregister(sock)
                answered[sock] = answer(sock, data)
    return answered


def test_bodies_past_the_bound_get_503_and_the_server_keeps_judging(
    fresh_server: Callable[..., Server],
) -> None:
    server = fresh_server("--max-body-bytes-in-flight", "8Mi", "--request-timeout", "60")
    socks = [connect(server) for _ in range(3)]
    try:
        for sock in socks:  # each sends all of its body but the last byte, and is held
            sock.sendall(head(DECLARED) + b"x" * (DECLARED - 1))
        # 9 MiB would be held: one is refused (its bytes let go), then the other two fit (6 MiB)
        refused = first_answers(socks, 1)
        (reply,) = refused.values()
        assert reply.startswith(b"HTTP/1.1 503 ") and b"Retry-After: 1" in reply
        assert b"too many request bytes in flight" in reply
        # a real review still fits beside the two held bodies, and is judged
        assert server.review("/validate", "s01-worker-delete.validating")["allowed"] is False
        # while the two are held, another large body does not fit...
        with connect(server) as extra:
            extra.sendall(head(DECLARED) + b"x" * DECLARED)
            assert answer(extra).startswith(b"HTTP/1.1 503 ")
        for sock in [s for s in socks if s not in refused]:  # ...they complete (not JSON: 400), let go
            sock.sendall(b"x")
            assert answer(sock).startswith(b"HTTP/1.1 400 ")
        with connect(server) as again:
            again.sendall(head(DECLARED) + b"x" * DECLARED)
            assert answer(again).startswith(b"HTTP/1.1 400 ")  # read and judged, not refused
    finally:
        for sock in socks:
            sock.close()
    metrics = server.session.get(server.url + "/metrics", timeout=10).text
    assert 'guardhook_requests_refused_unread_total{code="503",reason="bytes-in-flight"} 2.0' in metrics
    assert "request bodies held at once are bounded to 8 MiB (--max-body-bytes-in-flight)" in server.logged(
        "bounded to"
    )
    assert "refused a request from 127.0.0.1" in server.logged("with 503")


def test_one_request_alone_is_never_refused_by_a_bound_below_its_size(
    fresh_server: Callable[..., Server],
) -> None:
    server = fresh_server("--max-body-bytes-in-flight", "1Ki")
    review = load_review("s01-worker-delete.validating")
    assert len(json.dumps(review)) > 1024
    assert server.review("/validate", "s01-worker-delete.validating")["allowed"] is False


@pytest.mark.parametrize(
    ("files", "bound"),
    [
        ({"memory.max": "1073741824\n"}, 128 * MIB),  # cgroup v2, the manifests' 1Gi limit
        ({"memory.max": "max\n"}, NO_LIMIT_DEFAULT),
        ({"memory/memory.limit_in_bytes": "536870912\n"}, 64 * MIB),  # cgroup v1
        ({"memory/memory.limit_in_bytes": "9223372036854771712\n"}, NO_LIMIT_DEFAULT),  # v1: none
        ({}, NO_LIMIT_DEFAULT),
    ],
)
def test_the_default_bound_is_an_eighth_of_the_memory_limit(
    tmp_path: Path, files: dict[str, str], bound: int
) -> None:
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert default_budget(tmp_path)[0] == bound
    assert (memory_limit(tmp_path) is None) == (bound == NO_LIMIT_DEFAULT)


@pytest.mark.parametrize(
    ("text", "size"), [("134217728", 128 * MIB), ("128Mi", 128 * MIB), ("1Gi", 1 << 30), ("4Ki", 4096)]
)
def test_sizes_take_binary_suffixes(text: str, size: int) -> None:
    assert byte_size(text) == size


@pytest.mark.parametrize("text", ["0", "-1", "1.5Gi", "1G", "Mi", "lots"])
def test_bad_sizes_are_refused(text: str) -> None:
    with pytest.raises(Exception, match="is not a size in bytes"):
        byte_size(text)
