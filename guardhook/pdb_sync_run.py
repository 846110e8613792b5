"""Running the per-group PDB reconciler: `guardhook pdb-sync` and `guardhook serve --sync-group-pdbs`.

Each round plans from the current cluster view (`guardhook.pdb_sync.plan`) and applies the plan
(`guardhook.pdb_apply`). `serve --sync-group-pdbs` plans from the webhook's own live view; a
separate `pdb-sync` process keeps its own live view (`guardhook.view.live`), and `--once` /
`--dry-run` list the cluster once. With several replicas only the holder of the Lease
`guardhook-pdb-sync` in guardhook's namespace reconciles (`kubernetes.leaderelection` with its
LeaseLock); a replica that loses the Lease stops at once and campaigns again.
"""

from __future__ import annotations

import argparse
import json
import logging
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.leaderelection import electionconfig, leaderelection
from kubernetes.leaderelection.resourcelock.leaselock import LeaseLock
from urllib3.exceptions import HTTPError

from guardhook import argtypes
from guardhook.config import DEFAULT_STALE_AFTER_SECONDS
from guardhook.kube import api_client
from guardhook.pdb_apply import Outcome, apply_plan
from guardhook.pdb_sync import Plan, plan
from guardhook.sources import Source, choose_source, in_cluster_namespace, static_view
from guardhook.view.kube_transport import live_view, snapshot_view
from guardhook.view.store import ClusterView

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


def add_pdb_sync_command(commands: Any) -> None:
    """Register `guardhook pdb-sync` on the CLI's subparsers."""
    sync = commands.add_parser("pdb-sync", help="keep one PodDisruptionBudget per group of opted-in LWSs")
    sync.add_argument(
        "--cluster-state", action="append", default=[], metavar="PATH", help="plan only, from manifests"
    )
    sync.add_argument("--kubeconfig", help="the cluster to reconcile (default: in-cluster, then $KUBECONFIG)")
    sync.add_argument(
        "--namespace", help="namespace of the election Lease (default: the pod's, else guardhook-system)"
    )
    sync.add_argument(
        "--interval",
        type=argtypes.positive_seconds,
        default=DEFAULT_INTERVAL_SECONDS,
        help="seconds between rounds",
    )
    sync.add_argument("--once", action="store_true", help="one round, print what changed as JSON, exit")
    sync.add_argument("--dry-run", action="store_true", help="print the plan as JSON and change nothing")
    sync.add_argument(
        "--no-leader-elect", dest="elect", action="store_false", help="reconcile without holding the Lease"
    )
    sync.set_defaults(run=run_pdb_sync)


def plan_document(planned: Plan) -> dict[str, Any]:
    """A plan as printed by `--dry-run`: full objects to create/update, names to delete."""
    return {
        "create": planned.create,
        "update": planned.update,
        "delete": [f"{ns}/{name}" for ns, name in planned.delete],
        "warnings": planned.warnings,
    }


def run_pdb_sync(args: argparse.Namespace) -> int:
    """`guardhook pdb-sync`: exit 0; 1 when a `--once`/`--dry-run` round cannot list or had
    errors; 2 for an unusable kubeconfig."""
    source = choose_source(args.cluster_state, args.kubeconfig)
    if not source.live:
        print(json.dumps(plan_document(plan(static_view(source))), indent=2))
        return 0
    try:
        api = api_client(source)
    except Exception as exc:  # kubernetes' ConfigException and file errors
        print(f"guardhook: cannot use {source.describe()}: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.dry_run or args.once:
        return _one_round(args, source, api)
    live = live_view(source, DEFAULT_STALE_AFTER_SECONDS).start()
    namespace = args.namespace or in_cluster_namespace()

    def work(stop: threading.Event) -> None:
        reconcile_until(api, lambda: live.view, stop, args.interval)

    if args.elect:
        run_elected(api, namespace, work)
    else:
        work(threading.Event())
    return 0


def _one_round(args: argparse.Namespace, source: Source, api: client.ApiClient) -> int:
    try:
        view = snapshot_view(source, DEFAULT_STALE_AFTER_SECONDS)
    except Exception as exc:  # WatchError, connection errors: report, exit 1
        outcome = Outcome(errors=[f"cannot list the cluster: {exc}"])
        print(json.dumps(outcome.as_dict(), indent=2))
        return 1
    if args.dry_run:
        print(json.dumps(plan_document(plan(view)), indent=2))
        return 0
    outcome = sync_once(api, view)
    print(json.dumps(outcome.as_dict(), indent=2))
    return 1 if outcome.errors else 0
