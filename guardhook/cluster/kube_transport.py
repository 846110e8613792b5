"""The reflectors' transport on the `kubernetes` client: raw JSON lists and watch streams.

Every call passes `_preload_content=False`, so the client returns the urllib3 response and never
builds its typed models; bodies are parsed with `paging.decode` (orjson). Watch streams are split
into lines with the client's own `iter_resp_lines`. Every response is given back through
`paging.finish`: to the pool when read to its end, else with its connection closed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from kubernetes.watch.watch import iter_resp_lines
from urllib3.exceptions import ReadTimeoutError

from guardhook.cluster.kube import api_client
from guardhook.cluster.listing import LISTS, Listed
from guardhook.cluster.paging import decode, finish, request_page
from guardhook.cluster.sources import Source
from guardhook.cluster.view.live import (
    CONNECT_TIMEOUT_SECONDS,
    READ_TIMEOUT_SECONDS,
    LiveView,
    NotServed,
    WatchError,
    error_for,
    page_decoder,
    snapshot,
)
from guardhook.cluster.view.store import KINDS, ClusterView

log = logging.getLogger(__name__)


# A watch silent this long is closed and resumed from its resourceVersion: a dead connection (a
# vanished server sends no FIN) then shows as a failed reconnect well within the stale bound.
WATCH_IDLE_SECONDS = 20.0


# The reflectors list and watch with the same typed calls `audit` lists with (guardhook.cluster.listing).
_LISTED_BY_RESOURCE = {listed.resource: listed for listed in LISTS if listed.resource in KINDS}


def listed_for(kind: str) -> Listed:
    """How `kind` (a resource name from store.KINDS) is listed, with its older API versions.
    Raises ValueError for a kind the view does not hold."""
    listed = _LISTED_BY_RESOURCE.get(kind)
    if listed is None:
        raise ValueError(f"unknown kind {kind!r}")
    return listed


def list_function(api: client.ApiClient, kind: str) -> Callable[..., Any]:
    """The client's cluster-wide list/watch call for `kind` (a resource name from store.KINDS, all
    namespaces) at its newest API version. Raises ValueError for a kind the view does not hold."""
    return listed_for(kind).call(api)


class KubeTransport:
    """A Transport over one `kubernetes.client.ApiClient` (one per reflector: `close()` aborts
    this reflector's open watch).

    A kind served at several API versions (resource.k8s.io) is listed at the newest version the
    server serves: the first page of every list tries them newest first (a 404 moves on), and the
    following pages and the watch use the version that answered. NotServed only when none does."""

    def __init__(self, api: client.ApiClient, idle_seconds: float = WATCH_IDLE_SECONDS) -> None:
        self.api = api
        self.idle_seconds = idle_seconds
        self._lock = threading.Lock()
        self._open: Any = None
        self._served: dict[str, Listed] = {}

    def served_version(self, kind: str) -> str:
        """The apiVersion `kind` was last listed at ("" before a list answered)."""
        form = self._served.get(kind)
        return form.api_version if form else ""

    def list_page(self, kind: str, continue_token: str | None, limit: int) -> dict[str, Any]:
        page = self._page(kind, continue_token, limit) if continue_token else self._first_page(kind, limit)
        if not isinstance(page, dict):
            raise WatchError(f"{kind}: list answer is not an object")
        return page

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        response = self._call(
            kind,
            (CONNECT_TIMEOUT_SECONDS, self.idle_seconds),
            watch=True,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
        )
        with self._lock:
            self._open = response
        return self._events(response)

    def _events(self, response: Any) -> Iterator[dict[str, Any]]:
        """The decoded events of one watch `response`. Only a stream the server ended goes back to
        the pool; one stopped early (idle, closed by the reader, a bad line, `close()`) has its
        connection closed (`paging.finish`)."""
        ended = False
        try:
            for line in iter_resp_lines(response):
                event = decode(line)
                if isinstance(event, dict):
                    yield event
            ended = True
        except ReadTimeoutError:
            return  # idle: end this watch; the reflector resumes it from its resourceVersion
        finally:
            with self._lock:
                self._open = None
            finish(response, ended)

    def _first_page(self, kind: str, limit: int) -> Any:
        forms = listed_for(kind).forms
        for form in forms:
            self._served[kind] = form
            try:
                return self._page(kind, None, limit)
            except NotServed:
                if form is forms[-1]:
                    raise
                log.debug("%s: %s is not served, trying an older version", kind, form.api_version)
        raise AssertionError("unreachable: a Listed has at least one form")

    def _page(self, kind: str, continue_token: str | None, limit: int) -> Any:
        """One list page at the version `kind` is served at (guardhook.cluster.paging.request_page)."""
        form = self._served.get(kind) or listed_for(kind)
        call, timeout = form.call(self.api), (CONNECT_TIMEOUT_SECONDS, READ_TIMEOUT_SECONDS)
        try:
            return request_page(call, continue_token, limit, timeout, page_decoder(kind))
        except ApiException as exc:
            raise error_for(int(exc.status or 0), f"{kind}: HTTP {exc.status} {exc.reason}") from exc
        except ValueError as exc:
            raise WatchError(f"{kind}: list answer is not JSON: {exc}") from exc

    def _call(self, kind: str, timeout: tuple[float, float], **kwargs: Any) -> Any:
        form = self._served.get(kind) or listed_for(kind)
        try:
            return form.call(self.api)(_preload_content=False, _request_timeout=timeout, **kwargs)
        except ApiException as exc:
            raise error_for(int(exc.status or 0), f"{kind}: HTTP {exc.status} {exc.reason}") from exc

    def close(self) -> None:
        with self._lock:
            response = self._open
        if response is None:
            return
        try:
            # shutdown() wakes a blocked read (urllib3 >= 2.3); close() alone may not.
            shutdown = getattr(response, "shutdown", None)
            if shutdown is not None:
                shutdown()
            response.close()
        except Exception:  # closing an already broken stream: nothing left to do
            pass


def kube_transports(api_factory: Callable[[], client.ApiClient]) -> Callable[[], KubeTransport]:
    """A factory of KubeTransports, each with its own ApiClient (own connection pool)."""
    return lambda: KubeTransport(api_factory())


def reflector_client(source: Source) -> client.ApiClient:
    """`api_client(source)` without urllib3's own connection retries: the reflector backs off
    itself, and a refused connection should reach it at once."""
    return api_client(source, retries=False)


def live_view(source: Source, stale_after_seconds: float) -> LiveView:
    """A LiveView (not started) for a live `source`. Raises kubernetes' ConfigException for an
    unusable kubeconfig or in-cluster config (checked before any connection is made)."""
    reflector_client(source)  # fails fast on a bad kubeconfig, before any connection
    view = ClusterView(source=source.describe(), stale_after_seconds=stale_after_seconds)
    return LiveView(view, kube_transports(lambda: reflector_client(source)))


def snapshot_view(source: Source, stale_after_seconds: float) -> ClusterView:
    """A view listed once from a live `source` (no watches), for one-shot commands. Raises
    ConfigException for bad config, WatchError or a connection error when the server cannot be
    listed."""
    view = ClusterView(source=source.describe(), stale_after_seconds=stale_after_seconds)
    transport = KubeTransport(reflector_client(source))
    try:
        return snapshot(view, transport)
    finally:
        transport.api.close()
