"""One budget decision, for every group maker: allow or refuse removing one pod (an eviction, a
delete-based drain, a resize restart), recording an allowed one in the ledger.

Disrupting a broken group is always allowed; disrupting a whole group is allowed while fewer than
B groups of its set are broken. Either is then recorded in the ledger — also from a broken group,
since a view that lags may show broken a group that has healed since, whose replacement the
removal then takes — in one atomic update per set, so concurrent requests and several replicas
cannot exceed B, unless nothing may be recorded (dry runs, `review`, `check`). Every budget of a
set (evictions, drains, taints, resizes) reads and writes the set's one ledger record.
"""

from __future__ import annotations

import time
from collections.abc import Collection
from dataclasses import dataclass

from guardhook.budget.limit import budget_of, budget_source
from guardhook.budget.reading import reading, superseded
from guardhook.cluster.going import Going
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import (
    BrokenGroups,
    GroupRef,
    SetRef,
    SetSnapshot,
    describe_broken,
    groups_broken,
    resolve,
    snapshot,
)
from guardhook.groups.stuck import stuck_note
from guardhook.ledger import Disruption, Entries, Ledger, LedgerError


@dataclass(frozen=True)
class GroupDisruption:
    """One pod's removal in group terms: the pod, its group (`ref`), one snapshot of its set taken
    when the removal was asked for, and the set's budget B read from that snapshot."""

    pod: PodRecord
    ref: GroupRef
    snapshot: SetSnapshot
    budget: int

    @property
    def group(self) -> str:
        """The group's key."""
        return self.ref.key

    @property
    def set(self) -> SetRef:
        """The group's set."""
        return self.ref.set

    @property
    def broken_in_view(self) -> BrokenGroups:
        """The groups the snapshot shows not whole (no ledger): where plans start from."""
        return self.snapshot.broken

    def subject(self) -> str:
        """`group 3 of LeaderWorkerSet ns/a`, `PodGroup ns/g (disruptionMode all) of Workload ns/w`."""
        return self.snapshot.wording.group(self.set, self.group)

    def source(self) -> str:
        """Where B came from (guardhook.budget.limit.budget_source)."""
        return budget_source(self.snapshot, self.budget)


def group_disruption(
    view: ClusterView,
    pod: PodRecord,
    default: int,
    minimum: int = 0,
    going: Going | None = None,
    ref: GroupRef | None = None,
) -> GroupDisruption | None:
    """The group context of removing `pod`: its group (`ref` when the caller resolved it, else
    guardhook.groups.resolve), one snapshot of its set, and B (`budget_of(snapshot, default,
    minimum)`). None for a pod of no group, of a set the view does not hold (an LWS gone, its pods
    being collected), or of a group that is not one of its set's now (beyond `spec.replicas`:
    scaling down)."""
    ref = ref if ref is not None else resolve(view, pod)
    if ref is None:
        return None
    return _disruption(pod, ref, snapshot(view, ref, going), default, minimum)


def _disruption(
    pod: PodRecord, ref: GroupRef, snap: SetSnapshot | None, default: int, minimum: int
) -> GroupDisruption | None:
    """`pod`'s GroupDisruption from its set's snapshot `snap`; None when the set is not held or
    `ref`'s group is not one of it now."""
    if snap is None or not snap.counts(ref.key):
        return None
    return GroupDisruption(pod, ref, snap, budget_of(snap, default, minimum))


class SetReader:
    """`group_disruption` for many pods of one view that does not change meanwhile (a plan): each
    set is snapshotted once, however many of its pods are asked about."""

    def __init__(self, view: ClusterView, default: int, minimum: int = 0, going: Going | None = None) -> None:
        self.view = view
        self.default = default
        self.minimum = minimum
        self.going = going if going is not None else Going(view)
        self._snapshots: dict[tuple[str, SetRef], SetSnapshot | None] = {}

    def snapshot(self, ref: GroupRef) -> SetSnapshot | None:
        """The snapshot of `ref`'s set, taken on first use."""
        key = (ref.maker, ref.set)
        if key not in self._snapshots:
            self._snapshots[key] = snapshot(self.view, ref, self.going)
        return self._snapshots[key]

    def disruption(self, pod: PodRecord) -> GroupDisruption | None:
        """`group_disruption(view, pod, default, minimum)`, from the cached snapshots."""
        ref = resolve(self.view, pod)
        if ref is None:
            return None
        return _disruption(pod, ref, self.snapshot(ref), self.default, self.minimum)


@dataclass(frozen=True)
class Verdict:
    """A budget decision: `allowed`, else `message` says why not (429 TooManyRequests, which
    `kubectl drain` retries); `from_broken`: allowed because its group counts as broken in the view
    (then the removal breaks nothing more, and callers add no warning)."""

    allowed: bool
    message: str = ""
    from_broken: bool = False


def within_budget(group: str, broken: Collection[str], budget: int) -> bool:
    """Whether removing a pod of group `group` is allowed while the groups `broken` of its set are
    broken: always from a broken group, else while fewer than `budget` are broken."""
    return group in broken or len(broken) < budget


def decide(
    view: ClusterView,
    disruption: GroupDisruption,
    ledger: Ledger | None,
    may_record: bool,
    ttl: float,
    what: str,
    *,
    cause: str,
    stuck_after: float,
    going: Going | None = None,
) -> Verdict:
    """Allow or refuse removing `disruption.pod` by the budget and the ledger and, when allowed,
    record it (also from a broken group; an entry of the same pod it supersedes leaves) — in one
    atomic ledger update unless nothing may be recorded (`may_record` False: a dry run, `review`,
    `check`; or no ledger). Judged from `reading` (the disruption's snapshot and the entries of
    the update; the invariant is stated there): the set is read once per decision, again only when
    a write conflict makes the ledger re-plan. `what` starts the refusal ("evicting pod ns/name");
    `cause` (guardhook.ledger.CAUSES) is what the entry records; `stuck_after` (the configured
    `stuckAfterSeconds`) is when a refusal names a gated group down for good; `going` judges going
    pods on a re-read snapshot."""
    first = [disruption.snapshot]

    def plan(entries: Entries) -> tuple[Verdict, Entries | None]:
        # A write conflict re-plans: with the entries just read and a fresh snapshot.
        snap = first.pop() if first else (snapshot(view, disruption.ref, going) or disruption.snapshot)
        broken = reading(snap, entries)
        # A group counted only through a ledger entry may have healed since (a replica whose view
        # lags cannot tell): removing from it is judged as from a whole group, against the others.
        key = disruption.group
        from_broken = key in broken and key not in broken.recorded
        others = len(broken) - (key in broken.recorded)
        if not from_broken and others >= disruption.budget:
            return Verdict(False, budget_message(view, disruption, snap, broken, what, stuck_after)), None
        pod = disruption.pod
        # Stamped with the ledger's own clock, the one that later decides expiry.
        now = ledger.now() if ledger is not None else time.time()
        # Recorded also from a group that counts as broken: a lagging view can show a group broken
        # that has healed since, and the pod removed is then its replacement, which breaks it again.
        record = Disruption(key, pod.name, pod.uid, now + ttl, now, cause)
        # Entries leave storage only by expiry (a replica whose view lags still counts them), or
        # when this record supersedes them (a retried eviction of the same pod is one disruption),
        # or when their group is no longer one of the set's (scaled away).
        kept = tuple(e for e in entries if snap.counts(e.group) and not superseded(e, record))
        return Verdict(True, from_broken=from_broken), (*kept, record)

    try:
        if ledger is None:
            return plan(())[0]
        if not may_record:
            return plan(ledger.entries(disruption.set))[0]
        return ledger.update(disruption.set, plan)
    except LedgerError as exc:
        return Verdict(False, f"cannot consult the eviction ledger ({exc}); retry shortly")


def budget_message(
    view: ClusterView,
    disruption: GroupDisruption,
    snap: SetSnapshot,
    broken: BrokenGroups,
    what: str,
    stuck_after: float,
) -> str:
    """The refusal's text: `what` ("evicting pod ns/name") would break a group while `broken`
    (group key -> why, ledger entries included) already fill the budget; the groups of `snap`
    down for good (guardhook.groups.stuck, gated ones after `stuck_after` seconds) are named after
    it, since they hold the budget until someone acts."""
    wording = snap.wording
    source = budget_source(snap, disruption.budget)
    return (
        f"{what} would break {disruption.subject()}, but "
        f"{groups_broken(len(broken), snap.desired, wording.unit)} already broken "
        f"and at most {disruption.budget} may be broken at a time ({source}): "
        f"{describe_broken(broken, wording.label)}. Retry once a broken {wording.unit} is whole again"
    ) + stuck_note(view, snap, stuck_after)
