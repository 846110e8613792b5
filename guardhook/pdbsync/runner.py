"""Running the per-group PDB reconciler: `guardhook pdb-sync` and `guardhook serve --sync-group-pdbs`.

Each round plans from the current cluster view (`guardhook.pdbsync.desired.plan`) and applies the plan
(`guardhook.pdbsync.apply`). `serve --sync-group-pdbs` plans from the webhook's own live view; a
separate `pdb-sync` process keeps its own live view (`guardhook.cluster.view.live`), and `--once` /
`--dry-run` list the cluster once. With several replicas only the holder of the Lease
`guardhook-pdb-sync` in guardhook's namespace reconciles (`kubernetes.leaderelection` with its
LeaseLock); a replica that loses the Lease stops at once and campaigns again.
"""

from __future__ import annotations

import logging
import socket
import threading
import time
import uuid
from collections.abc import Callable

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock
from urllib3.exceptions import HTTPError

from guardhook.cluster.view.store import ClusterView
from guardhook.pdbsync.apply import Outcome, apply_plan
from guardhook.pdbsync.desired import plan

log = logging.getLogger(__name__)

LEASE_NAME = "guardhook-pdb-sync"
DEFAULT_INTERVAL_SECONDS = 30.0
LEASE_DURATION_SECONDS = 15
RENEW_DEADLINE_SECONDS = 10
RETRY_PERIOD_SECONDS = 2
EXIT_USAGE = 2
SYNC_WAIT_SECONDS = 1.0

ViewSource = Callable[[], ClusterView]
"""Returns the view a round plans from (the live view, or a fresh snapshot)."""


def sync_once(api: client.ApiClient, view: ClusterView) -> Outcome:
    """One round: plan from `view`, apply through the API. Never raises for an API error."""
    return apply_plan(client.PolicyV1Api(api), plan(view))


def reconcile_until(
    api: client.ApiClient, current_view: ViewSource, stop: threading.Event, interval: float
) -> None:
    """Run a round every `interval` seconds until `stop` is set; until the view has synced for the
    first time, check again every SYNC_WAIT_SECONDS instead."""
    while not stop.is_set():
        view = current_view()
        if not view.synced:
            stop.wait(min(interval, SYNC_WAIT_SECONDS))
            continue
        sync_once(api, view)
        stop.wait(interval)


def run_elected(
    api: client.ApiClient, namespace: str, work: Callable[[threading.Event], None], identity: str = ""
) -> None:
    """Campaign for the Lease forever; while holding it run `work(stop)`, setting `stop` when the
    Lease is lost. Blocks: run it on a daemon thread."""
    identity = identity or f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"
    while True:
        lock = LeaseLock(LEASE_NAME, namespace, identity)
        lock.api_instance = client.CoordinationV1Api(api)
        term = threading.Event()
        config = electionconfig.Config(
            lock,
            lease_duration=LEASE_DURATION_SECONDS,
            renew_deadline=RENEW_DEADLINE_SECONDS,
            retry_period=RETRY_PERIOD_SECONDS,
            onstarted_leading=lambda t=term: work(t),
            onstopped_leading=term.set,
        )
        try:
            leaderelection.LeaderElection(config).run()
        except (HTTPError, OSError) as exc:  # the lock lets connection errors through
            log.warning("pdb-sync: election against the API server failed: %s", exc)
        finally:
            term.set()
        log.warning("pdb-sync: not holding the Lease %s/%s; campaigning again", namespace, LEASE_NAME)
        time.sleep(RETRY_PERIOD_SECONDS)


def start_background_sync(
    api: client.ApiClient,
    namespace: str,
    current_view: ViewSource,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    elect: bool = True,
    stop: threading.Event | None = None,
) -> threading.Thread:
    """Start the reconciler on a daemon thread (for `guardhook serve --sync-group-pdbs`). Without
    election, setting `stop` ends it; an elected one runs for the life of the process."""

    def work(term: threading.Event) -> None:
        reconcile_until(api, current_view, term, interval)

    unelected = stop or threading.Event()
    target: Callable[[], None] = (
        (lambda: run_elected(api, namespace, work)) if elect else (lambda: work(unelected))
    )
    thread = threading.Thread(target=target, name="pdb-sync", daemon=True)
    thread.start()
    return thread
