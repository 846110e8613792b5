"""Capacity counted in groups, per LeaderWorkerSet: desired, whole, broken, and leaders Ready while
their group is incomplete (the leader's readiness is what Services see, so such a group takes
traffic it cannot serve). Used by `guardhook audit` and the /metrics gauges.

Whole and broken follow design.md §1 (guardhook.groups.health.group_health); only groups below
`spec.replicas` count (higher ones are being scaled away).

`spec.replicas` and `size` are int32s the API server accepts up to 2^31 - 1, so nothing here walks
every group index: the groups that have pods in the view are judged one by one, and the rest,
which have no pods and so are all alike, are counted.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import asdict, dataclass

from guardhook.cluster.going import Going
from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.health import GroupHealth, group_health
from guardhook.groups.index import group_keys, group_pods
from guardhook.groups.keys import GroupKey, below_replicas
from guardhook.groups.placement import member_of_pod
from guardhook.groups.ref import GroupRef


@dataclass(frozen=True)
class LwsGroups:
    """Group counts of one LWS. `broken` = desired − whole. `doomed_by_taint`: the groups (below
    `spec.replicas`) with a pod, not yet terminating, that a NoExecute node or device taint in
    force will evict (guardhook.cluster.going; already counted in `broken`)."""

    namespace: str
    name: str
    desired: int
    whole: int
    broken: int
    leader_ready_group_incomplete: int
    doomed_by_taint: int = 0

    def as_dict(self) -> dict[str, object]:
        return asdict(self)


def view_group_health(
    view: ClusterView, lws: LeaderWorkerSet, index: GroupKey, going: Going | None = None
) -> GroupHealth:
    """`group_health` of group `index` of `lws`, judged from the pods in `view`, a going pod
    (guardhook.cluster.going: marked for removal, or under a NoExecute taint it does not tolerate
    forever) breaking the group. `going`: a judge of `view` to reuse across groups."""
    judge = going if going is not None else Going(view)
    return group_health(index, lws.size, group_pods(view, lws.namespace, lws.name, index), judge.doomed)


def populated_groups(view: ClusterView, lws: LeaderWorkerSet) -> list[GroupKey]:
    """The group keys of `lws` that have pods in `view` and count (ordinals below `spec.replicas`;
    every Hash group: keys.below_replicas), in keys.key_order."""
    return [
        index for index in group_keys(view, lws.namespace, lws.name) if below_replicas(index, lws.replicas)
    ]


def empty_groups(lws: LeaderWorkerSet, populated: list[GroupKey]) -> int:
    """How many group indexes below `spec.replicas` have no pods, given the `populated` ones."""
    return max(0, lws.replicas - len(populated))


def empty_group_health(lws: LeaderWorkerSet, index: GroupKey = "0") -> GroupHealth:
    """`group_health` of a group of `lws` with no pods (broken, "0 of N pods exist", unless the
    size is 0)."""
    return group_health(index, lws.size, ())


def ref_group_health(view: ClusterView, ref: GroupRef) -> GroupHealth | None:
    """The health of LWS group `ref` (a pod's, guardhook.groups.resolve): by its LWS in `view`
    when the view holds it, else by the size the pod's `leaderworkerset.sigs.k8s.io/size`
    annotation says (`ref.size`); None when neither says how big the group is."""
    target = ref.set
    lws = view.lws(target.namespace, target.name)
    if lws is not None:
        return view_group_health(view, lws, ref.key)
    if ref.size is None:
        return None
    pods = group_pods(view, target.namespace, target.name, ref.key)
    return group_health(ref.key, ref.size, pods, Going(view).doomed)


def count_groups(view: ClusterView, lws: LeaderWorkerSet) -> LwsGroups:
    """Count the groups of `lws` from the pods in `view`."""
    populated = populated_groups(view, lws)
    whole = empty_groups(lws, populated) if empty_group_health(lws).whole else 0
    leader_ready_incomplete = 0
    doomed = 0
    going = Going(view)
    for index in populated:
        if view_group_health(view, lws, index, going).whole:
            whole += 1
            continue
        pods = group_pods(view, lws.namespace, lws.name, index)
        if any(_serving_leader(pod) for pod in pods):
            leader_ready_incomplete += 1
        if any(_tainted(going, pod) for pod in pods):
            doomed += 1
    return LwsGroups(
        lws.namespace,
        lws.name,
        lws.replicas,
        whole,
        max(0, lws.replicas - whole),
        leader_ready_incomplete,
        doomed,
    )


def _tainted(going: Going, pod: PodRecord) -> bool:
    """Whether a NoExecute taint in force (node or device) will evict `pod`, not yet going."""
    if pod.terminal or pod.terminating:
        return False
    return bool(going.node_doom(pod) or going.device_doom(pod))


def _serving_leader(pod: PodRecord) -> bool:
    member = member_of_pod(pod)
    return member is not None and member.is_leader and pod.ready and not pod.terminating and not pod.terminal


def all_groups(view: ClusterView) -> list[LwsGroups]:
    """`count_groups` for every LWS in `view`, sorted by namespace and name."""
    return list(each_lws_groups(view))


def each_lws_groups(view: ClusterView) -> Iterator[LwsGroups]:
    """`count_groups` of each LWS in `view` in namespace and name order, counted as it is asked for."""
    for lws in sorted(view.all_lws(), key=lambda lws: (lws.namespace, lws.name)):
        yield count_groups(view, lws)
