"""Policy `group-capacity`: deny a LeaderWorkerSet scale-up whose new groups cannot all be placed.

Sees LWS CREATE, LWS UPDATE and `leaderworkersets/scale` UPDATE. New groups are
`new replicas − old replicas`; a size change re-shapes every group, and since the LWS rolls groups
out under `rolloutStrategy.rollingUpdateConfiguration`, `maxSurge` (an int or a percentage of
replicas, rounded up, as in the LWS controller) groups of the new shape must also fit beside the
old ones. A reserve of `spareGroups` more groups (config, overridden per LWS by the annotation
`guardhook.io/spare-groups`) must fit too. Scale-downs (neither replicas nor size raised) are
always allowed. The feasibility answer comes from guardhook.capacity (exact within its model).

Skipped, with an advisory, when the view holds no nodes (an offline check of manifests), and for a
`/scale` of an LWS the view does not hold. A size change with `maxSurge: 0` replaces groups in
place; that replacement is not checked (advisory).

Fail mode: open. With a stale view the request is allowed with a warning: a scale-up that does
not fit leaves pods Pending, which the scheduler reports; it breaks nothing that runs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from guardhook.cluster.lws import LWS_API_GROUP, LeaderWorkerSet, int_annotation
from guardhook.cluster.model import scaled, spec_replicas
from guardhook.cluster.view.store import ClusterView
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)
from guardhook.wire import KubeObject

if TYPE_CHECKING:
    from guardhook.capacity import Fit, GroupDemand

SPARE_GROUPS_ANNOTATION = "guardhook.io/spare-groups"
ORDINALS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth", "tenth")


@dataclass(frozen=True)
class ScaleUp:
    """The LWS as it will be (`lws`), and its replicas and group size before and after."""

    lws: LeaderWorkerSet
    old_replicas: int
    new_replicas: int
    old_size: int
    new_size: int

    @property
    def raised(self) -> bool:
        return self.new_replicas > self.old_replicas or self.new_size > self.old_size

    @property
    def reshaped(self) -> bool:
        return self.old_replicas > 0 and self.new_size != self.old_size

    def new_groups(self) -> int:
        """Groups of the new shape that must be placed beside what runs now."""
        added = max(0, self.new_replicas - self.old_replicas)
        return added + (surge_groups(self.lws.rollout, self.new_replicas) if self.reshaped else 0)


def surge_groups(rollout: dict[str, Any], replicas: int) -> int:
    """`maxSurge` resolved against `replicas` (LWS: int or "N%", percentages rounded up; default
    0), capped at `replicas`."""
    value = scaled(rollout.get("maxSurge"), replicas, round_up=True, default=0)
    return max(0, min(value, replicas))


class GroupCapacity(Policy):
    id = "group-capacity"
    targets = (
        target(LWS_API_GROUP, "leaderworkersets", "", "CREATE", "UPDATE"),
        target(LWS_API_GROUP, "leaderworkersets", "scale", "UPDATE"),
    )
    default_actions = ("Deny",)
    fail_closed = False
    reads_nodes = True
    params = {"spareGroups": 0}

    def already_running(self, view: ClusterView, obj: KubeObject) -> bool:
        """An LWS whose pods the view holds is running: judged as a CREATE, its own groups would
        be counted as new demand against free capacity."""
        if obj.get("kind") != "LeaderWorkerSet":
            return False
        lws = LeaderWorkerSet(obj)
        return any(view.group_pods(lws.namespace, lws.name, group) for group in range(lws.replicas))

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Deny when not every new whole group (plus the spare reserve) fits; see the module
        docstring."""
        change = read_scale_up(ctx)
        if isinstance(change, str):
            return Judgement(advisories=(change,)) if change else ALLOW
        if not change.raised:
            return ALLOW
        new_groups = change.new_groups()
        if new_groups == 0:
            return Judgement(
                advisories=(
                    f"LeaderWorkerSet {change.lws.name} changes its group size with maxSurge 0: groups are "
                    "replaced in place and the replacements were not checked for capacity",
                )
            )
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        # numpy comes with the index: imported on the first capacity decision, not with the policy
        # registry, so commands that never judge capacity (`review` of a delete) start faster.
        from guardhook.capacity import GroupDemand, fit_groups, index_for, shape_of_template

        index = index_for(ctx.view)
        if index.node_count == 0:
            return Judgement(advisories=("the cluster view holds no nodes; group capacity was not checked",))
        lws = change.lws
        spare = int_annotation(lws.annotations, SPARE_GROUPS_ANNOTATION, int(ctx.params["spareGroups"]))
        demand = GroupDemand(
            leader=shape_of_template(lws.leader_template),
            worker=shape_of_template(lws.worker_template),
            size=max(1, change.new_size),
            count=new_groups + spare,
            namespace=lws.namespace or ctx.namespace,
            exclusive_key=lws.exclusive_topology,
        )
        fit = fit_groups(index, demand)
        if fit.all_fit:
            return ALLOW
        name = lws.name or ctx.name
        return Judgement(violation=Violation(shortfall_message(fit, name, new_groups)))


def read_scale_up(ctx: PolicyContext) -> ScaleUp | str:
    """Replicas and size before and after this request, with the LWS as it will be; or a string:
    an advisory ("" for nothing to say) when the request cannot be read as a scale."""
    if (ctx.request.get("subResource") or "") == "scale":
        name = ctx.name
        lws = ctx.view.lws(ctx.namespace, name)
        if lws is None:
            return (
                f"LeaderWorkerSet {ctx.namespace}/{name} is not in guardhook's view; capacity was not checked"
            )
        new, old = spec_replicas(ctx.object), spec_replicas(ctx.old_object)
        new_replicas = lws.replicas if new is None else new
        old_replicas = lws.replicas if old is None else old
        return ScaleUp(lws, old_replicas, new_replicas, lws.size, lws.size)
    if not ctx.object:
        return ""
    updated = LeaderWorkerSet(ctx.object)
    if ctx.operation == "CREATE":
        return ScaleUp(updated, 0, updated.replicas, updated.size, updated.size)
    before = LeaderWorkerSet(ctx.old_object) if ctx.old_object else updated
    return ScaleUp(updated, before.replicas, updated.replicas, before.size, updated.size)


def _ordinal(n: int) -> str:
    return ORDINALS[n - 1] if 0 < n <= len(ORDINALS) else f"#{n}"


def _groups(n: int) -> str:
    return f"{n} new group" + ("" if n == 1 else "s")


def shortfall_message(fit: Fit, lws_name: str, new_groups: int) -> str:
    """Say how many groups fit and what the next one lacks, e.g. "1 of 2 new groups fits; the
    second needs 4 pods (each nvidia.com/gpu 8, ...) and the 20 eligible nodes have room for 0"."""
    demand = fit.demand
    spare = demand.count - new_groups
    if fit.fits >= new_groups:
        return (
            f"all {_groups(new_groups)} of LeaderWorkerSet {lws_name} fit, but the reserve of {spare} spare "
            f"groups ({SPARE_GROUPS_ANNOTATION} / spareGroups) does not: room for {fit.fits - new_groups} "
            f"of them beside the new ones"
        )
    verb = "fits" if fit.fits == 1 else "fit"
    head = f"{fit.fits} of {_groups(new_groups)} of LeaderWorkerSet {lws_name} {verb} on free capacity"
    needs = f"the {_ordinal(fit.fits + 1)} needs {_pods(demand)}"
    if demand.exclusive_key:
        why = (
            f"with exclusive topology on node label {demand.exclusive_key} each group needs a domain of its "
            f"own: {fit.domains} domains, {fit.domains_taken} already hold a group, "
            f"{fit.domains_free_fitting} of the others can host a whole group"
        )
    elif fit.pod_slots >= 0:
        why = f"the {fit.eligible_worker} eligible nodes have room for {fit.pod_slots} more such pods"
        if fit.limiting:
            why += f" (short of {fit.limiting})"
    else:
        why = f"they do not fit beside the first {fit.fits} on the eligible nodes"
        if fit.limiting:
            why += f" (short of {fit.limiting})"
    text = f"{head}; {needs} and {why}"
    if fit.eligible_worker < fit.nodes or fit.eligible_leader < fit.nodes:
        text += (
            f". Eligible: {fit.eligible_leader} of {fit.nodes} nodes for leaders and "
            f"{fit.eligible_worker} for workers (Ready, schedulable, taints tolerated, nodeSelector and "
            "required node affinity matched)"
        )
    if spare:
        text += f"; {spare} spare groups are reserved on top ({SPARE_GROUPS_ANNOTATION} / spareGroups)"
    return text


def _pods(demand: GroupDemand) -> str:
    if demand.size == 1:
        return f"1 pod ({demand.leader.describe_requests()})"
    if demand.leader.requests == demand.worker.requests:
        return f"{demand.size} pods, each requesting {demand.worker.describe_requests()}"
    workers = demand.size - 1
    return (
        f"a leader requesting {demand.leader.describe_requests()} and {workers} worker"
        f"{'' if workers == 1 else 's'} requesting {demand.worker.describe_requests()} each"
    )


def warm_capacity_index(view: ClusterView) -> None:
    """Build the view's capacity index (guardhook.capacity) before the first request needs it."""
    from guardhook.capacity import index_for

    index_for(view)


POLICY = GroupCapacity()
