"""`guardhook drain-plan NODE…`: what draining these nodes does to each LeaderWorkerSet, in groups
(guardhook.planning.drain): the groups that lose a pod, the waves that keep every LWS within its
group budget, the evictions the webhook would answer 429 if the nodes were drained at once, and
whether each lost group can be rebuilt on what is left. `guardhook drain-plan --draining` plans the
nodes already draining (cordoned or carrying an autoscaler's drain taint; guardhook.cluster.going).

Exit codes: 0 when every lost group can be rebuilt, 1 when one cannot, a node can never be drained
(its pods' budget is 0) or a wave waits for a group with no pod, 2 on bad input (unknown node,
unreadable state or config, both or neither of NODE and --draining).
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

from guardhook.commands import argtypes
from guardhook.commands.common import (
    EXIT_USAGE,
    LISTING,
    SourceError,
    add_view_flags,
    live_client,
    using_source,
)

if TYPE_CHECKING:
    from guardhook.cluster.sources import Source
    from guardhook.planning.drain import DrainPlan, LwsDrain, PodlessGroups, Wave
    from guardhook.planning.evictions import PlannedGroup
    from guardhook.wire import KubeObject

log = logging.getLogger("guardhook")

EXIT_REBUILDABLE = 0
EXIT_NOT_REBUILDABLE = 1
EVICTION_POLICY = "group-eviction"
DELETE_POLICY = "worker-delete"  # its drainTaintKeys say which taints make a node draining
KEYS_SHOWN = 8
"""Group keys named per list in the text (a Hash key is 40 characters); "… and N more" counts the rest."""


def add_parser(commands: Any) -> None:
    """Register `guardhook drain-plan` on the CLI's subparsers."""
    drain = commands.add_parser(
        "drain-plan",
        help="plan draining nodes in groups: waves within each LWS's group budget, rebuild feasibility",
    )
    drain.add_argument(
        "nodes",
        nargs="*",
        metavar="NODE",
        type=argtypes.dns_subdomain,
        help="nodes to drain, in the order to try them",
    )
    drain.add_argument(
        "--draining",
        action="store_true",
        help="plan the nodes already draining instead: cordoned, or tainted by Karpenter "
        "(karpenter.sh/disrupted), cluster-autoscaler (ToBeDeletedByClusterAutoscaler) or a "
        "worker-delete drainTaintKeys key, or carrying a worker-delete drainConditions node condition "
        "(MaintenancePlanned, DrainInProgress, ...) with status True",
    )
    drain.add_argument(
        "--format", choices=("text", "json"), default="text", help="output format (default text)"
    )
    add_view_flags(drain, "plan on the cluster of this kubeconfig, listed once", enforcement=False)
    drain.set_defaults(run=run_drain_plan)


def run_drain_plan(args: argparse.Namespace) -> int:
    """Print the plan; return 0 (every lost group rebuildable) or 1. Raises SourceError (exit 2)
    for an unknown node or an unusable source."""
    from guardhook.cluster.sources import choose_source
    from guardhook.config import load_config
    from guardhook.planning.drain import UnknownNodeError, plan_drain
    from guardhook.policies.worker_delete import drain_conditions, drain_taint_keys

    if bool(args.nodes) == bool(args.draining):
        problem = (
            "give the nodes to drain or --draining, not both"
            if args.nodes
            else ("no node given: give the nodes to drain, or --draining for the nodes already draining")
        )
        print(f"guardhook drain-plan: {problem}", file=sys.stderr)
        return EXIT_USAGE
    config = load_config(args.config)
    source = choose_source(args.cluster_state, args.kubeconfig)
    objects = _objects(source)
    keys = drain_taint_keys(config.settings(DELETE_POLICY).params)
    conditions = drain_conditions(config.settings(DELETE_POLICY).params)
    try:
        plan = plan_drain(
            objects,
            None if args.draining else args.nodes,
            config.settings(EVICTION_POLICY).params,
            keys,
            conditions,
        )
    except UnknownNodeError as exc:
        raise SourceError(f"{exc} (not in {source.describe()})") from exc
    if args.format == "json":
        json.dump(plan.as_dict(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        render_text(plan, sys.stdout)
    return EXIT_REBUILDABLE if plan.ok else EXIT_NOT_REBUILDABLE


def _objects(source: Source) -> list[KubeObject]:
    from guardhook.cluster.listing import list_cluster
    from guardhook.cluster.sources import EMBEDDED
    from guardhook.cluster.view.manifests import load_paths
    from guardhook.cluster.view.static import embedded_fleet_objects

    if source.live:
        api = live_client(source, retries=False)
        listed = using_source(source, LISTING, lambda: list_cluster(api))
        for note in listed.notes:  # a kind RBAC forbids or the cluster does not serve: skipped
            print(f"guardhook drain-plan: {note}", file=sys.stderr)
        return listed.objects
    if source.kind == EMBEDDED:
        log.warning("no cluster configured: planning on the bundled sample fleet")
        return embedded_fleet_objects()
    return [m.obj for m in load_paths(source.paths)]


def render_text(plan: DrainPlan, out: TextIO) -> None:
    """The plan for people: a table per LWS (counts of groups), the keys of its groups losing a pod
    or broken, a line per wave, the 429s of an all-at-once drain, and one line per LWS on
    rebuilding. Every list of groups names at most KEYS_SHOWN of them, then how many more."""
    if not plan.nodes:  # --draining with no node draining
        print("Draining 0 nodes: no node is cordoned or carries a drain taint", file=out)
    else:
        print(f"Draining {len(plan.nodes)} node{_s(len(plan.nodes))}: {', '.join(plan.nodes)}", file=out)
    for node, why in plan.draining.items():
        print(f"  {node} is draining already ({why})", file=out)
    for stale in plan.stale:
        print(f"  {stale.describe()}", file=out)
    for stuck in plan.stuck:
        print(f"  {stuck.describe()}", file=out)
    header = ("NAMESPACE", "LWS", "BUDGET", "LOSING", "BROKEN-NOW", "LOST", "REBUILDABLE")
    rows = [header] + [
        (
            item.namespace,
            item.name,
            str(item.budget),
            str(len(item.losing)),
            str(item.broken_count),
            str(item.lost),
            str(item.rebuildable),
        )
        for item in plan.lws
    ]
    if plan.lws:
        widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
        for row in rows:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
        for item in plan.lws:
            keys = _keys_line(item)
            if keys:
                print(f"  {item.namespace}/{item.name}: {keys}", file=out)
    else:
        print("  No LeaderWorkerSet group loses a pod and none is broken.", file=out)
    _render_gangs(plan, out)
    for item in plan.lws:
        for warning in item.warnings:
            print(f"  warning: {item.namespace}/{item.name}: {warning}", file=out)
    for podless in plan.podless:
        print(f"  note: {_podless_sentence(podless)}", file=out)
    print(
        f"Waves: {len(plan.waves)} (each starts once the groups broken before it are whole again)", file=out
    )
    for number, wave in enumerate(plan.waves, start=1):
        print(f"  wave {number}: {', '.join(wave.nodes)}{_wave_detail(wave)}", file=out)
    for node in plan.blocked:
        print(f"  blocked: {node} (an eviction there is refused even with every group whole)", file=out)
    for number in plan.stalled:
        print(
            f"  stalled: wave {number} waits for groups with no pod (see the notes); nothing makes them "
            "whole, so the webhook refuses its evictions until they are made",
            file=out,
        )
    if plan.at_once:
        count = len(plan.at_once)
        print(f"Drained at once, the webhook would answer 429 to {count} eviction{_s(count)}:", file=out)
        for refusal in plan.at_once:
            print(f"  {refusal.namespace}/{refusal.pod} on {refusal.node}: {refusal.reason}", file=out)
    else:
        print("Drained at once, the webhook would answer no eviction with 429.", file=out)
    print("After the drain:", file=out)
    for item in (item for item in plan.lws if item.lost):  # the others' broken groups have no pod
        line = (
            f"  {item.namespace}/{item.name}: {item.lost} group{_s(item.lost)} to rebuild, "
            f"room for {item.rebuildable}"
        )
        print(line + (f" ({item.short})" if item.short else ""), file=out)
    for gang in plan.gangs:
        if gang.lost:
            line = (
                f"  {gang.namespace}/{gang.kind}/{gang.name}: {gang.lost} gang{_s(gang.lost)} to place "
                f"whole again, room for {gang.rebuildable}"
            )
            print(line + (f" ({gang.short})" if gang.short else ""), file=out)
    if not any(item.lost for item in plan.lws) and not any(gang.lost for gang in plan.gangs):
        print("  nothing to rebuild", file=out)


def _podless_sentence(podless: PodlessGroups) -> str:
    """The note on an LWS's groups with no live pod (guardhook.planning.drain.PodlessGroups)."""
    count = podless.count
    named = _capped(podless.groups, count - len(podless.groups)) if podless.groups else ""
    if podless.no_pod:
        what = f"{podless.namespace}/{podless.name} has no pod: its {count} group{_s(count)}"
    else:
        what = f"{podless.namespace}/{podless.name}: {count} group{_s(count)}" + (
            f" ({named})" if named else ""
        )
        what += " with no pod"
    return (
        f"{what} {'is' if count == 1 else 'are'} broken and left out of this plan: no drain loses them "
        "and none makes them (is the LWS controller running? a quota?)"
    )


def _render_gangs(plan: DrainPlan, out: TextIO) -> None:
    """A table per gang set (Workload API PodGroups, disruptionMode all), only when the drain
    touches one or one has a broken gang: counts, then the PodGroups by name."""
    if not plan.gangs:
        return
    print("  Gangs (Workload API PodGroups, disruptionMode all):", file=out)
    header = ("NAMESPACE", "SET", "BUDGET", "LOSING", "BROKEN-NOW")
    rows = [header] + [
        (g.namespace, f"{g.kind}/{g.name}", str(g.budget), str(len(g.losing)), str(len(g.broken)))
        for g in plan.gangs
    ]
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    for row in rows:
        print("    " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(), file=out)
    for g in plan.gangs:
        parts = [
            f"{what} {_capped(names)}"
            for what, names in (("losing", g.losing), ("broken now", g.broken))
            if names
        ]
        if parts:
            print(f"    {g.namespace}/{g.kind}/{g.name}: {'; '.join(parts)}", file=out)


def _wave_detail(wave: Wave) -> str:
    parts = []
    if wave.groups:
        parts.append("breaks " + _group_refs(wave.groups))
    else:
        parts.append("breaks no group")
    if wave.retried:
        parts.append(
            f"{len(wave.retried)} eviction{_s(len(wave.retried))} retried until a group is whole again"
        )
    if wave.waits_for or wave.waits_for_not_listed:
        parts.append("waits for " + _group_refs(wave.waits_for, wave.waits_for_not_listed))
    return " — " + "; ".join(parts)


def _keys_line(item: LwsDrain) -> str:
    """`losing groups 0, 1; broken now 4, 5, … and N more` for the table's count columns ("" when
    both are 0). A Hash LWS's groups with no pod have no key: they are counted, not named."""
    parts = []
    if item.losing:
        parts.append(f"losing group{_s(len(item.losing))} {_capped(item.losing)}")
    if item.broken:
        parts.append(f"broken now {_capped(item.broken, item.broken_not_listed)}")
    elif item.broken_not_listed:
        parts.append(f"broken now {item.broken_not_listed} with no pod")
    return "; ".join(parts)


def _group_refs(groups: list[PlannedGroup], not_listed: int = 0) -> str:
    """Groups by their LWS or gang set: `serve/llm-xl group 0` for one, `serve/llm-xl groups 0, 1, …
    and N more` for several (`not_listed`: more groups broken that no key names)."""
    sets: dict[tuple[str, str, str], list[str]] = {}
    for group in groups:
        sets.setdefault((group.namespace, group.kind, group.lws), []).append(group.group)
    parts = []
    alone = len(sets) == 1  # the groups no key names are of this one set
    for (namespace, kind, name), keys in sets.items():
        what = f"{kind} {namespace}/{name} PodGroup" if kind else f"{namespace}/{name} group"
        parts.append(f"{what}{_s(len(keys) + not_listed * alone)} {_capped(keys, not_listed * alone)}")
    if not_listed and not alone:
        parts.append(f"{not_listed} more with no pod")
    return ", ".join(parts)


def _capped(keys: tuple[str, ...] | list[str], not_listed: int = 0) -> str:
    """`keys` joined, at most KEYS_SHOWN of them, then `… and N more` (N counting `not_listed`,
    groups no key names); "-" for none."""
    shown = ", ".join(keys[:KEYS_SHOWN])
    more = len(keys[KEYS_SHOWN:]) + not_listed
    if not more:
        return shown or "-"
    return f"{shown} … and {more} more" if shown else f"{more} with no pod"


def _s(count: int) -> str:
    return "" if count == 1 else "s"
