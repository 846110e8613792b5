"""Running the group-readiness reconciler: `guardhook group-readiness` and
`guardhook serve --sync-group-readiness`.

A `Reconciler` subscribes to the view's pod changes: a change to a pod of an LWS group wakes the
round loop at once (so a condition follows the view within a round trip, not an interval) and
stamps the time the view saw that group change. Each round plans from the view
(`guardhook.readiness.desired.plan`) and patches only what differs; a condition it has just
written is not written again while the view has not caught up with its own write. With several
replicas only the holder of the Lease `guardhook-group-readiness` reconciles (the election and loop
every reconciler shares, `guardhook.reconcile`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from kubernetes import client

from guardhook.cluster.lws import member_of_pod
from guardhook.cluster.view.store import PODS, ClusterView
from guardhook.readiness.apply import PATCHED, Outcome, PodStatusApi, patch_condition
from guardhook.readiness.desired import PATCH, Entry, Plan, plan
from guardhook.reconcile import election, loop

NAME = "group-readiness"
LEASE_NAME = "guardhook-group-readiness"
DEFAULT_INTERVAL_SECONDS = 10.0
"""Full resync period; pod changes wake a round at once (LWS changes wait for the resync)."""

GroupKey = tuple[str, str, int]
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
        self._changed: dict[GroupKey, float] = {}
        self._written: dict[tuple[str, str, str], tuple[Seen, Seen]] = {}

    # ---- the view listener ------------------------------------------------------------------

    def watch(self, view: ClusterView) -> None:
        """Wake a round on every change to a pod of an LWS group in `view`."""
        view.subscribe(self._pod_changed)

    def _pod_changed(self, kind: str, old: Any, new: Any) -> None:
        if kind != PODS:
            return
        member = member_of_pod(new if new is not None else old)
        if member is None:
            return
        with self._lock:
            self._changed[(member.namespace, member.lws_name, member.group_index)] = time.monotonic()
        self.wake.set()

    # ---- rounds -----------------------------------------------------------------------------

    def plan(self, view: ClusterView) -> Plan:
        return plan(view, self.all_lws)

    def sync(self, view: ClusterView) -> Outcome:
        """One round: plan from `view`, patch what differs. Never raises for an API error."""
        started = time.monotonic()
        planned = self.plan(view)
        outcome = Outcome()
        live = {entry.key for entry in planned.entries}
        with self._lock:
            self._written = {k: v for k, v in self._written.items() if k in live}
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
        """True while the view lags behind our own last write to this leader (it still shows what
        it showed then) and that write set the same status: only a status flip is urgent; a new
        reason waits for the view to catch up, which wakes the next round anyway."""
        with self._lock:
            written = self._written.get(entry.key)
        if written is None:
            return False
        wrote, seen = written
        return seen == _seen(entry) and wrote is not None and wrote[0] == entry.want.status

    def _patch(self, entry: Entry, outcome: Outcome, started: float) -> None:
        if self.pods is None:
            raise RuntimeError("a plan-only Reconciler cannot patch")
        result = patch_condition(self.pods, entry, outcome)
        self.observer.patched(result)
        if result == PATCHED:
            with self._lock:
                self._written[entry.key] = (_want(entry), _seen(entry))
                changed = self._changed.get((entry.namespace, entry.lws, entry.group_index), started)
            if entry.want.ready and (entry.current is None or entry.current.status != "True"):
                self.observer.ready_after(max(0.0, time.monotonic() - changed))

    def run_until(self, current_view: loop.ViewSource, stop: threading.Event, interval: float) -> None:
        """Rounds until `stop`: woken by pod changes, else every `interval` seconds."""
        loop.reconcile_until(self.sync, current_view, stop, interval, wake=self.wake, name=NAME)


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
    --sync-group-readiness`). Without election, setting `stop` ends it; an elected one runs for the
    life of the process."""
    reconciler = Reconciler(api, all_lws, observer)
    reconciler.watch(view)

    def work(term: threading.Event) -> None:
        reconciler.run_until(lambda: view, term, interval)

    if elect:
        return loop.start_background(NAME, work, api, namespace, LEASE_NAME)
    return loop.start_background(NAME, work, stop=stop)
