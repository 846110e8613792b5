"""Gangs of the Workload API (Kubernetes 1.37, scheduling.k8s.io/v1beta1; KEP-5710 disruptionMode):
a pod whose PodGroup (`spec.schedulingGroup.podGroupName`) says `disruptionMode: all` is a group
member, since one evicted pod costs the whole group. PodGroups with `single` or no disruption mode
are not groups for disruption. A gang whose PodGroup is being deleted is broken: it is going as
a whole.

The set whose groups share one budget is the PodGroup's Workload (`spec.workloadRef.workloadName`),
else its controller owner (the JobSet, LWS, ... that made it), else the PodGroup alone. A gang's
size is its gang `minCount`, else the number of its pods the view holds; nothing recreates a gang
on guardhook's behalf (its controller may), so a denial names no pod to delete instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from guardhook.cluster.annotations import BUDGET_ANNOTATION, count, smallest_budget
from guardhook.cluster.going import Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.podgroups import POD_GROUP_KIND, WORKLOAD_KIND, PodGroupRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.broken import BrokenGroups
from guardhook.groups.health import GroupHealth, group_health
from guardhook.groups.keys import GroupKey
from guardhook.groups.maker import GANG_WORDING, SetSnapshot, sorted_sets
from guardhook.groups.ref import NO_RECREATOR, POD_GROUP, GroupRef, Rank, SetRef


def all_mode_group(view: ClusterView, pod: PodRecord) -> PodGroupRecord | None:
    """The PodGroup `pod` names when the view holds it with `disruptionMode: all`, else None."""
    if not pod.pod_group:
        return None
    group = view.pod_group(pod.namespace, pod.pod_group)
    return group if group is not None and group.all_mode else None


def set_of(group: PodGroupRecord) -> SetRef:
    """The set `group` is budgeted in: its Workload, else its controller owner, else itself."""
    if group.workload:
        return SetRef(group.namespace, WORKLOAD_KIND, group.workload)
    for owner in group.owners:
        if owner.controller:
            return SetRef(group.namespace, owner.kind, owner.name)
    return SetRef(group.namespace, POD_GROUP_KIND, group.name)


def members(view: ClusterView, group: PodGroupRecord) -> list[PodRecord]:
    """The pods of PodGroup `group` the view holds (terminal ones included)."""
    return [p for p in view.pods_in_namespace(group.namespace) if p.pod_group == group.name]


def size_of(group: PodGroupRecord, pods: list[PodRecord]) -> int:
    """A gang's size: its `minCount`, else the pods the view holds of it (terminal ones aside)."""
    if group.min_count is not None:
        return group.min_count
    return max(1, sum(1 for p in pods if not p.terminal))


def set_groups(view: ClusterView, target: SetRef) -> list[PodGroupRecord]:
    """The `disruptionMode: all` PodGroups of set `target`, by name."""
    found = [g for g in view.pod_groups(target.namespace) if g.all_mode and set_of(g) == target]
    return sorted(found, key=lambda g: g.name)


PODGROUP_DELETED = "PodGroup being deleted"
"""The problem of a gang whose PodGroup is terminating."""


def gang_health(
    view: ClusterView, group: PodGroupRecord, pods: list[PodRecord] | None = None, doomed=None
) -> GroupHealth:
    """Whole or broken, as for an LWS group (guardhook.groups.health.group_health); broken too
    while its PodGroup is being deleted: the gang is going as a whole (the PodGroup waits, by its
    protection finalizer, for its pods), so deleting its pods is that group-level removal, as
    deleting a leader is an LWS group's."""
    pods = members(view, group) if pods is None else pods
    health = group_health(group.name, size_of(group, pods), pods, doomed)
    if group.terminating:
        return replace(health, whole=False, problems=(*health.problems, PODGROUP_DELETED))
    return health


def podgroup_ref(view: ClusterView, pod: PodRecord) -> GroupRef | None:
    """The GroupRef of a member of an `all` PodGroup, or None."""
    group = all_mode_group(view, pod)
    if group is None:
        return None
    return GroupRef(
        set=set_of(group),
        key=group.name,
        rank=Rank(None),
        # minCount when set, else the pods the view holds (read only then: a pass over the namespace)
        size=group.min_count if group.min_count is not None else size_of(group, members(view, group)),
        restart=(),
        recreator=NO_RECREATOR,
        maker=POD_GROUP,
    )


def short_gangs(view: ClusterView, namespace: str) -> list[PodGroupRecord]:
    """The `disruptionMode: all` PodGroups of `namespace` with a gang `minCount` that the view
    holds fewer live (not terminal) pods of, by name: the gangs an unseen pod of the namespace
    may belong to (the view lags a pod just created)."""
    counts: dict[str, int] = {}
    for pod in view.pods_in_namespace(namespace):
        if pod.pod_group and not pod.terminal:
            counts[pod.pod_group] = counts.get(pod.pod_group, 0) + 1
    found = [
        g
        for g in view.pod_groups(namespace)
        if g.all_mode and g.min_count is not None and counts.get(g.name, 0) < g.min_count
    ]
    return sorted(found, key=lambda g: g.name)


def set_budget_annotation(
    view: ClusterView, target: SetRef, groups: list[PodGroupRecord]
) -> tuple[str | None, str]:
    """The `guardhook.io/max-disrupted-groups` value a gang set carries, and on what: the set's
    Workload's when the view holds it and it is a whole number, else the smallest whole number
    among its PodGroups'; (None, "") when none is set."""
    workload = view.workload(target.namespace, target.name) if target.kind == WORKLOAD_KIND else None
    if workload is not None and count(workload.annotations, BUDGET_ANNOTATION, -1) >= 0:
        return workload.annotations[BUDGET_ANNOTATION], f"{WORKLOAD_KIND} {target.namespace}/{target.name}"
    return smallest_budget((g.annotations, f"{POD_GROUP_KIND} {target.namespace}/{g.name}") for g in groups)


def gang_snapshot(view: ClusterView, target: SetRef, going: Going | None = None) -> SetSnapshot | None:
    """The SetSnapshot of gang set `target`: its `disruptionMode: all` PodGroups, their pods (one
    pass over the namespace's pods) judged whole or broken, all under the view's lock; None when
    the view holds no such PodGroup."""
    with view.lock:
        groups = set_groups(view, target)
        if not groups:
            return None
        names = {g.name for g in groups}
        found: dict[str, list[PodRecord]] = {name: [] for name in names}
        for pod in view.pods_in_namespace(target.namespace):
            if pod.pod_group in names:
                found[pod.pod_group].append(pod)
        doomed = (going if going is not None else Going(view)).doomed
        listed = {}
        for group in groups:
            health = gang_health(view, group, found[group.name], doomed)
            if not health.whole:
                listed[group.name] = "; ".join(health.problems)
        raw, on = set_budget_annotation(view, target, groups)
    pods = {name: tuple(members) for name, members in found.items() if members}
    return SetSnapshot(
        set=target,
        maker=PodGroupMaker.name,
        desired=len(groups),
        pods=pods,
        broken=BrokenGroups(listed, len(groups), names, None),
        budget_annotation=raw,
        budget_on=on,
        keys=frozenset(names),
        wording=GANG_WORDING,
    )


class PodGroupMaker:
    """Workload API gangs (guardhook.groups.maker.GroupMaker): `disruptionMode: all` PodGroups,
    budgeted per set (`set_of`)."""

    name: str = "PodGroup"
    flavours: tuple[str, ...] = (POD_GROUP,)
    # The Job controller stops a gang whole from kube-system (worker-delete allows kube-system's
    # identities for every gang); nothing else is named by the Workload API.
    gang_controllers: tuple[str, ...] = ()

    def resolve(self, view: ClusterView, pod: PodRecord) -> GroupRef | None:
        """`podgroup_ref`."""
        return podgroup_ref(view, pod)

    def snapshot(self, view: ClusterView, target: SetRef, going: Going | None = None) -> SetSnapshot | None:
        """`gang_snapshot`."""
        return gang_snapshot(view, target, going)

    def recreated_pods(self, view: ClusterView, ref: GroupRef) -> tuple[str, ...]:
        """None knowable: a gang's pods are its controller's to name."""
        return ()

    def group_size(self, view: ClusterView, target: SetRef, key: GroupKey) -> int | None:
        """`size_of` PodGroup `key` of set `target` (its `minCount`, else the pods the view holds
        of it); None when the view holds no such PodGroup of that set."""
        group = view.pod_group(target.namespace, key)
        if group is None or set_of(group) != target:
            return None
        return size_of(group, members(view, group))

    def stand_in(self, view: ClusterView, namespace: str, name: str) -> PodRecord | None:
        """A stand-in member of the one `disruptionMode: all` gang of `namespace` the view holds
        fewer pods of than its `minCount` (`short_gangs`; the view lags a pod just created), else
        None: with several such gangs which one it is cannot be told
        (guardhook.groups.maker.StandIns)."""
        short = short_gangs(view, namespace)
        if len(short) != 1:
            return None
        return PodRecord(namespace, name, "", {}, {}, "", "", False, False, ()).with_fields(
            pod_group=short[0].name
        )

    def sets(self, view: ClusterView) -> Iterator[SetRef]:
        """Every set holding a `disruptionMode: all` PodGroup in `view`."""
        return iter(sorted_sets(set_of(g) for g in view.all_pod_groups() if g.all_mode))


POD_GROUP_MAKER = PodGroupMaker()
