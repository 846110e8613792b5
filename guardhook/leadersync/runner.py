"""Running the leader-service-sync reconciler: `guardhook leader-service-sync` and
`guardhook serve --sync-leader-services`.

A `Reconciler` subscribes to the view's LeaderWorkerSet and Service changes: any such change (an
LWS that appears, changes its templates or scales from 0; a Service created or changed) wakes a
round at once; without changes a full round runs every `interval` seconds (the documented bound,
DEFAULT_INTERVAL_SECONDS). Each round plans from the view (`guardhook.leadersync.desired.plan`)
and patches what reaches workers, or reports it. InferencePools are not in the view: they are
listed on every full round and on every round woken by an LWS change; a round woken by a Service
change alone reuses the last listing. With several replicas only the holder of the Lease
`guardhook-leader-service-sync` reconciles (`guardhook.reconcile`: the election and loop every
reconciler shares).
"""

from __future__ import annotations

import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from guardhook.cluster.pools import POOL_RESOURCE, PoolListing, list_pools
from guardhook.cluster.view.store import LEADERWORKERSETS, SERVICES, ClusterView
from guardhook.config import Config
from guardhook.leadersync.apply import Outcome, apply_plan
from guardhook.leadersync.desired import PATCH, Plan, plan
from guardhook.policies.leader_service import SYNC_NAME, SYNC_PERIOD_SECONDS
from guardhook.reconcile import election, loop
from guardhook.wire import KubeObject

log = logging.getLogger(__name__)

NAME = SYNC_NAME
LEASE_NAME = "guardhook-leader-service-sync"
DEFAULT_INTERVAL_SECONDS = SYNC_PERIOD_SECONDS
"""Full round period: the bound docs/policies.md states (changes wake a round at once)."""

Unnarrowed = dict[tuple[str, str], int]
"""(kind, state) -> how many objects the last round left unnarrowed in that state."""


def _ignore(*_: Any) -> None:
    return None


@dataclass
class Observer:
    """Where the reconciler reports, for metrics: `patched(kind, result)` per PATCH sent
    (guardhook.leadersync.apply.RESULTS) and `unnarrowed(counts)` after every round."""

    patched: Callable[[str, str], None] = _ignore
    unnarrowed: Callable[[Unnarrowed], None] = _ignore


class Reconciler:
    """The leader-service-sync reconciler over `api` (None: plan only). `config` returns the
    configuration now (a reloaded one is followed); `pools` lists InferencePools (default: the
    API server through `api`)."""

    def __init__(
        self,
        api: client.ApiClient | None,
        config: Callable[[], Config],
        observer: Observer | None = None,
        pools: Callable[[], PoolListing] | None = None,
    ) -> None:
        self.api = api
        self.config = config
        self.observer = observer or Observer()
        self.wake = threading.Event()
        self.full_every = DEFAULT_INTERVAL_SECONDS
        self._pools = pools or self._list_pools
        self._lock = threading.Lock()
        self._lws_changed = True
        self._last_full = float("-inf")
        self._listed: list[KubeObject] = []
        self._reported: set[str] = set()

    # ---- the view listener ------------------------------------------------------------------

    def watch(self, view: ClusterView) -> None:
        """Wake a round on every LeaderWorkerSet and Service change in `view`."""
        view.subscribe(self._changed, kinds=(LEADERWORKERSETS, SERVICES))

    def _changed(self, kind: str, old: Any, new: Any) -> None:
        if kind == LEADERWORKERSETS:
            with self._lock:
                self._lws_changed = True
        self.wake.set()

    # ---- rounds -----------------------------------------------------------------------------

    def _list_pools(self) -> PoolListing:
        if self.api is None:
            return PoolListing()
        return list_pools(client.CustomObjectsApi(self.api))  # type: ignore[arg-type]  # generated signature

    def pools(self) -> list[KubeObject]:
        """The InferencePools to plan with: listed again on a full round or after an LWS
        change, else the last listing. A failed listing is logged and keeps the last one."""
        now = time.monotonic()
        with self._lock:
            relist = self._lws_changed or now - self._last_full >= self.full_every
            self._lws_changed = False
        if relist:
            listing = self._pools()
            for error in listing.errors:
                log.warning("%s: %s; InferencePools of that version are judged next round", NAME, error)
            if not listing.errors:
                self._listed = listing.pools
            else:
                self._listed = listing.pools + [p for p in self._listed if _version_failed(p, listing.errors)]
        if now - self._last_full >= self.full_every:
            self._last_full = now
        return self._listed

    def plan(self, view: ClusterView) -> Plan:
        """The plan for `view` and the current InferencePools; changes nothing."""
        return plan(view, self.pools(), self.config())

    def sync(self, view: ClusterView) -> Outcome:
        """One round: plan, patch, report. Never raises for an API error."""
        planned = self.plan(view)
        for warning in planned.warnings:
            log.warning("%s: %s", NAME, warning)
        if self.api is None:
            raise RuntimeError("a plan-only Reconciler cannot patch")
        outcome = apply_plan(self.api, planned, self.observer.patched)
        self._report(planned)
        return outcome

    def _report(self, planned: Plan) -> None:
        """Log each object left unnarrowed once (again when its reason changes); count them."""
        left = [e for e in planned.entries if e.state != PATCH]
        lines = {e.line() for e in left}
        for line in sorted(lines - self._reported):
            log.warning("%s: left as it is: %s", NAME, line)
        self._reported = lines
        self.observer.unnarrowed(dict(Counter((e.kind, e.state) for e in left)))

    def run_until(self, current_view: loop.ViewSource, stop: threading.Event, interval: float) -> None:
        """Rounds until `stop`: woken by LWS and Service changes, else every `interval` seconds.
        On return (the Lease lost) the unnarrowed counts drop to 0: the new holder reports them."""
        self.full_every = interval
        try:
            loop.reconcile_until(self.sync, current_view, stop, interval, wake=self.wake, name=NAME)
        finally:
            self._reported = set()
            self.observer.unnarrowed({})


def _version_failed(pool: KubeObject, errors: list[str]) -> bool:
    """Whether `pool`'s API version is one whose listing failed (its last listing is kept)."""
    version = str(pool.get("apiVersion") or "")
    return any(f"{POOL_RESOURCE}.{version}" in error for error in errors)


def run_elected(api: client.ApiClient, namespace: str, work: election.Work) -> None:
    """Campaign for the Lease `guardhook-leader-service-sync` forever, running `work(stop)` while
    holding it (`guardhook.reconcile.election`). Blocks."""
    election.run_elected(api, namespace, LEASE_NAME, work, name=NAME)


def start_background_sync(
    api: client.ApiClient,
    namespace: str,
    view: ClusterView,
    config: Callable[[], Config],
    interval: float = DEFAULT_INTERVAL_SECONDS,
    elect: bool = True,
    stop: threading.Event | None = None,
    observer: Observer | None = None,
) -> threading.Thread:
    """Start the reconciler on a daemon thread over the live `view` (for `guardhook serve
    --sync-leader-services`) until `stop` is set (for the life of the process without one); with
    `elect`, only while this replica holds its Lease."""
    reconciler = Reconciler(api, config, observer)
    return loop.follow_in_background(
        NAME, reconciler, view, interval, api, namespace, LEASE_NAME, elect, stop
    )
