"""`guardhook leader-service-sync`: the leader-service-sync reconciler as its own process, one
round (`--once`), or a plan (`--dry-run`; with `--cluster-state` offline from manifests, where the
InferencePools among the manifests are judged too)."""

from __future__ import annotations

import argparse
import json
import threading
from typing import Any

from guardhook.commands.common import add_reconciler_flags

DEFAULT_INTERVAL_SECONDS = 10.0  # guardhook.leadersync.runner.DEFAULT_INTERVAL_SECONDS


def add_parser(commands: Any) -> None:
    """Register `guardhook leader-service-sync` on the CLI's subparsers."""
    sync = commands.add_parser(
        "leader-service-sync",
        help="narrow to leaders (or report) Services and InferencePools that can match LWS workers",
    )
    add_reconciler_flags(
        sync,
        cluster_state_help="print the plan for these manifests (one line per object) and exit",
        interval_help="seconds between full rounds (default 10; LWS and Service changes wake one at once)",
        interval_default=DEFAULT_INTERVAL_SECONDS,
        dry_run_help="print the plan as JSON; change nothing",
    )
    sync.add_argument(
        "--config",
        metavar="FILE",
        help="policy configuration (YAML): policies.leader-service.actions (Mutate patches, else report)",
    )
    sync.set_defaults(run=run_leader_service_sync)


def run_leader_service_sync(args: argparse.Namespace) -> int:
    """`guardhook leader-service-sync`: exit 0; 1 when a `--once`/`--dry-run` round cannot list the
    cluster or had errors; 2 for an unusable kubeconfig or configuration, or when no cluster is
    configured."""
    from guardhook.cluster.kube_transport import live_view
    from guardhook.cluster.sources import choose_source, in_cluster_namespace
    from guardhook.commands.common import live_client, require_cluster
    from guardhook.config import load_config
    from guardhook.leadersync.runner import Reconciler, run_elected

    config = load_config(args.config)
    source = choose_source(args.cluster_state, args.kubeconfig)
    require_cluster(source, "leader-service-sync")
    if not source.live:
        return _offline_plan(source, config)
    one_round = args.dry_run or args.once
    api = live_client(source, retries=not one_round)  # a one-shot round: no silent retries
    if one_round:
        return _one_round(args, source, Reconciler(api, lambda: config), config.stale_after_seconds)
    live = live_view(source, config.stale_after_seconds)
    reconciler = Reconciler(api, lambda: config)
    reconciler.watch(live.view)
    live.start()

    def work(stop: threading.Event) -> None:
        reconciler.run_until(lambda: live.view, stop, args.interval)

    if args.elect:
        run_elected(api, args.namespace or in_cluster_namespace(), work)
    else:
        work(threading.Event())
    return 0


def _offline_plan(source: Any, config: Any) -> int:
    from guardhook.cluster.pools import POOL_KIND
    from guardhook.cluster.sources import static_view
    from guardhook.cluster.view.manifests import load_paths
    from guardhook.leadersync.desired import plan

    view = static_view(source, config.stale_after_seconds)
    pools = [m.obj for m in load_paths(source.paths) if m.obj.get("kind") == POOL_KIND]
    _print_plan(plan(view, pools, config))
    return 0


def _print_plan(planned: Any) -> None:
    document = {"entries": [e.as_dict() for e in planned.entries], "warnings": planned.warnings}
    print(json.dumps(document, indent=2))


def _one_round(args: argparse.Namespace, source: Any, reconciler: Any, stale_after: float) -> int:
    from guardhook.cluster.kube_transport import snapshot_view

    try:
        view = snapshot_view(source, stale_after)
    except Exception as exc:  # WatchError, connection errors: report, exit 1
        print(json.dumps({"errors": [f"cannot list the cluster: {exc}"]}, indent=2))
        return 1
    if args.dry_run:
        _print_plan(reconciler.plan(view))
        return 0
    outcome = reconciler.sync(view)
    print(json.dumps(outcome.as_dict(), indent=2))
    return 1 if outcome.errors else 0
