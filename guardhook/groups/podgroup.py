"""Gangs of the Workload API (Kubernetes 1.37, scheduling.k8s.io/v1beta1; KEP-5710 disruptionMode):
a pod whose PodGroup (`spec.schedulingGroup.podGroupName`) says `disruptionMode: all` is a group
member, since one evicted pod costs the whole group. PodGroups with `single` or no disruption mode
are not groups for disruption.

The set whose groups share one budget is the PodGroup's Workload (`spec.workloadRef.workloadName`),
else its controller owner (the JobSet, LWS, ... that made it), else the PodGroup alone. A gang's
size is its gang `minCount`, else the number of its pods the view holds; nothing recreates a gang
on guardhook's behalf (its controller may), so a denial names no pod to delete instead.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from guardhook.cluster.going import Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.podgroups import POD_GROUP_KIND, WORKLOAD_KIND, PodGroupRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.health import GroupHealth, group_health
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


def gang_health(
    view: ClusterView, group: PodGroupRecord, pods: list[PodRecord] | None = None, doomed=None
) -> GroupHealth:
    """Whole or broken, as for an LWS group (guardhook.groups.health.group_health)."""
    pods = members(view, group) if pods is None else pods
    return group_health(group.name, size_of(group, pods), pods, doomed)


def podgroup_ref(view: ClusterView, pod: PodRecord) -> GroupRef | None:
    """The GroupRef of a member of an `all` PodGroup, or None."""
    group = all_mode_group(view, pod)
    if group is None:
        return None
    return GroupRef(
        set=set_of(group),
        key=group.name,
        rank=Rank(None),
        size=size_of(group, members(view, group)),
        restart=(),
        recreator=NO_RECREATOR,
        maker=POD_GROUP,
    )


@dataclass(frozen=True, slots=True)
class GangSetGroups:
    """Gang counts of one set (a Workload, the PodGroups' common controller owner, or a lone
    PodGroup; see `set_of`): `gangs` its `disruptionMode: all` PodGroups, `whole` those whole (every
    pod of the size present, Ready, not terminating or going), `broken` = gangs - whole, and
    `broken_names` the broken PodGroups by name."""

    namespace: str
    kind: str
    name: str
    gangs: int
    whole: int
    broken: int
    broken_names: tuple[str, ...]

    def as_dict(self) -> dict[str, object]:
        """camelCase, as Kubernetes writes JSON."""
        return {
            "namespace": self.namespace,
            "kind": self.kind,
            "name": self.name,
            "gangs": self.gangs,
            "whole": self.whole,
            "broken": self.broken,
            "brokenPodGroups": list(self.broken_names),
        }


def each_gang_set(view: ClusterView) -> Iterator[GangSetGroups]:
    """The gang counts of every set holding a `disruptionMode: all` PodGroup in `view`, in
    namespace, kind and name order (`audit`, the /metrics gauges). A gang is judged as a group
    budget judges it (gang_health with guardhook.cluster.going's doomed pods)."""
    by_set: dict[SetRef, list[PodGroupRecord]] = {}
    for group in view.all_pod_groups():
        if group.all_mode:
            by_set.setdefault(set_of(group), []).append(group)
    doomed = Going(view).doomed
    pods: dict[tuple[str, str], list[PodRecord]] = {}  # one pass over each namespace's pods
    for namespace in {t.namespace for t in by_set}:
        for pod in view.pods_in_namespace(namespace):
            if pod.pod_group:
                pods.setdefault((namespace, pod.pod_group), []).append(pod)
    for target in sorted(by_set, key=lambda t: (t.namespace, t.kind, t.name)):
        groups = by_set[target]
        broken = tuple(
            sorted(g.name for g in groups if not gang_health(view, g, pods.get(g.key, []), doomed).whole)
        )
        whole = len(groups) - len(broken)
        yield GangSetGroups(
            target.namespace, target.kind, target.name, len(groups), whole, len(broken), broken
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
