"""`/metrics` on a port of its own (`serve --metrics-port`), plain HTTP, as Gatekeeper (8888) and
Kyverno (8000) serve theirs: a NetworkPolicy can then let Prometheus reach the metrics and nothing
else, and only the API server reach the webhook port (manifests/components/network-policy).

A small threaded HTTP server in the gunicorn worker (the process that holds the metrics); each
connection gets its own thread and a 5 s socket timeout, so a slow scraper never touches the
webhook's request threads. Only GET /metrics is served; every other path is 404, and every other
method 405 with `Allow: GET` (RFC 9110 §15.5.6).
"""

from __future__ import annotations

import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from guardhook.server.app import Runtime
from guardhook.server.metrics import CONTENT_TYPE

SOCKET_TIMEOUT_SECONDS = 5


def serve_metrics(runtime: Runtime, host: str, port: int) -> ThreadingHTTPServer:
    """Start serving `runtime`'s metrics at http://host:port/metrics from a daemon thread; returns
    the server (`shutdown()` stops it). Raises OSError when the port cannot be bound."""

    class MetricsHandler(BaseHTTPRequestHandler):
        timeout = SOCKET_TIMEOUT_SECONDS
        # Errors (404 for another path, 501 for another method) as one line of text, not HTML.
        error_content_type = "text/plain; charset=utf-8"
        error_message_format = "%(code)d %(message)s\n"

        def do_GET(self) -> None:  # noqa: N802 (the http.server naming)
            if self.path.split("?", 1)[0] != "/metrics":
                self.send_error(404, "only /metrics is served on this port")
                return
            runtime.refresh_metrics()
            body = runtime.metrics.render()
            self.send_response(200)
            self.send_header("Content-Type", CONTENT_TYPE)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def refuse_method(self) -> None:
            length = self.headers.get("Content-Length", "")
            if length.isdigit() and int(length) <= 65536:  # read it: a close with it unread is a reset
                self.rfile.read(int(length))
            self.send_response(405)
            body = f"405 {self.command} is not allowed: only GET /metrics is served on this port\n".encode()
            self.send_header("Allow", "GET")
            self.send_header("Content-Type", "text/plain; charset=utf-8")
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)
            self.close_connection = True

        do_POST = do_PUT = do_DELETE = do_PATCH = do_OPTIONS = refuse_method  # noqa: N815

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            pass  # scrapes are not worth a log line each

    server = ThreadingHTTPServer((host, port), MetricsHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="guardhook-metrics", daemon=True).start()
    return server
