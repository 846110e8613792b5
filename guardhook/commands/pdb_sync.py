"""`guardhook pdb-sync`: the per-group PDB reconciler as its own process, or one round / a plan."""

from __future__ import annotations

import argparse
import json
import threading
from typing import TYPE_CHECKING, Any

from guardhook.commands.common import add_reconciler_flags, live_client, require_cluster

if TYPE_CHECKING:
    from kubernetes import client

    from guardhook.cluster.sources import Source
    from guardhook.pdbsync.desired import Plan


def add_parser(commands: Any) -> None:
    """Register `guardhook pdb-sync` on the CLI's subparsers."""
    sync = commands.add_parser("pdb-sync", help="keep one PodDisruptionBudget per group of opted-in LWSs")
    add_reconciler_flags(
        sync,
        cluster_state_help="plan only, from manifests",
        interval_help="seconds between rounds (default 30)",
        dry_run_help="print the plan as JSON and change nothing",
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
    errors; 2 for an unusable kubeconfig or when no cluster is configured (SourceError)."""
    from guardhook.cluster.kube_transport import live_view
    from guardhook.cluster.sources import choose_source, in_cluster_namespace, static_view
    from guardhook.config import DEFAULT_STALE_AFTER_SECONDS
    from guardhook.pdbsync.desired import plan
    from guardhook.pdbsync.runner import DEFAULT_INTERVAL_SECONDS, reconcile_until, run_elected

    source = choose_source(args.cluster_state, args.kubeconfig)
    require_cluster(source, "pdb-sync")
    if not source.live:
        print(json.dumps(plan_document(plan(static_view(source))), indent=2))
        return 0
    one_round = args.dry_run or args.once
    api = live_client(source, retries=not one_round)  # a one-shot round: no silent retries
    if one_round:
        return _one_round(args, source, api)
    live = live_view(source, DEFAULT_STALE_AFTER_SECONDS).start()
    namespace = args.namespace or in_cluster_namespace()

    def work(stop: threading.Event) -> None:
        reconcile_until(api, lambda: live.view, stop, args.interval or DEFAULT_INTERVAL_SECONDS)

    if args.elect:
        run_elected(api, namespace, work)
    else:
        work(threading.Event())
    return 0


def _one_round(args: argparse.Namespace, source: Source, api: client.ApiClient) -> int:
    from guardhook.cluster.kube_transport import snapshot_view
    from guardhook.config import DEFAULT_STALE_AFTER_SECONDS
    from guardhook.pdbsync.apply import Outcome
    from guardhook.pdbsync.desired import plan
    from guardhook.pdbsync.runner import sync_once

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
