"""The group disruption budget shared by `group-eviction`, delete-based drains (`worker-delete`) and
`group-taint`: at most B groups of one LWS broken at a time (design.md §2).

B is the LWS annotation `guardhook.io/max-disrupted-groups`, else the policy's `maxDisruptedGroups`.
A group counts as broken when the view shows it not whole, or when the ledger holds an unexpired
disruption of it that the view does not show yet. Disrupting a broken group is always allowed.
Disrupting a whole group is allowed while fewer than B groups are broken and is then recorded in
the ledger (one atomic update per LWS, so concurrent requests and several replicas cannot exceed B),
unless nothing may be recorded (dry runs, `review`, `check`). The ledger key is (namespace, LWS
name), so evictions and drains of one LWS share the budget.
"""

from __future__ import annotations

import heapq
import itertools
import time
from collections.abc import Collection, Iterable, Iterator, Mapping
from dataclasses import dataclass

from guardhook.cluster.going import Going
from guardhook.cluster.groups import empty_group_health, empty_groups, populated_groups, view_group_health
from guardhook.cluster.lws import LeaderWorkerSet, int_annotation, member_of_pod
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.ledger import Disruption, Entries, Ledger, LedgerError
from guardhook.policies.base import ALLOW, TOO_MANY_REQUESTS, Judgement, Violation

BUDGET_ANNOTATION = "guardhook.io/max-disrupted-groups"
EMPTY_GROUPS_LISTED = 20
"""Messages name at most this many groups with no pods, then say how many more there are."""


class BrokenGroups(Mapping[int, str]):
    """group index -> why, for the groups of one LWS the view shows not whole, without holding
    every index: `spec.replicas` is an int32 (up to 2^31 - 1) and all groups with no pods are
    broken alike. `listed`: the broken groups that have pods (and groups added since, e.g. from
    the ledger); every index below `replicas` not in `populated` is broken with `empty_why`
    (None when a group with no pods counts as whole, i.e. size 0). Lookups and len() are O(1);
    iterating visits every broken group, so callers that only need membership or a count must
    not iterate, and messages use `describe_broken` (bounded)."""

    def __init__(
        self, listed: Mapping[int, str], replicas: int, populated: Collection[int], empty_why: str | None
    ) -> None:
        self.listed = dict(listed)
        self.replicas = replicas
        self.populated = frozenset(populated)
        self.empty_why = empty_why

    def _empty(self, index: int) -> bool:
        return self.empty_why is not None and 0 <= index < self.replicas and index not in self.populated

    @property
    def empty_count(self) -> int:
        """How many broken groups have no pods (and are not listed)."""
        if self.empty_why is None:
            return 0
        listed_empty = sum(1 for index in self.listed if self._empty(index))
        return max(0, self.replicas - len(self.populated)) - listed_empty

    def __getitem__(self, index: int) -> str:
        if index in self.listed:
            return self.listed[index]
        if self._empty(index):
            return self.empty_why  # type: ignore[return-value]  # _empty implies not None
        raise KeyError(index)

    def __contains__(self, index: object) -> bool:
        return isinstance(index, int) and (index in self.listed or self._empty(index))

    def __len__(self) -> int:
        return len(self.listed) + self.empty_count

    def empty_indexes(self) -> Iterator[int]:
        """The unlisted groups with no pods, ascending (lazily: there may be 2^31 of them)."""
        if self.empty_why is None:
            return iter(())
        return (i for i in range(self.replicas) if i not in self.populated and i not in self.listed)

    def __iter__(self) -> Iterator[int]:
        return heapq.merge(sorted(self.listed), self.empty_indexes())

    def shown(self, limit: int = EMPTY_GROUPS_LISTED) -> list[int]:
        """The broken groups a listing names, ascending: every listed one and the first `limit`
        with no pods (`len(self) - len(shown)` are left unnamed)."""
        return list(heapq.merge(sorted(self.listed), itertools.islice(self.empty_indexes(), limit)))

    def with_group(self, index: int, why: str) -> BrokenGroups:
        """A copy with group `index` broken for `why`, unless it is broken already."""
        return self.with_groups((index,), why)

    def with_groups(self, indexes: Iterable[int], why: str) -> BrokenGroups:
        """A copy with every group in `indexes` broken for `why`, unless broken already."""
        listed = dict(self.listed)
        for index in indexes:
            if index not in self:
                listed[index] = why
        return BrokenGroups(listed, self.replicas, self.populated, self.empty_why)


@dataclass(frozen=True)
class GroupDisruption:
    """One pod's removal in group terms: the pod, its LWS, its group, the budget B and the groups
    the view shows broken (group index -> why)."""

    pod: PodRecord
    lws: LeaderWorkerSet
    group: int
    budget: int
    broken_in_view: BrokenGroups


def budget_of(lws: LeaderWorkerSet, default: int) -> int:
    """B for `lws`: its `guardhook.io/max-disrupted-groups` annotation, else `default`."""
    return int_annotation(lws.annotations, BUDGET_ANNOTATION, default)


def budget_source(lws: LeaderWorkerSet) -> str:
    """Where `budget_of(lws, ...)` took B from, for messages: the LWS's annotation when it holds a
    non-negative integer, else the policy's `maxDisruptedGroups` parameter (default 1), saying so
    when an annotation is there but not usable."""
    raw = lws.annotations.get(BUDGET_ANNOTATION)
    if raw is None:
        return "config parameter maxDisruptedGroups"
    if raw.isdigit():
        return f"annotation {BUDGET_ANNOTATION}"
    return (
        f"config parameter maxDisruptedGroups; annotation {BUDGET_ANNOTATION}: {raw!r} is not a whole number"
    )


def groups_broken(count: int, replicas: int | None = None) -> str:
    """`1 of its 4 groups is broken` / `2 of its groups are broken`: a count of broken groups with
    the verb agreeing."""
    total = f"{replicas} " if replicas is not None else ""
    return f"{count} of its {total}groups {'is' if count == 1 else 'are'}"


def broken_in_view(view: ClusterView, lws: LeaderWorkerSet, going: Going | None = None) -> BrokenGroups:
    """group index -> why, for every group below `spec.replicas` the view shows not whole (a going
    pod breaks its group; `going`: the judge to use, default Going(view)). Work is proportional to
    the LWS's pods in the view, not to `spec.replicas` (see BrokenGroups)."""
    populated = populated_groups(view, lws)
    broken: dict[int, str] = {}
    going = going if going is not None else Going(view)
    for index in populated:
        health = view_group_health(view, lws, index, going)
        if not health.whole:
            broken[index] = "; ".join(health.problems)
    empty = empty_group_health(lws)
    empty_why = None if empty.whole or not empty_groups(lws, populated) else "; ".join(empty.problems)
    return BrokenGroups(broken, lws.replicas, populated, empty_why)


def group_disruption(view: ClusterView, pod: PodRecord, default_budget: int) -> GroupDisruption | None:
    """The group context of removing `pod`, or None for a pod outside any LWS the view knows (the
    LWS is gone and its pods are being collected) or of a group beyond `spec.replicas`."""
    member = member_of_pod(pod)
    if member is None:
        return None
    lws = view.lws(member.namespace, member.lws_name)
    if lws is None or member.group_index >= lws.replicas:
        return None
    return GroupDisruption(
        pod, lws, member.group_index, budget_of(lws, default_budget), broken_in_view(view, lws)
    )


def pending(view: ClusterView, lws: LeaderWorkerSet, entries: Entries) -> Entries:
    """Ledger entries still to count: of a group below `spec.replicas`, whose pod the view still
    shows present (same uid) and not terminating. Once the view shows the pod going, the view itself
    counts the group as broken."""
    kept = []
    for entry in entries:
        pod = view.pod(lws.namespace, entry.pod)
        gone = pod is None or pod.uid != entry.uid or pod.terminating or pod.terminal
        if entry.group < lws.replicas and not gone:
            kept.append(entry)
    return tuple(kept)


def with_pending(
    view: ClusterView, lws: LeaderWorkerSet, broken: BrokenGroups, entries: Entries
) -> BrokenGroups:
    """`broken` plus the groups of `pending` ledger entries (recorded, not visible yet)."""
    merged = broken
    for entry in pending(view, lws, entries):
        merged = merged.with_group(entry.group, f"eviction of {entry.pod} recorded, not visible yet")
    return merged


def ledger_key(lws: LeaderWorkerSet) -> tuple[str, str]:
    """The eviction ledger's key for `lws`: (namespace, name), shared by evictions, drains and
    group-taint's read of it, so all of them count against one budget."""
    return (lws.namespace, lws.name)


def too_many(message: str) -> Judgement:
    """A denial with 429 TooManyRequests, which `kubectl drain` retries."""
    return Judgement(violation=Violation(message, code=TOO_MANY_REQUESTS))


def within_budget(group: int, broken: Collection[int], budget: int) -> bool:
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
) -> Judgement:
    """Allow or deny (429) removing `disruption.pod` by the budget and the ledger and, when allowed
    from a whole group, record it — in one atomic ledger update unless nothing may be recorded.
    `what` starts the denial ("evicting pod ns/name"); `recorded_advisory`, when given, is the
    warning an allowed removal of a whole group carries."""

    def plan(entries: Entries) -> tuple[Judgement, Entries | None]:
        broken = with_pending(view, disruption.lws, disruption.broken_in_view, entries)
        if disruption.group in broken:
            return ALLOW, None
        if not within_budget(disruption.group, broken, disruption.budget):
            return too_many(budget_message(disruption, broken, what)), None
        pod = disruption.pod
        # Stamped with the ledger's own clock, the one that later decides expiry.
        now = ledger.now() if ledger is not None else time.time()
        record = Disruption(disruption.group, pod.name, pod.uid, now + ttl)
        # Entries leave storage only by expiry: a replica whose view lags still counts them.
        kept = tuple(e for e in entries if e.group < disruption.lws.replicas)
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


def describe_broken(broken: BrokenGroups) -> str:
    """`group 1 (why); group 3 (why)`, or "none". Every broken group with pods is named, and at
    most EMPTY_GROUPS_LISTED of those with no pods, then "and N more groups with no pods (why)"."""
    shown = broken.shown()
    text = "; ".join(f"group {index} ({broken[index]})" for index in shown)
    more = len(broken) - len(shown)
    if more > 0:
        text += f"; and {more} more group{'s' if more > 1 else ''} with no pods ({broken.empty_why})"
    return text or "none"


def budget_message(disruption: GroupDisruption, broken: BrokenGroups, what: str) -> str:
    """The 429 denial's text: `what` ("evicting pod ns/name") would break a group while
    `broken` (group index -> why, ledger entries included) already fill the budget."""
    lws = disruption.lws
    return (
        f"{what} would break group {disruption.group} of LeaderWorkerSet "
        f"{lws.namespace}/{lws.name}, but {groups_broken(len(broken), lws.replicas)} already broken "
        f"and at most {disruption.budget} may be broken at a time ({budget_source(lws)}): "
        f"{describe_broken(broken)}. Retry once a broken group is whole again"
    )
