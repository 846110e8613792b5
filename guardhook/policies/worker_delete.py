"""Policy `worker-delete`: deleting one worker of a whole group breaks the replica.

The LWS restarts a group by deleting its leader pod (the garbage collector then removes the worker
StatefulSet and its pods), so deleting the leader is the group-level operation (design.md §1).
Deleting a single worker of a whole group takes the replica down without restarting it. Allowed:
leaders, pods already terminating (the kubelet's final delete), groups already broken, non-LWS
pods. A DELETE carries the pod in `oldObject` only, and some carry no `request.name`; a DELETE
without `oldObject` (API servers before 1.15, hand-written reviews) is judged from the view's pod.

Who else disrupts a group:
- A pod a component already marked for removal — `DisruptionTarget=True` (the scheduler's
  preemption, the taint managers, pod GC, the kubelet, the Eviction API) or Kueue's
  `TerminationTarget=True` — may be deleted whoever sends the DELETE; an audit annotation says why.
- A delete-based drain (`kubectl drain --disable-eviction`, Karpenter's termination controller past
  a NodePool's `terminationGracePeriod`, cluster-autoscaler): a worker DELETE whose pod is bound to
  a draining node — cordoned, or carrying a drain taint (`karpenter.sh/disrupted`,
  `ToBeDeletedByClusterAutoscaler`, or a key of `drainTaintKeys`), or carrying a node lifecycle
  condition of `drainConditions` with status True (KEP-5683: by default `MaintenancePlanned`,
  `MaintenanceInProgress`, `DrainInProgress`, `Drained`, `GracefulNodeShutdownInProgress`; written
  by a maintenance controller that neither cordons nor taints; guardhook.cluster.going) — is
  judged by the group budget of `group-eviction` (B, the
  shared ledger, broken groups drain freely; guardhook.policies.shared.group_budget): within the
  budget it is allowed with a warning and recorded (not on a dry run), over it denied with 429
  naming the groups already down. Parameters `maxDisruptedGroups` and `ledgerTTLSeconds` mean
  what they mean for `group-eviction` and follow its configured values unless set here.

Denials say what the delete would do under the LWS's `restartPolicy` (lws pod_controller.go
`handleRestartPolicy`): under `RecreateGroupOnPodRestart` (the default) and
`RecreateGroupAfterStart` the LWS controller sees the worker's deletionTimestamp and deletes the
leader, recreating the whole group (a cold start); under `None` the replica stays broken and the
replacement worker joins nothing. They name the leader to delete instead, with
`--cascade=foreground`: the workers go first and the group is rebuilt sooner, which is how the LWS
controller itself restarts a group.

Fail mode: closed. With a stale view the group's state is unknown, so the delete is denied.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from guardhook.cluster.going import DRAIN_CONDITIONS, draining
from guardhook.cluster.groups import member_group_health
from guardhook.cluster.lws import RECREATING_POLICIES, GroupMember, member_of_pod
from guardhook.cluster.model import NodeRecord, PodRecord
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    allowed_disruption_target,
    stale_judgement,
    target,
)
from guardhook.policies.shared.group_budget import group_disruption, judge_budget

DRAIN_TAINT_KEYS_PARAM = "drainTaintKeys"
DRAIN_CONDITIONS_PARAM = "drainConditions"


class WorkerDelete(Policy):
    id = "worker-delete"
    targets = (target("", "pods", "", "DELETE"),)
    default_actions = ("Deny",)
    fail_closed = True
    params = {
        "maxDisruptedGroups": 1,
        "ledgerTTLSeconds": 120,
        "drainTaintKeys": [],
        "drainConditions": list(DRAIN_CONDITIONS),
    }
    shared_params = {"maxDisruptedGroups": "group-eviction", "ledgerTTLSeconds": "group-eviction"}
    param_minimums = {"ledgerTTLSeconds": 1}

    def param_problem(self, name: str, value: Any) -> str | None:
        """`drainTaintKeys` must list taint keys, `drainConditions` node condition types (strings)."""
        if name == DRAIN_TAINT_KEYS_PARAM and not all(isinstance(k, str) and k for k in value):
            return "must be a list of taint keys (non-empty strings)"
        if name == DRAIN_CONDITIONS_PARAM and not all(isinstance(k, str) and k for k in value):
            return "must be a list of node condition types (non-empty strings)"
        return None

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Deny deleting a worker of a whole group; see the module docstring for what is allowed."""
        pod = _deleted_pod(ctx)
        member = member_of_pod(pod) if pod is not None else None
        if pod is None or member is None or member.is_leader or pod.terminating:
            return ALLOW
        if pod.disruption:
            return allowed_disruption_target(pod.disruption, ctx.user)
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        health = member_group_health(ctx.view, member)
        if health is None or not health.whole:
            return ALLOW  # unknown size (neither the LWS nor the pod says it), or already broken
        node = ctx.view.node(pod.node_name) if pod.node_name else None
        why = (
            draining(node, drain_taint_keys(ctx.params), drain_conditions(ctx.params))
            if node is not None
            else ""
        )
        if node is not None and why:
            drained = self._drain(ctx, pod, node, why)
            if drained is not None:
                return drained
        lws = ctx.view.lws(member.namespace, member.lws_name)
        restart_policy = lws.restart_policy if lws is not None else None
        return Judgement(
            violation=Violation(_message(member, ctx.name or pod.name or "this pod", restart_policy))
        )

    def _drain(self, ctx: PolicyContext, pod: PodRecord, node: NodeRecord, why: str) -> Judgement | None:
        """A worker DELETE on a draining node (`why`: cordoned, or its drain taint), judged by the
        group budget; None when the view does not hold the pod's LWS (then it is judged as any
        worker delete)."""
        disruption = group_disruption(ctx.view, pod, int(ctx.params.get("maxDisruptedGroups", 1)))
        if disruption is None:
            return None
        lws = disruption.lws
        if why == "cordoned":
            where = f"pod {pod.namespace}/{pod.name} from cordoned node {node.name}"
        else:
            where = f"pod {pod.namespace}/{pod.name} from draining node {node.name} ({why})"
        advisory = (
            f"deleting {where} is a drain without evictions: it breaks group {disruption.group} of "
            f"LeaderWorkerSet {lws.namespace}/{lws.name} (at most {disruption.budget} at a time); "
            f"counted against the group-eviction budget"
        )
        ttl = float(ctx.params.get("ledgerTTLSeconds", 120))
        what = f"deleting {where} (a drain without evictions)"
        return judge_budget(
            ctx.view, disruption, ctx.ledger, ctx.may_record, ttl, what, advisory, cause="delete"
        )


def _deleted_pod(ctx: PolicyContext) -> PodRecord | None:
    """The pod being deleted: from `oldObject` (what the API server sends), else the view's."""
    if ctx.old_object:
        record = PodRecord.from_object(ctx.old_object)
        return record if record.namespace else record.with_fields(namespace=ctx.namespace)
    return ctx.view.pod(ctx.namespace, ctx.name)


def drain_taint_keys(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The drain taint keys configured on top of guardhook.cluster.going.DRAIN_TAINT_KEYS
    (`worker-delete`'s `drainTaintKeys`; drain-plan and audit read the same parameter)."""
    keys = params.get(DRAIN_TAINT_KEYS_PARAM) or ()
    return tuple(k for k in keys if isinstance(k, str) and k)


def drain_conditions(params: Mapping[str, Any]) -> tuple[str, ...]:
    """The node condition types that make a node draining when True (`worker-delete`'s
    `drainConditions`, default guardhook.cluster.going.DRAIN_CONDITIONS; drain-plan and audit read
    the same parameter)."""
    types = params.get(DRAIN_CONDITIONS_PARAM)
    if types is None:
        return DRAIN_CONDITIONS
    return tuple(t for t in types if isinstance(t, str) and t)


def delete_consequence(restart_policy: str | None) -> str:
    """What deleting one worker of a whole group leads to under the LWS `restartPolicy`
    (lws pod_controller.go handleRestartPolicy: a deleted pod or a restarted container makes the
    controller delete the leader under the two recreating policies; `None` does nothing)."""
    if restart_policy in RECREATING_POLICIES:
        return (
            f"under restartPolicy {restart_policy} the LWS controller then deletes the leader and "
            f"recreates the whole group: the replica is down for a cold start"
        )
    if restart_policy is None:
        return (
            "the group breaks: under a recreating restartPolicy the LWS controller recreates the whole "
            "group (a cold start), under None the replica stays broken"
        )
    return (
        f"under restartPolicy {restart_policy} the replica stays broken: the StatefulSet recreates the "
        f"worker, but the replacement joins nothing until the group restarts"
    )


def _message(member: GroupMember, name: str, restart_policy: str | None) -> str:
    return (
        f"pod {member.namespace}/{name} is worker {member.worker_index} of group "
        f"{member.group_index} of LeaderWorkerSet {member.lws_name}, which is whole; deleting "
        f"one worker breaks the replica: {delete_consequence(restart_policy)}. To restart the group, "
        f"delete its leader instead: kubectl delete pod -n {member.namespace} {member.leader_pod_name} "
        f"--cascade=foreground{member.note()}"
    )


POLICY = WorkerDelete()
