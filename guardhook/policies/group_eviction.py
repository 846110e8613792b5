"""Policy `group-eviction`: a drain may break at most B groups of one LWS at a time, and never
waits on a group that is already broken (design.md §2).

An eviction is a CREATE on the `pods/eviction` subresource whose object is an Eviction
(`policy/v1`; the API server converts `policy/v1beta1` bodies to v1 before admission) carrying
only the pod's name and namespace, so the pod is looked up in the cluster view. The budget B is
the LWS annotation `guardhook.io/max-disrupted-groups`, else the `maxDisruptedGroups` parameter.

A group counts as broken when the view shows it not whole (fewer than `size` pods, one
terminating or not Ready; a group index below `spec.replicas` with no pods at all), or when the
ledger holds an unexpired eviction from it that the view does not show seen through yet — both
from one reading (guardhook.budget.reading states the invariant). Evicting from a broken
group is always allowed: the replica is lost already, and blocking would only stall the drain.
Evicting from a whole group is allowed while fewer than B groups are broken, and is then
recorded in the ledger before the answer — atomically, so concurrent evictions and several
guardhook replicas cannot exceed B (the one budget, guardhook.budget, shared with delete-based
drains, group-taint and group-resize). Entries expire after
`ledgerTTLSeconds`, so an eviction that something later refused frees its budget. Dry runs and
`guardhook review` record nothing and are judged the same.

A pod already marked for removal — pod condition `DisruptionTarget` (Kubernetes) or
`TerminationTarget` (Kueue) with status "True" — may be evicted whoever asks: its group is being
disrupted by the component that set the condition. The response says so in an audit annotation.

An eviction a PodDisruptionBudget in the view will refuse is answered 429 and records nothing.
A denial carries 429 TooManyRequests, which `kubectl drain` retries.

Gangs of the Workload API (a pod of a `disruptionMode: all` PodGroup, scheduling.k8s.io/v1beta1;
guardhook.groups.podgroup) are budgeted the same way per set — the PodGroups' Workload, else their
common controller owner — with the same parameters and annotation, by the same budget
(guardhook.budget). PodGroups with `single` or no disruption mode are no groups.

Fail mode: closed with 429 when the view is stale or the ledger cannot be reached. A pod the view
shows terminating, or does not hold while its name is an LWS member's (a stand-in:
guardhook.groups.stand_in), is
allowed — its group counts as broken in the view — and recorded like any allowed eviction: it is
either gone (the API server answers 404, which a drain treats as done; the LWS deletes the rest of
a group once one pod is evicted, so this is common) or the view lags a group that has healed
since, and the pod evicted is the replacement, which breaks that group again; the entry keeps it
counted until the view shows it (guardhook.budget.reading). Answering 429 would wedge a drain
on a pod that no longer exists. A pod the view does not know in a namespace where exactly one
`disruptionMode: all` gang misses pods the view has not seen is judged and recorded as that
gang's. Other pods the view does not know are allowed.
When the API server did not serve LeaderWorkerSets when the view last asked (the CRD was installed
after guardhook started), the view cannot tell, and an LWS pod's eviction is answered 429.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from guardhook.budget import GroupDisruption, default_budget, group_disruption, min_budget, within_budget
from guardhook.cluster.lws import LWS_KIND
from guardhook.cluster.model import PodRecord, metadata
from guardhook.cluster.pdb_budget import matching_pdbs, refusal
from guardhook.cluster.view.store import LEADERWORKERSETS, ClusterView
from guardhook.groups import GroupRef, resolve, stand_in
from guardhook.policies.base import (
    ALLOW,
    TOO_MANY_REQUESTS,
    Judgement,
    Policy,
    PolicyContext,
    allowed_disruption_target,
    stale_judgement,
    target,
)
from guardhook.policies.shared.group_budget import BUDGET_ANNOTATION, judge_budget, too_many
from guardhook.policies.shared.maker_guards import DEFER_PARAM, deferred, item_problem
from guardhook.wire import KubeObject

__all__ = [
    "BUDGET_ANNOTATION",
    "Eviction",
    "eviction_context",
    "pdb_refusal",
    "view_pdb_refusal",
    "within_budget",
]

Eviction = GroupDisruption
"""What an eviction asks for: the pod, its group, one snapshot of its set, and B."""


class GroupEviction(Policy):
    id = "group-eviction"
    targets = (target("", "pods", "eviction", "CREATE"),)
    default_actions = ("Deny",)
    fail_closed = True
    stale_code = TOO_MANY_REQUESTS
    params = {
        "maxDisruptedGroups": 1,
        "ledgerTTLSeconds": 120,
        "minMaxDisruptedGroups": 0,
        # How long a group's pods may stay scheduling-gated before the 429, audit, drain-plan and
        # the guardhook_stuck_groups gauge name it down for good (guardhook.groups.stuck).
        "stuckAfterSeconds": 900,
        # `<maker>=<webhook entry>`: evictions of that maker's groups are left to its own guard
        # (guardhook.policies.shared.maker_guards).
        "deferToMakerGuards": [],
    }
    # A TTL of 0 forgets each allowed eviction at once: concurrent evictions then break any budget.
    param_minimums = {"ledgerTTLSeconds": 1, "stuckAfterSeconds": 0}

    def param_problem(self, name: str, value: Any) -> str | None:
        """`deferToMakerGuards` items must read `<maker>=<webhook entry name>`."""
        return item_problem(value) if name == DEFER_PARAM else None

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Allow, or deny with 429 naming the broken groups; see the module docstring."""
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        namespace, name = _evicted_pod(ctx)
        seen = ctx.view.pod(namespace, name)
        # A pod the view has not seen: named by its group maker's rules (guardhook.groups.stand_in)
        # and judged as its group's, else allowed (a 429 would wedge a drain on a pod that may be
        # gone: the API server answers 404 only after admission).
        pod = seen if seen is not None else stand_in(ctx.view, namespace, name)
        if pod is None:
            return ALLOW
        if pod.terminal:
            return ALLOW
        if pod.disruption and not pod.terminating:
            return allowed_disruption_target(pod.disruption, ctx.user)
        ref = resolve(ctx.view, pod)  # once: the deferral, the budget and the LWS check read it
        if ctx.params.get(DEFER_PARAM):
            deferral = deferred(ctx.view, ref, ctx.params)
            if deferral is not None:
                return deferral
        eviction = eviction_context(ctx.view, pod, ctx.params, ref) if ref is not None else None
        if eviction is None:
            return lws_unknowable(ctx.view, pod, ref) or ALLOW
        return self._judge(ctx, eviction, seen is not None and not seen.terminating)

    def _judge(self, ctx: PolicyContext, eviction: Eviction, seen: bool) -> Judgement:
        """An eviction of a group member (any group maker), by the group budget of its set. A pod
        the view shows terminating or does not hold (`seen` False) is judged (its group counts as
        broken, so it is allowed) and recorded all the same: the view may lag a group that has
        healed since, and the pod the API server evicts is then its replacement."""
        pod = eviction.pod
        refused = view_pdb_refusal(ctx.view, pod) if seen else None
        if refused:
            return too_many(
                f"evicting pod {pod.namespace}/{pod.name}: {refused}; the API server would refuse it"
            )
        what = f"evicting pod {pod.namespace}/{pod.name}{eviction.ref.note()}"
        return judge_budget(
            ctx.view, eviction, ctx.ledger, ctx.may_record, ctx.params, what, cause="eviction"
        )


def lws_unknowable(view: ClusterView, pod: PodRecord, ref: GroupRef | None) -> Judgement | None:
    """429 for `pod` (of group `ref`) of an LWS the view cannot hold because the API server did
    not serve LeaderWorkerSets when last asked (the CRD installed after guardhook started: the view
    picks it up within DISCOVERY_RETRY_SECONDS). Allowing it would let a drain take every group at
    once; None when the view can tell (no LWS member, or LeaderWorkerSets served)."""
    if ref is None or ref.set.kind != LWS_KIND or view.readable(LEADERWORKERSETS):
        return None
    return too_many(
        f"evicting pod {pod.namespace}/{pod.name}: it belongs to {ref.set}, but the API server did "
        f"not serve LeaderWorkerSets when guardhook last asked (CRD installed since?), so its groups "
        f"cannot be counted; retry shortly"
    )


def _evicted_pod(ctx: PolicyContext) -> tuple[str, str]:
    """(namespace, name) of the pod being evicted: the request's, else the Eviction's metadata."""
    meta = metadata(ctx.object)
    namespace = ctx.namespace or str(meta.get("namespace") or "")
    return namespace, ctx.name


def eviction_context(
    view: ClusterView, pod: PodRecord, params: Mapping[str, Any], ref: GroupRef | None = None
) -> Eviction | None:
    """The eviction's group context (guardhook.budget.group_disruption; `ref`: the pod's group when
    already resolved), or None for a pod of no group, of a set the view does not hold (an LWS gone,
    its pods being collected) or of a group beyond `spec.replicas` (scaling down). `params` are the
    policy's (`maxDisruptedGroups`, `minMaxDisruptedGroups`); the budget is the set's annotation
    guardhook.io/max-disrupted-groups when set."""
    return group_disruption(view, pod, default_budget(params), min_budget(params), ref=ref)


def view_pdb_refusal(view: ClusterView, pod: PodRecord) -> str | None:
    """Why a PodDisruptionBudget in `view` will refuse evicting `pod`, or None."""
    pdbs = matching_pdbs(view.pdbs_in_namespace(pod.namespace), pod)
    if not pdbs:
        return None
    return pdb_refusal(pdbs, pod, view.pods_in_namespace(pod.namespace))


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


POLICY = GroupEviction()
