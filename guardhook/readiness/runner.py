"""Running the group-readiness reconciler: `guardhook group-readiness` and
`guardhook serve --sync-group-readiness`.

A `Reconciler` subscribes to the view's pod changes: a change to a pod of an LWS group wakes the
round loop at once (so a condition follows the view within a round trip, not an interval) and
stamps the time the view saw that group change. A woken round plans just the changed groups; every
`interval` a full round plans every group (and sees LWS changes such as an opt-out). Each round
plans from the view (`guardhook.readiness.desired.plan`) and patches only what differs; a
condition it has just written is not written again while the view has not caught up with its own
write. With several replicas only the holder of the Lease `guardhook-group-readiness` reconciles
(the election and loop every reconciler shares, `guardhook.reconcile`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from guardhook.cluster.lws import LWS_KIND
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.groups import resolve_alone
from guardhook.readiness.apply import PATCHED, Outcome, PodStatusApi, patch_condition
from guardhook.readiness.desired import PATCH, Entry, GroupId, Plan, plan
from guardhook.reconcile import election, loop

NAME = "group-readiness"
LEASE_NAME = "guardhook-group-readiness"
DEFAULT_INTERVAL_SECONDS = 10.0
"""Full resync period; pod changes wake a round at once (LWS changes wait for the resync)."""
IN_FLIGHT_SECONDS = 5.0
"""How long the view may lag behind our own write before we trust the view again."""

Seen = tuple[str, str, str] | None


def _ignore(*_: Any) -> None:
    return None


@dataclass
class Observer:
    """Where the reconciler reports, for metrics: `patched(result)` per patch attempt ("patched",
    "conflict", "gone", "error") and `ready_after(seconds)` when a condition turns True, with the
    seconds since the view saw the change that made the group whole."""

    patched: Callable[[str], None] = _ignore
    ready_after: Callable[[float], None] = _ignore


class Reconciler:
    """The group-readiness reconciler over `api` (None: plan only). `all_lws` is the policy
    parameter `allLeaderWorkerSets`."""

    def __init__(
        self, api: client.ApiClient | None, all_lws: bool = False, observer: Observer | None = None
    ) -> None:
        self.pods: PodStatusApi | None = None
        if api is not None:
            self.pods = client.CoreV1Api(api)  # type: ignore[assignment]  # generated signature
        self.all_lws = all_lws
        self.observer = observer or Observer()
        self.wake = threading.Event()
        self._lock = threading.Lock()
        self._changed: dict[GroupId, float] = {}
        self._dirty: set[GroupId] = set()
        self._last_full = float("-inf")
        self.full_every = DEFAULT_INTERVAL_SECONDS
        # Per leader: our last write, the states the view may still show from before it (its state
        # then, and our earlier writes), and when.
        self._written: dict[tuple[str, str, str], tuple[Seen, frozenset[Seen], float]] = {}

    # ---- the view listener ------------------------------------------------------------------

    def watch(self, view: ClusterView) -> None:
        """Wake a round on every change to a pod of an LWS group in `view`."""
        view.subscribe(self._pod_changed)

    def _pod_changed(self, kind: str, old: Any, new: Any) -> None:
        if kind != PODS:
            return
        # Placed from the pod alone: a listener runs under the view's lock, mid-update.
        member = resolve_alone(new if new is not None else old)
        if member is None or member.set.kind != LWS_KIND:
            return
        key = (member.set.namespace, member.set.name, member.key)
        with self._lock:
            self._changed[key] = time.monotonic()
            self._dirty.add(key)
        self.wake.set()

    # ---- rounds -----------------------------------------------------------------------------

    def plan(self, view: ClusterView) -> Plan:
        """The full plan for `view` (guardhook.readiness.desired.plan); changes nothing."""
        return plan(view, self.all_lws)

    def sync(self, view: ClusterView) -> Outcome:
        """One full round: plan every group from `view`, patch what differs. Never raises for an
        API error."""
        with self._lock:
            self._dirty.clear()
        self._last_full = time.monotonic()
        planned = self.plan(view)
        live = {entry.key for entry in planned.entries}
        groups = {(entry.namespace, entry.lws, entry.group_index) for entry in planned.entries}
        with self._lock:  # forget leaders and groups that are gone
            self._written = {k: v for k, v in self._written.items() if k in live}
            self._changed = {k: v for k, v in self._changed.items() if k in groups or k in self._dirty}
        return self._apply(planned)

    def sync_changed(self, view: ClusterView) -> Outcome:
        """A round for the loop: only the groups whose pods changed since the last round, or a
        full round once `full_every` seconds have passed (LWS changes, e.g. an opt-out, are seen
        there). Never raises for an API error."""
        if time.monotonic() - self._last_full >= self.full_every:
            return self.sync(view)
        with self._lock:
            dirty, self._dirty = self._dirty, set()
        return self._apply(plan(view, self.all_lws, only=dirty)) if dirty else Outcome()

    def _apply(self, planned: Plan) -> Outcome:
        started = time.monotonic()
        outcome = Outcome()
        for entry in planned.entries:
            if entry.action != PATCH:
                with self._lock:
                    self._written.pop(entry.key, None)
                continue
            if self._awaiting_own_write(entry):
                continue
            self._patch(entry, outcome, started)
        return outcome

    def _awaiting_own_write(self, entry: Entry) -> bool:
        """True while the view lags behind our own last write to this leader — it still shows a
        state from before that write (its state then, or one of our earlier writes), for at most
        IN_FLIGHT_SECONDS — and that write set the same status: only a status flip is urgent; a
        new reason waits for the view to catch up, which wakes the next round anyway."""
        with self._lock:
            written = self._written.get(entry.key)
        if written is None:
            return False
        wrote, before, at = written
        fresh = time.monotonic() - at < IN_FLIGHT_SECONDS
        return fresh and _seen(entry) in before and wrote is not None and wrote[0] == entry.want.status

    def _patch(self, entry: Entry, outcome: Outcome, started: float) -> None:
        if self.pods is None:
            raise RuntimeError("a plan-only Reconciler cannot patch")
        result = patch_condition(self.pods, entry, outcome)
        self.observer.patched(result)
        if result == PATCHED:
            with self._lock:
                previous = self._written.get(entry.key)
                before = {_seen(entry)}
                if previous is not None and _seen(entry) in previous[1]:
                    before |= previous[1] | {previous[0]}
                self._written[entry.key] = (_want(entry), frozenset(before), time.monotonic())
                changed = self._changed.get((entry.namespace, entry.lws, entry.group_index), started)
            if entry.want.ready and (entry.current is None or entry.current.status != "True"):
                self.observer.ready_after(max(0.0, time.monotonic() - changed))

    def run_until(self, current_view: loop.ViewSource, stop: threading.Event, interval: float) -> None:
        """Rounds until `stop`: woken by pod changes, else every `interval` seconds."""
        self.full_every = interval
        loop.reconcile_until(self.sync_changed, current_view, stop, interval, wake=self.wake, name=NAME)


def _want(entry: Entry) -> Seen:
    return (entry.want.status, entry.want.reason, entry.want.message)


def _seen(entry: Entry) -> Seen:
    current = entry.current
    return None if current is None else (current.status, current.reason, current.message)


def run_elected(api: client.ApiClient, namespace: str, work: election.Work) -> None:
    """Campaign for the Lease `guardhook-group-readiness` forever, running `work(stop)` while
    holding it (`guardhook.reconcile.election`). Blocks."""
    election.run_elected(api, namespace, LEASE_NAME, work, name=NAME)


def start_background_sync(
    api: client.ApiClient,
    namespace: str,
    view: ClusterView,
    all_lws: bool = False,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    elect: bool = True,
    stop: threading.Event | None = None,
    observer: Observer | None = None,
) -> threading.Thread:
    """Start the reconciler on a daemon thread over the live `view` (for `guardhook serve
    --sync-group-readiness`) until `stop` is set (for the life of the process without one); with
    `elect`, only while this replica holds its Lease."""
    reconciler = Reconciler(api, all_lws, observer)
    return loop.follow_in_background(
        NAME, reconciler, view, interval, api, namespace, LEASE_NAME, elect, stop
    )
