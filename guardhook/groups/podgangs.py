"""Gangs read from their pods alone: the group makers whose sets the view does not hold as
objects (a Grove PodCliqueSet, guardhook.groups.grove; a JobSet, guardhook.groups.jobset).

Such a maker says, for a pod, its set's name and its group's key (`place`); `PodReadMaker` reads
a set's pods of each group through it (`members`) and turns that into the group maker protocol
(guardhook.groups.maker.GroupMaker: resolve, snapshot, recreated_pods, sets), and `PodGang` is one
of its gangs, from which its `snapshot` is read: the one budget (guardhook.budget) counts these
gangs through that snapshot, as any maker's. A new maker of this kind is one module building a
`PodReadMaker` and one line in guardhook.groups.makers.

A gang's size is what its pods show (the maker's `size`: e.g. the highest pod index plus one);
its budget the smallest `guardhook.io/max-disrupted-groups` its pods carry (from the set's pod
templates), else the policy's default.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from guardhook.cluster.annotations import smallest_budget
from guardhook.cluster.going import Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.broken import BrokenGroups
from guardhook.groups.health import group_health
from guardhook.groups.maker import SetSnapshot, Wording, sorted_sets
from guardhook.groups.ref import GroupRef, Rank, Recreator, SetRef

Place = Callable[[PodRecord, "ClusterView | None"], "tuple[str, str, str] | None"]
"""(set name, group key, how the labels disagreed with the controller or "") of a pod, or None."""
Size = Callable[[list[PodRecord], ClusterView], int]
"""A group's size from its pods."""
IsGroup = Callable[[PodRecord, list[PodRecord], ClusterView], bool]
"""Whether a pod's group (with its pods) is a group for disruption at all."""

POD_READ_WORDING = Wording("group", "gang")


@dataclass(frozen=True, slots=True)
class PodGang:
    """One gang of a set read from its pods: `name` is the group's key (a Grove replica index, a
    JobSet Job's name), `size` its size, `pods` the view's pods of it (terminal ones included),
    `maker` its GroupRef.maker flavour, `inconsistent` as on a GroupRef."""

    namespace: str
    name: str
    set: SetRef
    size: int
    maker: str
    pods: tuple[PodRecord, ...] = field(repr=False, default=())
    inconsistent: str = ""


def _always(pod: PodRecord, pods: list[PodRecord], view: ClusterView) -> bool:
    return True


def _key_order(key: str) -> tuple[int, str]:
    return (len(key), key) if key.isdigit() else (0, key)


@dataclass
class PodReadMaker:
    """A group maker (guardhook.groups.maker.GroupMaker) whose sets and groups are read from pods:
    `name` (the registry's), `flavour` (GroupRef.maker, one of guardhook.groups.ref.MAKERS), the
    set's `kind`, who recreates a group (`recreator`), the maker's rules (`place`, `size`,
    `is_group`; see the aliases above), and the identities of its controller as installed
    (`gang_controllers`: guardhook.groups.maker.GroupMaker)."""

    name: str
    flavour: str
    kind: str
    recreator: Recreator
    place: Place
    size: Size
    is_group: IsGroup = _always
    gang_controllers: tuple[str, ...] = ()
    flavours: tuple[str, ...] = field(init=False)

    def __post_init__(self) -> None:
        self.flavours = (self.flavour,)

    def members(self, view: ClusterView, namespace: str, name: str) -> dict[str, list[PodRecord]]:
        """Group key -> the view's pods (terminal ones included) of set `namespace/name`, each
        placed by `place`."""
        found: dict[str, list[PodRecord]] = {}
        for pod in view.pods_in_namespace(namespace):
            placed = self.place(pod, view)
            if placed is not None and placed[0] == name:
                found.setdefault(placed[1], []).append(pod)
        return found

    def group_size(self, view: ClusterView, target: SetRef, key: str) -> int | None:
        """`size` of group `key` of set `target` from its pods in the view; None when `target` is
        not of this maker's kind or the view holds no pod of that group."""
        if target.kind != self.kind:
            return None
        pods = self.members(view, target.namespace, target.name).get(key)
        return self.size(pods, view) if pods else None

    def gang(self, view: ClusterView, pod: PodRecord) -> PodGang | None:
        """The gang `pod` belongs to, or None (not this maker's, or its group is no group for
        disruption). A pod the view has not seen (a pod-to-be) is counted in its gang."""
        placed = self.place(pod, view)
        if placed is None:
            return None
        name, key, why = placed
        target = SetRef(pod.namespace, self.kind, name)
        pods = self.members(view, pod.namespace, name).get(key, [])
        if pod.uid not in {p.uid for p in pods}:
            pods = [*pods, pod]
        if not self.is_group(pod, pods, view):
            return None
        return PodGang(pod.namespace, key, target, self.size(pods, view), self.flavour, tuple(pods), why)

    def gangs(self, view: ClusterView, target: SetRef) -> tuple[PodGang, ...]:
        """The gangs of set `target` the view holds pods of, by key (ordinals in number order)."""
        if target.kind != self.kind:
            return ()
        found = self.members(view, target.namespace, target.name)
        gangs = [
            PodGang(target.namespace, key, target, self.size(pods, view), self.flavour, tuple(pods))
            for key, pods in found.items()
            if pods and self.is_group(pods[0], pods, view)
        ]
        return tuple(sorted(gangs, key=lambda g: _key_order(g.name)))

    def resolve(self, view: ClusterView, pod: PodRecord) -> GroupRef | None:
        """The GroupRef of a pod of one of this maker's gangs (no rank: a gang member), or None."""
        gang = self.gang(view, pod)
        if gang is None:
            return None
        return GroupRef(
            gang.set, gang.name, Rank(None), gang.size, (), self.recreator, self.flavour, gang.inconsistent
        )

    def snapshot(self, view: ClusterView, target: SetRef, going: Going | None = None) -> SetSnapshot | None:
        """The set's gangs (those the view holds pods of) judged whole or broken under the view's
        lock; None when it holds none."""
        with view.lock:
            gangs = self.gangs(view, target)
            if not gangs:
                return None
            doomed = (going if going is not None else Going(view)).doomed
            listed = {}
            for gang in gangs:
                health = group_health(gang.name, gang.size, gang.pods, doomed)
                if not health.whole:
                    listed[gang.name] = "; ".join(health.problems)
            raw, on = budget_annotation(gangs)
        names = frozenset(g.name for g in gangs)
        return SetSnapshot(
            set=target,
            maker=self.name,
            desired=len(gangs),
            pods={g.name: g.pods for g in gangs},
            broken=BrokenGroups(listed, len(gangs), names, None),
            budget_annotation=raw,
            budget_on=on,
            keys=names,
            wording=POD_READ_WORDING,
        )

    def recreated_pods(self, view: ClusterView, ref: GroupRef) -> tuple[str, ...]:
        """None knowable: the pods are generated names of the maker's controllers."""
        return ()

    def sets(self, view: ClusterView) -> Iterator[SetRef]:
        """Every set of this maker the view holds a pod of."""
        found = []
        for pod in view.all_pods():
            placed = self.place(pod, None)
            if placed is not None:
                found.append(SetRef(pod.namespace, self.kind, placed[0]))
        return iter(sorted_sets(found))


def budget_annotation(gangs: tuple[PodGang, ...]) -> tuple[str | None, str]:
    """The smallest whole `guardhook.io/max-disrupted-groups` the gangs' pods carry, and on what
    pod ("Pod ns/name"); (None, "") when none does."""
    return smallest_budget((p.annotations, f"Pod {p.namespace}/{p.name}") for g in gangs for p in g.pods)
