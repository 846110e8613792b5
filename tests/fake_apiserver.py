"""An in-process fake of the kube-apiserver's list/watch API on 127.0.0.1, driven by the test.

It serves a single-pod GET, cluster-wide list (with `limit`/`continue`, capped at `max_page` items per page so
pagination is exercised) and streaming watch (chunked JSON lines, `resourceVersion`,
`allowWatchBookmarks`, `timeoutSeconds`) for the six kinds the cluster view holds. The test adds,
modifies and deletes objects, sends bookmarks, compacts history (a watch from an older
resourceVersion then gets an ERROR event with 410), and can take the server away (`stop()`:
listening socket and open watches closed) and bring it back on the same port (`start()`).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
from collections.abc import Iterable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

PATHS = {
    "/api/v1/nodes": "nodes",
    "/api/v1/pods": "pods",
    "/api/v1/services": "services",
    "/apis/apps/v1/statefulsets": "statefulsets",
    "/apis/policy/v1/poddisruptionbudgets": "poddisruptionbudgets",
    "/apis/leaderworkerset.x-k8s.io/v1/leaderworkersets": "leaderworkersets",
}
RESOURCE_OF_KIND = {
    "Node": "nodes",
    "Pod": "pods",
    "Service": "services",
    "StatefulSet": "statefulsets",
    "PodDisruptionBudget": "poddisruptionbudgets",
    "LeaderWorkerSet": "leaderworkersets",
}
Key = tuple[str, str]


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


class FakeApiServer:
    """The fake server. `serve_lws=False` answers 404 for LeaderWorkerSets (CRD not installed)."""

    def __init__(self, serve_lws: bool = True, max_page: int = 5) -> None:
        self.serve_lws = serve_lws
        self.get_delay = 0.0  # seconds a single-pod GET waits before answering
        self.max_page = max_page
        self.port = 0
        self.rv = 100
        self.compacted = 0
        self.objects: dict[str, dict[Key, dict[str, Any]]] = {kind: {} for kind in PATHS.values()}
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (resourceVersion, resource, event)
        self.requests: list[str] = []
        self.cond = threading.Condition()
        self._httpd: ThreadingHTTPServer | None = None
        self._generation = 0
        self._compactions = 0

    # ---- lifecycle -------------------------------------------------------------------------

    def start(self) -> FakeApiServer:
        """Listen (on the previous port when restarting) and serve in a daemon thread."""
        handler = type("Handler", (_Handler,), {"fake": self})
        httpd = _QuietServer(("127.0.0.1", self.port), handler)
        httpd.daemon_threads = True
        self.port = httpd.server_address[1]
        with self.cond:
            self._generation += 1
            self._httpd = httpd
        threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True).start()
        return self

    def stop(self) -> None:
        """Go away: stop listening and drop every open watch without a clean end."""
        with self.cond:
            httpd, self._httpd = self._httpd, None
            self._generation += 1
            self.cond.notify_all()
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def write_kubeconfig(self, path: Path) -> Path:
        """A kubeconfig pointing at this server (token auth, plain HTTP)."""
        path.write_text(kubeconfig_text(self.url))
        return path

    # ---- test-driven changes ---------------------------------------------------------------

    def load(self, objects: Iterable[dict[str, Any]]) -> None:
        """Add objects (any of the six kinds; others are ignored) as ADDED events."""
        for obj in objects:
            resource = RESOURCE_OF_KIND.get(str(obj.get("kind")))
            if resource is not None:
                self.put(resource, obj)

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object; returns the stored copy with its new resourceVersion."""
        obj = copy.deepcopy(obj)
        with self.cond:
            self.rv += 1
            meta = obj.setdefault("metadata", {})
            meta["resourceVersion"] = str(self.rv)
            meta.setdefault("uid", f"uid-{resource}-{meta.get('name')}")
            key = key_of(obj)
            kind = "MODIFIED" if key in self.objects[resource] else "ADDED"
            self.objects[resource][key] = obj
            self.events.append((self.rv, resource, {"type": kind, "object": obj}))
            self.cond.notify_all()
        return obj

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any]:
        with self.cond:
            return copy.deepcopy(self.objects[resource][(namespace, name)])

    def delete(self, resource: str, namespace: str, name: str) -> None:
        with self.cond:
            obj = self.objects[resource].pop((namespace, name))
            self.rv += 1
            obj["metadata"]["resourceVersion"] = str(self.rv)
            self.events.append((self.rv, resource, {"type": "DELETED", "object": obj}))
            self.cond.notify_all()

    def bookmark(self, resource: str) -> None:
        """Send a BOOKMARK at the current resourceVersion to watchers of `resource`."""
        with self.cond:
            self.rv += 1
            event = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}
            self.events.append((self.rv, resource, event))
            self.cond.notify_all()

    def compact(self) -> None:
        """Forget the event history and move the resourceVersion on: every watch resumed from
        before this point gets 410 Gone, and open watches are ended so they reconnect."""
        with self.cond:
            self.rv += 1
            self.compacted = self.rv
            self.events.clear()
            self._compactions += 1
            self.cond.notify_all()

    def list_requests(self, resource: str) -> list[str]:
        """The query strings of list (not watch) requests for `resource` seen so far."""
        path = next(p for p, r in PATHS.items() if r == resource)
        split = (r.split("?", 1) for r in self.requests if "?" in r)
        return [query for p, query in split if p == path and "watch" not in query]

    def list_page(self, resource: str, token: str, limit: int) -> dict[str, Any]:
        with self.cond:
            if token:
                start, list_rv = (int(part) for part in token.split(":"))
            else:
                start, list_rv = 0, self.rv
            items = sorted(self.objects[resource].items())
            size = min(limit or len(items), self.max_page) or len(items)
            page = [obj for _, obj in items[start : start + size]]
            more = start + size < len(items)
            meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
            if more:
                meta["continue"] = f"{start + size}:{list_rv}"
            return {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": copy.deepcopy(page)}


def kubeconfig_text(server: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: fake\n  cluster:\n    server: {server}\n"
        "users:\n- name: fake\n  user:\n    token: fake-token\n"
        "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
        "current-context: fake\n"
    )


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-stream is what outage tests do


class _Handler(BaseHTTPRequestHandler):
    fake: FakeApiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        fake = self.fake
        fake.requests.append(self.path)
        url = urlparse(self.path)
        query = {k: v[-1] for k, v in parse_qs(url.query).items()}
        single = re.fullmatch(r"/api/v1/namespaces/([^/]+)/pods/([^/]+)", url.path)
        if single:
            self._get_pod(*single.groups())
            return
        resource = PATHS.get(url.path)
        if resource is None or (resource == "leaderworkersets" and not fake.serve_lws):
            self._json(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})
            return
        if query.get("watch") in ("true", "1", "True"):
            since = int(query.get("resourceVersion") or 0)
            self._watch(resource, since, int(query.get("timeoutSeconds") or 60))
            return
        self._json(200, fake.list_page(resource, query.get("continue", ""), int(query.get("limit") or 0)))

    def _get_pod(self, namespace: str, name: str) -> None:
        time.sleep(self.fake.get_delay)
        with self.fake.cond:
            obj = self.fake.objects["pods"].get((namespace, name))
        if obj is None:
            self._json(404, {"kind": "Status", "status": "Failure", "reason": "NotFound", "code": 404})
        else:
            self._json(200, obj)

    def _json(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(data)
        self.close_connection = True

    def _watch(self, resource: str, since: int, timeout: int) -> None:
        fake = self.fake
        self.close_connection = True
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Connection", "close")
        self.end_headers()
        with fake.cond:
            generation, compactions = fake._generation, fake._compactions
            if since < fake.compacted:
                gone = {"kind": "Status", "reason": "Expired", "code": 410, "message": f"too old: {since}"}
                self._chunk({"type": "ERROR", "object": gone})
                self._end()
                return
        deadline = time.monotonic() + timeout
        cursor = since
        while True:
            with fake.cond:
                if fake._generation != generation:
                    return  # gone away: drop the stream without a clean end
                if fake._compactions != compactions:
                    break  # history compacted: end cleanly, the client reconnects and gets 410
                pending = [(rv, e) for rv, r, e in fake.events if r == resource and rv > cursor]
                if not pending:
                    if time.monotonic() >= deadline:
                        break
                    fake.cond.wait(0.1)
                    continue
            for rv, event in pending:
                self._chunk(event)
                cursor = rv
        self._end()

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event).encode() + b"\n"
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _end(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
