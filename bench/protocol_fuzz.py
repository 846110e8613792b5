"""Protocol-level mutations of review requests, sent over real TLS to a running `guardhook serve`.

Each example starts from a captured review (../shared/fixtures/reviews) sent as the API server
sends it, then damages the HTTP framing rather than the JSON: the request line (method, path,
version), Content-Length (missing, short, duplicated, negative, not a number, beside chunked),
chunked bodies (valid, bad sizes, extensions), Transfer-Encoding and Content-Encoding (gzip),
Expect: 100-continue, oversized or malformed header fields, bare LF line ends, NUL bytes, and
pipelined leftovers. Every request is complete as sent (no declared length beyond the bytes
sent), so no answer waits on the read timeout.

The invariant on the webhook port: every answer is HTTP with a status under 500 and a JSON body
(an AdmissionReview or a `Status`), and no connection is reset. Used by bench/fuzz.py
(`--protocol`) and tests/test_fuzz.py.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

Mutation = Callable[[random.Random, "Parts"], None]


@dataclass
class Parts:
    """One request being built: request line pieces, header lines (name, value), body, extra
    bytes after it, and the line end used."""

    method: bytes = b"POST"
    path: bytes = b"/validate"
    version: bytes = b"HTTP/1.1"
    headers: list[tuple[bytes, bytes]] = field(default_factory=list)
    body: bytes = b""
    trailing: bytes = b""
    eol: bytes = b"\r\n"

    def render(self) -> bytes:
        lines = [self.method + b" " + self.path + b" " + self.version]
        lines += [name + b": " + value for name, value in self.headers]
        return self.eol.join(lines) + self.eol + self.eol + self.body + self.trailing

    def set(self, name: bytes, value: bytes) -> None:
        self.headers = [(n, v) for n, v in self.headers if n.lower() != name.lower()]
        self.headers.append((name, value))

    def drop(self, name: bytes) -> None:
        self.headers = [(n, v) for n, v in self.headers if n.lower() != name.lower()]


def chunked(body: bytes, rng: random.Random) -> bytes:
    out, at = b"", 0
    while at < len(body):
        size = min(rng.randint(1, max(1, len(body) // 3)), len(body) - at)
        out += b"%x\r\n" % size + body[at : at + size] + b"\r\n"
        at += size
    return out + b"0\r\n\r\n"


def m_method(rng: random.Random, p: Parts) -> None:
    p.method = rng.choice(
        [b"GET", b"PUT", b"OPTIONS", b"DELETE", b"PATCH", b"post", b"P\x00ST", b"BREW", b"X" * 300]
    )


def m_path(rng: random.Random, p: Parts) -> None:
    p.path = rng.choice(
        [
            b"/mutate",
            b"/validate?x=1",
            b"/",
            b"/validate/",
            b"//validate",
            b"/v%00",
            b"*",
            b"/" + b"a" * 9000,
            b"http://x/validate",
            b"/\xff\xfe",
            b"/validate#f",
            b"validate",
        ]
    )


def m_version(rng: random.Random, p: Parts) -> None:
    p.version = rng.choice(
        [b"HTTP/1.0", b"HTTP/2.0", b"HTTP/1.1x", b"HTTP/9.9", b"HTTPS/1.1", b"", b"HTTP/1"]
    )


def m_length(rng: random.Random, p: Parts) -> None:
    n = len(p.body)
    choice = rng.randrange(7)
    if choice == 0:
        p.drop(b"Content-Length")
    elif choice == 1:
        p.set(b"Content-Length", b"%d" % rng.randint(0, max(0, n - 1)))  # short: the rest is pipelined
    elif choice == 2:
        p.headers.append((b"Content-Length", b"%d" % n))
    elif choice == 3:
        p.headers.append((b"Content-Length", b"%d" % (n + 1)))
    elif choice == 4:
        p.set(b"Content-Length", b"-%d" % n)
    elif choice == 5:
        p.set(b"Content-Length", rng.choice([b"abc", b"1e3", b"0x10", b" ", b"%d, %d" % (n, n), b"+%d" % n]))
    else:
        p.set(b"Content-Length", b"0%d" % n)


def m_chunked(rng: random.Random, p: Parts) -> None:
    body = p.body
    p.drop(b"Content-Length")
    p.set(b"Transfer-Encoding", rng.choice([b"chunked", b"Chunked", b"gzip, chunked", b"chunked, chunked"]))
    p.body = chunked(body, rng)
    choice = rng.randrange(5)
    if choice == 0:
        p.headers.append((b"Content-Length", b"%d" % len(body)))  # both: refused (RFC 9112 6.3)
    elif choice == 1:
        p.body = b"zz\r\n" + p.body  # bad chunk size
    elif choice == 2:
        p.body = p.body.replace(b"\r\n", b";ext=\x01\r\n", 1)


def m_transfer_coding(rng: random.Random, p: Parts) -> None:
    p.set(b"Transfer-Encoding", rng.choice([b"gzip", b"identity", b"compress", b"x" * 50, b"chunked;q=1"]))
    p.body = b"0\r\n\r\n"
    p.set(b"Content-Length", b"%d" % len(p.body))


def m_gzip(rng: random.Random, p: Parts) -> None:
    p.body = gzip.compress(p.body)
    p.set(b"Content-Encoding", rng.choice([b"gzip", b"GZIP", b"deflate", b"br", b"gzip, identity"]))
    p.set(b"Content-Length", b"%d" % len(p.body))


def m_expect(rng: random.Random, p: Parts) -> None:
    p.set(b"Expect", rng.choice([b"100-continue", b"200-ok", b"100-Continue"]))


def m_big_header(rng: random.Random, p: Parts) -> None:
    size = rng.choice([8000, 9000, 20_000, 70_000])
    p.headers.append((b"X-Big", b"a" * size))


def m_many_headers(rng: random.Random, p: Parts) -> None:
    p.headers += [(b"X-H%d" % i, b"v") for i in range(rng.choice([99, 101, 500]))]


def m_bad_header(rng: random.Random, p: Parts) -> None:
    p.headers.insert(
        rng.randrange(len(p.headers) + 1),
        rng.choice(
            [
                (b"Bad Name", b"x"),
                (b"X-Fold", b"a\r\n folded"),
                (b"X-Nul", b"a\x00b"),
                (b"", b"empty name"),
                (b"X-Ctl", b"\x7f\x1b[2K"),
                (b"Host", b"a"),
                (b"X-Hi", b"\xff\xfe"),
                (b"Connection", b"close"),
                (b"Connection", b"keep-alive, Upgrade"),
                (b"Upgrade", b"h2c"),
            ]
        ),
    )


def m_bare_lf(rng: random.Random, p: Parts) -> None:
    p.eol = b"\n"
    # A head without CRLF CRLF never completes: the server answers 408 after its read timeout (5 s).
    # Ended by a CRLF CRLF, the bare LFs inside are judged at once.
    p.trailing = b"\r\n\r\n"


def m_trailing(rng: random.Random, p: Parts) -> None:
    # A pipelined request after the first (answered unless the first closes): never /healthz, whose
    # documented answer is text, not JSON.
    p.trailing = rng.choice(
        [b"GARBAGE\r\n\r\n", b"\r\n", b"GET /no-such-path HTTP/1.1\r\nHost: x\r\n\r\n", b"\x16\x03\x01"]
    )


MUTATIONS: tuple[Mutation, ...] = (
    m_method,
    m_path,
    m_version,
    m_length,
    m_chunked,
    m_transfer_coding,
    m_gzip,
    m_expect,
    m_big_header,
    m_many_headers,
    m_bad_header,
    m_bare_lf,
    m_trailing,
)


def base_request(body: bytes, path: bytes = b"/validate") -> Parts:
    """A review request as the API server sends it (Go's net/http header set), with Connection:
    close so each example's answers end with the connection."""
    headers = [
        (b"Host", b"guardhook.guardhook-system.svc:443"),
        (b"User-Agent", b"kube-apiserver-admission"),
        (b"Content-Length", b"%d" % len(body)),
        (b"Accept", b"application/json, */*"),
        (b"Content-Type", b"application/json"),
        (b"Connection", b"close"),
    ]
    return Parts(path=path, headers=headers, body=body)


def mutated(rng: random.Random, bodies: list[bytes]) -> bytes:
    """One damaged request: a captured review's request with 1-3 mutations."""
    parts = base_request(rng.choice(bodies), rng.choice([b"/validate", b"/mutate"]))
    for mutation in rng.sample(MUTATIONS, rng.randint(1, 3)):
        mutation(rng, parts)
    return parts.render()


@dataclass
class Outcome:
    """What one exchange showed: the answers' status codes, and what broke the invariant."""

    statuses: list[int] = field(default_factory=list)
    finding: str = ""
    reset: bool = False
    session: ssl.SSLSession | None = None
    """The TLS session, to resume on the next connection (a cheaper handshake)."""


LINGER_SECONDS = 0.3
"""How long to wait for more after an answer (a pipelined leftover's) before ending the exchange."""
_STATUS_LINE = re.compile(rb"HTTP/1\.[01] (\d{3}) ")


def split_answers(data: bytes) -> tuple[list[tuple[int, bytes, bytes]], bytes]:
    """The complete HTTP answers in `data` as (status, head, body), interim 1xx answers dropped,
    and what is left over (not an answer)."""
    answers = []
    while data:
        end = data.find(b"\r\n\r\n")
        match = _STATUS_LINE.match(data)
        if end < 0 or match is None:
            break
        head, rest = data[:end], data[end + 4 :]
        status = int(match.group(1))
        if 100 <= status < 200:
            data = rest
            continue
        length = re.search(rb"\r\ncontent-length: *(\d+)", head, re.IGNORECASE)
        size = int(length.group(1)) if length else len(rest)
        if len(rest) < size:
            break  # the body is still coming
        answers.append((status, head, rest[:size]))
        data = rest[size:]
    return answers, data


def exchange(
    address: tuple[str, int],
    context: ssl.SSLContext,
    request: bytes,
    timeout: float = 15.0,
    session: ssl.SSLSession | None = None,
) -> Outcome:
    """Send `request` on a new TLS connection, read until the server closes, and check each answer:
    status < 500, Content-Type application/json, a JSON body; no reset, nothing that is not HTTP."""
    outcome = Outcome()
    data = b""
    try:
        with (
            socket.create_connection(address, timeout=timeout) as raw,
            context.wrap_socket(raw, server_hostname=address[0], session=session) as tls,
        ):
            tls.sendall(request)
            outcome.session = tls.session
            while chunk := tls.recv(65536):
                data += chunk
                if split_answers(data)[0]:
                    tls.settimeout(LINGER_SECONDS)  # answered; a kept-alive connection stays open
    except TimeoutError:
        if not split_answers(data)[0]:
            outcome.finding = "no answer within the timeout"
    except (ConnectionResetError, BrokenPipeError) as exc:
        outcome.reset, outcome.finding = True, f"reset: {exc!r}"
    except ssl.SSLError as exc:
        if "EOF" not in str(exc) and "eof" not in str(exc):  # an unclean TLS end is not a reset
            outcome.finding = f"TLS error: {exc!r}"
    answers, left = split_answers(data)
    for status, head, body in answers:
        outcome.statuses.append(status)
        if status >= 500:
            outcome.finding = outcome.finding or f"HTTP {status}: {body[:200]!r}"
        elif b"content-type: application/json" not in head.lower():
            outcome.finding = outcome.finding or f"HTTP {status} not JSON: {head[:200]!r} {body[:120]!r}"
        else:
            try:
                json.loads(body)
            except ValueError:
                outcome.finding = outcome.finding or f"HTTP {status} body not JSON: {body[:200]!r}"
    if left.strip():
        outcome.finding = outcome.finding or f"bytes that are no answer: {left[:200]!r}"
    return outcome


def review_bodies(folder: Path) -> list[bytes]:
    """The captured reviews' bodies, as sent."""
    return [path.read_bytes() for path in sorted(folder.glob("*.json"))]


def client_context(ca: Path) -> ssl.SSLContext:
    """A verifying client context for the server's CA (the session cache makes reconnects cheap)."""
    return ssl.create_default_context(cafile=str(ca))
