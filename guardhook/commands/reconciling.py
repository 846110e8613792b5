"""What the commands of the view-driven reconcilers (`group-readiness`, `leader-service-sync`) share:
one round against a fresh snapshot (`--once`, `--dry-run`) and the long-running loop on a watched
view, elected or not. The reconcilers themselves (guardhook.readiness, guardhook.leadersync) share
the election and loop machinery of guardhook.reconcile; this is only their command-line side."""

from __future__ import annotations

import argparse
import json
import threading
from collections.abc import Callable
from typing import Any, Protocol

from guardhook.cluster.sources import Source
from guardhook.reconcile.loop import Follower


class ViewReconciler(Follower, Protocol):
    """A reconciler that follows a live view (reconcile.loop.Follower) and plans and syncs from
    one view."""

    def plan(self, view: Any, /) -> Any: ...

    def sync(self, view: Any, /) -> Any: ...


def one_round(
    args: argparse.Namespace,
    source: Source,
    reconciler: ViewReconciler,
    stale_after: float,
    print_plan: Callable[[Any, Any], None],
) -> int:
    """One round against a snapshot of `source` (a view `stale_after` seconds may pass unwatched):
    with `args.dry_run` the plan, printed by `print_plan(planned, view)`, else the sync's outcome as
    JSON. Returns the exit code: 0, or 1 when the cluster cannot be listed or the sync had errors
    (`{"errors": [...]}` printed)."""
    from guardhook.cluster.kube_transport import snapshot_view

    try:
        view = snapshot_view(source, stale_after)
    except Exception as exc:  # WatchError, connection errors: report, exit 1
        print(json.dumps({"errors": [f"cannot list the cluster: {exc}"]}, indent=2))
        return 1
    if args.dry_run:
        print_plan(reconciler.plan(view), view)
        return 0
    outcome = reconciler.sync(view)
    print(json.dumps(outcome.as_dict(), indent=2))
    return 1 if outcome.errors else 0


def run_live(
    args: argparse.Namespace,
    source: Source,
    api: Any,
    reconciler: ViewReconciler,
    stale_after: float,
    run_elected: Callable[[Any, str, Callable[[threading.Event], None]], None],
) -> int:
    """Run `reconciler` on a watched view of `source` until the process stops: a round every
    `args.interval` seconds and on each change it wakes on, under `run_elected`'s Lease in
    `args.namespace` (else the pod's own) with `args.elect`, else at once. Returns 0."""
    from guardhook.cluster.kube_transport import live_view
    from guardhook.cluster.sources import in_cluster_namespace

    live = live_view(source, stale_after)
    reconciler.watch(live.view)
    live.start()

    def work(stop: threading.Event) -> None:
        reconciler.run_until(lambda: live.view, stop, args.interval)

    if args.elect:
        run_elected(api, args.namespace or in_cluster_namespace(), work)
    else:
        work(threading.Event())
    return 0
