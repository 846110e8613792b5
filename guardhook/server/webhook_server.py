"""Serve the webhook app over HTTPS under gunicorn (a gthread worker that reads requests whole in
its event loop, guardhook.server.readahead; one process).

Why these settings: the API server keeps connections alive for ~90 s, which the sync worker would
drop, so we use gthread with `keepalive` above that; one worker process holds one cluster view
and one eviction ledger (several processes would each hold their own); the app is loaded in the
worker after fork so watches and their threads live there, not in the master. gunicorn sets
TCP_NODELAY on accepted sockets, so small responses do not wait on Nagle's algorithm.
"""

from __future__ import annotations

import gc
import logging
import ssl
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from gunicorn.app.base import BaseApplication
from gunicorn.glogging import Logger as GunicornLogger

from guardhook.admission.codec import MAX_BODY_BYTES
from guardhook.admission.decisionlog import write_lines_with
from guardhook.server.app import Runtime, create_app
from guardhook.server.asynclog import direct_line, write_in_background
from guardhook.server.bodybudget import NO_LIMIT_DEFAULT
from guardhook.server.certs import CertPaths, RotatingServerContext
from guardhook.server.logformat import formatter
from guardhook.server.readahead import READ_TIMEOUT_SECONDS, worker_class

log = logging.getLogger(__name__)

KEEPALIVE_SECONDS = 120
REQUEST_TIMEOUT_SECONDS = 30
GRACEFUL_TIMEOUT_SECONDS = 25
WORKER_CONNECTIONS = 1000
"""gunicorn's default, set explicitly: the API servers' kept-alive connections (one or a few per
API server) and the kubelet's probes stay far below it."""


@dataclass(frozen=True)
class ServeOptions:
    """Listening address, threads, and the certificate folder to serve with."""

    host: str
    port: int
    threads: int
    certs: CertPaths
    request_timeout: float = READ_TIMEOUT_SECONDS
    """Seconds from a connection's first byte to a complete request (headers and body)."""
    max_connections: int = WORKER_CONNECTIONS
    """gunicorn's `worker_connections`: open connections at once; at the limit the oldest idle
    kept-alive ones are closed to admit new ones (guardhook.server.readahead)."""
    max_body_in_flight: int = NO_LIMIT_DEFAULT
    """Request bytes held at once by requests being read or answered (guardhook.server.bodybudget)."""


class SameFormatLogger(GunicornLogger):
    """gunicorn's logger, writing its lines in guardhook's format (`--log-format`)."""

    def setup(self, cfg: Any) -> None:
        super().setup(cfg)
        for handler in (*self.error_log.handlers, *self.access_log.handlers):
            handler.setFormatter(formatter())


class WebhookServer(BaseApplication):
    """A gunicorn application whose worker builds its Runtime with `make_runtime` after fork."""

    def __init__(self, options: ServeOptions, make_runtime: Callable[[], Runtime]) -> None:
        self.options = options
        self.make_runtime = make_runtime
        # Loaded here, in the master: every worker it forks (at start, and after SIGHUP) starts from
        # the last pair that loaded, and keeps it when the files on disk no longer load.
        self._tls: RotatingServerContext | None = RotatingServerContext(options.certs)
        super().__init__()

    def load_config(self) -> None:
        host = f"[{self.options.host}]" if ":" in self.options.host else self.options.host
        settings: dict[str, Any] = {
            "bind": f"{host}:{self.options.port}",
            "workers": 1,
            "worker_class": worker_class(
                self.options.request_timeout, MAX_BODY_BYTES, self.options.max_body_in_flight
            ),
            "threads": self.options.threads,
            "worker_connections": self.options.max_connections,
            "keepalive": KEEPALIVE_SECONDS,
            "timeout": REQUEST_TIMEOUT_SECONDS,
            "graceful_timeout": GRACEFUL_TIMEOUT_SECONDS,
            "certfile": str(self.options.certs.cert),
            "keyfile": str(self.options.certs.key),
            "ssl_context": self._ssl_context,
            "accesslog": None,
            "errorlog": "-",
            "loglevel": logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower(),
            "logger_class": SameFormatLogger,
            "preload_app": False,
            "proc_name": "guardhook",
            "control_socket_disable": True,
        }
        for key, value in settings.items():
            self.cfg.set(key, value)

    @property
    def tls(self) -> RotatingServerContext | None:
        """The serving certificate's context."""
        return self._tls

    def reload(self) -> None:
        """SIGHUP in the master: reload the configuration, and look at the certificate files once,
        so that files that do not load are logged and counted here (the new worker inherits the
        count) and the new worker serves the last pair that loaded."""
        super().reload()
        if self._tls is not None:
            self._tls.context()

    def _ssl_context(self, _conf: Any, _default_factory: Callable[[], ssl.SSLContext]) -> ssl.SSLContext:
        # gunicorn asks for a context per connection: hand out the cached one, reloaded when the
        # certificate files change, so rotation needs no restart and in-flight requests keep theirs.
        if self._tls is None:
            self._tls = RotatingServerContext(self.options.certs)
        return self._tls.context()

    def load(self) -> Callable[..., Any]:
        if write_in_background() is not None:  # in the worker, after fork: the writer thread lives here
            write_lines_with(direct_line)  # decision lines go to it without a LogRecord
        runtime = self.make_runtime()
        app = create_app(runtime)
        freeze_heap_when_ready(runtime)
        return app


def freeze_heap_when_ready(runtime: Runtime, poll_seconds: float = 0.5) -> None:
    """Move what start-up built (modules, the app, the cluster view once it has synced) out of the
    cyclic garbage collector's reach with `gc.freeze`. It lives as long as the process, and each
    full collection would otherwise walk all of it with the GIL held: ~25 ms for the sample fleet,
    far more for a large cluster, a latency spike for every request in flight (seen at p99 in
    bench/load.py). A static view is synced already; a live one is frozen after its first sync,
    from a daemon thread."""
    gc.freeze()
    if runtime.ready:
        return

    def wait_then_freeze() -> None:
        while not runtime.ready:
            time.sleep(poll_seconds)
        gc.freeze()

    threading.Thread(target=wait_then_freeze, name="gc-freeze", daemon=True).start()
