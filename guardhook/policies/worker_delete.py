"""Policy `worker-delete`: deleting one worker of a whole group breaks the replica.

The LWS restarts a group by deleting its leader pod (the garbage collector then removes the worker
StatefulSet and its pods), so deleting the leader is the group-level operation (design.md §1).
Deleting a single worker of a whole group takes the replica down without restarting it. Allowed:
leaders, pods already terminating (the kubelet's final delete), groups already broken, non-LWS
pods. A DELETE carries the pod in `oldObject` only, and some carry no `request.name`; a DELETE
without `oldObject` (API servers before 1.15, hand-written reviews) is judged from the view's pod.

Fail mode: closed. With a stale view the group's state is unknown, so the delete is denied.
"""

from __future__ import annotations

from guardhook.cluster.groups import member_group_health
from guardhook.cluster.lws import member_of_object, member_of_pod
from guardhook.cluster.model import metadata
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)


class WorkerDelete(Policy):
    id = "worker-delete"
    targets = (target("", "pods", "", "DELETE"),)
    default_actions = ("Deny",)
    fail_closed = True

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Deny deleting a worker of a whole group; see the module docstring for what is allowed."""
        pod = ctx.old_object
        if pod:
            member, terminating = member_of_object(pod), bool(metadata(pod).get("deletionTimestamp"))
        else:
            record = ctx.view.pod(ctx.namespace, ctx.name)
            member = member_of_pod(record) if record is not None else None
            terminating = record is not None and record.terminating
        if member is None or member.is_leader or terminating:
            return ALLOW
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        health = member_group_health(ctx.view, member)
        if health is None or not health.whole:
            return ALLOW  # unknown size (neither the LWS nor the pod says it), or already broken
        name = ctx.name or "this pod"
        return Judgement(
            violation=Violation(
                f"pod {member.namespace}/{name} is worker {member.worker_index} of group "
                f"{member.group_index} of LeaderWorkerSet {member.lws_name}, which is whole; deleting "
                f"one worker breaks the replica without restarting it. To restart the group, delete "
                f"its leader instead: kubectl delete pod -n {member.namespace} {member.leader_pod_name}"
            )
        )


POLICY = WorkerDelete()
