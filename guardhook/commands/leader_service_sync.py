"""`guardhook leader-service-sync`: the leader-service-sync reconciler as its own process, one
round (`--once`), or a plan (`--dry-run`; with `--cluster-state` offline from manifests, where the
InferencePools among the manifests are judged too)."""

from __future__ import annotations

import argparse
import json
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
    from guardhook.cluster.sources import choose_source
    from guardhook.commands.common import live_client, require_cluster
    from guardhook.commands.reconciling import one_round, run_live
    from guardhook.config import load_config
    from guardhook.leadersync.runner import Reconciler, run_elected

    config = load_config(args.config)
    source = choose_source(args.cluster_state, args.kubeconfig)
    require_cluster(source, "leader-service-sync")
    if not source.live:
        return _offline_plan(source, config)
    once = args.dry_run or args.once
    api = live_client(source, retries=not once)  # a one-shot round: no silent retries
    reconciler = Reconciler(api, lambda: config)
    if once:
        return one_round(args, source, reconciler, config.stale_after_seconds, lambda p, _: _print_plan(p))
    return run_live(args, source, api, reconciler, config.stale_after_seconds, run_elected)


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
