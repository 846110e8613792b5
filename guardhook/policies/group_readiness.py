"""Policy `group-readiness`: gate each leader's readiness on its whole group (issue 16).

On pods CREATE, a leader pod (`leaderworkerset.sigs.k8s.io/worker-index: "0"`) of a LeaderWorkerSet
that opted in (annotation `guardhook.io/group-readiness: "true"`, or the parameter
`allLeaderWorkerSets: true` unless the LWS says "false") gets the readiness gate
`spec.readinessGates: [{conditionType: guardhook.io/group-ready}]` as a JSONPatch. The
group-readiness reconciler (guardhook.readiness) then sets that pod condition True only while the
whole group is, and the kubelet reports the leader Ready only when its containers are ready AND the
condition is True (pkg/kubelet/status/generate.go, GeneratePodReadyCondition).

Readiness gates can only be set when a pod is created (spec.readinessGates is immutable), and
leader pods are created by the StatefulSet controller: this policy therefore ignores the user
exemptions (`honours_user_exemptions = False`), unlike the delete guards; namespace exemptions
still apply. Workers of a data-parallel LWS (`guardhook.io/serving-pods: "all"`: every pod
serves) get the gate too; other workers, pods without LWS labels and pods that already carry the
gate are left alone, so the patch is idempotent (the webhook uses `reinvocationPolicy:
IfNeeded`) and never adds a second entry.

A leader (or data-parallel worker) of a LeaderWorkerSet with `groupIdentity: Hash` (lws KEP-898)
never gets a second gate: LWS itself gates its leaders on `leaderworkerset.sigs.k8s.io/group-ready`
(set by its pod controller once the worker StatefulSet is Ready); the answer says so.

`guardhook audit` judges existing pods as CREATEs: a leader of an opted-in LWS without the gate
(created while guardhook was down) shows up as a Mutate finding; its group must be restarted to
get the gate. Fail mode: open. The opt-in is read from the LWS in the view; when the view has
never synced or is stale and does not hold the LWS, the pod is created without the gate (with a
warning), as it would be while guardhook is down.
"""

from __future__ import annotations

from guardhook.cluster.lws import GROUP_READY_GATE, LWS_KIND
from guardhook.cluster.model import PodRecord, as_dict, readiness_gates
from guardhook.groups import resolve
from guardhook.groups.ready import DEFAULT_STARTUP_WINDOW_SECONDS, GATE, gates_workers, opted_in
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)
from guardhook.wire import JSONPatchOp, KubeObject

ALL_LWS_PARAM = "allLeaderWorkerSets"
STARTUP_WINDOW_PARAM = "startupWindowSeconds"
"""Seconds a gated pod with ready containers may wait for its group before the watchdog calls it
held (metric guardhook_group_readiness_held, alert GuardhookGroupReadinessHeld, an audit finding)."""


def gate_patch(pod: KubeObject) -> tuple[JSONPatchOp, ...]:
    """The JSONPatch adding guardhook's gate to `pod`: a new `spec.readinessGates` list, or one
    entry appended to the pod's own list; () when the pod already carries the gate."""
    spec = as_dict(pod.get("spec"))
    if GATE in readiness_gates(spec):
        return ()
    gate = {"conditionType": GATE}
    if isinstance(spec.get("readinessGates"), list):
        return ({"op": "add", "path": "/spec/readinessGates/-", "value": gate},)
    return ({"op": "add", "path": "/spec/readinessGates", "value": [gate]},)


def hash_note(pod: str, namespace: str, lws: str) -> str:
    """Why a pod of a Hash LWS gets no gate of guardhook's: LWS gates its leaders itself."""
    return (
        f"pod {pod} of LeaderWorkerSet {namespace}/{lws} (groupIdentity Hash) gets no {GATE} readiness "
        f"gate: the LWS already gates its leaders on {GROUP_READY_GATE}, set True by its pod controller "
        "once the group's worker StatefulSet is Ready, so the leader is Ready only while its group is"
    )


class GroupReadiness(Policy):
    """The `group-readiness` policy (see the module docstring)."""

    id = "group-readiness"
    targets = (target("", "pods", "", "CREATE"),)
    default_actions = ("Mutate",)
    can_mutate = True
    honours_user_exemptions = False
    params = {ALL_LWS_PARAM: False, STARTUP_WINDOW_PARAM: DEFAULT_STARTUP_WINDOW_SECONDS}
    param_minimums = {STARTUP_WINDOW_PARAM: 1}

    def judge(self, ctx: PolicyContext) -> Judgement:
        """A violation carrying the gate patch for a leader of an opted-in LWS without the gate;
        ALLOW for anything else (see the module docstring)."""
        pod = ctx.object
        record = PodRecord.from_object(pod)
        if not record.namespace:  # a CREATE's pod may carry no namespace yet
            record = record.with_fields(namespace=ctx.namespace)
        member = resolve(ctx.view, record)
        if member is None or member.set.kind != LWS_KIND:
            return ALLOW
        patch = gate_patch(pod)
        if not patch:
            return ALLOW
        lws = ctx.view.lws(ctx.namespace, member.set.name)
        if lws is None:
            stale = member.is_leader and ctx.view.is_stale()
            return stale_judgement(self, ctx.view) if stale else ALLOW
        if not member.is_leader and not gates_workers(lws):
            return ALLOW
        if not opted_in(lws, bool(ctx.params.get(ALL_LWS_PARAM, False))):
            return ALLOW
        if lws.hashed:
            return Judgement(advisories=(hash_note(ctx.name or "(generated name)", lws.namespace, lws.name),))
        if not member.is_leader:
            return Judgement(
                violation=Violation(
                    f"worker pod {ctx.name} of LeaderWorkerSet {ctx.namespace}/{lws.name} (opted in to "
                    f'group readiness, serving-pods "all": every pod serves) has no readiness gate '
                    f"{GATE}; with it the worker is Ready only while its whole group is",
                    patch=patch,
                )
            )
        return Judgement(
            violation=Violation(
                f"leader pod {ctx.name} of LeaderWorkerSet {ctx.namespace}/{lws.name} (opted in to group "
                f"readiness) has no readiness gate {GATE}; with it the leader is Ready only while its "
                "whole group is (a gate is set at pod creation only: an existing leader gets it when "
                "its group is recreated)",
                patch=patch,
            )
        )


POLICY = GroupReadiness()
