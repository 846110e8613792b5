"""`guardhook group-readiness`: the group-readiness reconciler as its own process, one round
(`--once`), or a plan (`--dry-run`; with `--cluster-state` offline from manifests)."""

from __future__ import annotations

import argparse
import json
import threading
from typing import Any

from guardhook.commands.common import add_reconciler_flags

DEFAULT_INTERVAL_SECONDS = 10.0  # guardhook.readiness.runner.DEFAULT_INTERVAL_SECONDS


def add_parser(commands: Any) -> None:
    """Register `guardhook group-readiness` on the CLI's subparsers."""
    sync = commands.add_parser(
        "group-readiness",
        help="set the guardhook.io/group-ready condition on gated leaders of opted-in LWSs",
    )
    add_reconciler_flags(
        sync,
        cluster_state_help="print the plan for these manifests (one line per leader) and exit",
        interval_help="seconds between full rounds (default 10; pod changes wake a round at once)",
        interval_default=DEFAULT_INTERVAL_SECONDS,
        dry_run_help="print the plan, one line per leader; change nothing",
    )
    sync.add_argument(
        "--config",
        metavar="FILE",
        help="policy configuration (YAML), for policies.group-readiness.allLeaderWorkerSets",
    )
    sync.set_defaults(run=run_group_readiness)


def run_group_readiness(args: argparse.Namespace) -> int:
    """`guardhook group-readiness`: exit 0; 1 when a `--once`/`--dry-run` round cannot list the
    cluster or had errors; 2 for an unusable kubeconfig or configuration, or when no cluster is
    configured (it never plans for the bundled sample fleet)."""
    from guardhook.cluster.kube_transport import live_view
    from guardhook.cluster.sources import choose_source, in_cluster_namespace, static_view
    from guardhook.commands.common import live_client, require_cluster
    from guardhook.config import load_config
    from guardhook.readiness.runner import Reconciler, run_elected

    config = load_config(args.config)
    all_lws = bool(config.settings("group-readiness").params.get("allLeaderWorkerSets", False))
    source = choose_source(args.cluster_state, args.kubeconfig)
    require_cluster(source, "group-readiness")
    if not source.live:
        view = static_view(source, config.stale_after_seconds)
        _print_plan(Reconciler(None, all_lws).plan(view), view, all_lws)
        return 0
    one_round = args.dry_run or args.once
    api = live_client(source, retries=not one_round)  # a one-shot round: no silent retries
    if one_round:
        return _one_round(args, source, Reconciler(api, all_lws), config.stale_after_seconds)
    live = live_view(source, config.stale_after_seconds)
    reconciler = Reconciler(api, all_lws)
    reconciler.watch(live.view)
    live.start()

    def work(stop: threading.Event) -> None:
        reconciler.run_until(lambda: live.view, stop, args.interval)

    if args.elect:
        run_elected(api, args.namespace or in_cluster_namespace(), work)
    else:
        work(threading.Event())
    return 0


def _print_plan(planned: Any, view: Any, all_lws: bool) -> None:
    for warning in planned.warnings:
        print(f"warning: {warning}")
    for entry in planned.entries:
        print(entry.line())
    if not planned.entries and not planned.warnings:
        print(nothing_to_plan(view, all_lws))


def nothing_to_plan(view: Any, all_lws: bool) -> str:
    """The one line for an empty plan: no LeaderWorkerSet opted in (and how to opt in), or the
    opted-in ones have no leader pods yet."""
    from guardhook.groups.ready import OPT_IN_ANNOTATION, opted_in

    opted = [lws for lws in view.all_lws() if opted_in(lws, all_lws)]
    if not opted:
        return (
            f'no LeaderWorkerSet opted in (annotation {OPT_IN_ANNOTATION}: "true", '
            "or policies.group-readiness.allLeaderWorkerSets)"
        )
    names = ", ".join(sorted(f"{lws.namespace}/{lws.name}" for lws in opted))
    return f"no leader pods yet of the opted-in LeaderWorkerSet{'s' if len(opted) > 1 else ''} {names}"


def _one_round(args: argparse.Namespace, source: Any, reconciler: Any, stale_after: float) -> int:
    from guardhook.cluster.kube_transport import snapshot_view

    try:
        view = snapshot_view(source, stale_after)
    except Exception as exc:  # WatchError, connection errors: report, exit 1
        print(json.dumps({"errors": [f"cannot list the cluster: {exc}"]}, indent=2))
        return 1
    if args.dry_run:
        _print_plan(reconciler.plan(view), view, reconciler.all_lws)
        return 0
    outcome = reconciler.sync(view)
    print(json.dumps(outcome.as_dict(), indent=2))
    return 1 if outcome.errors else 0
