"""A gunicorn gthread worker that reads each request whole before a request thread sees it.

gunicorn's gthread worker hands a connection to a pool thread as soon as its first byte arrives;
the thread then does the TLS handshake and reads headers and body with blocking calls. A client
that trickles a header line a second holds that thread as long as it likes (the per-operation
socket timeout, guardhook.server.tlssock, only bounds each single read), and `--threads` such
clients stop the webhook. Measured with bench/slowloris.py: 64 trickling connections against 8
threads put a normal review's p99 past 100 s.

Here the worker's own event loop (its selector, which already waits on kept-alive connections
without holding a thread) also does the TLS handshake and reads the request line, headers and
body with non-blocking calls into a buffer. Only a complete request is queued for a pool thread,
with the bytes already in the parser's buffer, so waiting connections never hold the threads that
answer complete requests. Like the Go API server's `http.Server.ReadHeaderTimeout` (here covering
the body too), a connection gets `request_timeout` seconds from its first byte (or from accept, for
the TLS handshake of a new connection) to a complete request; past that it is closed. A new
connection whose first bytes are a plain HTTP request line, not a TLS record, is answered as Go's
net/http answers it (400 "Client sent an HTTP request to an HTTPS server") and logged, not reset.

The bytes held at once by requests being read, queued or answered are bounded (`max_in_flight`,
guardhook.server.bodybudget): a request whose bytes would pass the bound is answered 503 with
Retry-After and closed, so many large bodies at once cannot run the process out of memory.

Stopping (SIGTERM to the master, or an old worker after SIGHUP), in this order, within gunicorn's
`graceful_timeout` (webhook_server.GRACEFUL_TIMEOUT_SECONDS):

1. stop accepting: connections already queued in the listening socket's backlog are accepted
   first, then the worker's copy of the listening socket is closed (the master closed its own), so
   no connection waits in a backlog nobody reads (a reset when the socket finally closes) and a
   new one is refused at once;
2. answer what was read: requests being read, queued or judged are answered; every answer after
   the signal carries `Connection: close` (gunicorn's own rule for a stopping worker), so a client
   opens its next connection elsewhere (a Service's other endpoint);
3. kept-alive idle connections stay open SHUTDOWN_LINGER_SECONDS for a request a client may
   already be sending (answered with `Connection: close`), then are closed last, gracefully: FIN
   first, then whatever arrives is read and dropped until the client closes (at most
   CLOSE_DRAIN_SECONDS), so a request crossing the close meets an end of stream, not a reset.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import re
import selectors
import socket
import ssl
import time
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from gunicorn import http, util
from gunicorn.sock import ssl_context
from gunicorn.workers.gthread import ThreadWorker

from guardhook.server import refusals
from guardhook.server.clientauth import NO_CERTIFICATE
from guardhook.server.status import protocol_error, raw_answer

log = logging.getLogger(__name__)

READ_TIMEOUT_SECONDS = 5.0
"""Default time from a connection's first byte to a complete request. The API server sends a
review in one write and waits 10 s by default (at most 30 s) for the answer."""

MAX_HEADER_BYTES = 64 * 1024
"""A header block still open past this is handed to gunicorn's parser, which answers 400 (its
limit_request_line / limit_request_field_size are lower)."""

READ_CHUNK = 64 * 1024
TIMEOUT_ANSWER = raw_answer(408, "no complete request in time")
HEADER_END = b"\r\n\r\n"
_CONTENT_LENGTH = re.compile(rb"\r\ncontent-length:[ \t]*(\d+)[ \t]*(?=\r\n)", re.IGNORECASE)
_CHUNKED = re.compile(rb"\r\ntransfer-encoding:[^\r\n]*chunked", re.IGNORECASE)
_EXPECT_CONTINUE = re.compile(rb"\r\nexpect:[ \t]*100-continue[ \t]*(?=\r\n)", re.IGNORECASE)
_REVIEW_LINE = re.compile(rb"POST /(validate|mutate)[ ?]")
_PLAIN_HTTP = re.compile(rb"(GET|HEAD|POST|PUT|DELETE|OPTIONS|PATCH|CONNECT|TRACE) ")
PLAIN_HTTP_MESSAGE = "Client sent an HTTP request to an HTTPS server"
"""Go's net/http answer (400) to plain HTTP on a TLS port, with the same words."""
PLAIN_HTTP_ANSWER = raw_answer(400, PLAIN_HTTP_MESSAGE)

OVER_BOUND_ANSWER = raw_answer(
    503,
    "too many request bytes in flight: the server's bound on request bodies held at once is reached; retry",
    (("Retry-After", "1"),),
)
UNAUTHENTICATED_ANSWER = raw_answer(401, NO_CERTIFICATE)
OVER_BOUND_LOG_SECONDS = 10.0
"""At most one WARNING per this many seconds for refusals past the bound (each is counted)."""

SHUTDOWN_LINGER_SECONDS = 5.0
"""How long a stopping worker keeps idle kept-alive connections open (gunicorn's own default is
2 s): a client sending every few seconds gets a `Connection: close` answer in that time and closes
the connection itself, instead of meeting a close from the server."""

CLOSE_DRAIN_SECONDS = 1.0
"""After a stopping worker's FIN on an idle connection, how long bytes that still arrive are read
and dropped (so the close is no reset) before the socket is closed."""

ROOM_BATCH = 16
"""At worker_connections, new connections are accepted while fewer than this many connections are
closing (making room for earlier ones); past it they wait in the listening socket's backlog until
one has closed (see accept)."""

DISCARD_FACTOR = 4
"""An oversized body declared up to this many times the cap is read and thrown away in the event
loop after the 400 went out, before the connection closes: a client that writes its whole body
before reading (most do) would otherwise have the connection reset under it by a close with its
bytes unread, and never read the answer. A larger one is closed at once after the 400."""


def request_complete(buffer: bytes | bytearray, max_body: int) -> bool:
    """Whether `buffer` starts with a whole HTTP/1.1 request (headers and body) or with enough to
    be answered without reading more: a header block over MAX_HEADER_BYTES, or a declared body
    over `max_body` bytes (the app refuses those unread, with 400 and Connection: close)."""
    end = buffer.find(HEADER_END)
    if end < 0:
        return len(buffer) > MAX_HEADER_BYTES
    head, body = buffer[: end + 2], buffer[end + len(HEADER_END) :]  # head keeps its last CRLF
    if _CHUNKED.search(head):
        return chunked_complete(body, max_body)
    match = _CONTENT_LENGTH.search(head)
    if match is None:
        return True  # no body (a GET, or a body gunicorn refuses for lack of a length)
    length = int(match.group(1))
    return length > max_body or len(body) >= length


def oversized_length(buffer: bytes | bytearray, max_body: int) -> int | None:
    """The declared Content-Length of the request heading `buffer` when it is over `max_body` (a
    chunked body has no declared length: None), else None."""
    end = buffer.find(HEADER_END)
    head = bytes(buffer[: end + 2]) if end >= 0 else b""
    match = _CONTENT_LENGTH.search(head)
    if match is None or _CHUNKED.search(head):
        return None
    length = int(match.group(1))
    return length if length > max_body else None


def handed_on(buffer: bytes, close: bool) -> bytes:
    """`buffer` as gunicorn's parser gets it: `Expect: 100-continue` taken out of its first
    request's head (the expectation is met by then: a 100 sent, or the body already in), and with
    `close` a `Connection: close` put first (gunicorn honours the first Connection header)."""
    end = buffer.find(HEADER_END)
    if end < 0:
        return buffer
    head = _EXPECT_CONTINUE.sub(b"", buffer[: end + 2])
    if close:
        line_end = head.find(b"\r\n") + 2
        head = head[:line_end] + b"Connection: close\r\n" + head[line_end:]
    return head + buffer[end + 2 :]


def chunked_complete(body: bytes | bytearray, max_body: int) -> bool:
    """Whether a chunked body (RFC 9112 §7.1) has reached its last chunk and the trailer section's
    end, or has grown over `max_body` (then the app refuses it). A malformed size line counts as
    complete: gunicorn's parser answers it with 400."""
    at = 0
    while True:
        line_end = body.find(b"\r\n", at)
        if line_end < 0:
            return len(body) > max_body
        try:
            size = int(body[at:line_end].split(b";", 1)[0].strip(), 16)
        except ValueError:
            return True
        at = line_end + 2
        if size == 0:
            return body.find(b"\r\n\r\n", at - 2) >= 0 or len(body) > max_body
        at += size + 2
        if at > len(body):
            return len(body) > max_body


@dataclass
class Reading:
    """A connection being read: what arrived, and by when the request must be complete."""

    deadline: float
    buffer: bytearray = field(default_factory=bytearray)
    events: int = 0
    continued: bool = False
    close: bool = False
    """The body is over the cap: the connection closes after the 400 (gunicorn ignores an app's
    `Connection: close`, so the request handed on asks for it)."""
    discard: int = 0
    """Bytes of an oversized body still to come, read and thrown away after the 400."""
    held: int = 0
    """Bytes counted against the server-wide bound (ReadAheadWorker.max_in_flight) for this request."""
    caller_checked: bool = False
    """Whether the request line was looked at for a review without a client certificate."""


class ReadAheadWorker(ThreadWorker):
    """gthread, with handshake and request reading moved from the pool threads to the event loop.

    Subclassed per server with `request_timeout` (seconds) and `max_body` (bytes) set.
    """

    request_timeout: float = READ_TIMEOUT_SECONDS
    max_body: int = 3 * 1024 * 1024
    max_in_flight: int = 256 * 1024 * 1024
    """Request bytes held at once, read or being answered (guardhook.server.bodybudget)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.in_flight = 0
        """Bytes held now by requests being read, queued or answered (each counted by _hold)."""
        self.over_bound = 0
        """Requests refused with 503 because the bound was reached."""
        self._over_bound_logged = 0.0
        self.reading: dict[Any, Reading] = {}
        self.discarding: dict[Any, Reading] = {}
        self.cut_off = 0
        self.made_room = 0
        """Idle kept-alive connections closed to stay under worker_connections."""
        # gthread answers `Connection: close` once worker_connections - threads connections are
        # idle, closing the connection that just had its answer (a reconnect and a TLS handshake
        # for its client, churn at the limit): here idle ones may fill the limit, and a new
        # connection closes the oldest idle one instead (accept).
        self.max_keepalived = self.worker_connections

    def enqueue_req(self, conn: Any) -> None:
        """Called by gthread for a new connection, a kept-alive one that became readable, and one
        with read-ahead bytes left by the previous request: read it whole before queueing it."""
        state = Reading(deadline=time.monotonic() + self.request_timeout)
        if conn.parser is not None:
            state.buffer += conn.parser.unreader.take_buffered()
        self.reading[conn] = state
        self._advance(conn)

    def _advance(self, conn: Any, _fileobj: Any = None) -> None:
        state = self.reading.get(conn)
        if state is None:
            return
        try:
            wanted = self._handshake(conn) or self._read(conn, state)
        except PlainHTTP:
            self._answer_plain_http(conn)
            return
        except OverBound:
            self._refuse_over_bound(conn)
            return
        except Unauthenticated:
            self._refuse_unauthenticated(conn)
            return
        except (OSError, ValueError) as exc:  # ssl.SSLError is an OSError: a bad or broken client
            log.debug("closing a connection while reading its request: %s", exc)
            self._drop(conn)
            return
        if wanted is None:
            conn.guardhook_held, state.held = state.held, 0  # held until answered (finish_request)
            self._release(conn)
            # The expectation is met here (a 100 sent, or the body already in): gunicorn must
            # not answer it once more.
            conn.parser.unreader.unread(handed_on(bytes(state.buffer), close=state.close))
            conn.guardhook_discard = state.discard
            conn.data_ready = True
            super().enqueue_req(conn)
            return
        if wanted == -1:  # the client closed the connection
            self._drop(conn)
            return
        self._watch(conn, state, wanted)

    def _handshake(self, conn: Any) -> int:
        """Start or continue a new connection's TLS handshake; the selector event it waits for,
        or 0 once done (and the HTTP/1.1 parser is set up)."""
        if conn.initialized:
            return 0
        if self.cfg.is_ssl:
            if not isinstance(conn.sock, ssl.SSLSocket):
                conn.sock.setblocking(False)
                first = _peek(conn.sock)
                if first is None:
                    return selectors.EVENT_READ
                if _PLAIN_HTTP.match(first):
                    raise PlainHTTP
                conn.sock = ssl_context(self.cfg).wrap_socket(
                    conn.sock,
                    server_side=True,
                    suppress_ragged_eofs=self.cfg.suppress_ragged_eofs,
                    do_handshake_on_connect=False,
                )
            try:
                conn.sock.do_handshake()
            except ssl.SSLWantReadError:
                return selectors.EVENT_READ
            except ssl.SSLWantWriteError:
                return selectors.EVENT_WRITE
        else:
            conn.sock.setblocking(False)
        conn.parser = http.get_parser(self.cfg, conn.sock, conn.client)
        conn.initialized = True
        return 0

    def _answer_plain_http(self, conn: Any) -> None:
        """Answer plain HTTP sent to the TLS port as Go's net/http does (400 "Client sent an HTTP
        request to an HTTPS server", in the port's JSON `Status`), log it, and close gracefully:
        what the client sent is read first and the close is a FIN, so the answer is not lost to
        a reset."""
        refusals.refused("plain-http")
        log.warning(
            "plain HTTP from %s on the HTTPS port: answered 400 (%s)", _peer(conn), PLAIN_HTTP_MESSAGE
        )
        self._release(conn)
        with contextlib.suppress(OSError):  # BlockingIOError once what arrived is read
            for _ in range(16):  # the request, so the close below is no reset (_close_idle drains the rest)
                if not conn.sock.recv(READ_CHUNK):
                    break
        with contextlib.suppress(OSError):
            conn.sock.send(PLAIN_HTTP_ANSWER)
        self._close_idle(conn, time.monotonic())

    def _read(self, conn: Any, state: Reading) -> int | None:
        """Read what is there; None once the request is complete, -1 at EOF, else the selector
        event to wait for."""
        conn.sock.setblocking(False)
        self._check_caller(conn, state)
        self._hold(state)  # bytes a kept-alive connection's previous read left
        while not self._complete(state):
            try:
                data = conn.sock.recv(READ_CHUNK)
            except (ssl.SSLWantReadError, BlockingIOError):
                self._continue_if_expected(conn, state)
                return selectors.EVENT_READ
            except ssl.SSLWantWriteError:
                return selectors.EVENT_WRITE
            if not data:
                return -1
            state.buffer += data
            self._check_caller(conn, state)
            self._hold(state)
        return None

    def _check_caller(self, conn: Any, state: Reading) -> None:
        """Once the request line is in: raise Unauthenticated for a review request (POST /validate
        or /mutate) on a connection that presented no client certificate where the TLS context
        asks for one (`serve --client-ca-file`), so its body is never read or held. The app
        answers the same (and checks the certificate's names: guardhook.server.clientauth)."""
        if state.caller_checked:
            return
        line_end = state.buffer.find(b"\r\n")
        if line_end < 0:
            return
        state.caller_checked = True
        sock = conn.sock
        if not isinstance(sock, ssl.SSLSocket) or sock.context.verify_mode != ssl.CERT_OPTIONAL:
            return
        if _REVIEW_LINE.match(state.buffer, 0, line_end + 1) and not sock.getpeercert():
            raise Unauthenticated

    def _refuse_unauthenticated(self, conn: Any) -> None:
        """Answer 401 to a review request without a client certificate, unread, and close."""
        refusals.refused("no-client-certificate")
        log.warning("refused a review from %s: %s", _peer(conn), NO_CERTIFICATE)
        self._release(conn)
        with contextlib.suppress(OSError):
            conn.sock.send(UNAUTHENTICATED_ANSWER)
        self._close_idle(conn, time.monotonic())

    def _hold(self, state: Reading) -> None:
        """Count the bytes the request in `state` holds (what arrived, not what its Content-Length
        declares: a client must send the bytes it makes the server hold) against max_in_flight.
        Raises OverBound when that would pass the bound while other requests hold bytes (one
        request alone always goes on: a bound below one body must not stop every review)."""
        grow = len(state.buffer) - state.held
        if grow <= 0:
            return
        if self.in_flight + grow > self.max_in_flight and self.in_flight > state.held:
            raise OverBound
        self.in_flight += grow
        state.held += grow

    def _refuse_over_bound(self, conn: Any) -> None:
        """Answer 503 with Retry-After to a request that would pass max_in_flight, and close the
        connection gracefully (what the client still sends is read and dropped, not held)."""
        refusals.refused("bytes-in-flight")
        self.over_bound += 1
        now = time.monotonic()
        if now - self._over_bound_logged >= OVER_BOUND_LOG_SECONDS:
            self._over_bound_logged = now
            log.warning(
                "refused a request from %s with 503: request bodies in flight would pass the bound of "
                "%d bytes (serve --max-body-bytes-in-flight); %d refused so far",
                _peer(conn),
                self.max_in_flight,
                self.over_bound,
            )
        self._release(conn)
        with contextlib.suppress(OSError):
            conn.sock.send(OVER_BOUND_ANSWER)
        self._close_idle(conn, now)

    def _complete(self, state: Reading) -> bool:
        """Whether the request in `state` can be handed on (request_complete); for one whose
        declared body is over the cap, also note that it closes and what is left to throw away."""
        if not request_complete(state.buffer, self.max_body):
            return False
        end = state.buffer.find(HEADER_END)
        length = oversized_length(state.buffer, self.max_body)
        body_so_far = len(state.buffer) - end - len(HEADER_END) if end >= 0 else 0
        state.close = length is not None or body_so_far > self.max_body
        waits_for_100 = body_so_far == 0 and _EXPECT_CONTINUE.search(bytes(state.buffer[: end + 2]))
        if length is not None and length <= DISCARD_FACTOR * self.max_body and not waits_for_100:
            state.discard = length - body_so_far  # a client waiting for a 100 sends no body
        return True

    def _continue_if_expected(self, conn: Any, state: Reading) -> None:
        """A client that sent `Expect: 100-continue` waits for the interim 100 before its body
        (RFC 9110 §10.1.1): send it once the headers are in (a request handed on has its Expect
        removed, so gunicorn sends no second one)."""
        if state.continued:
            return
        end = state.buffer.find(HEADER_END)
        if end >= 0 and _EXPECT_CONTINUE.search(bytes(state.buffer[: end + 2])):
            state.continued = True
            conn.sock.send(b"HTTP/1.1 100 Continue\r\n\r\n")

    def finish_request(self, conn: Any, fs: Any) -> None:
        """gthread's completion of a request; a connection closing after the 400 to an oversized
        body first has the rest of that body read and thrown away (see DISCARD_FACTOR)."""
        self.in_flight -= getattr(conn, "guardhook_held", 0)  # the answer is out: its bytes are let go
        conn.guardhook_held = 0
        discard = getattr(conn, "guardhook_discard", 0)
        conn.guardhook_discard = 0
        if discard and not fs.cancelled() and fs.exception() is None and fs.result() is False:
            state = Reading(deadline=time.monotonic() + self.request_timeout, discard=discard)
            self.discarding[conn] = state
            conn.sock.setblocking(False)
            self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._discard, conn))
            state.events = selectors.EVENT_READ
            self._discard(conn)  # TLS may hold decrypted bytes the selector does not see
            return
        if fs.cancelled() or fs.exception() is not None or fs.result():
            super().finish_request(conn, fs)  # kept alive (or broken: closed at once, no wait)
            return
        # Not kept alive (`Connection: close`, an error answer): gthread closes it here with
        # gunicorn's util.close_graceful, which waits up to 2 s for the client's FIN with this
        # event loop blocked: no accept, no handshake, no read meanwhile. A client that reads its
        # answer and closes later (bench/probes.py: 1.7 s for every new connection at the limit)
        # stalled every other connection. The same graceful close, without the wait: FIN now,
        # what still comes is read and dropped in this loop.
        with contextlib.suppress(OSError):  # a socket the thread closed already: _close_idle copes
            conn.sock.setblocking(False)
        self._close_idle(conn, time.monotonic())

    def _discard(self, conn: Any, _fileobj: Any = None) -> None:
        state = self.discarding.get(conn)
        if state is None:
            return
        try:
            while state.discard > 0:
                data = conn.sock.recv(READ_CHUNK)
                if not data:
                    break
                state.discard -= len(data)
        except (ssl.SSLWantReadError, ssl.SSLWantWriteError, BlockingIOError):
            return  # more to come: wait for it
        except (OSError, ValueError) as exc:
            log.debug("closing a connection while discarding an oversized body: %s", exc)
        self._end_discard(conn)

    def _end_discard(self, conn: Any) -> None:
        self.discarding.pop(conn, None)
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)
        self.nr_conns -= 1
        conn.close()

    def set_accept_enabled(self, enabled: bool) -> None:
        """gthread's switch, which it turns off at `worker_connections` open connections: a probe's
        new connection would then wait behind idle kept-alive ones. Here a running worker goes on
        accepting while room can be made (an idle kept-alive connection to close, and fewer than
        ROOM_BATCH closing), and each connection accepted over the limit closes the oldest idle
        one (accept). When a stopping worker turns accepting off, it first accepts what is queued
        in the backlog (each read and answered, with Connection: close), then closes the worker's
        copy of the listening sockets (see the module docstring, step 1)."""
        if self.alive:
            super().set_accept_enabled(enabled or self._room_possible())
            return
        if enabled:
            super().set_accept_enabled(enabled)
            return
        for listener in self.sockets:
            self._accept_backlog(listener)
        super().set_accept_enabled(False)
        for listener in self.sockets:
            with contextlib.suppress(OSError):
                listener.close()

    def wait_for_and_dispatch_events(self, timeout: float) -> None:
        """gthread's select and dispatch, with accepting switched back on first when room can be
        made again (gthread itself switches it on only when the count falls under the limit)."""
        if self.alive:
            self.set_accept_enabled(self.nr_conns < self.worker_connections)
        super().wait_for_and_dispatch_events(timeout)

    def accept(self, listener: Any) -> None:
        """Accept a new connection; one that takes the open connections (closing ones aside) over
        `worker_connections` closes the oldest idle kept-alive connection (_make_room), so a
        probe is accepted at once at the limit and the count comes back under it."""
        before = self.nr_conns
        super().accept(listener)
        if self.alive and self.nr_conns > before and self._open() > self.worker_connections:
            self._make_room()

    def _open(self) -> int:
        """Open connections that are not closing (a closing one is gone within CLOSE_DRAIN_SECONDS)."""
        return self.nr_conns - len(self.discarding)

    def _room_possible(self) -> bool:
        return bool(self.keepalived_conns) and len(self.discarding) < ROOM_BATCH

    def _make_room(self) -> bool:
        """Close the oldest idle kept-alive connection, gracefully (FIN, then what still comes is
        read and dropped); never one with a request in flight: a connection still being read, or
        answered, is not in keepalived_conns, and an idle one whose next request has started to
        arrive (not dispatched yet) is passed over. One whose client has closed it already is
        closed first (it makes the room). Whether one was closed."""
        for conn in list(itertools.islice(self.keepalived_conns, ROOM_BATCH)):
            state = _idle_state(conn.sock)
            if state == "busy":
                continue
            self.keepalived_conns.remove(conn)
            self.made_room += 1
            if state == "closed":  # by its client, not yet seen by the loop: nothing to drain
                with contextlib.suppress(KeyError, ValueError, OSError):
                    self.poller.unregister(conn.sock)
                self.nr_conns -= 1
                conn.close()
            else:
                self._close_idle(conn, time.monotonic())
            return True
        return False

    def _accept_backlog(self, listener: Any) -> None:
        with contextlib.suppress(OSError):
            listener.setblocking(False)
        for _ in range(self.worker_connections):
            before = self.nr_conns
            try:
                self.accept(listener)
            except OSError:
                return
            if self.nr_conns == before:  # EAGAIN: the backlog is empty
                return

    def _cap_keepalive(self, deadline: float) -> None:
        """Keep idle kept-alive connections SHUTDOWN_LINGER_SECONDS after the stop, not gunicorn's 2 s."""
        super()._cap_keepalive(time.monotonic() + SHUTDOWN_LINGER_SECONDS)

    def murder_keepalived(self, force: bool = False) -> None:
        """Close expired kept-alive connections; a stopping worker closes them gracefully (module
        docstring, step 3): FIN, then read and drop what still comes until the client closes."""
        if self.alive or force:
            super().murder_keepalived(force)
            return
        now = time.monotonic()
        while self.keepalived_conns and self.keepalived_conns[0].timeout <= now:
            self._close_idle(self.keepalived_conns.popleft(), now)

    def _close_idle(self, conn: Any, now: float) -> None:
        """Close a connection no thread holds (an idle kept-alive one, already out of
        keepalived_conns, or one cut off after its 408) gracefully: FIN, then read and drop what
        still comes for CLOSE_DRAIN_SECONDS, so the close is no reset."""
        with contextlib.suppress(KeyError, ValueError, OSError):
            self.poller.unregister(conn.sock)
        try:
            conn.sock.shutdown(socket.SHUT_WR)
        except OSError:
            self.nr_conns -= 1
            conn.close()
            return
        state = Reading(deadline=now + CLOSE_DRAIN_SECONDS, discard=1 << 62)
        self.discarding[conn] = state
        self.poller.register(conn.sock, selectors.EVENT_READ, partial(self._discard, conn))
        state.events = selectors.EVENT_READ

    def _watch(self, conn: Any, state: Reading, events: int) -> None:
        callback = partial(self._advance, conn)
        if state.events == 0:
            self.poller.register(conn.sock, events, callback)
        elif state.events != events:
            self.poller.modify(conn.sock, events, callback)
        state.events = events

    def _release(self, conn: Any) -> None:
        state = self.reading.pop(conn, None)
        if state is not None:
            self.in_flight -= state.held
            state.held = 0
        if state is not None and state.events:
            with contextlib.suppress(KeyError, ValueError, OSError):
                self.poller.unregister(conn.sock)

    def _drop(self, conn: Any) -> None:
        self._release(conn)
        self.nr_conns -= 1
        conn.close()

    def murder_pending(self) -> None:
        """Also close connections whose request did not complete in time (gthread's event loop
        calls this at least once a second)."""
        super().murder_pending()
        now = time.monotonic()
        for conn in [c for c, s in self.reading.items() if s.deadline <= now]:
            self.cut_off += 1
            log.debug("closed %s: no complete request within %gs", _peer(conn), self.request_timeout)
            self._time_out(conn)
            self._release(conn)
            # FIN after the 408, then what the client still sends is read and dropped: closed with
            # its bytes unread, the socket would answer them with a reset that can destroy the 408.
            self._close_idle(conn, now)
        for conn in [c for c, s in self.discarding.items() if s.deadline <= now]:
            self._end_discard(conn)

    def handle_error(self, req: Any, client: Any, addr: Any, exc: BaseException) -> None:
        """Answer a request gunicorn's parser refused (or one the app failed on) with the JSON
        `Status` the webhook port documents (guardhook.server.status), not gunicorn's HTML page;
        the connection closes after it. A broken TLS session gets no answer: it cannot carry one."""
        if isinstance(exc, ssl.SSLError):
            log.debug("closing a connection after a TLS error: %s", exc)
            return
        known = protocol_error(exc)
        if known is None:
            self.log.exception("Error handling request %s", getattr(req, "uri", "(no URI read)"))
            code, message = 500, "internal error while handling the request"
        else:
            code, message = known
            self.log.warning("Invalid request from ip=%s: %s", (addr or ("",))[0], message)
        try:
            util.write_nonblock(client, raw_answer(code, message))
        except Exception:  # the client may be gone: nothing left to tell it
            log.debug("could not send the %d answer", code)

    def _time_out(self, conn: Any) -> None:
        """Tell a client that sent part of a request why it is closed (408, RFC 9110 §15.5.9);
        one non-blocking attempt, since the client may not be reading either."""
        state = self.reading.get(conn)
        if state is None or not state.buffer or not conn.initialized:
            return
        with contextlib.suppress(OSError):
            conn.sock.send(TIMEOUT_ANSWER)


class Unauthenticated(Exception):
    """A review request on a connection without the client certificate the server requires."""


class OverBound(Exception):
    """A request's body would pass the server-wide bound on body bytes in flight."""


class PlainHTTP(Exception):
    """A new connection to the TLS port opened with a plain HTTP request line."""


def _idle_state(sock: Any) -> str:
    """What an idle kept-alive connection holds, looked at without taking anything: "closed" when
    its client has closed it (or it broke), "busy" when bytes have arrived (its next request
    started; in the socket, or decrypted already in its TLS object), else "idle"."""
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return "busy"
    try:  # the TCP socket under the TLS one: any TLS record counts as bytes that arrived
        first = socket.socket.recv(sock, 1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except BlockingIOError:
        return "idle"
    except OSError:
        return "closed"
    return "busy" if first else "closed"


def _peek(sock: socket.socket) -> bytes | None:
    """The first bytes waiting on a new (non-blocking, not yet TLS) connection, without taking
    them; None when none arrived yet, b"" at EOF or on an error (the handshake then fails as usual)."""
    try:
        return sock.recv(8, socket.MSG_PEEK)
    except BlockingIOError:
        return None
    except OSError:
        return b""


def _peer(conn: Any) -> str:
    client = conn.client
    if isinstance(client, tuple) and len(client) >= 2:
        return f"{client[0]}:{client[1]}"
    return str(client)


def worker_class(
    request_timeout: float, max_body: int, max_in_flight: int = ReadAheadWorker.max_in_flight
) -> type[ReadAheadWorker]:
    """A ReadAheadWorker subclass with these limits (gunicorn instantiates the class itself)."""
    limits = {"request_timeout": request_timeout, "max_body": max_body, "max_in_flight": max_in_flight}
    return type("ReadAheadWorker", (ReadAheadWorker,), {**limits, "__module__": __name__})
