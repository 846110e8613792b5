"""The group disruption budget shared by `group-eviction`, delete-based drains (`worker-delete`) and
`group-taint`: at most B groups of one LWS broken at a time (design.md §2).

B is the LWS annotation `guardhook.io/max-disrupted-groups`, else the policy's `maxDisruptedGroups`,
and never below the cluster admin's `minMaxDisruptedGroups` (group-eviction's, default 0: a tenant's
annotation "0" would block every drain of the nodes its groups run on; issue 48).
A group counts as broken when the view shows it not whole, or when the ledger holds an unexpired
disruption of it that the view does not show seen through yet, both from one reading
(`budget_reading`, whose docstring states the invariant and how it holds across replicas).
Disrupting a broken group is always allowed; disrupting a whole group is allowed while fewer than
B groups are broken. Either is then recorded in the ledger — also from a broken group, since a view
that lags may show broken a group that has healed since, whose replacement the removal then takes —
in one atomic update per LWS, so concurrent requests and several replicas cannot exceed B, unless
nothing may be recorded (dry runs, `review`, `check`). The ledger key is (namespace, LWS
name), so evictions and drains of one LWS share the budget.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from guardhook.cluster.annotations import BUDGET_ANNOTATION
from guardhook.cluster.going import Going
from guardhook.cluster.lws import (
    LWS_KIND,
    GroupKey,
    LeaderWorkerSet,
    below_replicas,
    int_annotation,
)
from guardhook.cluster.model import PodRecord, digits
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.broken import BrokenGroups, describe_broken, groups_broken
from guardhook.groups.index import lws_pods
from guardhook.groups.lws import broken_in_pods
from guardhook.groups.placement import GroupMember, member_of_pod
from guardhook.groups.ref import SetRef
from guardhook.groups.stuck import stuck_note
from guardhook.ledger import Disruption, Entries, Ledger, LedgerError
from guardhook.policies.base import ALLOW, TOO_MANY_REQUESTS, Judgement, Violation

MIN_BUDGET_PARAM = "minMaxDisruptedGroups"
"""The parameter (group-eviction's, shared with worker-delete, group-resize, group-taint) that no
LWS's B goes below, whatever its annotation says."""


@dataclass(frozen=True)
class GroupDisruption:
    """One pod's removal in group terms: the pod, its LWS, its group, the budget B, and (read on
    first use, from `view`) the groups the view shows broken (group index -> why)."""

    pod: PodRecord
    lws: LeaderWorkerSet
    group: GroupKey
    budget: int
    view: ClusterView = field(repr=False, compare=False)
    member: GroupMember = field(repr=False, compare=False)
    """The pod's membership as read to find its group (so a message need not read it again)."""

    @functools.cached_property
    def broken_in_view(self) -> BrokenGroups:
        """`broken_in_view(view, lws)`, read the first time it is asked for: the plans start from
        it, while a budget decision reads its own snapshot with the ledger (`budget_reading`), so an
        admission request never pays for this one."""
        return broken_in_view(self.view, self.lws)


def budget_of(lws: LeaderWorkerSet, default: int, minimum: int = 0) -> int:
    """B for `lws`: its `guardhook.io/max-disrupted-groups` annotation, else `default`; never below
    `minimum` (`minMaxDisruptedGroups`: the annotation is the tenant's, the minimum the admin's)."""
    return max(int_annotation(lws.annotations, BUDGET_ANNOTATION, default), minimum)


def min_budget(params: Mapping[str, Any]) -> int:
    """The policy's `minMaxDisruptedGroups` (0 when unset): the least B of any LWS."""
    return int(params.get(MIN_BUDGET_PARAM, 0))


def budget_source(lws: LeaderWorkerSet, budget: int | None = None) -> str:
    """Where `budget_of(lws, ...)` took B from, for messages: the LWS's annotation when it holds a
    non-negative integer, else the policy's `maxDisruptedGroups` parameter (default 1), saying so
    when an annotation is there but not usable; the cluster minimum when `budget` (B as used) is
    above the annotation's value."""
    raw = lws.annotations.get(BUDGET_ANNOTATION)
    if raw is None:
        return "config parameter maxDisruptedGroups"
    if digits(raw):
        if budget is not None and int(raw) < budget:
            return f"config parameter {MIN_BUDGET_PARAM}, above annotation {BUDGET_ANNOTATION}: {raw!r}"
        return f"annotation {BUDGET_ANNOTATION}"
    return (
        f"config parameter maxDisruptedGroups; annotation {BUDGET_ANNOTATION}: {raw!r} is not a whole number"
    )


LwsPods = Mapping[GroupKey, Sequence[PodRecord]]
"""One snapshot of an LWS's pods: group key -> its pods (guardhook.groups.index.lws_pods)."""


def broken_in_view(view: ClusterView, lws: LeaderWorkerSet, going: Going | None = None) -> BrokenGroups:
    """`broken_in_pods` of one snapshot of `lws`'s pods in `view`; `going`: the judge of going
    pods to use (default Going(view))."""
    judge = going if going is not None else Going(view)
    return broken_in_pods(lws, lws_pods(view, lws.namespace, lws.name), judge.doomed)


def group_disruption(
    view: ClusterView, pod: PodRecord, default_budget: int, minimum_budget: int = 0
) -> GroupDisruption | None:
    """The group context of removing `pod`, or None for a pod outside any LWS the view knows (the
    LWS is gone and its pods are being collected) or of a group beyond `spec.replicas`. B is
    `budget_of(lws, default_budget, minimum_budget)`."""
    member = member_of_pod(pod)
    if member is None:
        return None
    lws = view.lws(member.namespace, member.lws_name)
    if lws is None or not below_replicas(member.group_index, lws.replicas):
        return None
    budget = budget_of(lws, default_budget, minimum_budget)
    return GroupDisruption(pod, lws, member.group_index, budget, view, member)


def budget_reading(
    view: ClusterView, lws: LeaderWorkerSet, entries: Entries, going: Going | None = None
) -> BrokenGroups:
    """The groups of `lws` that count as broken for a budget decision, from ONE reading: one
    snapshot of the LWS's pods (`guardhook.groups.index.lws_pods`, taken under the view's lock)
    and the ledger `entries` read in the same ledger update (whose write is a compare-and-swap on
    them).

    The invariant, kept by every budget decision (evictions, delete-based drains, group-taint,
    resize) and across replicas sharing the ledger: at no time are more than B groups of an LWS
    broken by disruptions guardhook allowed, because every allowed disruption of a whole group
    is counted by every later decision, first through its ledger entry and then through the view:

    - a group counts as broken when this snapshot shows it not whole, or when an unexpired entry
      of a group below `spec.replicas` is recorded for it (`BrokenGroups.recorded`: such a group
      may have healed since, so removing from it is judged against the other broken groups, not
      allowed as from a broken one);
    - an entry stops counting only when this same snapshot shows its disruption seen through:
      its group broken (it counts through the view then), or its group whole again with the
      evicted pod replaced (a pod of that name with another uid, created after the entry was
      recorded). A pod the snapshot does not hold, or holds terminating, never frees an entry
      by itself, and no second read of the view is ever combined with this one;
    - entries leave the ledger's storage only by expiry, so a replica whose view lags counts
      them until its own snapshot shows them seen through;
    - a decision that allows a disruption (of a whole group, or of one that counts as broken: the
      snapshot may lag a group that has healed since) writes its entry with a compare-and-swap
      on the entries it read (a Lease resourceVersion precondition; a conflict re-reads the
      ledger, takes a new snapshot and plans again), so two decisions cannot both count from a
      ledger that holds neither's entry.

    `going` judges which pods of the snapshot are going (default Going(view)).

    Premise: a replica's view lags the API server by less than a replacement pod takes to become
    Ready (its ADDED event precedes its Ready by a container start-up and a readiness probe, and a
    broken watch makes the view stale, which answers 429). A group the snapshot shows broken is
    then broken or still healing, and removing from it breaks nothing more.

    Clocks: the entry's `recorded` is the ledger's clock and `created` the API server's (whole
    seconds); a replacement created within the second of the recording, or an entry with no
    `recorded`, counts until its TTL (the safe side)."""
    groups = lws_pods(view, lws.namespace, lws.name)
    # Going pods (guardhook.cluster.going) are judged on this snapshot's records; the node and
    # device taints they meet are the view's current ones, which can only add broken groups.
    broken = broken_in_pods(lws, groups, (going if going is not None else Going(view)).doomed)
    merged = broken
    for entry in entries:
        if not below_replicas(entry.group, lws.replicas) or entry.group in broken:
            continue
        if not replaced(entry, groups.get(entry.group, ())):
            why = f"{recorded_as(entry)}, not visible yet"
            merged = merged.with_groups((entry.group,), why, recorded=True)
    return merged


def recorded_as(entry: Disruption) -> str:
    """What ledger entry `entry` recorded, for a message: "eviction of POD recorded", "delete of
    POD recorded", "resize of POD recorded", "a NoExecute taint dooming it recorded (it evicts
    POD)" (group-taint's entries name a pod of the doomed group), or "disruption of POD recorded"
    for an entry without a known cause (written before entries had one)."""
    if entry.cause == "taint":
        return f"a NoExecute taint dooming it recorded (it evicts {entry.pod})"
    return f"{entry.cause or 'disruption'} of {entry.pod} recorded"


def superseded(entry: Disruption, record: Disruption) -> bool:
    """Whether `record` (a new entry) makes `entry` redundant: the same group, pod name and uid,
    recorded (known time) no later and expiring no later. `record` then counts its group whenever
    `entry` would (`budget_reading`: a replacement created after `record` was recorded is also
    created after `entry` was), so dropping `entry` keeps every count; without it each retry of
    one pod's eviction (kubectl drain retries every 5 s while a PodDisruptionBudget refuses it
    after guardhook allowed it) added an entry to the Lease until its TTL."""
    return (
        (entry.group, entry.pod, entry.uid) == (record.group, record.pod, record.uid)
        and 0.0 < entry.recorded <= record.recorded
        and entry.expires <= record.expires
    )


def replaced(entry: Disruption, pods: Sequence[PodRecord]) -> bool:
    """Whether `pods` (the entry's group, whole) hold a replacement of the entry's pod: same name,
    another uid, created after the entry was recorded."""
    if not entry.recorded:
        return False
    return any(
        pod.name == entry.pod and pod.uid != entry.uid and pod.created > entry.recorded for pod in pods
    )


def ledger_key(lws: LeaderWorkerSet) -> tuple[str, str]:
    """The eviction ledger's key for `lws`: (namespace, name), shared by evictions, drains and
    group-taint's read of it, so all of them count against one budget."""
    return (lws.namespace, lws.name)


def too_many(message: str) -> Judgement:
    """A denial with 429 TooManyRequests, which `kubectl drain` retries."""
    return Judgement(violation=Violation(message, code=TOO_MANY_REQUESTS))


def within_budget(group: GroupKey, broken: Collection[GroupKey], budget: int) -> bool:
    """Whether removing a pod of group `group` is allowed while the groups `broken` of its LWS are
    broken: always from a broken group, else while fewer than `budget` are broken."""
    return group in broken or len(broken) < budget


def judge_budget(
    view: ClusterView,
    disruption: GroupDisruption,
    ledger: Ledger | None,
    may_record: bool,
    ttl: float,
    what: str,
    recorded_advisory: str = "",
    *,
    cause: str,
) -> Judgement:
    """Allow or deny (429) removing `disruption.pod` by the budget and the ledger and, when allowed,
    record it (also from a broken group; an entry of the same pod it supersedes leaves) — in one
    atomic ledger update unless nothing may be recorded.
    Judged from `budget_reading` (one reading of view and ledger; the invariant is stated there),
    never from `disruption.broken_in_view`, which is older than the ledger read.
    `what` starts the denial ("evicting pod ns/name"); `recorded_advisory`, when given, is the
    warning an allowed removal of a whole group carries; `cause` (guardhook.ledger.CAUSES) is what
    the entry records, named when it counts a group for a later request."""

    def plan(entries: Entries) -> tuple[Judgement, Entries | None]:
        # Re-run on every ledger conflict: a fresh snapshot with the entries just read.
        broken = budget_reading(view, disruption.lws, entries)
        # A group counted only through a ledger entry may have healed since (a replica whose view
        # lags cannot tell): removing from it is judged as from a whole group, against the others.
        from_broken = disruption.group in broken and disruption.group not in broken.recorded
        others = len(broken) - (disruption.group in broken.recorded)
        if not from_broken and others >= disruption.budget:
            return too_many(budget_message(disruption, broken, what)), None
        pod = disruption.pod
        # Stamped with the ledger's own clock, the one that later decides expiry.
        now = ledger.now() if ledger is not None else time.time()
        # Recorded also from a group that counts as broken: a lagging view can show a group broken
        # that has healed since, and the pod removed is then its replacement, which breaks it again.
        record = Disruption(disruption.group, pod.name, pod.uid, now + ttl, now, cause)
        # Entries leave storage only by expiry (a replica whose view lags still counts them), or
        # when this record supersedes them: a retried eviction of the same pod is one disruption.
        replicas = disruption.lws.replicas
        kept = tuple(e for e in entries if below_replicas(e.group, replicas) and not superseded(e, record))
        if from_broken:
            return ALLOW, (*kept, record)
        allowed = Judgement(advisories=(recorded_advisory,)) if recorded_advisory else ALLOW
        return allowed, (*kept, record)

    try:
        if ledger is None:
            return plan(())[0]
        if not may_record:
            return plan(ledger.entries(ledger_key(disruption.lws)))[0]
        return ledger.update(ledger_key(disruption.lws), plan)
    except LedgerError as exc:
        return too_many(f"cannot consult the eviction ledger ({exc}); retry shortly")


def budget_message(disruption: GroupDisruption, broken: BrokenGroups, what: str) -> str:
    """The 429 denial's text: `what` ("evicting pod ns/name") would break a group while
    `broken` (group index -> why, ledger entries included) already fill the budget."""
    lws = disruption.lws
    return (
        f"{what} would break group {disruption.group} of LeaderWorkerSet "
        f"{lws.namespace}/{lws.name}, but {groups_broken(len(broken), lws.replicas)} already broken "
        f"and at most {disruption.budget} may be broken at a time ({budget_source(lws, disruption.budget)}): "
        f"{describe_broken(broken)}. Retry once a broken group is whole again"
    ) + stuck_note(disruption.view, SetRef(lws.namespace, LWS_KIND, lws.name))
