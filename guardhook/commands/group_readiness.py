"""`guardhook group-readiness`: the group-readiness reconciler as its own process, one round
(`--once`), or a plan (`--dry-run`; with `--cluster-state` offline from manifests)."""

from __future__ import annotations

import argparse
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
    from guardhook.cluster.sources import choose_source, static_view
    from guardhook.commands.common import live_client, require_cluster
    from guardhook.commands.reconciling import one_round, run_live
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
    once = args.dry_run or args.once
    api = live_client(source, retries=not once)  # a one-shot round: no silent retries
    reconciler = Reconciler(api, all_lws)
    if once:
        return one_round(
            args, source, reconciler, config.stale_after_seconds, lambda p, v: _print_plan(p, v, all_lws)
        )
    return run_live(args, source, api, reconciler, config.stale_after_seconds, run_elected)


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
