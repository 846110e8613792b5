"""Server TLS sockets whose every blocking read and write is bounded by a timeout.

The worker (guardhook.server.readahead) reads each request whole in its event loop before a pool
thread sees it, so the threads only block on a client while writing the answer (and on a body
gunicorn drains). Each such operation gets a timeout here: a client that stops reading its answer
is closed, freeing the thread, rather than holding it for good.
"""

from __future__ import annotations

import errno
import ssl
from typing import Any

IO_TIMEOUT_SECONDS = 5.0
"""Longest wait for one read or write on a connection. The API server sends a review in one go (and
its own webhook timeout is 10 s by default), so a 5 s gap means a stalled or hostile client."""


class StalledClient(TimeoutError):
    """A read or write on a client connection timed out. It carries errno ECONNRESET, so gunicorn
    closes the connection quietly (logged at debug) as for a client that went away, while code
    that bounds a read by a timeout (gunicorn's body drain) still sees a TimeoutError."""

    def __init__(self, operation: str) -> None:
        super().__init__(
            errno.ECONNRESET, f"client stalled: no {operation} progress in {IO_TIMEOUT_SECONDS:g} s"
        )


class TimedSSLSocket(ssl.SSLSocket):
    """An SSLSocket where blocking mode means "blocking with IO_TIMEOUT_SECONDS"; a read or write
    that times out raises StalledClient, and a handshake that times out an SSL EOF, which gunicorn
    treats as a client that went away (closed quietly, logged at debug)."""

    io_timeout: float = IO_TIMEOUT_SECONDS

    def setblocking(self, flag: bool) -> None:
        if flag:
            super().settimeout(self.io_timeout)
        else:
            super().setblocking(False)

    def settimeout(self, value: float | None) -> None:
        super().settimeout(self.io_timeout if value is None else value)

    def do_handshake(self, *args: Any, **kwargs: Any) -> None:
        try:
            super().do_handshake(*args, **kwargs)
        except TimeoutError:
            raise ssl.SSLEOFError(ssl.SSL_ERROR_EOF, "TLS handshake timed out") from None

    def recv(self, buflen: int = 1024, flags: int = 0) -> bytes:
        try:
            return super().recv(buflen, flags)
        except StalledClient:
            raise
        except TimeoutError:
            raise StalledClient("read") from None

    def recv_into(self, buffer: Any, nbytes: int | None = None, flags: int = 0) -> int:
        try:
            return super().recv_into(buffer, nbytes, flags)
        except StalledClient:
            raise
        except TimeoutError:
            raise StalledClient("read") from None


def bound_io(context: ssl.SSLContext, timeout: float = IO_TIMEOUT_SECONDS) -> ssl.SSLContext:
    """Make `context` wrap server sockets as TimedSSLSocket with `timeout` seconds per operation
    (the `sslsocket_class` attribute may be set per context, per the `ssl` docs). Returns it."""
    context.sslsocket_class = type("TimedSSLSocket", (TimedSSLSocket,), {"io_timeout": timeout})
    return context
