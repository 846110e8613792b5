"""The round loop every reconciler runs: plan from the current cluster view and apply, every
`interval` seconds, or at once when woken (a `wake` Event set by a view listener), until stopped.

A round never runs on a view that has not synced yet (it would plan from an empty cluster); a
round that raises is logged and the loop carries on, so an API server outage or a bug in one round
never ends the reconciler.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Any, Protocol

from kubernetes import client

from guardhook.cluster.view.store import ClusterView
from guardhook.reconcile.election import Work, run_elected

log = logging.getLogger(__name__)

SYNC_WAIT_SECONDS = 1.0
STOP_CHECK_SECONDS = 1.0
MIN_ROUND_GAP_SECONDS = 0.02
"""Rounds woken back to back are at least this far apart, so a burst of pod events costs a
few rounds, not one per event."""

ViewSource = Callable[[], ClusterView]
"""Returns the view a round plans from (the live view, or a fresh snapshot)."""
Round = Callable[[ClusterView], Any]
"""One round of a reconciler: plan from the view and apply; its result is not used here."""


def reconcile_until(
    run_round: Round,
    current_view: ViewSource,
    stop: threading.Event,
    interval: float,
    wake: threading.Event | None = None,
    name: str = "reconciler",
) -> None:
    """Run `run_round(view)` every `interval` seconds, or as soon as `wake` is set, until `stop`
    is set; until the view has synced for the first time, check again every SYNC_WAIT_SECONDS
    instead. `stop` is noticed within STOP_CHECK_SECONDS while waiting on `wake`."""
    while not stop.is_set():
        view = current_view()
        if not view.synced:
            stop.wait(min(interval, SYNC_WAIT_SECONDS))
            continue
        if wake is not None:
            wake.clear()  # changes from here on wake the next round
        try:
            run_round(view)
        except Exception:  # one failed round must not end the reconciler
            log.exception("%s: round failed; trying again next round", name)
        _wait(stop, wake, interval)


def _wait(stop: threading.Event, wake: threading.Event | None, interval: float) -> None:
    if wake is None:
        stop.wait(interval)
        return
    stop.wait(MIN_ROUND_GAP_SECONDS)
    deadline = time.monotonic() + interval
    while not stop.is_set():
        left = deadline - time.monotonic()
        if left <= 0 or wake.wait(min(left, STOP_CHECK_SECONDS)):
            return


def start_background(
    name: str,
    work: Work,
    api: client.ApiClient | None = None,
    namespace: str = "",
    lease_name: str = "",
    stop: threading.Event | None = None,
) -> threading.Thread:
    """Run `work(stop)` on a daemon thread called `name` until `stop` is set (for the life of the
    process without one). With `api` and `lease_name` it runs only while this replica holds the
    Lease `namespace/lease_name`, and setting `stop` also ends the campaign for it
    (`election.run_elected`)."""
    unelected = stop or threading.Event()
    if api is not None and lease_name:
        elected_api = api

        def target() -> None:
            run_elected(elected_api, namespace, lease_name, work, name=name, stop=stop)

    else:

        def target() -> None:
            work(unelected)

    thread = threading.Thread(target=target, name=name, daemon=True)
    thread.start()
    return thread


class Follower(Protocol):
    """A reconciler that wakes on a live view's changes (`watch`) and runs rounds until stopped."""

    def watch(self, view: ClusterView, /) -> None: ...

    def run_until(self, current_view: ViewSource, stop: threading.Event, interval: float, /) -> None: ...


def follow_in_background(
    name: str,
    follower: Follower,
    view: ClusterView,
    interval: float,
    api: client.ApiClient,
    namespace: str,
    lease_name: str,
    elect: bool = True,
    stop: threading.Event | None = None,
) -> threading.Thread:
    """Subscribe `follower` to the live `view` and run its rounds (every `interval` seconds, and
    when woken) on a daemon thread called `name` (`start_background`) until `stop` is set (for
    the life of the process without one): with `elect`, only while this replica holds the Lease
    `namespace/lease_name`. For `guardhook serve`'s background reconcilers."""
    follower.watch(view)

    def work(term: threading.Event) -> None:
        follower.run_until(lambda: view, term, interval)

    if elect:
        return start_background(name, work, api, namespace, lease_name, stop)
    return start_background(name, work, stop=stop)
