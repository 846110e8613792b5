"""The live cluster view: one reflector per kind keeps a ClusterView current by list + watch.

Each reflector follows the API server's list/watch protocol (Kubernetes docs, "Efficient detection
of changes"): a paginated list (`limit`/`continue`) gives the objects and a resourceVersion; a
watch from that resourceVersion (with `allowWatchBookmarks`) streams ADDED/MODIFIED/DELETED and
BOOKMARK events. A watch that ends is restarted from the last resourceVersion seen; a `410 Gone`
(expired resourceVersion, as HTTP status or as an ERROR event) triggers a relist that replaces the
kind. A broken connection marks the kind broken in the view and is retried with capped exponential
backoff; a successful (re)list or watch reconnect marks it synced again. A kind the server does not
serve (404, e.g. the LeaderWorkerSet CRD not installed, or resource.k8s.io at none of the versions
the transport tries) counts as synced and empty, and is probed again every
`discovery_retry_seconds` — but only an optional kind (`OPTIONAL_KINDS`): every
Kubernetes API server serves pods, nodes, Services, StatefulSets and PDBs, so a 404 for one of those
means the kubeconfig points at something else, and is a failure (never synced, retried), not an
empty cluster whose pods guardhook would then allow anything on.

Responses are read with `_preload_content=False` and parsed as JSON: the client's typed models are
never built, and objects kept as dicts (services, PDBs, LWS) lose `managedFields` and the
last-applied annotation. Reflector threads are daemons started in the serving worker after fork.
"""

from __future__ import annotations

import logging
import random
import sys
import threading
import time
from collections.abc import Callable, Container, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from guardhook.cluster.drawire import decode_claim_page, decode_slice_page
from guardhook.cluster.giveway import chunks, giving_way
from guardhook.cluster.model import as_dict, digits, metadata
from guardhook.cluster.paging import Page, decode, pages
from guardhook.cluster.podwire import PodWire, decode_pod_page, item_versions
from guardhook.cluster.view.gcpause import collector_paused
from guardhook.cluster.view.store import (
    COVERAGE_KINDS,
    DRA_KINDS,
    FLOOR_KINDS,
    JOBSETS,
    KINDS,
    LEADERWORKERSETS,
    NODEPOOLS,
    PODDISRUPTIONBUDGETS,
    PODGROUPS,
    PODS,
    RESOURCECLAIMS,
    RESOURCESLICES,
    SERVICES,
    WORKLOADS,
    ClusterView,
    Key,
    object_key,
)
from guardhook.wire import KubeObject

log = logging.getLogger(__name__)

PAGE_SIZE = 500
WATCH_TIMEOUT_SECONDS = 300
CONNECT_TIMEOUT_SECONDS = 5.0
READ_TIMEOUT_SECONDS = 30.0
DISCOVERY_RETRY_SECONDS = 15.0
"""How often a kind the API server does not serve is asked for again: an LWS CRD installed
after guardhook started is seen within this (until then LWS pods are judged fail-closed)."""
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"
KEPT_AS_DICTS = (SERVICES, PODDISRUPTIONBUDGETS, LEADERWORKERSETS)
UNSYNCED_CHUNK = 128
"""Objects applied under one hold of the view's lock while the view has not synced (no request
reads it yet; only the other kinds' reflectors wait, at most a few milliseconds): fewer steps,
each with its own calls and lists, than the `giveway.CHUNK` a synced view's relist takes."""


class WatchError(Exception):
    """A list or watch failed; `status` is the HTTP status (0 when there was no answer)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class Gone(WatchError):
    """410 Gone: the resourceVersion (or continue token) expired; relist from scratch."""


class NotServed(WatchError):
    """404: the API server does not serve this kind (e.g. its CRD is not installed)."""


OPTIONAL_KINDS = frozenset(
    {LEADERWORKERSETS, NODEPOOLS, PODGROUPS, WORKLOADS, JOBSETS, *DRA_KINDS, *COVERAGE_KINDS, *FLOOR_KINDS}
)
"""Kinds a cluster may lack: a CRD (LeaderWorkerSet, Karpenter's NodePool, JobSet), the Workload API's
PodGroups (served from Kubernetes 1.37 behind the GenericWorkload gate), or resource.k8s.io, which
a server serves only from 1.32 (beta, off by default) and DeviceTaintRule only behind an
alpha feature gate. The coverage kinds (Namespaces, webhook configurations) are read only to report
gaps: a 404 or a 403 (RBAC) leaves them empty and unreadable (`ClusterView.readable`), retried
like a kind not served."""


def _unreadable(kind: str, error: WatchError) -> bool:
    """Whether `error` leaves coverage kind `kind` unreadable (RBAC 403, or 404) rather than failing it."""
    return (kind in COVERAGE_KINDS or kind in FLOOR_KINDS) and error.status in (403, 404)


def not_a_kubernetes_api(kind: str, error: NotServed) -> WatchError:
    """The failure for a 404 on a built-in `kind`: the server is not a Kubernetes API server."""
    return WatchError(
        f"the server answered 404 for {kind}, which every Kubernetes API server serves: "
        f"is the kubeconfig's server URL a Kubernetes API server? ({error})",
        404,
    )


def error_for(status: int, message: str) -> WatchError:
    """The WatchError subclass for an HTTP `status`."""
    if status == 410:
        return Gone(message, status)
    if status == 404:
        return NotServed(message, status)
    return WatchError(message, status)


class Transport(Protocol):
    """How a reflector reaches the API server. Both calls raise WatchError (or any exception for a
    broken connection); `watch` sends its request before returning, so a returned iterator means
    the watch is established."""

    def list_page(self, kind: str, continue_token: str | None, limit: int) -> dict[str, Any]:
        """One page of a list: the decoded `{kind}List` (items, metadata.continue/resourceVersion)."""
        ...

    def watch(self, kind: str, resource_version: str, timeout_seconds: int) -> Iterator[dict[str, Any]]:
        """The events of one watch from `resource_version`: decoded `{type, object}` dicts."""
        ...

    def close(self) -> None:
        """Abort any open watch stream (used by stop)."""
        ...


@dataclass
class Backoff:
    """Capped exponential backoff with jitter, in seconds: initial, doubling up to `cap`."""

    initial: float = 0.5
    cap: float = 30.0
    attempt: int = 0

    def next(self) -> float:
        delay = min(self.cap, self.initial * (2**self.attempt))
        self.attempt = min(self.attempt + 1, 32)
        return delay * random.uniform(0.8, 1.0)

    def reset(self) -> None:
        self.attempt = 0


def resource_version(obj: dict[str, Any]) -> str:
    """metadata.resourceVersion of `obj` ("" when absent)."""
    return str(metadata(obj).get("resourceVersion") or "")


_PAGE_DECODERS: dict[str, Callable[[bytes], Page]] = {
    PODS: decode_pod_page,
    RESOURCESLICES: decode_slice_page,
    RESOURCECLAIMS: decode_claim_page,
}


def page_decoder(kind: str) -> Callable[[bytes], Page]:
    """How a list page of `kind` is decoded from the API server's JSON bytes: pods into typed
    structs (guardhook.cluster.podwire: the bulk of a relist), ResourceSlices and ResourceClaims
    into their records (guardhook.cluster.drawire), every other kind into dicts."""
    return _PAGE_DECODERS.get(kind, decode)


def _as_int(version: str) -> int | None:
    # resourceVersions are opaque strings; every real API server (etcd revisions) uses integers,
    # so ordering is compared only when both sides are integers.
    return int(version) if digits(version) else None


def older(version: str, than: str | int | None) -> bool:
    """Whether `version` is known to be older than `than` (both integer resourceVersions; `than`
    may be one as `compact_version` keeps it)."""
    new = _as_int(version)
    held = than if type(than) is int else _as_int(str(than or ""))
    return new is not None and held is not None and new < held


class Versions:
    """The resourceVersion of each object a reflector holds (`compact_version`), by (namespace,
    name): held as namespace -> name -> version, so no (namespace, name) tuple is kept per object
    (56 B: 109 MB over issue 53's 1.95 million pods), and the keys are the strings the caller
    passes (a pod's are its record's own). A mapping's reads and writes by key."""

    __slots__ = ("_by_namespace",)

    def __init__(self) -> None:
        self._by_namespace: dict[str, dict[str, str | int]] = {}

    def __setitem__(self, key: Key, version: str | int) -> None:
        names = self._by_namespace.get(key[0])
        if names is None:
            names = self._by_namespace[key[0]] = {}
        names[key[1]] = version

    def put_all(self, keys: Iterable[Key], texts: Iterable[str]) -> None:
        """`self[key] = compact_version(text)` for each pair: a list page's objects in one loop (a
        relist of 2 million pods makes one call a page, not two million)."""
        by_namespace = self._by_namespace
        last: str | None = None
        names: dict[str, str | int] = {}
        for key, text in zip(keys, texts, strict=True):
            if key[0] is not last:  # a page's objects come namespace by namespace
                last = key[0]
                names = by_namespace.get(last) or by_namespace.setdefault(last, {})
            names[key[1]] = (
                int(text) if text.isdigit() and text.isascii() and (text[0] != "0" or text == "0") else text
            )

    def get(self, key: Key, default: str | int | None = None) -> str | int | None:
        names = self._by_namespace.get(key[0])
        return default if names is None else names.get(key[1], default)

    def __getitem__(self, key: Key) -> str | int:
        found = self.get(key)
        if found is None:
            raise KeyError(key)
        return found

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, tuple) or len(key) != 2:
            return False
        names = self._by_namespace.get(key[0])
        return names is not None and key[1] in names

    def pop(self, key: Key, default: str | int | None = None) -> str | int | None:
        names = self._by_namespace.get(key[0])
        if names is None or key[1] not in names:
            return default
        found = names.pop(key[1])
        if not names:
            del self._by_namespace[key[0]]
        return found

    def __len__(self) -> int:
        return sum(map(len, self._by_namespace.values()))  # a few hundred namespaces at most

    def names_in(self, namespace: str) -> Container[str]:
        """The names held in `namespace` (ClusterView.keys_not_in looks pods up by them)."""
        return self._by_namespace.get(namespace) or _NO_NAMES


_NO_NAMES: dict[str, str | int] = {}


def compact_version(version: str) -> str | int:
    """A resourceVersion as a reflector keeps it for each object it holds: an integer when the
    text is one written without leading zeros (every etcd revision; 32 B instead of ~58 B a string,
    ~50 MB over 2 million pods), else the text. `str()` of the result gives the text back."""
    if digits(version) and (version[0] != "0" or version == "0"):
        return int(version)
    return version


def _interned(key: Key) -> Key:
    # The view's records hold the same (interned) strings: a 150k-pod relist keeps one copy.
    return (sys.intern(key[0]), sys.intern(key[1]))


def trimmed(kind: str, obj: KubeObject) -> KubeObject:
    """`obj` without the fields no policy reads but that weigh most (kinds kept as dicts)."""
    if kind in KEPT_AS_DICTS:
        meta = metadata(obj)
        meta.pop("managedFields", None)
        annotations = as_dict(meta.get("annotations"))
        annotations.pop(LAST_APPLIED, None)
    return obj


@dataclass
class ReflectorStats:
    """What a reflector reports to metrics: watch restarts, the monotonic time it last heard the
    kind was current (list, watch connect, event or bookmark), and whether the server serves it."""

    restarts: int = 0
    last_sync: float | None = None
    served: bool = True


class Reflector:
    """Keeps one kind of `view` current through `transport`. Single writer of that kind.

    `run()` loops until `stop()`; tests may call `relist()`, `apply()` and `watch_once()` directly.
    """

    def __init__(
        self,
        kind: str,
        view: ClusterView,
        transport: Transport,
        page_size: int = PAGE_SIZE,
        watch_timeout_seconds: int = WATCH_TIMEOUT_SECONDS,
        discovery_retry_seconds: float = DISCOVERY_RETRY_SECONDS,
        backoff: Backoff | None = None,
    ) -> None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}")
        self.kind = kind
        self.view = view
        self.transport = transport
        self.page_size = page_size
        self.watch_timeout_seconds = watch_timeout_seconds
        self.discovery_retry_seconds = discovery_retry_seconds
        self.backoff = backoff or Backoff()
        self.resource_version: str | None = None
        self.versions = Versions()
        """Each held object's resourceVersion (`compact_version`): late watch events are told by it."""
        self.stats = ReflectorStats()
        self._stopped = threading.Event()

    # ---- protocol steps --------------------------------------------------------------------

    def relist(self) -> None:
        """List every object of the kind (all pages) into the view, drop what the list no longer
        holds, and mark the kind synced: the same result as `ClusterView.replace_kind`, but applied
        page by page so only one page of decoded JSON is held at a time.

        A continue token that expires mid-list (410) restarts the list once from the first page.
        Raises NotServed (404), Gone, or WatchError / connection errors.
        """
        for attempt in range(2):
            try:
                with collector_paused():  # see gcpause: collections over a growing heap find nothing
                    versions, version = self._list_into_view()
                break
            except Gone:
                if attempt == 1:
                    raise
                log.info("%s: list continue token expired, listing again from the start", self.kind)
        gone = self.view.keys_not_in(self.kind, versions)
        for chunk in self._in_steps(gone):
            self.view.remove_all(self.kind, chunk)
        with self.view.lock:
            was_synced = self.view.synced
            self.view.mark_synced(self.kind)
            if not was_synced and self.view.synced:
                log.info("cluster view synced: every kind listed; the webhook is ready")
        self.versions = versions
        self.resource_version = version
        self._heard()
        self.stats.served = True
        log.info("%s: listed %d objects at resourceVersion %s", self.kind, len(versions), version)

    def _list_into_view(self) -> tuple[Versions, str]:
        versions = Versions()
        version = ""
        for page in pages(lambda token: self.transport.list_page(self.kind, token, self.page_size)):
            items: list[Any] = [obj for obj in page.get("items") or [] if isinstance(obj, (dict, PodWire))]
            if self.kind in KEPT_AS_DICTS:
                items = [trimmed(self.kind, obj) for obj in items]
            for chunk in self._in_steps(items):
                held = self.view.upsert_all(self.kind, chunk)
                # A pod (dict or PodWire) always comes back with its held key, so only another
                # kind's object is asked for its key here.
                versions.put_all(
                    held  # type: ignore[arg-type]
                    if self.kind == PODS
                    else [key or _interned(object_key(obj)) for key, obj in zip(held, chunk, strict=True)],
                    item_versions(chunk),
                )
            version = str(metadata(page).get("resourceVersion") or "")
        return versions, version

    def _in_steps(self, items: list[Any]) -> Iterator[Sequence[Any]]:
        """`items` in small slices, each applied under one hold of the view's lock; once the view
        has synced (requests are judged from it) the GIL is given away between slices, so a relist
        does not hold a request thread off for long (guardhook.cluster.giveway). Before, nothing
        reads the view: the initial list runs without the pauses (a sleep(0) costs ~75 us here)."""
        if not self.view.synced:
            return chunks(items, UNSYNCED_CHUNK)
        return giving_way(chunks(items))

    def apply(self, event: dict[str, Any]) -> None:
        """Apply one watch event. Events older than what the view holds for the object are ignored,
        so a late event never undoes a newer one. Raises Gone / WatchError for an ERROR event."""
        kind = event.get("type")
        obj = as_dict(event.get("object"))
        version = resource_version(obj)
        if kind == "ERROR":
            code = obj.get("code")
            raise error_for(code if isinstance(code, int) else 0, str(obj.get("message") or "watch error"))
        if kind not in ("ADDED", "MODIFIED", "DELETED", "BOOKMARK"):
            log.warning("%s: ignoring a watch event of type %r", self.kind, kind)
            return
        self._advance(version)
        self._heard()
        if kind == "BOOKMARK":
            return
        key = object_key(obj)
        if older(version, self.versions.get(key)):
            log.debug("%s: ignoring a late %s of %s at %s", self.kind, kind, key, version)
            return
        if kind == "DELETED":
            self.view.remove(self.kind, key)
            self.versions.pop(key, None)
        else:
            self.view.upsert(self.kind, trimmed(self.kind, obj))
            self.versions[key] = compact_version(version)

    def _advance(self, version: str) -> None:
        if version and not older(version, self.resource_version):
            self.resource_version = version

    def _heard(self) -> None:
        self.stats.last_sync = time.monotonic()

    def watch_once(self) -> None:
        """One watch from the current resourceVersion until the server ends it (its timeout).
        A successful connect clears a broken mark. Raises like `apply` and on connection errors."""
        events = self.transport.watch(self.kind, self.resource_version or "", self.watch_timeout_seconds)
        outage = self.view.broken_seconds(self.kind)
        if outage:
            log.info("%s: watch restored after %.1fs", self.kind, outage)
        self.view.mark_synced(self.kind)
        self._heard()
        self.backoff.reset()
        try:
            for event in events:
                if self._stopped.is_set():
                    return
                self.apply(event)
        finally:
            # Stopped, or an event that raised: end the stream now (its connection is closed, not
            # pooled), not whenever the abandoned iterator is collected.
            close = getattr(events, "close", None)
            if close is not None:
                close()

    # ---- the loop --------------------------------------------------------------------------

    def run(self) -> None:
        """List, then watch forever: relist on 410, reconnect with backoff, until stop()."""
        while not self._stopped.is_set():
            try:
                if self.resource_version is None:
                    self.relist()
                self.watch_once()
                self.stats.restarts += 1
            except NotServed as exc:
                if self.kind not in OPTIONAL_KINDS:
                    self._failed(not_a_kubernetes_api(self.kind, exc))
                    continue
                self._not_served()
                self._stopped.wait(self.discovery_retry_seconds)
            except Gone:
                log.info("%s: resourceVersion %s expired (410), relisting", self.kind, self.resource_version)
                self.resource_version = None
                self.stats.restarts += 1
            except WatchError as exc:
                if not _unreadable(self.kind, exc):
                    if self._stopped.is_set():
                        return
                    self._failed(exc)
                    continue
                self._not_served(forbidden=True)
                self._stopped.wait(self.discovery_retry_seconds)
            except Exception as exc:  # any broken connection: mark, back off, retry
                if self._stopped.is_set():
                    return
                self._failed(exc)

    def _failed(self, exc: Exception) -> None:
        first = self.view.broken_seconds(self.kind) == 0.0
        self.view.mark_broken(self.kind)
        self.stats.restarts += 1
        delay = self.backoff.next()
        # One warning per outage; the retries of the same outage only at debug level.
        level = logging.WARNING if first else logging.DEBUG
        log.log(level, "%s: list/watch failed (%s); retrying with backoff", self.kind, _describe(exc))
        self._stopped.wait(delay)

    def _not_served(self, forbidden: bool = False) -> None:
        if self.stats.served:  # log once per transition, not on every probe
            why = "guardhook may not list" if forbidden else "the API server does not serve"
            hint = "RBAC: see manifests/base/rbac.yaml" if forbidden else "CRD or API version not installed?"
            log.warning(
                "%s %s (%s): treating it as empty, checking again every %.0fs",
                why,
                self.kind,
                hint,
                self.discovery_retry_seconds,
            )
        with self.view.lock:
            self.view.replace_kind(self.kind, [])
            # An unserved LWS kind is unreadable too: group-eviction must not take "no LWS" at its word.
            if self.kind in COVERAGE_KINDS or self.kind in FLOOR_KINDS or self.kind == LEADERWORKERSETS:
                self.view.mark_unreadable(self.kind)
        self.versions = Versions()
        self.resource_version = None
        self.stats.served = False
        self._heard()

    def stop(self) -> None:
        """Ask `run` to return (it does after the current request ends or is closed)."""
        self._stopped.set()


def _describe(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}"[:200]


@dataclass
class LiveView:
    """A ClusterView fed by one reflector thread per kind. `start()` in the serving process (after
    fork), `stop()` in tests; `collect(runtime)` refreshes the per-kind metrics."""

    view: ClusterView
    transports: Callable[[], Transport]
    reflectors: dict[str, Reflector] = field(default_factory=dict)
    threads: list[threading.Thread] = field(default_factory=list)
    _reported_restarts: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for kind in KINDS:
            self.reflectors[kind] = Reflector(kind, self.view, self.transports())

    def start(self) -> LiveView:
        """Start the daemon reflector threads; returns self."""
        for kind, reflector in self.reflectors.items():
            thread = threading.Thread(target=reflector.run, name=f"guardhook-watch-{kind}", daemon=True)
            thread.start()
            self.threads.append(thread)
        return self

    def stop(self, timeout: float = 5.0) -> None:
        """Stop every reflector and close their open watches; waits up to `timeout` seconds each."""
        for reflector in self.reflectors.values():
            reflector.stop()
            reflector.transport.close()
        for thread in self.threads:
            thread.join(timeout)

    def collect(self, runtime: Any) -> None:
        """Runtime collector: per-kind objects held, last sync age, watch restarts, and staleness."""
        metrics = runtime.metrics
        now = time.monotonic()
        metrics.view_stale.set(1 if self.view.is_stale() else 0)
        for kind, reflector in self.reflectors.items():
            metrics.view_objects.labels(kind).set(self.view.count(kind))
            last = reflector.stats.last_sync
            metrics.view_last_sync_age.labels(kind).set(-1 if last is None else now - last)
            restarts = reflector.stats.restarts
            delta = restarts - self._reported_restarts.get(kind, 0)
            if delta > 0:
                metrics.view_watch_restarts.labels(kind).inc(delta)
            self._reported_restarts[kind] = restarts


def snapshot(view: ClusterView, transport: Transport) -> ClusterView:
    """List every kind once into `view` (no watches): the view `guardhook review` judges from with
    a live source. A CRD-backed kind the server does not serve is empty. Raises WatchError (also
    for a 404 on a built-in kind) or a connection error when the API server cannot be listed."""
    for kind in KINDS:
        reflector = Reflector(kind, view, transport)
        try:
            reflector.relist()
        except WatchError as exc:
            if _unreadable(kind, exc):
                log.warning("cannot list %s (HTTP %d): its protection gaps are not checked", kind, exc.status)
                view.replace_kind(kind, [])
                view.mark_unreadable(kind)
                continue
            if not isinstance(exc, NotServed):
                raise
            if kind not in OPTIONAL_KINDS:
                raise not_a_kubernetes_api(kind, exc) from exc
            log.warning("the API server does not serve %s: treating it as empty", kind)
            view.replace_kind(kind, [])
    return view
