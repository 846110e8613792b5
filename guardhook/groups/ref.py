"""The group reference every policy reads: set, key, rank, size, restart advice, recreator."""

from __future__ import annotations

from dataclasses import dataclass

LWS_ORDINAL = "LeaderWorkerSet (Ordinal)"
LWS_HASH = "LeaderWorkerSet (Hash)"
KTHENA = "Kthena ModelServing"
POD_GROUP = "PodGroup"
GROVE = "Grove PodCliqueSet"
JOBSET = "JobSet"
MAKERS = (LWS_ORDINAL, LWS_HASH, KTHENA, POD_GROUP, GROVE, JOBSET)
"""The group makers guardhook knows, as messages and `audit` name them."""


@dataclass(frozen=True, slots=True, order=True)
class SetRef:
    """The set a group belongs to: the object whose groups share one disruption budget (an LWS,
    a Workload, or the PodGroups' common controller owner). `kind` is the object's kind. Ordered
    by namespace, kind, name (plans and reports list sets so)."""

    namespace: str
    kind: str
    name: str

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"


@dataclass(frozen=True, slots=True)
class Rank:
    """A pod's place in its group: worker 0 is the leader (Kthena: the entry pod); None for a
    gang member, which has no rank."""

    worker: int | None

    @property
    def is_leader(self) -> bool:
        return self.worker == 0

    def __str__(self) -> str:
        if self.worker is None:
            return "member"
        return "leader" if self.worker == 0 else f"worker {self.worker}"


@dataclass(frozen=True, slots=True)
class Recreator:
    """Who recreates a broken group and how, for messages: `controller` ("LeaderWorkerSet
    controller", "Kthena ModelServing controller", "" for none), the field that says how
    (`restartPolicy`, `recoveryPolicy`) and its value, and whether that value recreates the whole
    group when one pod goes."""

    controller: str
    field: str
    policy: str
    recreates_group: bool

    def describe(self) -> str:
        """`under restartPolicy X the LeaderWorkerSet controller recreates the whole group`, or
        what happens when nothing recreates it."""
        if not self.controller:
            return "nothing recreates the group: it stays broken until its pods are replaced"
        if self.recreates_group:
            return f"under {self.field} {self.policy} the {self.controller} recreates the whole group"
        return (
            f"under {self.field} {self.policy} the {self.controller} replaces only the pod, which "
            "joins nothing until the group restarts"
        )


NO_RECREATOR = Recreator("", "", "", False)


@dataclass(frozen=True, slots=True)
class GroupRef:
    """A pod's group, however it is made (guardhook.groups).

    `key` is the group's key as a string: an ordinal ("3"), a Hash group's 40-character key, a
    Kthena group's ordinal, or a PodGroup's name; the view, the ledger and every plan index the
    group by it (guardhook.groups.keys.GroupKey: no integer index anywhere). `size` is None when
    nothing says how big the group is. `restart` lists the pods a user deletes to restart the
    group (empty when there is no such pod, e.g. a gang). `maker` is one of
    guardhook.groups.ref.MAKERS. `inconsistent` says how the pod's labels disagreed with its
    controller ("" when they agree)."""

    set: SetRef
    key: str
    rank: Rank
    size: int | None
    restart: tuple[str, ...]
    recreator: Recreator
    maker: str
    inconsistent: str = ""

    @property
    def is_leader(self) -> bool:
        return self.rank.is_leader

    @property
    def is_gang(self) -> bool:
        """A gang member (a Workload API PodGroup, a Grove replica, a JobSet Job: no rank): no
        leader restarts the group, and removing any member breaks the whole gang."""
        return self.rank.worker is None

    def describe(self) -> str:
        """`group 3 of LeaderWorkerSet ns/name` (a Hash key shown whole: it is what the labels say)."""
        return f"group {self.key} of {self.set}"

    def note(self) -> str:
        """A sentence for an answer when the labels were inconsistent ("" when they were not)."""
        if not self.inconsistent:
            return ""
        judged = f"judged as {self.rank} of group {self.key}"
        return f" (its labels were inconsistent: {self.inconsistent}; {judged})"
