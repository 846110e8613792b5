"""Plain-HTTP side ports of the gunicorn worker (the process that holds the runtime), each a small
threaded HTTP server of its own, beside the webhook's HTTPS port:

- `/metrics` on a port of its own (`serve --metrics-port`), as Gatekeeper (8888) and Kyverno (8000)
  serve theirs: a NetworkPolicy can then let Prometheus reach the metrics and nothing else, and
  only the API server reach the webhook port (manifests/components/network-policy);
- `/healthz` and `/readyz` on a port of their own (`serve --health-port`), as controller-runtime's
  managers serve their probes (`--health-probe-bind-address`, `:8081`): the kubelet's probes then
  never queue behind the webhook port's connections — its TLS handshakes, kept-alive API server
  connections, slow clients and `--max-connections` — and always meet a thread of their own
  (bench/probes.py: the connection ceiling).

Each connection gets its own thread and a 5 s socket timeout, so a slow client never touches the
webhook's request threads. Only GET of the port's own paths is served; every other path is 404,
and every other method 405 with `Allow: GET` (RFC 9110 §15.5.6).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from guardhook.server.app import Runtime, health_answer, ready_answer
from guardhook.server.metrics import CONTENT_TYPE

SOCKET_TIMEOUT_SECONDS = 5

Answer = tuple[int, str, bytes]
"""(HTTP status, Content-Type, body)."""


def serve_metrics(runtime: Runtime, host: str, port: int) -> ThreadingHTTPServer:
    """Start serving `runtime`'s metrics at http://host:port/metrics from a daemon thread; returns
    the server (`shutdown()` stops it). Raises OSError when the port cannot be bound."""

    def metrics() -> Answer:
        runtime.refresh_metrics()
        return 200, CONTENT_TYPE, runtime.metrics.render()

    return serve_plain(host, port, {"/metrics": metrics}, "guardhook-metrics")


def serve_health(runtime: Runtime, host: str, port: int) -> ThreadingHTTPServer:
    """Start serving `runtime`'s probes at http://host:port/healthz and /readyz (the same answers
    as on the webhook port) from a daemon thread; returns the server. Raises OSError when the port
    cannot be bound."""
    return serve_plain(
        host,
        port,
        {"/healthz": health_answer, "/readyz": lambda: ready_answer(runtime)},
        "guardhook-health",
    )


def serve_plain(
    host: str, port: int, routes: Mapping[str, Callable[[], Answer]], name: str
) -> ThreadingHTTPServer:
    """Serve GET of each path in `routes` (its callable gives the answer) over plain HTTP at
    host:port, from a daemon thread named `name`, a thread per connection; returns the server.
    Raises OSError when the port cannot be bound."""
    served = ", ".join(routes)

    class SidePortHandler(BaseHTTPRequestHandler):
        timeout = SOCKET_TIMEOUT_SECONDS
        # Errors (404 for another path, 501 for another method) as one line of text, not HTML.
        error_content_type = "text/plain; charset=utf-8"
        error_message_format = "%(code)d %(message)s\n"

        def do_GET(self) -> None:  # noqa: N802 (the http.server naming)
            route = routes.get(self.path.split("?", 1)[0])
            if route is None:
                self.send_error(404, f"only {served} is served on this port")
                return
            status, content_type, body = route()
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def refuse_method(self) -> None:
            length = self.headers.get("Content-Length", "")
            if length.isdigit() and int(length) <= 65536:  # read it: a close with it unread is a reset
                self.rfile.read(int(length))
            self.send_response(405)
            body = f"405 {self.command} is not allowed: only GET {served} is served on this port\n".encode()
            self.send_header("Allow", "GET")
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = refuse_method  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # scrapes and probes are not worth a log line each

    server = ThreadingHTTPServer((host, port), SidePortHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name=name, daemon=True).start()
    return server
