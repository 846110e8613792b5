"""Policy `pod-counted-scaler`: scalers that count pods must not scale an LWS's StatefulSets.

An LWS `L` owns the leader StatefulSet `L` (one leader per group) and, through each leader pod,
the worker StatefulSet `L-<g>` of group g (design.md §1). Scaling `L` adds leaders whose groups
the LWS does not know; scaling `L-<g>` resizes one group for good, since the LWS controller never
reconciles a worker StatefulSet's replicas back. So this policy denies, when aimed at an
LWS-owned StatefulSet:

- HorizontalPodAutoscaler CREATE/UPDATE (autoscaling/v2; the API server converts v1 to v2 for a
  webhook registered for v2, and both carry `spec.scaleTargetRef`);
- KEDA ScaledObject CREATE/UPDATE (keda.sh/v1alpha1; an omitted `scaleTargetRef.apiVersion` /
  `kind` defaults to apps/v1 Deployment, as in KEDA);
- `statefulsets/scale` UPDATE and StatefulSet UPDATE that change the replica count.

An HPA or ScaledObject aimed at a Grove PodCliqueSet or PodCliqueScalingGroup (grove.io) with a
pod-counted metric (Resource, ContainerResource or Pods metrics; Object or External ones with a
Value target; KEDA cpu/memory triggers or metricType Value; guardhook.policies.shared.scaler_metrics)
is denied: their `/scale` counts replicas of several pods (grove #744), so such a metric scales by
pods. With only per-replica metrics (AverageValue targets), or when the view shows one pod per
replica, it is allowed.

An HPA or ScaledObject aimed at an LWS is how groups should be scaled, except for an LWS that a
DisaggregatedSet runs for one of its roles (ownerReference kind DisaggregatedSet,
disaggregatedset.x-k8s.io; guardhook.cluster.disaggregated): its name carries a revision hash and
is replaced at the next rollout, and the DisaggregatedSet controller drives its replicas, so such a
scaler is denied too. For it, and for the StatefulSets of such an LWS, the message names the role's
`DisaggregatedSetRoleScaler` `<disaggregatedset>-<role>` (lws KEP-849) as the target instead.

A LeaderWorkerSet with `groupIdentity: Hash` (lws KEP-898) has a leader Deployment named after it
and worker StatefulSets named after their leader pods (generated names; the group-index label, or
the view's leader pod of that name, says the group): a scaler aimed at that Deployment or at such
a StatefulSet is denied as for the Ordinal ones. A scaler aimed at an LWS a RoleBasedGroup runs
(sgl-project/rbg, workloads.x-k8s.io; guardhook.groups.rbg) is denied naming the role's
RoleBasedGroupScalingAdapter `<rbg>-<role>`; one aimed at a RoleBasedGroupSet is warned about (its
replicas count whole RoleBasedGroups, not pods).

A StatefulSet is LWS-owned when its ownerReferences name a LeaderWorkerSet or it carries the LWS
name label (from the request object or the view); for one the view has not seen, by the naming
convention `L` / `L-<g>` of an LWS in the view. The LWS controller and `statefulset-controller` are
exempt identities (guardhook.config), so their own writes are never judged.

Fail mode: open. With a stale view, a request whose own StatefulSet shows LWS ownership is still
denied (no view needed); any other request aimed at a StatefulSet is allowed with a warning.
"""

from __future__ import annotations

import fnmatch
import logging
from dataclasses import dataclass
from typing import Any, Protocol

from guardhook.cluster.disaggregated import DS_API_VERSION, DS_ROLE_LABEL, ROLE_SCALER_KIND, RoleOf, role_of
from guardhook.cluster.lws import (
    GROUP_INDEX_LABEL,
    LWS_API_GROUP,
    LWS_API_VERSION,
    LWS_CONTROLLER,
    LWS_KIND,
    NAME_LABEL,
)
from guardhook.cluster.model import OwnerRef, as_dict, metadata, spec_replicas, str_map
from guardhook.cluster.view.store import ClusterView
from guardhook.groups import (
    RBG_API_VERSION,
    RBG_SET_KIND,
    SCALING_ADAPTER_KIND,
    RbgRole,
    ScaledTarget,
    is_rbg_set,
    rbg_role,
    resolve,
    scaled_target,
    worker_statefulset_group,
)
from guardhook.policies.base import (
    ALLOW,
    Judgement,
    Policy,
    PolicyContext,
    Violation,
    stale_judgement,
    target,
)
from guardhook.policies.shared.scaler_metrics import pod_counted_metrics


class ExemptingConfig(Protocol):
    """What the start-up check reads of guardhook.config.Config (the config layer sits above the
    policies, so they never import it)."""

    def exempt_users(self, policy_id: str) -> tuple[str, ...]:
        """The user patterns policy `policy_id` does not judge (global plus its own)."""
        ...


log = logging.getLogger(__name__)

KEDA_DEFAULT_API_VERSION = "apps/v1"
KEDA_DEFAULT_KIND = "Deployment"
DEFAULT_LWS_CONTROLLER = LWS_CONTROLLER


@dataclass(frozen=True)
class OwnedStatefulSet:
    """An LWS-owned StatefulSet: the LWS's name and the group index (None for the leader one)."""

    lws_name: str
    group: str | None
    """The group's key: its ordinal ("3") or a Hash group's key."""

    def describe(self, namespace: str, name: str) -> str:
        if self.group is None:
            return (
                f"StatefulSet {namespace}/{name}, the leader StatefulSet of LeaderWorkerSet {self.lws_name}"
            )
        return (
            f"StatefulSet {namespace}/{name}, the worker StatefulSet of group {self.group} of "
            f"LeaderWorkerSet {self.lws_name}"
        )


class PodCountedScaler(Policy):
    id = "pod-counted-scaler"
    targets = (
        target("autoscaling", "horizontalpodautoscalers", "", "CREATE", "UPDATE"),
        target("keda.sh", "scaledobjects", "", "CREATE", "UPDATE"),
        target("apps", "statefulsets", "scale", "UPDATE"),
        target("apps", "statefulsets", "", "UPDATE"),
    )
    default_actions = ("Deny",)
    fail_closed = False

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Deny a scaler or scale aimed at an LWS-owned StatefulSet; see the module docstring."""
        resource = str(as_dict(ctx.request.get("resource")).get("resource", ""))
        subresource = ctx.request.get("subResource") or ""
        if resource == "statefulsets":
            return self._judge_statefulset(ctx, subresource == "scale")
        return self._judge_scaler(ctx, resource == "scaledobjects")

    def _judge_scaler(self, ctx: PolicyContext, keda: bool) -> Judgement:
        ref = as_dict(as_dict(ctx.object.get("spec")).get("scaleTargetRef"))
        default_version, default_kind = (KEDA_DEFAULT_API_VERSION, KEDA_DEFAULT_KIND) if keda else ("", "")
        api_version = str(ref.get("apiVersion") or default_version)
        kind = str(ref.get("kind") or default_kind)
        name = str(ref.get("name") or "")
        scaler = f"{'KEDA ScaledObject' if keda else 'HorizontalPodAutoscaler'} {ctx.namespace}/{ctx.name}"
        group = api_version.split("/")[0]
        if kind == LWS_KIND and group == LWS_API_GROUP and name:
            return self._judge_lws_target(ctx, scaler, name)
        scaled = scaled_target(ctx.view, ctx.namespace, api_version, kind, name)
        if scaled is not None:
            return self._judge_gang_target(ctx, scaler, kind, name, keda, scaled)
        if is_rbg_set(api_version, kind):
            return Judgement(advisories=(_rbg_set_warning(scaler, ctx.namespace, name),))
        if kind == "Deployment" and group == "apps" and name:
            return self._judge_deployment(ctx, scaler, name)
        if kind != "StatefulSet" or group != "apps" or not name:
            return ALLOW
        owned = self._owner(ctx, name, None)
        if not isinstance(owned, OwnedStatefulSet):
            return owned
        return _deny(f"{scaler} scales {owned.describe(ctx.namespace, name)}", owned, _role(ctx, owned))

    def _judge_lws_target(self, ctx: PolicyContext, scaler: str, name: str) -> Judgement:
        """Deny a scaler aimed at an LWS that a DisaggregatedSet runs (its name changes at every
        rollout and its controller drives the replicas); allow one aimed at any other LWS."""
        lws = ctx.view.lws(ctx.namespace, name)
        if lws is None:
            return stale_judgement(self, ctx.view) if ctx.view.is_stale() else ALLOW
        rbg = rbg_role(lws.obj)
        if rbg is not None:
            return Judgement(violation=Violation(_rbg_message(scaler, ctx.namespace, name, rbg)))
        role = role_of(lws.obj)
        if role is None:
            return ALLOW
        runs = f"role {role.role}" if role.role else "a role"
        return Judgement(
            violation=Violation(
                f"{scaler} scales LeaderWorkerSet {ctx.namespace}/{name}, which DisaggregatedSet "
                f"{role.disaggregated_set} runs for {runs}: its name "
                "carries a revision hash and is replaced at the next rollout, and the DisaggregatedSet "
                f"controller drives its replicas. {_role_scaler_advice(role)}"
            )
        )

    def _judge_gang_target(
        self, ctx: PolicyContext, scaler: str, kind: str, name: str, keda: bool, scaled: ScaledTarget
    ) -> Judgement:
        """Deny a scaler with a pod-counted metric (guardhook.policies.shared.scaler_metrics) aimed at
        a Grove PodCliqueSet or PodCliqueScalingGroup: its `/scale` counts replicas of several pods
        (a PodCliqueSet's selector matches every pod of every clique, grove #744), so the metric
        multiplies replicas by pods. Allowed when every metric counts replicas, or when the view shows
        every replica as one pod."""
        counted = pod_counted_metrics(ctx.object, keda)
        if not counted:
            return ALLOW
        sizes = scaled.pods
        if sizes and max(sizes) <= 1:
            return ALLOW
        replica = scaled.each
        seen = f"; the view shows {max(sizes)} pods in one" if sizes else ""
        return Judgement(
            violation=Violation(
                f"{scaler} scales {kind} {ctx.namespace}/{name} on {', '.join(counted)}: its scale "
                f"subresource counts whole replicas, each a {replica}{seen}, but a pod-counted metric "
                "computes replicas as a ratio times the Ready pods its selector matches, so it scales by "
                "pods, not replicas. Use a metric per replica instead: an External or Object metric with an "
                "AverageValue target (total ÷ target = replicas), or in KEDA a trigger with metricType "
                "AverageValue (the default) in place of cpu/memory triggers"
            )
        )

    def _judge_deployment(self, ctx: PolicyContext, scaler: str, name: str) -> Judgement:
        """Deny a scaler aimed at the leader Deployment of a Hash LWS (lws KEP-898: the Deployment
        is named after the LWS): it adds leaders, one per pod counted, whose groups the LWS does not
        ask for, and the LWS controller sets the Deployment's replicas back."""
        lws = ctx.view.lws(ctx.namespace, name)
        if lws is None:
            return ALLOW  # a Deployment of no LWS the view holds (Hash LWSs have one named after them)
        if not lws.hashed:
            return ALLOW
        return Judgement(
            violation=Violation(
                f"{scaler} scales Deployment {ctx.namespace}/{name}, the leader Deployment of "
                f"LeaderWorkerSet {name} (groupIdentity Hash): a pod-counted scaler breaks LWS groups "
                "(extra leaders start groups the LeaderWorkerSet does not ask for, and the LWS controller "
                f"sets the Deployment's replicas back). Scale whole groups instead: target apiVersion: "
                f"{LWS_API_VERSION}, kind: {LWS_KIND}, name: {name} (its scale subresource counts groups)"
            )
        )

    def _judge_statefulset(self, ctx: PolicyContext, scale: bool) -> Judgement:
        new, old = spec_replicas(ctx.object), spec_replicas(ctx.old_object)
        if new == old:
            return ALLOW
        name = ctx.name
        owned = self._owner(ctx, name, None if scale else ctx.object)
        if not isinstance(owned, OwnedStatefulSet):
            return owned
        how = "scaling" if scale else "changing spec.replicas of"
        return _deny(
            f"{how} {owned.describe(ctx.namespace, name)} from {old} to {new} counts pods, not groups",
            owned,
            _role(ctx, owned),
        )

    def _owner(
        self, ctx: PolicyContext, name: str, obj: dict[str, Any] | None
    ) -> OwnedStatefulSet | Judgement:
        """The LWS owning StatefulSet `name`, or the judgement when there is none: allow, or the
        stale-view answer when the view would have to say (the request's own StatefulSet, when it
        carries one, needs no view)."""
        found = _from_object(name, obj)
        if found is not None:
            return found
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        return lws_owned_statefulset(ctx.view, ctx.namespace, name, None) or ALLOW


def _role(ctx: PolicyContext, owned: OwnedStatefulSet) -> RoleOf | None:
    """The DisaggregatedSet role whose LWS owns the StatefulSet, when the view shows one."""
    lws = ctx.view.lws(ctx.namespace, owned.lws_name)
    return None if lws is None else role_of(lws.obj)


def _rbg_message(scaler: str, namespace: str, name: str, rbg: RbgRole) -> str:
    """The denial of a scaler aimed at an LWS a RoleBasedGroup runs (sgl-project/rbg)."""
    runs = f"role {rbg.role}" if rbg.role else "a role"
    return (
        f"{scaler} scales LeaderWorkerSet {namespace}/{name}, which RoleBasedGroup {rbg.rbg} runs for "
        f"{runs} and whose spec.replicas it applies on every reconcile: the scaler and the RoleBasedGroup "
        f"would fight. Scale the role instead: enable scalingAdapter for it in the RoleBasedGroup and "
        f"target the {SCALING_ADAPTER_KIND} the RoleBasedGroup controller creates for it: apiVersion: "
        f"{RBG_API_VERSION}, kind: {SCALING_ADAPTER_KIND}, name: {rbg.adapter_name}"
    )


def _rbg_set_warning(scaler: str, namespace: str, name: str) -> str:
    """The warning for a scaler aimed at a RoleBasedGroupSet (its replicas count whole RBGs)."""
    return (
        f"{scaler} scales {RBG_SET_KIND} {namespace}/{name}, whose replicas count whole RoleBasedGroups "
        "(each with every role): a pod-counted metric averages the pods of every role against a count of "
        f"RoleBasedGroups. Prefer a {SCALING_ADAPTER_KIND} per role, or a metric per RoleBasedGroup"
    )


def _role_scaler_advice(role: RoleOf) -> str:
    """Where to aim a scaler for a DisaggregatedSet role instead (KEP-849): its role scaler, named
    `<disaggregatedset>-<role>` (scaler_manager.go ScalerName). Without a role label on the LWS the
    role cannot be told from the LWS's name either (`<ds>-<slice>-<revision>-<role>`, and role
    names may hold dashes), so the advice says where the role's name is instead of a name."""
    name = (
        role.scaler_name
        if role.role
        else f"{role.disaggregated_set}- followed by the role's name from the DisaggregatedSet's "
        f"spec.roles (this LeaderWorkerSet has no {DS_ROLE_LABEL} label naming its role)"
    )
    return (
        "Scale the role instead: give it scaling.mode: External in the DisaggregatedSet and target "
        f"the {ROLE_SCALER_KIND} the DisaggregatedSet controller creates for it, stable across rollouts: "
        f"apiVersion: {DS_API_VERSION}, kind: {ROLE_SCALER_KIND}, name: {name}"
    )


def _deny(what: str, owned: OwnedStatefulSet, role: RoleOf | None = None) -> Judgement:
    effect = (
        "extra leaders start groups the LeaderWorkerSet does not know"
        if owned.group is None
        else "it resizes one group for good, since the LWS controller never reconciles a worker "
        "StatefulSet back, or adds pods that join no group"
    )
    advice = (
        f"Scale whole groups instead: target apiVersion: {LWS_API_VERSION}, kind: {LWS_KIND}, name: "
        f"{owned.lws_name} (its scale subresource counts groups)"
        if role is None
        else _role_scaler_advice(role)
    )
    return Judgement(
        violation=Violation(f"{what}: a pod-counted scaler breaks LWS groups ({effect}). {advice}")
    )


def lws_owned_statefulset(
    view: ClusterView, namespace: str, name: str, obj: dict[str, Any] | None
) -> OwnedStatefulSet | None:
    """Whether StatefulSet `namespace/name` belongs to an LWS, judged from `obj` (the request's
    StatefulSet, when there is one), else the view's record, else (also when a record owned by a
    pod carries no LWS marker: its labels removed) the naming convention `L` / `L-<g>` of an LWS in
    the view. None when it does not."""
    found = _from_object(name, obj)
    if found is not None:
        return found
    record = view.statefulset(namespace, name)
    if record is None:
        return _from_naming(view, namespace, name)
    found = _from_markers(name, record.owners, record.labels)
    if found is None and any(o.controller and o.kind == "Pod" for o in record.owners):
        # A worker StatefulSet (its controller the leader pod) whose LWS labels a tenant removed is
        # still known by its name (issue 48); one with no such owner and no marker is no LWS's.
        return _from_naming(view, namespace, name)
    return found


def _from_object(name: str, obj: dict[str, Any] | None) -> OwnedStatefulSet | None:
    """LWS ownership as the request's own StatefulSet `obj` shows it (None without one)."""
    if not obj:
        return None
    meta = metadata(obj)
    return _from_markers(name, OwnerRef.parse_all(meta), str_map(meta.get("labels")))


def _from_markers(name: str, owners: tuple[OwnerRef, ...], labels: dict[str, str]) -> OwnedStatefulSet | None:
    for owner in owners:
        if owner.kind == LWS_KIND and owner.api_version.startswith(LWS_API_GROUP + "/"):
            return OwnedStatefulSet(owner.name, None)
    lws_name = labels.get(NAME_LABEL)
    if not lws_name:
        return None
    # A worker StatefulSet carries its group's group-index label (lws pod_controller.go
    # constructWorkerStatefulSetApplyConfiguration); the leader StatefulSet does not.
    group = labels.get(GROUP_INDEX_LABEL) or worker_statefulset_group(lws_name, name)
    return OwnedStatefulSet(lws_name, group)


def _from_naming(view: ClusterView, namespace: str, name: str) -> OwnedStatefulSet | None:
    """By the names the LWS controller gives: `L` (leader StatefulSet) or a worker StatefulSet
    named after its leader pod, `L-<g>` (Ordinal) or a Hash leader's generated name (then the
    view's leader pod of that name says the group)."""
    candidates = view.lws_in_namespace(namespace)
    if any(lws.name == name for lws in candidates):  # `L` itself before `L'-<g>` of another LWS
        return OwnedStatefulSet(name, None)
    leader = view.pod(namespace, name)
    ref = resolve(view, leader) if leader is not None else None
    if (
        ref is not None
        and ref.set.kind == LWS_KIND
        and ref.rank.is_leader
        and any(lws.name == ref.set.name for lws in candidates)
    ):
        return OwnedStatefulSet(ref.set.name, ref.key)
    for lws in candidates:
        group = None if lws.hashed else worker_statefulset_group(lws.name, name)
        if group is not None:
            return OwnedStatefulSet(lws.name, group)
    return None


def lws_controller_exemption_warning(view: ClusterView, config: ExemptingConfig) -> str | None:
    """A warning when the view holds a LeaderWorkerSet but no exempt-user pattern covers an LWS
    controller identity (its own StatefulSet scaling would then be judged); None when fine."""
    if not view.all_lws():
        return None
    patterns = config.exempt_users(POLICY.id)
    if any(p == LWS_CONTROLLER or fnmatch.fnmatchcase(DEFAULT_LWS_CONTROLLER, p) for p in patterns):
        return None
    if any("controller-manager" in p for p in patterns):
        return None  # another install's identity, e.g. system:serviceaccount:ml:<release>-controller-manager
    return (
        "the cluster view holds LeaderWorkerSets but no exempt user covers the LWS controller "
        f"(default {LWS_CONTROLLER}); guardhook would judge the controller's own writes. "
        "Add its service account to exemptions.users or policies.pod-counted-scaler.exemptions.users"
    )


def startup_checks(view: ClusterView, config: ExemptingConfig) -> None:
    """Log configuration problems this policy can see at start (see lws_controller_exemption_warning)."""
    warning = lws_controller_exemption_warning(view, config)
    if warning:
        log.warning("%s", warning)


POLICY = PodCountedScaler()
