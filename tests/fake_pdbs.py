"""A small in-process fake of the Kubernetes REST endpoints the PDB reconciler uses.

It serves, over plain HTTP on 127.0.0.1, namespaced collections under `/api/v1/...` and
`/apis/<group>/<version>/...`: list (namespaced and across namespaces, with `labelSelector`),
watch (`watch=true` from a resourceVersion: the events since, then new ones, for at most
WATCH_SECONDS), get, create (409 AlreadyExists), replace (409 Conflict on a stale
resourceVersion, 404 when missing) and delete (404 when missing). That covers
PodDisruptionBudgets, Pods, LeaderWorkerSets and Leases, so the real `kubernetes` client, the live
cluster view and leader election run against it unchanged. Every write through HTTP is logged in
`writes` as (method, namespace, resource, name).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from guardhook.selectors import matches, parse

WATCH_SECONDS = 1.0
ROUTE = re.compile(r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/([^/]+))?/([^/]+)(?:/([^/]+))?$")


class FakeApi:
    """The object store and its HTTP server; `objects[(resource, namespace, name)]` is the object."""

    def __init__(self) -> None:
        self.objects: dict[tuple[str, str, str], dict[str, Any]] = {}
        self.writes: list[tuple[str, str, str, str]] = []
        self.events: list[tuple[int, str, str, dict[str, Any]]] = []  # (version, type, resource, object)
        self.version = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def put(self, resource: str, obj: dict[str, Any]) -> None:
        """Store `obj` directly, as another client would (not logged in `writes`; watchers see it)."""
        with self.lock:
            self._store(resource, copy.deepcopy(obj))

    def remove(self, resource: str, namespace: str, name: str) -> None:
        """Delete an object directly, as another client would (watchers see it)."""
        with self.lock:
            self._drop(resource, namespace, name)

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        return self.objects.get((resource, namespace, name))

    def names(self, resource: str) -> list[str]:
        return sorted(name for (kind, _ns, name) in self.objects if kind == resource)

    def kubeconfig(self, folder: Path) -> Path:
        """Write a kubeconfig pointing at this fake; returns its path."""
        path = folder / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "fake", "cluster": {"server": self.url}}],
                    "users": [{"name": "tester", "user": {"token": "t"}}],
                    "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "tester"}}],
                    "current-context": "fake",
                }
            )
        )
        return path

    def _store(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.version += 1
        meta = obj.setdefault("metadata", {})
        meta.setdefault("uid", str(uuid.uuid4()))
        meta["resourceVersion"] = str(self.version)
        key = (resource, meta.get("namespace", ""), meta["name"])
        kind = "MODIFIED" if key in self.objects else "ADDED"
        self.objects[key] = obj
        self.events.append((self.version, kind, resource, copy.deepcopy(obj)))
        return obj

    def _drop(self, resource: str, namespace: str, name: str) -> bool:
        obj = self.objects.pop((resource, namespace, name), None)
        if obj is None:
            return False
        self.version += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self.version)
        self.events.append((self.version, "DELETED", resource, gone))
        return True

    def _since(self, resource: str, version: int) -> list[tuple[int, str, str, dict[str, Any]]]:
        with self.lock:
            return [e for e in self.events if e[0] > version and e[2] == resource]

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _status(self, code: int, reason: str) -> None:
                self._send(
                    code,
                    {
                        "kind": "Status",
                        "apiVersion": "v1",
                        "status": "Failure",
                        "code": code,
                        "reason": reason,
                    },
                )

            def _route(self) -> tuple[str, str, str | None, dict[str, list[str]]] | None:
                url = urlparse(self.path)
                match = ROUTE.match(url.path)
                if not match:
                    self._status(404, "NotFound")
                    return None
                namespace, resource, name = match.groups()
                return resource, namespace or "", name, parse_qs(url.query)

            def _body(self) -> dict[str, Any]:
                length = int(self.headers.get("Content-Length") or 0)
                return json.loads(self.rfile.read(length) or b"{}")

            def do_GET(self) -> None:
                route = self._route()
                if route is None:
                    return
                resource, namespace, name, query = route
                if query.get("watch", [""])[0] in ("true", "1"):
                    self._watch(resource, int(query.get("resourceVersion", ["0"])[0] or 0))
                    return
                with fake.lock:
                    if name is not None:
                        obj = fake.objects.get((resource, namespace, name))
                        self._send(200, obj) if obj else self._status(404, "NotFound")
                        return
                    selector = parse(query.get("labelSelector", [""])[0])
                    items = [
                        obj
                        for (kind, ns, _), obj in sorted(fake.objects.items())
                        if kind == resource
                        and (not namespace or ns == namespace)
                        and matches(selector, obj["metadata"].get("labels") or {})
                    ]
                    listed = {"metadata": {"resourceVersion": str(fake.version)}, "items": items}
                self._send(200, {"apiVersion": "v1", "kind": "List", **listed})

            def _watch(self, resource: str, version: int) -> None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()  # no length: the stream ends when the connection closes
                deadline = time.monotonic() + WATCH_SECONDS
                while time.monotonic() < deadline:
                    for number, kind, _, obj in fake._since(resource, version):
                        self.wfile.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
                        self.wfile.flush()
                        version = number
                    time.sleep(0.02)
                self.close_connection = True

            def do_POST(self) -> None:
                route = self._route()
                if route is None:
                    return
                resource, namespace, _, _ = route
                obj = self._body()
                obj.setdefault("metadata", {})["namespace"] = namespace
                with fake.lock:
                    key = (resource, namespace, obj["metadata"].get("name", ""))
                    if key in fake.objects:
                        self._status(409, "AlreadyExists")
                        return
                    fake.writes.append(("POST", *key[1:2], resource, key[2]))
                    self._send(201, fake._store(resource, obj))

            def do_PUT(self) -> None:
                route = self._route()
                if route is None or route[2] is None:
                    return
                resource, namespace, name, _ = route
                obj = self._body()
                with fake.lock:
                    current = fake.objects.get((resource, namespace, name))
                    if current is None:
                        self._status(404, "NotFound")
                        return
                    sent = obj.get("metadata", {}).get("resourceVersion")
                    if sent and sent != current["metadata"]["resourceVersion"]:
                        self._status(409, "Conflict")
                        return
                    obj["metadata"]["uid"] = current["metadata"]["uid"]
                    obj["metadata"]["namespace"] = namespace
                    fake.writes.append(("PUT", namespace, resource, name))
                    self._send(200, fake._store(resource, obj))

            def do_DELETE(self) -> None:
                route = self._route()
                if route is None or route[2] is None:
                    return
                resource, namespace, name, _ = route
                with fake.lock:
                    if not fake._drop(resource, namespace, name):
                        self._status(404, "NotFound")
                        return
                    fake.writes.append(("DELETE", namespace, resource, name))
                self._send(200, {"kind": "Status", "apiVersion": "v1", "status": "Success"})

        return Handler


@contextmanager
def running_fake() -> Iterator[FakeApi]:
    """A FakeApi serving on a background thread for the duration of the block."""
    fake = FakeApi()
    thread = threading.Thread(target=fake.server.serve_forever, daemon=True)
    thread.start()
    try:
        yield fake
    finally:
        fake.server.shutdown()
        fake.server.server_close()
