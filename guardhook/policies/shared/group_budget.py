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

import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass

from guardhook.cluster.groups import view_group_health
from guardhook.cluster.lws import LeaderWorkerSet, int_annotation, member_of_pod
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.ledger import Disruption, Entries, Ledger, LedgerError
from guardhook.policies.base import ALLOW, TOO_MANY_REQUESTS, Judgement, Violation

BUDGET_ANNOTATION = "guardhook.io/max-disrupted-groups"


@dataclass(frozen=True)
class GroupDisruption:
    """One pod's removal in group terms: the pod, its LWS, its group, the budget B and the groups
    the view shows broken (group index -> why)."""

    pod: PodRecord
    lws: LeaderWorkerSet
    group: int
    budget: int
    broken_in_view: Mapping[int, str]


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


def broken_in_view(view: ClusterView, lws: LeaderWorkerSet) -> dict[int, str]:
    """group index -> why, for every group below `spec.replicas` the view shows not whole."""
    broken: dict[int, str] = {}
    for index in range(lws.replicas):
        health = view_group_health(view, lws, index)
        if not health.whole:
            broken[index] = "; ".join(health.problems)
    return broken


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
    view: ClusterView, lws: LeaderWorkerSet, broken: Mapping[int, str], entries: Entries
) -> dict[int, str]:
    """`broken` plus the groups of `pending` ledger entries (recorded, not visible yet)."""
    merged = dict(broken)
    for entry in pending(view, lws, entries):
        merged.setdefault(entry.group, f"eviction of {entry.pod} recorded, not visible yet")
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


def describe_broken(broken: Mapping[int, str]) -> str:
    """`group 1 (why); group 3 (why)`, or "none"."""
    return "; ".join(f"group {index} ({why})" for index, why in sorted(broken.items())) or "none"


def budget_message(disruption: GroupDisruption, broken: Mapping[int, str], what: str) -> str:
    """The 429 denial's text: `what` ("evicting pod ns/name") would break a group while
    `broken` (group index -> why, ledger entries included) already fill the budget."""
    lws = disruption.lws
    return (
        f"{what} would break group {disruption.group} of LeaderWorkerSet "
        f"{lws.namespace}/{lws.name}, but {groups_broken(len(broken), lws.replicas)} already broken "
        f"and at most {disruption.budget} may be broken at a time ({budget_source(lws)}): "
        f"{describe_broken(broken)}. Retry once a broken group is whole again"
    )
