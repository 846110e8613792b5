"""A small in-process double of the API server's Lease endpoints (coordination.k8s.io/v1) that
enforces optimistic concurrency like the real one: a replace whose `metadata.resourceVersion` is
not the stored one gets 409 Conflict, a create of an existing Lease 409 AlreadyExists.

Serves plain HTTP on 127.0.0.1 only; every write bumps one global resourceVersion counter.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from kubernetes import client

PATH = re.compile(r"^/apis/coordination\.k8s\.io/v1/namespaces/([^/]+)/leases(?:/([^/?]+))?(?:\?.*)?$")


class LeaseStore:
    """The stored Leases by (namespace, name), and counts of what happened, for assertions."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.leases: dict[tuple[str, str], dict[str, Any]] = {}
        self.version = 0
        self.conflicts = 0
        self.writes = 0
        self.fail_with: int | None = None  # answer every request with this status when set

    def get(self, namespace: str, name: str) -> dict[str, Any] | None:
        with self.lock:
            found = self.leases.get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def create(self, namespace: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = str(body.get("metadata", {}).get("name", ""))
        with self.lock:
            if (namespace, name) in self.leases:
                self.conflicts += 1
                return 409, _status(409, "AlreadyExists", f'leases "{name}" already exists')
            return 201, self._store(namespace, name, body)

    def replace(self, namespace: str, name: str, body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        with self.lock:
            current = self.leases.get((namespace, name))
            if current is None:
                return 404, _status(404, "NotFound", f'leases "{name}" not found')
            sent = body.get("metadata", {}).get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                self.conflicts += 1
                message = f'Operation cannot be fulfilled on leases "{name}": the object has been modified'
                return 409, _status(409, "Conflict", message)
            return 200, self._store(namespace, name, body, current["metadata"]["uid"])

    def _store(self, namespace: str, name: str, body: dict[str, Any], uid: str = "") -> dict[str, Any]:
        self.version += 1
        self.writes += 1
        stored = copy.deepcopy(body)
        meta = stored.setdefault("metadata", {})
        meta.update(namespace=namespace, resourceVersion=str(self.version), uid=uid or f"uid-{self.version}")
        self.leases[(namespace, name)] = stored
        return copy.deepcopy(stored)


def _status(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": code,
        "reason": reason,
        "message": message,
    }


def _handler(store: LeaseStore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: Any) -> None:  # keep test output quiet
            pass

        def _send(self, code: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _route(self) -> tuple[str, str | None] | None:
            if store.fail_with is not None:
                self._send(store.fail_with, _status(store.fail_with, "InternalError", "injected failure"))
                return None
            match = PATH.match(self.path)
            if not match:
                self._send(404, _status(404, "NotFound", f"no route {self.path}"))
                return None
            return match.group(1), match.group(2)

        def _body(self) -> dict[str, Any]:
            length = int(self.headers.get("Content-Length") or 0)
            return json.loads(self.rfile.read(length) or b"{}")

        def do_GET(self) -> None:
            route = self._route()
            if route is None:
                return
            found = store.get(route[0], route[1] or "")
            if found is None:
                self._send(404, _status(404, "NotFound", f'leases "{route[1]}" not found'))
            else:
                self._send(200, found)

        def do_POST(self) -> None:
            route = self._route()
            if route is not None:
                self._send(*store.create(route[0], self._body()))

        def do_PUT(self) -> None:
            route = self._route()
            if route is not None:
                self._send(*store.replace(route[0], route[1] or "", self._body()))

    return Handler


@contextmanager
def fake_lease_server() -> Iterator[tuple[LeaseStore, str]]:
    """Run the double on a free 127.0.0.1 port; yields (store, base URL). Stops on exit."""
    store = LeaseStore()
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(store))
    httpd.daemon_threads = True
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield store, f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join(timeout=5)


def api_client_for(url: str) -> client.ApiClient:
    """A kubernetes ApiClient talking to the double at `url` (each replica gets its own)."""
    configuration = client.Configuration()
    configuration.host = url
    return client.ApiClient(configuration)
