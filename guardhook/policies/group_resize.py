"""Policy `group-resize`: an in-place resize that restarts a container restarts the whole group.

In-place pod resize (KEP-1287, GA in Kubernetes 1.35) is an UPDATE of the `pods/resize`
subresource: `object` is the whole Pod with the new `spec.containers[].resources` (and
`spec.initContainers[]` for sidecars), `oldObject` the Pod before. Each container's
`resizePolicy` lists, per resource (`cpu`, `memory`), `restartPolicy: NotRequired` (the default
for a resource not listed) or `RestartContainer`: the kubelet restarts the container to apply a
change of that resource. Pod-level in-place resize (KEP-5419, beta in 1.36) changes
`spec.resources` of the pod: there is no pod-level resize policy, so a container whose limit
(or, with neither request nor limit of its own, its request) of a resource is inherited from the
pod sees a pod-level change of it as its own, and its `resizePolicy` decides: RestartContainer
restarts it (KEP-5419 "Resize Restart Policy"; a container with its own limit is not touched).
A resize may change both levels at once. VPA's `InPlaceOrRecreate` mode drives such resizes as
`system:serviceaccount:kube-system:vpa-updater`, which is not exempt.

A restarted container is what the LWS controller acts on: under `restartPolicy`
`RecreateGroupOnPodRestart` (the default) or `RecreateGroupAfterStart` it deletes the leader and
recreates the whole group once any container of it restarted (lws pod_controller.go
`handleRestartPolicy`, `ContainerRestarted`). So a resize of a group member that restarts a
container is a disruption of the group, judged by the group budget of `group-eviction` (B, the
shared ledger; guardhook.budget): within it allowed with a warning and
recorded (not on a dry run), over it denied with 429 TooManyRequests naming the groups already
down, so a retry is natural. Allowed: a resize that restarts nothing, of a pod outside an LWS the
view knows, of a terminating pod, of a group already broken. Under `restartPolicy: None` the
container restarts alone (the LWS controller does nothing): allowed, with a warning that the
group loses that pod while it restarts. Parameters `maxDisruptedGroups`, `ledgerTTLSeconds` and
`stuckAfterSeconds` follow `group-eviction`'s configured values unless set here.

Fail mode: closed with 429 when the view is stale (the budget cannot be read); the webhook entry
itself is `failurePolicy: Ignore` (life without guardhook).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from guardhook.budget import default_budget, group_disruption, min_budget
from guardhook.cluster.lws import LWS_KIND, RECREATING_POLICIES
from guardhook.cluster.model import PodRecord, as_dict, as_list
from guardhook.groups import resolve
from guardhook.policies.base import (
    ALLOW,
    TOO_MANY_REQUESTS,
    Judgement,
    Policy,
    PolicyContext,
    stale_judgement,
    target,
)
from guardhook.policies.shared.group_budget import judge_budget

RESTART_CONTAINER = "RestartContainer"
NOT_REQUIRED = "NotRequired"


@dataclass(frozen=True)
class Restart:
    """A container the resize restarts, the resources whose `resizePolicy` says so, and those of
    them whose change came from the pod level (`inherited`)."""

    container: str
    resources: tuple[str, ...]
    inherited: tuple[str, ...] = ()

    def describe(self) -> str:
        """`container c (memory: RestartContainer)`, or with a pod-level change `container c
        (memory: RestartContainer; memory inherited from the pod-level spec.resources)`."""
        inherited = (
            f"; {', '.join(self.inherited)} inherited from the pod-level spec.resources"
            if self.inherited
            else ""
        )
        return f"container {self.container} ({', '.join(self.resources)}: {RESTART_CONTAINER}{inherited})"


def restarts(new_pod: Mapping[str, Any], old_pod: Mapping[str, Any]) -> list[Restart]:
    """The containers (`spec.containers` and `spec.initContainers`, by name) a resize from
    `old_pod` to `new_pod` restarts: those where a resource whose request or limit changed — its
    own, or the pod-level one it inherits (see the module docstring) — has `resizePolicy`
    `RestartContainer` (a resource not listed is `NotRequired`)."""
    old = _containers(old_pod)
    limits_changed, requests_changed = _pod_level_changes(new_pod, old_pod)
    found = []
    for name, container in _containers(new_pod).items():
        before = old.get(name)
        if before is None:
            continue
        policy = _resize_policy(container)
        own = as_dict(container.get("resources"))
        changed = _changed_resources(as_dict(before.get("resources")), own)
        inherited = _inherited(own, limits_changed, requests_changed) - changed
        restarting = tuple(
            r for r in sorted(changed | inherited) if policy.get(r, NOT_REQUIRED) == RESTART_CONTAINER
        )
        if restarting:
            found.append(Restart(name, restarting, tuple(r for r in restarting if r in inherited)))
    return found


def _pod_level_changes(new_pod: Mapping[str, Any], old_pod: Mapping[str, Any]) -> tuple[set[str], set[str]]:
    """(resources whose pod-level limit changed, those whose pod-level request changed)."""
    new = as_dict(as_dict(new_pod.get("spec")).get("resources"))
    old = as_dict(as_dict(old_pod.get("spec")).get("resources"))
    return (
        _changed_resources({"limits": old.get("limits")}, {"limits": new.get("limits")}),
        _changed_resources({"requests": old.get("requests")}, {"requests": new.get("requests")}),
    )


def _inherited(own: Mapping[str, Any], limits_changed: set[str], requests_changed: set[str]) -> set[str]:
    """The pod-level changes a container with resources `own` inherits: a limit it does not set,
    a request where it sets neither request nor limit."""
    limits, requests = as_dict(own.get("limits")), as_dict(own.get("requests"))
    return {r for r in limits_changed if r not in limits} | {
        r for r in requests_changed if r not in requests and r not in limits
    }


def _containers(pod: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    spec = as_dict(pod.get("spec"))
    out: dict[str, dict[str, Any]] = {}
    for field in ("initContainers", "containers"):
        for container in map(as_dict, as_list(spec.get(field))):
            name = container.get("name")
            if isinstance(name, str) and name:
                out[name] = container
    return out


def _resize_policy(container: Mapping[str, Any]) -> dict[str, str]:
    """resource name -> restartPolicy of a container's `resizePolicy`."""
    policy: dict[str, str] = {}
    for entry in map(as_dict, as_list(container.get("resizePolicy"))):
        resource, restart = entry.get("resourceName"), entry.get("restartPolicy")
        if isinstance(resource, str) and isinstance(restart, str):
            policy[resource] = restart
    return policy


def _changed_resources(old: Mapping[str, Any], new: Mapping[str, Any]) -> set[str]:
    """Resource names whose request or limit differs between two `resources` blocks (compared as
    written: "1" and "1000m" count as a change, which the kubelet would apply as none; erring on
    the side of a restart only costs a warning within the budget)."""
    changed: set[str] = set()
    for part in ("requests", "limits"):
        before, after = as_dict(old.get(part)), as_dict(new.get(part))
        changed.update(r for r in {*before, *after} if str(before.get(r)) != str(after.get(r)))
    return changed


class GroupResize(Policy):
    """The `group-resize` policy (see the module docstring)."""

    id = "group-resize"
    targets = (target("", "pods", "resize", "UPDATE"),)
    default_actions = ("Deny",)
    fail_closed = True
    stale_code = TOO_MANY_REQUESTS
    params = {
        "maxDisruptedGroups": 1,
        "ledgerTTLSeconds": 120,
        "minMaxDisruptedGroups": 0,
        "stuckAfterSeconds": 900,
    }
    shared_params = {
        "maxDisruptedGroups": "group-eviction",
        "ledgerTTLSeconds": "group-eviction",
        "minMaxDisruptedGroups": "group-eviction",
        "stuckAfterSeconds": "group-eviction",
    }
    param_minimums = {"ledgerTTLSeconds": 1, "stuckAfterSeconds": 0}

    def judge(self, ctx: PolicyContext) -> Judgement:
        """Judge a resize of a group member by the group budget when it restarts a container
        under a recreating restartPolicy; see the module docstring."""
        pod = _resized_pod(ctx)
        ref = resolve(ctx.view, pod)
        if ref is None or ref.set.kind != LWS_KIND or pod.terminating or pod.terminal:
            return ALLOW  # a restartPolicy that recreates the group is an LWS's
        restarting = restarts(ctx.object, ctx.old_object or ctx.object)
        if not restarting:
            return ALLOW
        if ctx.view.is_stale():
            return stale_judgement(self, ctx.view)
        lws = ctx.view.lws(ref.set.namespace, ref.set.name)
        if lws is None:
            return ALLOW
        what = f"resizing pod {pod.namespace}/{pod.name}"
        containers = "; ".join(r.describe() for r in restarting)
        if lws.restart_policy not in RECREATING_POLICIES:
            return Judgement(
                advisories=(
                    f"{what} restarts {containers}; under restartPolicy {lws.restart_policy} the LWS "
                    f"controller does not recreate group {ref.key} of LeaderWorkerSet "
                    f"{lws.namespace}/{lws.name}, which lacks this pod until the container is back",
                )
            )
        disruption = group_disruption(
            ctx.view, pod, default_budget(ctx.params), min_budget(ctx.params), ref=ref
        )
        if disruption is None:
            return ALLOW
        consequence = (
            f"restarts {containers}, and under restartPolicy {lws.restart_policy} the LWS controller "
            f"then recreates the whole group"
        )
        advisory = (
            f"{what} {consequence} {disruption.subject().removeprefix('group ')} "
            f"(a cold start; at most {disruption.budget} at a time); counted against the group-eviction "
            f"budget"
        )
        return judge_budget(
            ctx.view,
            disruption,
            ctx.ledger,
            ctx.may_record,
            ctx.params,
            f"{what} ({consequence})",
            advisory,
            cause="resize",
        )


def _resized_pod(ctx: PolicyContext) -> PodRecord:
    """The pod as it stands before the resize (`oldObject`, else `object`), in the request's
    namespace when the object names none."""
    record = PodRecord.from_object(ctx.old_object or ctx.object)
    return record if record.namespace else record.with_fields(namespace=ctx.namespace)


POLICY = GroupResize()
