"""Running the per-group PDB reconciler: `guardhook pdb-sync` and `guardhook serve --sync-group-pdbs`.

Each round plans from the current cluster view (`guardhook.pdbsync.desired.plan`) and applies the plan
(`guardhook.pdbsync.apply`). `serve --sync-group-pdbs` plans from the webhook's own live view; a
separate `pdb-sync` process keeps its own live view (`guardhook.cluster.view.live`), and `--once` /
`--dry-run` list the cluster once. With several replicas only the holder of the Lease
`guardhook-pdb-sync` in guardhook's namespace reconciles; election and the round loop are the
machinery every reconciler shares (`guardhook.reconcile`).
"""

from __future__ import annotations

import threading

from kubernetes import client

from guardhook.cluster.view.store import ClusterView
from guardhook.pdbsync.apply import Outcome, apply_plan
from guardhook.pdbsync.desired import plan
from guardhook.reconcile import election, loop
from guardhook.reconcile.loop import ViewSource

NAME = "pdb-sync"
LEASE_NAME = "guardhook-pdb-sync"
DEFAULT_INTERVAL_SECONDS = 30.0


def sync_once(api: client.ApiClient, view: ClusterView) -> Outcome:
    """One round: plan from `view`, apply through the API. Never raises for an API error."""
    return apply_plan(client.PolicyV1Api(api), plan(view))


def reconcile_until(
    api: client.ApiClient, current_view: ViewSource, stop: threading.Event, interval: float
) -> None:
    """Run a round every `interval` seconds until `stop` is set (`guardhook.reconcile.loop`)."""
    loop.reconcile_until(lambda view: sync_once(api, view), current_view, stop, interval, name=NAME)


def run_elected(api: client.ApiClient, namespace: str, work: election.Work, identity: str = "") -> None:
    """Campaign for the Lease `guardhook-pdb-sync` forever, running `work(stop)` while holding it
    (`guardhook.reconcile.election`). Blocks: run it on a daemon thread."""
    election.run_elected(api, namespace, LEASE_NAME, work, identity=identity, name=NAME)


def start_background_sync(
    api: client.ApiClient,
    namespace: str,
    current_view: ViewSource,
    interval: float = DEFAULT_INTERVAL_SECONDS,
    elect: bool = True,
    stop: threading.Event | None = None,
) -> threading.Thread:
    """Start the reconciler on a daemon thread (for `guardhook serve --sync-group-pdbs`) until
    `stop` is set (for the life of the process without one); with `elect`, only while this
    replica holds its Lease."""

    def work(term: threading.Event) -> None:
        reconcile_until(api, current_view, term, interval)

    if elect:
        return loop.start_background(NAME, work, api, namespace, LEASE_NAME, stop)
    return loop.start_background(NAME, work, stop=stop)
