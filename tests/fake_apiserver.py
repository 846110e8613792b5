"""An in-process fake of the kube-apiserver's REST API on 127.0.0.1, driven by the test.

It serves any resource generically, core (`/api/v1/...`) and group (`/apis/<group>/<version>/...`),
namespaced and cluster-scoped, keyed by the resource's plural name:

- list (namespaced or across namespaces, `labelSelector`, `limit`/`continue` capped at `max_page`
  items per page so pagination is exercised); items carry no kind/apiVersion, as the API server
  sends them;
- watch (`watch=true`: chunked JSON lines from `resourceVersion` on, for `timeoutSeconds`; a watch
  from before a `compact()` gets an ERROR event with 410 Gone);
- get, create (POST; 409 AlreadyExists for an existing name), replace (PUT; 409 Conflict when
  `metadata.resourceVersion` is not the stored one, 404 when missing) and delete (404 when missing);
- PATCH of an object as an RFC 6902 JSONPatch (`application/json-patch+json`; 422 when an
  operation, e.g. a `test`, does not apply);
- PATCH of the `status` subresource as a strategic merge patch (or a JSON merge patch): only
  `status` changes; lists of `conditions` merge by `type` (PodStatus.conditions' patchMergeKey),
  other fields as a merge patch; `metadata.uid` / `metadata.resourceVersion` in the patch are
  preconditions (409 Conflict when they differ from the stored object, as the API server does).

One resourceVersion counter covers every write. The test adds, changes and deletes objects directly
(`put`, `delete`: watchers see them, `writes` does not), sends bookmarks, answers every request
with an error (`fail_with`), slows single GETs (`get_delay`), refuses resources or whole API
versions (`unserved`: "leaderworkersets" or "resource.k8s.io/v1" answer 404, as for a CRD or an API
version the server does not serve), forbids resources (`forbidden`: 403, as RBAC does), keeps
connections open after each answer and each watch's end as a real API server does (`keep_alive`:
by default every answer closes its connection, so no client ever reuses one), and can
take the server away (`stop()`: listening socket and
open watches closed) and bring it back on the same port (`start()`). What happened is recorded for
assertions: `requests` ("METHOD /path?query"), the client port of each (`peers`: which
connection it came on), `writes` through HTTP (method, namespace, resource,
name) and `conflicts` (409 answers).
"""

from __future__ import annotations

import copy
import json
import re
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import jsonpatch
from kubernetes import client

from guardhook.cluster.selectors import matches, parse

ROUTE = re.compile(
    r"^/(?:api/v1|apis/[^/]+/[^/]+)(?:/namespaces/([^/]+))?/([^/]+)(?:/([^/]+))?(?:/(status))?$"
)
Key = tuple[str, str]  # (namespace, name); namespace "" for cluster-scoped objects


def key_of(obj: dict[str, Any]) -> Key:
    meta = obj.get("metadata") or {}
    return (str(meta.get("namespace") or ""), str(meta.get("name") or ""))


def plural_of(kind: str) -> str:
    """The resource name of a kind, by the API's regular pluralisation (Pod -> pods, Policy -> policies)."""
    lower = kind.lower()
    return lower[:-1] + "ies" if lower.endswith("y") else lower + "s"


def status(code: int, reason: str, message: str = "") -> dict[str, Any]:
    """A `Status` failure body as the API server sends it."""
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message or reason,
        "reason": reason,
        "code": code,
    }


STRATEGIC_MERGE = "application/strategic-merge-patch+json"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"


def merge_status(current: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """`current` status with `patch` merged in: `conditions` merge by `type` (a patched condition
    replaces the fields it names), nested maps merge, other values replace, None deletes."""
    merged = copy.deepcopy(current)
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        elif key == "conditions" and isinstance(value, list):
            by_type = {c.get("type"): c for c in merged.get("conditions") or []}
            order = [c.get("type") for c in merged.get("conditions") or []]
            for condition in value:
                kind = condition.get("type")
                if kind not in by_type:
                    order.append(kind)
                    by_type[kind] = {}
                by_type[kind] = merge_status(by_type[kind], condition)
            merged["conditions"] = [by_type[kind] for kind in order]
        elif isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = merge_status(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def kubeconfig_text(server: str) -> str:
    """A kubeconfig for `server` (token auth, plain HTTP)."""
    return (
        "apiVersion: v1\nkind: Config\n"
        f"clusters:\n- name: fake\n  cluster:\n    server: {server}\n"
        "users:\n- name: fake\n  user:\n    token: fake-token\n"
        "contexts:\n- name: fake\n  context:\n    cluster: fake\n    user: fake\n"
        "current-context: fake\n"
    )


class FakeApiServer:
    """The object store and its HTTP server. `objects[resource][(namespace, name)]` is the object."""

    def __init__(
        self,
        unserved: Iterable[str] = (),
        max_page: int = 5,
        forbidden: Iterable[str] = (),
        keep_alive: bool = False,
    ) -> None:
        self.unserved = set(unserved)
        self.keep_alive = keep_alive
        self.forbidden = set(forbidden)
        self.max_page = max_page
        self.get_delay = 0.0  # seconds a single-object GET waits before answering
        self.fail_with: int | None = None  # answer every request with this status when set
        self.port = 0
        self.rv = 0
        self.compacted = 0
        self.objects: defaultdict[str, dict[Key, dict[str, Any]]] = defaultdict(dict)
        self.events: list[tuple[int, str, dict[str, Any]]] = []  # (resourceVersion, resource, event)
        self.requests: list[str] = []
        self.peers: list[int] = []  # the client port each request came from (its connection)
        self.writes: list[tuple[str, str, str, str]] = []
        self.conflicts = 0
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
        """A kubeconfig pointing at this server (token auth, plain HTTP); returns `path`."""
        path.write_text(kubeconfig_text(self.url))
        return path

    def api_client(self) -> client.ApiClient:
        """A `kubernetes` ApiClient of its own talking to this server."""
        configuration = client.Configuration()
        configuration.host = self.url
        return client.ApiClient(configuration)

    # ---- test-driven changes, as another client would make them -------------------------------

    def load(self, objects: Iterable[dict[str, Any]]) -> None:
        """Store objects of any kind (under `plural_of(kind)`) as ADDED events."""
        for obj in objects:
            self.put(plural_of(str(obj["kind"])), obj)

    def put(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        """Create or replace an object; returns the stored copy with its new resourceVersion."""
        with self.cond:
            return copy.deepcopy(self._store(resource, copy.deepcopy(obj)))

    def get(self, resource: str, namespace: str, name: str) -> dict[str, Any] | None:
        """A copy of the stored object, or None."""
        with self.cond:
            found = self.objects[resource].get((namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def delete(self, resource: str, namespace: str, name: str) -> bool:
        """Delete an object (watchers get DELETED); False when there was none."""
        with self.cond:
            return self._drop(resource, namespace, name)

    def names(self, resource: str) -> list[str]:
        with self.cond:
            return sorted(name for _, name in self.objects[resource])

    def bookmark(self, resource: str) -> None:
        """Send a BOOKMARK at the current resourceVersion to watchers of `resource`."""
        with self.cond:
            self.rv += 1
            event = {"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": str(self.rv)}}}
            self._emit(resource, event)

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
        found = []
        for request in self.requests:
            method, _, target = request.partition(" ")
            url = urlparse(target)
            route = ROUTE.match(url.path)
            listed = method == "GET" and route and route.group(3) is None and "watch" not in url.query
            if listed and route and route.group(2) == resource:
                found.append(url.query)
        return found

    # ---- the store (callers hold `cond`) ------------------------------------------------------

    def _store(self, resource: str, obj: dict[str, Any]) -> dict[str, Any]:
        self.rv += 1
        meta = obj.setdefault("metadata", {})
        meta["resourceVersion"] = str(self.rv)
        meta.setdefault("uid", str(uuid.uuid4()))
        key = key_of(obj)
        kind = "MODIFIED" if key in self.objects[resource] else "ADDED"
        self.objects[resource][key] = obj
        self._emit(resource, {"type": kind, "object": copy.deepcopy(obj)})
        return obj

    def _drop(self, resource: str, namespace: str, name: str) -> bool:
        obj = self.objects[resource].pop((namespace, name), None)
        if obj is None:
            return False
        self.rv += 1
        gone = copy.deepcopy(obj)
        gone["metadata"]["resourceVersion"] = str(self.rv)
        self._emit(resource, {"type": "DELETED", "object": gone})
        return True

    def _emit(self, resource: str, event: dict[str, Any]) -> None:
        self.events.append((self.rv, resource, event))
        self.cond.notify_all()

    def _list(self, resource: str, namespace: str, query: dict[str, str]) -> dict[str, Any]:
        selector = parse(query.get("labelSelector", ""))
        with self.cond:
            if query.get("continue"):
                start, list_rv = (int(part) for part in query["continue"].split(":"))
            else:
                start, list_rv = 0, self.rv
            items = [
                obj
                for (ns, _), obj in sorted(self.objects[resource].items())
                if (not namespace or ns == namespace)
                and matches(selector, obj["metadata"].get("labels") or {})
            ]
            limit = int(query.get("limit") or 0)
            size = min(limit or len(items), self.max_page) or len(items)
            page = [
                {k: v for k, v in obj.items() if k not in ("kind", "apiVersion")}
                for obj in items[start : start + size]
            ]
            meta: dict[str, Any] = {"resourceVersion": str(list_rv)}
            if start + size < len(items):
                meta["continue"] = f"{start + size}:{list_rv}"
            return {"kind": "List", "apiVersion": "v1", "metadata": meta, "items": copy.deepcopy(page)}

    def _create(self, resource: str, namespace: str, obj: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        meta = obj.setdefault("metadata", {})
        meta["namespace"] = namespace
        name = str(meta.get("name") or "")
        with self.cond:
            if (namespace, name) in self.objects[resource]:
                self.conflicts += 1
                return 409, status(409, "AlreadyExists", f'{resource} "{name}" already exists')
            meta["uid"] = str(uuid.uuid4())
            self.writes.append(("POST", namespace, resource, name))
            return 201, copy.deepcopy(self._store(resource, obj))

    def _replace(
        self, resource: str, namespace: str, name: str, obj: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        with self.cond:
            current = self.objects[resource].get((namespace, name))
            if current is None:
                return 404, status(404, "NotFound", f'{resource} "{name}" not found')
            sent = obj.get("metadata", {}).get("resourceVersion")
            if sent and sent != current["metadata"]["resourceVersion"]:
                self.conflicts += 1
                message = f'Operation cannot be fulfilled on {resource} "{name}": the object was modified'
                return 409, status(409, "Conflict", message)
            meta = obj.setdefault("metadata", {})
            meta.update(name=name, namespace=namespace, uid=current["metadata"]["uid"])
            self.writes.append(("PUT", namespace, resource, name))
            return 200, copy.deepcopy(self._store(resource, obj))

    def _patch_status(
        self, resource: str, namespace: str, name: str, patch: dict[str, Any]
    ) -> tuple[int, dict[str, Any]]:
        with self.cond:
            current = self.objects[resource].get((namespace, name))
            if current is None:
                return 404, status(404, "NotFound", f'{resource} "{name}" not found')
            meta = patch.get("metadata") or {}
            for field in ("uid", "resourceVersion"):
                sent = meta.get(field)
                if sent and sent != current["metadata"].get(field):
                    self.conflicts += 1
                    message = f"Precondition failed: {field} in precondition: {sent}"
                    return 409, status(409, "Conflict", message)
            patched = copy.deepcopy(current)
            patched["status"] = merge_status(patched.get("status") or {}, patch.get("status") or {})
            self.writes.append(("PATCH", namespace, resource + "/status", name))
            return 200, copy.deepcopy(self._store(resource, patched))

    def _json_patch(
        self, resource: str, namespace: str, name: str, patch: list[dict[str, Any]]
    ) -> tuple[int, dict[str, Any]]:
        """An RFC 6902 JSONPatch of an object, as the API server applies one: 404 when missing,
        422 when an operation does not apply (a failed `test` included: "Testing value ... failed")."""
        with self.cond:
            current = self.objects[resource].get((namespace, name))
            if current is None:
                return 404, status(404, "NotFound", f'{resource} "{name}" not found')
            try:
                patched = jsonpatch.apply_patch(current, patch)
            except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException) as exc:
                self.conflicts += 1
                return 422, status(422, "Invalid", str(exc))
            self.writes.append(("PATCH", namespace, resource, name))
            return 200, copy.deepcopy(self._store(resource, patched))

    def _delete(self, resource: str, namespace: str, name: str) -> tuple[int, dict[str, Any]]:
        with self.cond:
            if not self._drop(resource, namespace, name):
                return 404, status(404, "NotFound", f'{resource} "{name}" not found')
            self.writes.append(("DELETE", namespace, resource, name))
        return 200, {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}


@contextmanager
def running_fake(**options: Any) -> Iterator[FakeApiServer]:
    """A started FakeApiServer (`options` as for its constructor), stopped after the block."""
    fake = FakeApiServer(**options).start()
    try:
        yield fake
    finally:
        fake.stop()


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # clients hanging up mid-stream is what outage tests do


class _Handler(BaseHTTPRequestHandler):
    fake: FakeApiServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # quiet
        pass

    def _route(self) -> tuple[str, str, str | None, dict[str, str]] | None:
        """(resource, namespace, name or None, query), or None after answering an error."""
        fake = self.fake
        fake.requests.append(f"{self.command} {self.path}")
        fake.peers.append(self.client_address[1])
        if fake.fail_with is not None:
            self._json(fake.fail_with, status(fake.fail_with, "InternalError", "injected failure"))
            return None
        url = urlparse(self.path)
        match = ROUTE.match(url.path)
        group_version = url.path.split("/")[2:4] if url.path.startswith("/apis/") else []
        if not match or match.group(2) in fake.unserved or "/".join(group_version) in fake.unserved:
            self._json(404, status(404, "NotFound", f"the server could not find {url.path}"))
            return None
        namespace, resource, name, subresource = match.groups()
        if resource in fake.forbidden:
            self._json(403, status(403, "Forbidden", f"{resource} is forbidden: RBAC"))
            return None
        if subresource is not None and self.command != "PATCH":
            self._json(404, status(404, "NotFound", f"the server could not find {url.path}"))
            return None
        return resource, namespace or "", name, {k: v[-1] for k, v in parse_qs(url.query).items()}

    def _body(self) -> dict[str, Any]:
        length = int(self.headers.get("Content-Length") or 0)
        return json.loads(self.rfile.read(length) or b"{}")

    def do_GET(self) -> None:
        route = self._route()
        if route is None:
            return
        resource, namespace, name, query = route
        if name is not None:
            time.sleep(self.fake.get_delay)
            found = self.fake.get(resource, namespace, name)
            if found is None:
                self._json(404, status(404, "NotFound", f'{resource} "{name}" not found'))
            else:
                self._json(200, found)
        elif query.get("watch") in ("true", "1", "True"):
            since = int(query.get("resourceVersion") or 0)
            self._watch(resource, namespace, query, since, int(query.get("timeoutSeconds") or 60))
        else:
            self._json(200, self.fake._list(resource, namespace, query))

    def do_POST(self) -> None:
        route = self._route()
        if route is not None:
            self._json(*self.fake._create(route[0], route[1], self._body()))

    def do_PUT(self) -> None:
        route = self._route()
        if route is not None and route[2] is not None:
            self._json(*self.fake._replace(route[0], route[1], route[2], self._body()))
        elif route is not None:
            self._json(405, status(405, "MethodNotAllowed", "PUT needs an object name"))

    def do_PATCH(self) -> None:
        route = self._route()
        if route is None:
            return
        kind = (self.headers.get("Content-Type") or "").split(";")[0].strip()
        if route[2] is not None and kind == JSON_PATCH and not self.path.split("?")[0].endswith("/status"):
            ops = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)))
            self._json(*self.fake._json_patch(route[0], route[1], route[2], ops))
        elif route[2] is None or not self.path.split("?")[0].endswith("/status"):
            self._json(405, status(405, "MethodNotAllowed", "only PATCH of a status subresource is served"))
        elif kind not in (STRATEGIC_MERGE, MERGE_PATCH):
            self._json(415, status(415, "UnsupportedMediaType", f"unsupported patch type {kind!r}"))
        else:
            self._json(*self.fake._patch_status(route[0], route[1], route[2], self._body()))

    def do_DELETE(self) -> None:
        route = self._route()
        if route is not None and route[2] is not None:
            self._json(*self.fake._delete(route[0], route[1], route[2]))
        elif route is not None:
            self._json(405, status(405, "MethodNotAllowed", "DELETE needs an object name"))

    def _json(self, code: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self._connection_header()
        self.end_headers()
        self.wfile.write(data)

    def _connection_header(self) -> None:
        """Close the connection after this answer, unless the fake keeps connections alive."""
        if not self.fake.keep_alive:
            self.send_header("Connection", "close")
            self.close_connection = True

    def _watch(self, resource: str, namespace: str, query: dict[str, str], since: int, timeout: int) -> None:
        fake = self.fake
        selector = parse(query.get("labelSelector", ""))

        def wanted(event: dict[str, Any]) -> bool:
            if event["type"] == "BOOKMARK":
                return True
            meta = event["object"]["metadata"]
            return (not namespace or meta.get("namespace") == namespace) and matches(
                selector, meta.get("labels") or {}
            )

        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self._connection_header()
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
                    self.close_connection = True
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
                if wanted(event):
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
