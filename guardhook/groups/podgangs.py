"""Gangs read from their pods alone: the group makers whose sets the view does not hold as
objects (Grove PodCliqueSets, guardhook.groups.grove; JobSets, guardhook.groups.jobset).

Each maker says, for a pod, its set (`SetRef`) and its group's key, and, for a set, the view's
pods of each group; this module turns that into what the gang budget reads
(guardhook.policies.shared.gang_budget): a `PodGang` (its `name` is the group's key, as a
PodGroup's name is), the set's gangs, a gang's pods and health, the set's budget annotation and a
`GroupRef`. A new maker of this kind is one module and one entry in `MAKERS`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from guardhook.cluster.annotations import BUDGET_ANNOTATION
from guardhook.cluster.lws import int_annotation
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.grove import PODCLIQUESET_KIND, grove_member, replica_size
from guardhook.groups.grove import set_members as grove_set_members
from guardhook.groups.health import GroupHealth, group_health
from guardhook.groups.jobset import JOBSET_KIND, is_group, job_size, jobset_member
from guardhook.groups.jobset import set_members as jobset_set_members
from guardhook.groups.ref import GROVE, JOBSET, GroupRef, Rank, Recreator, SetRef


@dataclass(frozen=True, slots=True)
class PodGang:
    """One gang of a set read from its pods: `name` is the group's key (a Grove replica index, a
    JobSet's Job name), `size` its size, `pods` the view's pods of it (terminal ones included),
    `maker` one of guardhook.groups.ref.MAKERS, `inconsistent` as on a GroupRef."""

    namespace: str
    name: str
    set: SetRef
    size: int
    maker: str
    pods: tuple[PodRecord, ...] = field(repr=False, default=())
    inconsistent: str = ""


@dataclass(frozen=True, slots=True)
class _Maker:
    """One maker of pod-read gangs: its name (MAKERS), set kind, recreator, how a pod resolves
    (set name, key, inconsistency) and a set's pods by key, which of those keys are groups, and a
    group's size."""

    maker: str
    kind: str
    recreator: Recreator
    place: Callable[[PodRecord, ClusterView | None], tuple[str, str, str] | None]
    members: Callable[[ClusterView, str, str], dict[str, list[PodRecord]]]
    size: Callable[[list[PodRecord], ClusterView], int]
    is_group: Callable[[PodRecord, list[PodRecord], ClusterView], bool]


def _grove_place(pod: PodRecord, view: ClusterView | None) -> tuple[str, str, str] | None:
    member = grove_member(pod, view)
    return None if member is None else (member.pcs, member.replica, member.inconsistent)


def _jobset_place(pod: PodRecord, view: ClusterView | None) -> tuple[str, str, str] | None:
    member = jobset_member(pod, view)
    return None if member is None else (member.jobset, member.job, member.inconsistent)


def _jobset_is_group(pod: PodRecord, pods: list[PodRecord], view: ClusterView) -> bool:
    member = jobset_member(pod, view)
    return member is not None and is_group(member, pods)


MAKERS: tuple[_Maker, ...] = (
    _Maker(
        GROVE,
        PODCLIQUESET_KIND,
        Recreator("Grove operator", "a PodCliqueSet's", "terminationDelay", True),
        _grove_place,
        grove_set_members,
        replica_size,
        lambda pod, pods, view: True,
    ),
    _Maker(
        JOBSET,
        JOBSET_KIND,
        Recreator("JobSet controller", "failurePolicy", "RestartJobSet (the default action)", True),
        _jobset_place,
        jobset_set_members,
        lambda pods, view: job_size(pods),
        _jobset_is_group,
    ),
)
"""The makers of pod-read gangs, tried in order (a pod is one maker's at most)."""


def _gang(
    view: ClusterView, maker: _Maker, target: SetRef, key: str, pods: list[PodRecord], why: str = ""
) -> PodGang:
    return PodGang(target.namespace, key, target, maker.size(pods, view), maker.maker, tuple(pods), why)


def _placed(view: ClusterView, pod: PodRecord) -> tuple[_Maker, SetRef, str, str] | None:
    for maker in MAKERS:
        placed = maker.place(pod, view)
        if placed is not None:
            return maker, SetRef(pod.namespace, maker.kind, placed[0]), placed[1], placed[2]
    return None


def pod_gang(view: ClusterView, pod: PodRecord) -> PodGang | None:
    """The pod-read gang `pod` belongs to, or None (no such maker's pod, or its maker says the
    pod's group is no group for disruption, e.g. a one-pod Job)."""
    placed = _placed(view, pod)
    if placed is None:
        return None
    maker, target, key, why = placed
    pods = maker.members(view, target.namespace, target.name).get(key, [])
    if pod.uid not in {p.uid for p in pods}:
        pods = [*pods, pod]  # a pod-to-be or one the view has not seen yet
    if not maker.is_group(pod, pods, view):
        return None
    return _gang(view, maker, target, key, pods, why)


def set_gangs(view: ClusterView, target: SetRef) -> tuple[PodGang, ...]:
    """The gangs of set `target` the view holds pods of, by key (ordinals in number order)."""
    for maker in MAKERS:
        if maker.kind != target.kind:
            continue
        found = maker.members(view, target.namespace, target.name)
        gangs = [
            _gang(view, maker, target, key, pods)
            for key, pods in found.items()
            if pods and maker.is_group(pods[0], pods, view)
        ]
        return tuple(sorted(gangs, key=lambda g: (len(g.name), g.name)))
    return ()


def set_budget(gangs: tuple[PodGang, ...], default: int) -> int:
    """The set's budget B: the smallest `guardhook.io/max-disrupted-groups` its pods carry (from
    the pod templates of the PodCliqueSet or JobSet), else `default`."""
    values = [int_annotation(p.annotations, BUDGET_ANNOTATION, -1) for g in gangs for p in g.pods]
    set_values = [v for v in values if v >= 0]
    return min(set_values) if set_values else default


def pod_gang_health(
    gang: PodGang, pods: tuple[PodRecord, ...] | None = None, doomed: Callable[[PodRecord], str] | None = None
) -> GroupHealth:
    """Whole or broken, as for an LWS group (guardhook.groups.health.group_health)."""
    return group_health(gang.name, gang.size, gang.pods if pods is None else pods, doomed)


def pod_gang_ref(view: ClusterView, pod: PodRecord) -> GroupRef | None:
    """The GroupRef of a pod of a pod-read gang, or None."""
    gang = pod_gang(view, pod)
    if gang is None:
        return None
    recreator = next(m.recreator for m in MAKERS if m.maker == gang.maker)
    return GroupRef(
        set=gang.set,
        key=gang.name,
        rank=Rank(None),
        size=gang.size,
        restart=(),
        recreator=recreator,
        maker=gang.maker,
        inconsistent=gang.inconsistent,
    )
