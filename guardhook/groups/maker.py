"""The protocol every group maker implements, in the shape of Kueue's `jobframework.GenericJob`
(kubernetes-sigs/kueue pkg/controller/jobframework/interface.go): one object per way a group is
made, asked the same few questions by every reader — which group a pod is in (`resolve`), one
consistent reading of a set's groups (`snapshot`: for a budget, a plan or a report), the pods a
recreated group will have (`recreated_pods`), how many pods a group has when whole (`group_size`),
every set it makes in a view (`sets`), and who deletes its gangs' pods as a whole
(`gang_controllers`).

The makers are registered in guardhook.groups.makers (an ordered tuple); a new maker is one module
implementing `GroupMaker` plus one line there.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from guardhook.cluster.going import Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.broken import BrokenGroups
from guardhook.groups.keys import GroupKey, below_replicas
from guardhook.groups.ref import GroupRef, SetRef
from guardhook.wire import KubeObject


@dataclass(frozen=True)
class Wording:
    """How messages name a maker's groups: `label` before a key ("group 3", "PodGroup train-1"),
    `unit` when counting ("2 of its 4 groups", "1 of its 3 gangs"), `qualifier` after a named
    group (" (disruptionMode all)"), and whether a denial names the key with its namespace
    ("PodGroup train/train-1": `namespaced`)."""

    label: str = "group"
    unit: str = "group"
    qualifier: str = ""
    namespaced: bool = False

    def group(self, target: SetRef, key: GroupKey, namespaced: bool | None = None) -> str:
        """`group 3 of LeaderWorkerSet ns/a`, `PodGroup ns/g (disruptionMode all) of Workload ns/w`
        (`namespaced` None: as the maker names it in a denial; False: the key alone, as plans do)."""
        with_ns = self.namespaced if namespaced is None else namespaced
        shown = f"{target.namespace}/{key}" if with_ns else key
        return f"{self.label} {shown}{self.qualifier} of {target}"


LWS_WORDING = Wording()
GANG_WORDING = Wording("PodGroup", "gang", " (disruptionMode all)", True)


@dataclass(frozen=True)
class SetSnapshot:
    """One consistent reading of a set's groups, taken under the view's lock (no watch event lands
    between two groups of it): what a budget decision, a plan or a report reads, once.

    `desired`: how many groups the set wants (an LWS's `spec.replicas`, a set's `disruptionMode:
    all` PodGroups). `pods`: group key -> its pods (terminal ones included), for the groups that
    have pods. `broken`: the groups the view shows not whole, and why (guardhook.groups.broken:
    groups with no pods counted without being listed; a Hash LWS's such groups have no key and are
    only counted: `unnamed_empty`). `budget_annotation`: the raw `guardhook.io/max-disrupted-groups`
    value the set carries (None when none), and `budget_on`: on what ("LeaderWorkerSet ns/a",
    "Workload ns/w", "PodGroup ns/g"). `keys`: the keys of the set's groups when they are named
    (gangs); None when a key is a group of the set by `below_replicas` (LWS). `maker`: the maker's
    registered name (guardhook.groups.makers)."""

    set: SetRef
    maker: str
    desired: int
    pods: Mapping[GroupKey, tuple[PodRecord, ...]]
    broken: BrokenGroups
    budget_annotation: str | None = None
    budget_on: str = ""
    keys: frozenset[GroupKey] | None = None
    wording: Wording = field(default=LWS_WORDING)

    def counts(self, key: GroupKey) -> bool:
        """Whether `key` is one of the set's groups now: a named group of it, else an ordinal
        below `desired` or any Hash key (guardhook.groups.keys.below_replicas). A ledger entry of
        a group that does not count is dropped on the next write."""
        return key in self.keys if self.keys is not None else below_replicas(key, self.desired)

    def whole(self, key: GroupKey) -> bool:
        """Whether group `key` is whole in this snapshot: it has pods, and is not broken."""
        return key in self.pods and key not in self.broken

    @property
    def unnamed_empty(self) -> int:
        """How many groups with no pods are counted without a key (a Hash LWS's; 0 otherwise)."""
        return self.broken.empty_count if self.broken.hashed else 0

    def none_broken(self) -> BrokenGroups:
        """A BrokenGroups of this set with no group broken (a plan that starts with every group
        whole)."""
        return BrokenGroups({}, self.desired, (), None, hashed=self.broken.hashed)


@runtime_checkable
class GroupMaker(Protocol):
    """One way groups are made (an LWS and what serves it, Workload API gangs, ...).

    `name`: how the registry (guardhook.groups.makers) and `SetSnapshot.maker` name it.
    `flavours`: the `GroupRef.maker` values its `resolve` gives (guardhook.groups.ref.MAKERS).
    `gang_controllers`: the identities (usernames) of the controllers that delete the pods of this
    maker's gangs themselves, as a whole (scaling, rolling or restarting them), as their install
    names them: `worker-delete`'s `gangControllers` default (guardhook.groups.makers
    .gang_controllers); () for a maker whose groups have a leader to delete instead."""

    name: str
    flavours: tuple[str, ...]
    gang_controllers: tuple[str, ...]

    def resolve(self, view: ClusterView, pod: PodRecord) -> GroupRef | None:
        """The group `pod` (a view record, or one built from a review's object) is in, when this
        maker made it: controller ownerReference chain first, labels second; else None."""
        ...

    def snapshot(self, view: ClusterView, target: SetRef, going: Going | None = None) -> SetSnapshot | None:
        """One consistent reading of set `target`'s groups under the view's lock; None when the
        view does not hold the set (or `target` is none of this maker's). `going` judges which
        pods are going (default guardhook.cluster.going.Going(view))."""
        ...

    def recreated_pods(self, view: ClusterView, ref: GroupRef) -> tuple[str, ...]:
        """The names of the pods the group `ref` will have once its recreator recreates it, where
        they can be known (empty when not: a Hash group comes back under a new key, a gang's
        pods are its controller's to name)."""
        ...

    def group_size(self, view: ClusterView, target: SetRef, key: GroupKey) -> int | None:
        """How many pods group `key` of set `target` has when whole, as the view says it (an LWS's
        `size`, a gang's `minCount`, else its pods); None when `target` is none of this maker's or
        the view cannot say (drain-plan's rebuild asks it of the gangs a drain loses)."""
        ...

    def sets(self, view: ClusterView) -> Iterator[SetRef]:
        """Every set of this maker in `view` (audit, metrics), in namespace, kind, name order."""
        ...


@runtime_checkable
class StandIns(Protocol):
    """What a group maker may add to GroupMaker: a pod the view has not seen yet (an eviction of a
    pod just created, or already gone) named by its maker's rules, as a stand-in record that
    `resolve` places in its group."""

    def stand_in(self, view: ClusterView, namespace: str, name: str) -> PodRecord | None:
        """A stand-in record for pod `namespace/name` when this maker's rules place it in one
        group of a set the view holds, else None."""
        ...


@runtime_checkable
class Warms(Protocol):
    """What a group maker may add to GroupMaker: an index of the view it builds on first use, built
    now instead (`guardhook serve` at start, so the first request does not pay for it)."""

    def warm(self, view: ClusterView) -> None:
        """Build this maker's indexes of `view` now (they then follow the view's changes)."""
        ...


@runtime_checkable
class Recreates(Protocol):
    """What a group maker may add to GroupMaker: the pods its controller creates when it recreates
    a group, as API objects not yet bound (drain-plan's rebuild places them on the nodes left)."""

    def recreated_objects(self, view: ClusterView, target: SetRef, key: GroupKey) -> list[KubeObject]:
        """The pods group `key` of set `target` comes back as, from the set's templates, named and
        labelled as its controller names and labels them; [] when the view does not hold the set
        (or `target` is none of this maker's)."""
        ...


@runtime_checkable
class Waiting(Protocol):
    """What a group maker may add to GroupMaker: how many groups of a set wait to be placed (held
    by a scheduling gate, claiming nothing yet), so capacity counts them as demand."""

    def waiting_groups(self, view: ClusterView, target: SetRef) -> int:
        """How many groups of set `target` wait to be placed (0 when none, or not this maker's)."""
        ...


@dataclass(frozen=True)
class ScaleRequest:
    """The parts of an admission request a scale-up is read from: the resource (API group,
    plural, subresource: "" or "scale"), the operation, the object's namespace and name, and the
    object before and after (a `/scale` request carries autoscaling/v1 Scale objects)."""

    group: str
    resource: str
    subresource: str
    operation: str
    namespace: str
    name: str
    object: Mapping[str, Any]
    old_object: Mapping[str, Any]


@dataclass(frozen=True)
class GangPods:
    """`count` pods of one kind in each new gang (`role`: e.g. a Grove PodClique's template name):
    their pod `template` (`{metadata, spec}`) when the request carries it, else `like`, a pod the
    view holds of an existing gang (its requests and tolerations: the view's records keep no node
    selectors or affinity)."""

    role: str
    count: int
    template: Mapping[str, Any] | None = None
    like: PodRecord | None = None


@dataclass(frozen=True)
class NewGangs:
    """What a scale-up of a gang set asks to place: `count` new whole gangs (`old` -> `new` of
    what the set's `/scale` counts, a `unit` each: "replica"), each of the pods `pods`, of set
    `set`; `read_from` says where the pod shapes came from (for the answer's model), and
    `placed_by` who places the gangs whole instead of the default scheduler ("" for none)."""

    set: SetRef
    old: int
    new: int
    pods: tuple[GangPods, ...]
    unit: str = "replica"
    read_from: str = ""
    placed_by: str = ""

    @property
    def count(self) -> int:
        """New gangs to place: the rise in what `/scale` counts (0 for none)."""
        return max(0, self.new - self.old)

    @property
    def size(self) -> int:
        """Pods per gang."""
        return sum(p.count for p in self.pods)


@runtime_checkable
class ScaleUps(Protocol):
    """What a group maker may add to GroupMaker: read a scale-up of its sets (or of the objects
    that scale its gangs) as whole new gangs to place, for group-capacity. `scale_resources`:
    the (API group, plural, subresource) it reads."""

    scale_resources: tuple[tuple[str, str, str], ...]

    def new_gangs(self, view: ClusterView, request: ScaleRequest) -> NewGangs | str:
        """The new gangs `request` asks for, or a string: why it cannot be read ("" for nothing
        to say, e.g. a request that scales nothing)."""
        ...


@dataclass(frozen=True)
class ScaledTarget:
    """What the `/scale` of an object a group maker knows counts: `each`, what one replica is (for
    messages: "gang (every pod of every clique of one replica)"), and `pods`, the live pods of each
    replica as the view shows them (empty when it shows none)."""

    each: str
    pods: tuple[int, ...]


@runtime_checkable
class ScaledReplicas(Protocol):
    """What a group maker may add to GroupMaker: read the `/scale` of an object of its own (a
    Grove PodCliqueSet) as replicas of several pods, for the scalers aimed at it."""

    def scaled_target(
        self, view: ClusterView, namespace: str, api_version: str, kind: str, name: str
    ) -> ScaledTarget | None:
        """What the `/scale` of `kind` `namespace/name` counts, when it is one of this maker's
        objects whose replicas are several pods each; else None."""
        ...


def sorted_sets(sets: Iterable[SetRef]) -> list[SetRef]:
    """`sets` in namespace, kind, name order, each once."""
    return sorted(set(sets), key=lambda s: (s.namespace, s.kind, s.name))
