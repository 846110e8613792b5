"""Policy `group-eviction`: a drain may break at most B groups of one LWS at a time, and never
waits on a group that is already broken (design.md §2).

An eviction is a CREATE on the `pods/eviction` subresource whose object is an Eviction
(`policy/v1`; the API server converts `policy/v1beta1` bodies to v1 before admission) carrying
only the pod's name and namespace, so the pod is looked up in the cluster view. The budget B is
the LWS annotation `guardhook.io/max-disrupted-groups`, else the `maxDisruptedGroups` parameter.

A group counts as broken when the view shows it not whole (fewer than `size` pods, one
terminating or not Ready; a group index below `spec.replicas` with no pods at all), or when the
ledger holds an unexpired eviction from it that the view does not show yet (the evicted pod is
still there, not terminating). Evicting from a broken group is always allowed: the replica is
lost already, and blocking would only stall the drain. Evicting from a whole group is allowed
while fewer than B groups are broken, and is then recorded in the ledger before the answer —
atomically, so concurrent evictions and several guardhook replicas cannot exceed B. Entries
expire after `ledgerTTLSeconds`, so an eviction that something later refused frees its budget.
Dry runs and `guardhook review` record nothing and are judged the same.

An eviction a PodDisruptionBudget in the view will refuse is answered 429 and records nothing.
A denial carries 429 TooManyRequests, which `kubectl drain` retries.

Fail mode: closed with 429 when the view is stale or the ledger cannot be reached. A pod the view
does not know is allowed and recorded nowhere: it is either gone (the API server answers 404,
which a drain treats as done — the LWS deletes the rest of a group once one pod is evicted, so
this is common) or was created within the watch's lag and cannot be Ready, so its group is not
whole; answering 429 would wedge a drain on a pod that no longer exists.
"""

from __future__ import annotations

import time
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from guardhook.cluster.groups import view_group_health
from guardhook.cluster.lws import LeaderWorkerSet, int_annotation, member_of_pod
from guardhook.cluster.model import PodRecord, metadata
from guardhook.cluster.pdb_budget import matching_pdbs, refusal
from guardhook.cluster.view.store import ClusterView
from guardhook.ledger import Disruption, Entries, Ledger, LedgerError
from guardhook.policies.base import (
    ALLOW,
    TOO_MANY_REQUESTS,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)
from guardhook.wire import KubeObject

BUDGET_ANNOTATION = "guardhook.io/max-disrupted-groups"


@dataclass(frozen=True)
class Eviction:
    """What an eviction asks for: the pod, its LWS, and the group states the view shows."""

    pod: PodRecord
    lws: LeaderWorkerSet
    group: int
    budget: int
    broken_in_view: Mapping[int, str]
    """group index -> why the view shows it broken."""


class GroupEviction(Policy):
    id = "group-eviction"
    targets = (target("", "pods", "eviction", "CREATE"),)
    default_actions = ("Deny",)
    fail_closed = True
    stale_code = TOO_MANY_REQUESTS
    params = {"maxDisruptedGroups": 1, "ledgerTTLSeconds": 120}
    # A TTL of 0 forgets each allowed eviction at once: concurrent evictions then break any budget.
    param_minimums = {"ledgerTTLSeconds": 1}

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Allow, or deny with 429 naming the broken groups; see the module docstring."""
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        namespace, name = _evicted_pod(ctx)
        pod = ctx.view.pod(namespace, name)
        if pod is None or pod.terminal or pod.terminating:
            return ALLOW
        eviction = eviction_context(ctx.view, pod, ctx.params)
        if eviction is None:
            return ALLOW
        refused = view_pdb_refusal(ctx.view, pod)
        if refused:
            return _deny(f"evicting pod {namespace}/{name}: {refused}; the API server would refuse it")
        ttl = float(ctx.params.get("ledgerTTLSeconds", 120))
        return _judge_budget(ctx.view, eviction, ctx.ledger, ctx.may_record, ttl)


def _evicted_pod(ctx: PolicyContext) -> tuple[str, str]:
    """(namespace, name) of the pod being evicted: the request's, else the Eviction's metadata."""
    meta = metadata(ctx.object)
    namespace = ctx.namespace or str(meta.get("namespace") or "")
    return namespace, ctx.name


def eviction_context(view: ClusterView, pod: PodRecord, params: Mapping[str, Any]) -> Eviction | None:
    """The eviction's group context, or None for a pod outside any LWS the view knows (the LWS
    is gone and its pods are being collected) or of a group beyond `spec.replicas` (scaling down).
    `params` are the policy's (`maxDisruptedGroups`); the budget is the LWS annotation
    guardhook.io/max-disrupted-groups when set. Also used by `guardhook drain-plan`."""
    member = member_of_pod(pod)
    if member is None:
        return None
    lws = view.lws(member.namespace, member.lws_name)
    if lws is None or member.group_index >= lws.replicas:
        return None
    default = int(params.get("maxDisruptedGroups", 1))
    broken: dict[int, str] = {}
    for index in range(lws.replicas):
        health = view_group_health(view, lws, index)
        if not health.whole:
            broken[index] = "; ".join(health.problems)
    return Eviction(
        pod=pod,
        lws=lws,
        group=member.group_index,
        budget=int_annotation(lws.annotations, BUDGET_ANNOTATION, default),
        broken_in_view=broken,
    )


def view_pdb_refusal(view: ClusterView, pod: PodRecord) -> str | None:
    """Why a PodDisruptionBudget in `view` will refuse evicting `pod`, or None."""
    pdbs = matching_pdbs(view.pdbs_in_namespace(pod.namespace), pod)
    if not pdbs:
        return None
    return pdb_refusal(pdbs, pod, [p for p in view.all_pods() if p.namespace == pod.namespace])


def pdb_refusal(
    pdbs: Iterable[KubeObject], pod: PodRecord, namespace_pods: Sequence[PodRecord]
) -> str | None:
    """The first refusal (guardhook.cluster.pdb_budget.refusal) among `pdbs` matching `pod`, given
    the pods of its namespace; None when every one lets it go."""
    for pdb in pdbs:
        reason = refusal(pdb, pod, namespace_pods)
        if reason:
            return reason
    return None


def within_budget(group: int, broken: Collection[int], budget: int) -> bool:
    """Whether evicting from group `group` is allowed while the groups `broken` of its LWS are
    broken: always from a broken group, else while fewer than `budget` are broken."""
    return group in broken or len(broken) < budget


def _judge_budget(
    view: ClusterView, eviction: Eviction, ledger: Ledger | None, may_record: bool, ttl: float
) -> Judgement:
    """Check the budget against the ledger and, when allowed from a whole group, record it —
    in one atomic ledger update unless nothing may be recorded."""

    def plan(entries: Entries) -> tuple[Judgement, Entries | None]:
        pending = _pending(view, eviction.lws, entries)
        broken = dict(eviction.broken_in_view)
        for entry in pending:
            broken.setdefault(entry.group, f"eviction of {entry.pod} recorded, not visible yet")
        if eviction.group in broken:
            return ALLOW, None
        if not within_budget(eviction.group, broken, eviction.budget):
            return _deny(_budget_message(eviction, broken)), None
        record = Disruption(eviction.group, eviction.pod.name, eviction.pod.uid, time.time() + ttl)
        # Entries leave storage only by expiry: a replica whose view lags still counts them.
        kept = tuple(e for e in entries if e.group < eviction.lws.replicas)
        return ALLOW, (*kept, record)

    try:
        if ledger is None:
            return plan(())[0]
        if not may_record:
            return plan(ledger.entries(_key(eviction)))[0]
        return ledger.update(_key(eviction), plan)
    except LedgerError as exc:
        return _deny(f"cannot consult the eviction ledger ({exc}); retry shortly")


def _pending(view: ClusterView, lws: LeaderWorkerSet, entries: Entries) -> Entries:
    """Entries still to count: of a group below `spec.replicas`, whose pod the view still shows
    present (same uid) and not terminating. Once the view shows the pod going, the view itself
    counts the group as broken (and once the pod is back with a new uid, the group is judged by
    the view alone)."""
    kept = []
    for entry in entries:
        pod = view.pod(lws.namespace, entry.pod)
        gone = pod is None or pod.uid != entry.uid or pod.terminating or pod.terminal
        if entry.group < lws.replicas and not gone:
            kept.append(entry)
    return tuple(kept)


def _budget_message(eviction: Eviction, broken: Mapping[int, str]) -> str:
    lws, pod = eviction.lws, eviction.pod
    groups = "; ".join(f"group {index} ({why})" for index, why in sorted(broken.items())) or "none"
    return (
        f"evicting pod {pod.namespace}/{pod.name} would break group {eviction.group} of LeaderWorkerSet "
        f"{lws.namespace}/{lws.name}, but {len(broken)} of its {lws.replicas} groups "
        f"{'is' if len(broken) == 1 else 'are'} already broken "
        f"and at most {eviction.budget} may be at a time (annotation {BUDGET_ANNOTATION}): {groups}. "
        f"Retry once a broken group is whole again"
    )


def _key(eviction: Eviction) -> tuple[str, str]:
    return (eviction.lws.namespace, eviction.lws.name)


def _deny(message: str) -> Judgement:
    return Judgement(violation=Violation(message, code=TOO_MANY_REQUESTS))


POLICY = GroupEviction()
