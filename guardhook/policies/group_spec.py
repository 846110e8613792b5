"""Policy `group-spec`: lint a LeaderWorkerSet spec for settings that hurt serving groups.

Rules (design.md §2; LWS v1 API defaults from sigs.k8s.io/lws api/leaderworkerset/v1; probe
behaviour from the Kubernetes docs, "Configure Liveness, Readiness and Startup Probes"):

- `restartPolicy: None` (or `Default`, its deprecated name): a failed pod is restarted alone, so
  the group keeps serving without it instead of being recreated whole.
- a rollout that takes serving groups down: `maxUnavailable` > 0 with `maxSurge` 0 on more than
  one replica (LWS defaults: maxUnavailable 1, maxSurge 0). Percentages resolve against
  `spec.replicas` as the LWS controller does: maxUnavailable rounds down, maxSurge rounds up. The
  remedy, `maxSurge: 1, maxUnavailable: 0`, costs one spare group during a rollout: the message says
  how many pods and accelerators that is.
- a leader without a `readinessProbe`, or whose readiness only opens a TCP socket: the leader's
  readiness is what Services and the group count see. With no probe the leader is Ready as soon as
  its containers run; an open port does not show a loaded model (llama.cpp's server listens while
  it loads and answers /health with 503 until done; vLLM and SGLang listen only once loaded, so
  there the TCP check happens to work, but a health endpoint works for every server).
- a Hash LWS with `groupReplacementPolicy: Immediate` (lws PR #1050): a recreated group's
  replacement is scheduled while the old group still holds its nodes, so every recreate needs a
  second group's room or preempts something (`PostTermination`, the default, gates the replacement
  leader until the old group is gone).
- a probe that restarts a container before a multi-minute weight load can finish. Only two probes
  restart a container: a `livenessProbe` (held off while a `startupProbe` has not yet succeeded)
  and the `startupProbe` itself. A failing readiness probe never restarts anything: it only keeps
  the pod out of Service endpoints until it passes, which is what a loading model should get. So:
  a liveness probe with no startup probe, or a startup probe, whose failure window
  (initialDelaySeconds + periodSeconds × failureThreshold) is shorter than the parameter
  `weightLoadSeconds` (default 300). A restart under `RecreateGroupOnPodRestart` (the default)
  recreates the whole group, which then loads again: a restart loop.
- pod-level resources (`spec.resources`, KEP-2837, GA in 1.37) a template's pods cannot have: a
  pod-level request below its containers' aggregate request (cpu, memory, hugepages-*). The API
  server rejects every such pod ("spec.resources.requests[cpu]: Invalid value: ...: must be
  greater than or equal to aggregate container requests of ..."; the LWS API does not validate
  its templates as pods), so no group of it is ever made. The finding states both values.
- a guardhook annotation that cannot be read (`guardhook.io/max-disrupted-groups` or
  `guardhook.io/spare-groups` not a non-negative integer, `guardhook.io/serving-pods` neither
  "leaders" nor "all"): the finding names the annotation and the value used instead
  (guardhook.cluster.coverage.unreadable_annotations), since the other policies silently fall back.
- `guardhook.io/max-disrupted-groups: "0"`: no group of the LWS may be disrupted, so every drain of
  a node its groups run on stops (issue 48: a tenant's annotation); the finding names group-eviction's
  `minMaxDisruptedGroups`, the cluster's minimum that such an annotation cannot go below.

Requests: leaderworkersets CREATE and UPDATE. Reads only the request object, never the view, so
it cannot be stale. Default action: Warn.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from guardhook.cluster.coverage import BUDGET_ANNOTATION, unreadable_annotations
from guardhook.cluster.lws import GROUP_REPLACEMENT_GATE, IMMEDIATE, POST_TERMINATION, LeaderWorkerSet
from guardhook.cluster.model import as_dict, as_list, scaled
from guardhook.cluster.resources import (
    Resources,
    add_into,
    container_total,
    parse_resource_list,
    pod_level_supported,
    pod_requests,
)
from guardhook.policies.base import ALLOW, Judgement, Policy, PolicyContext, Violation, target

DEFAULT_WEIGHT_LOAD_SECONDS = 300
# Restart policies under which a failed pod is restarted alone ("Default" is None's deprecated name).
POD_ALONE_POLICIES = ("None", "Default")
# Resources every pod requests; the others (GPUs, TPUs, NICs) are what a spare group costs.
COMMON_RESOURCES = ("cpu", "memory", "ephemeral-storage", "pods")


class GroupSpec(Policy):
    id = "group-spec"
    targets = (target("leaderworkerset.x-k8s.io", "leaderworkersets", "", "CREATE", "UPDATE"),)
    default_actions = ("Warn",)
    params = {"weightLoadSeconds": DEFAULT_WEIGHT_LOAD_SECONDS}
    reads_view = False

    def judge(self, ctx: PolicyContext) -> Judgement:
        """One violation whose message joins every finding with "; " (and names the LWS), with the
        findings apart in Violation.findings; ALLOW when the spec is clean."""
        if not ctx.object:
            return ALLOW
        lws = LeaderWorkerSet(ctx.object)
        findings = lint(lws, int(ctx.params.get("weightLoadSeconds", DEFAULT_WEIGHT_LOAD_SECONDS)))
        if not findings:
            return ALLOW
        message = f"LeaderWorkerSet {lws.name}: " + "; ".join(findings)
        return Judgement(violation=Violation(message, findings=tuple(findings)))


def lint(lws: LeaderWorkerSet, weight_load_seconds: int) -> list[str]:
    """Every finding for `lws`, as short sentences (see the module docstring for the rules)."""
    findings: list[str] = []
    if lws.restart_policy in POD_ALONE_POLICIES:
        findings.append(
            f"restartPolicy {lws.restart_policy} restarts a failed pod alone and leaves its group broken; "
            "use RecreateGroupOnPodRestart"
        )
    findings += _rollout(lws)
    findings += _leader_readiness(lws)
    findings += _restarts_during_load(lws, weight_load_seconds)
    findings += _pod_level_below_containers(lws)
    findings += [unreadable.sentence() for unreadable in unreadable_annotations(lws)]
    findings += _zero_budget(lws)
    findings += _immediate_replacement(lws)
    return findings


def _immediate_replacement(lws: LeaderWorkerSet) -> list[str]:
    """The finding for a Hash LWS with `groupReplacementPolicy: Immediate` (lws PR #1050): its
    replacement group is scheduled while the old one still holds its nodes."""
    if not lws.hashed or lws.group_replacement_policy != IMMEDIATE:
        return []
    return [
        f"groupReplacementPolicy {IMMEDIATE} schedules a recreated group's replacement while the old "
        "group still holds its nodes: every recreate needs room for a second group "
        f"({group_cost(lws)}), or it preempts other workloads; {POST_TERMINATION} (the default) keeps "
        f"the replacement leader behind the {GROUP_REPLACEMENT_GATE} scheduling gate until the old "
        "group is gone"
    ]


def _zero_budget(lws: LeaderWorkerSet) -> list[str]:
    """The finding for a budget annotation of 0 (any run of zeros: it reads as 0)."""
    raw = lws.annotations.get(BUDGET_ANNOTATION, "")
    if not raw or raw.strip("0") or not raw.isascii():
        return []
    return [
        f'{BUDGET_ANNOTATION}: "{raw}" lets no group be disrupted, so every drain (kubectl drain, '
        "node upgrades, autoscaler scale-downs) of a node its groups run on waits forever unless the "
        "cluster sets group-eviction's minMaxDisruptedGroups above it; allow at least 1"
    ]


def _rollout(lws: LeaderWorkerSet) -> list[str]:
    replicas = lws.replicas
    if replicas <= 1:
        return []
    rollout = lws.rollout
    unavailable = scaled(rollout.get("maxUnavailable"), replicas, False, 1)
    surge = scaled(rollout.get("maxSurge"), replicas, True, 0)
    if surge == 0 and unavailable == 0:
        unavailable = 1  # as for Deployments, a rollout must make progress somehow
    if unavailable > 0 and surge == 0:
        return [
            f"rollout takes up to {unavailable} of {replicas} serving groups down at once "
            f"(maxUnavailable {unavailable}, maxSurge 0); set maxSurge 1 and maxUnavailable 0, "
            f"which keeps every group serving but needs room for one spare group during a rollout "
            f"({group_cost(lws)})"
        ]
    return []


def group_cost(lws: LeaderWorkerSet) -> str:
    """What one more group of `lws` needs, for the surge advice: "2 pods, 16 nvidia.com/gpu" —
    its pods and its requests (limits where no request is set) of every resource but cpu, memory
    and ephemeral storage; just the pods when the templates request no such resource."""
    total: Resources = {}
    add_into(total, pod_requests(as_dict(lws.leader_template.get("spec"))))
    workers = max(lws.size - 1, 0)  # up to 2^31 - 1 (int32): multiply, never loop per pod
    add_into(
        total,
        {
            name: amount * workers
            for name, amount in pod_requests(as_dict(lws.worker_template.get("spec"))).items()
        },
    )
    pods = f"{lws.size} pod" + ("" if lws.size == 1 else "s")
    extra = [
        f"{amount} {name}"
        for name, amount in sorted(total.items())
        if amount and name not in COMMON_RESOURCES and not name.startswith("hugepages-")
    ]
    return ", ".join([pods, *extra])


def _pod_level_below_containers(lws: LeaderWorkerSet) -> list[str]:
    """Findings for pod-level requests below the containers' aggregate (see the module docstring)."""
    templates = [("worker", lws.worker_template)]
    if lws.leader_template is not lws.worker_template:
        templates.insert(0, ("leader", lws.leader_template))
    findings = []
    for role, template in templates:
        spec = as_dict(template.get("spec"))
        requested = parse_resource_list(as_dict(as_dict(spec.get("resources")).get("requests")))
        if not requested:
            continue
        # Here, not at the top: most templates set no pod-level requests, and the import statement
        # (numpy comes with guardhook.capacity) cost 2-3 µs on every call (issue 53).
        from guardhook.capacity.shapes import format_amount

        containers = container_total(spec)
        for name, amount in sorted(requested.items()):
            if pod_level_supported(name) and containers.get(name, 0) > amount:
                pod_level, theirs = format_amount(name, amount), format_amount(name, containers[name])
                findings.append(
                    f"{role} template: pod-level spec.resources.requests[{name}] {pod_level} is below its "
                    f"containers' aggregate request {theirs}; the API server rejects every such pod "
                    "(must be greater than or equal to aggregate container requests)"
                )
    return findings


def _containers(template: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = as_dict(template.get("spec"))
    for container in as_list(spec.get("containers")):
        if isinstance(container, dict):
            yield container


def _leader_readiness(lws: LeaderWorkerSet) -> list[str]:
    probes = [as_dict(c.get("readinessProbe")) for c in _containers(lws.leader_template)]
    probes = [p for p in probes if p]
    if not probes:
        return [
            "leader has no readinessProbe, so it is Ready (and takes Service traffic) as soon as its "
            "containers start, before its model is loaded; probe the server's health endpoint"
        ]
    if all(set(p) & {"tcpSocket", "httpGet", "exec", "grpc"} == {"tcpSocket"} for p in probes):
        return [
            "leader readinessProbe only checks that a TCP port accepts connections, which does not show a "
            "loaded model (llama.cpp's server accepts them while loading, its /health answering 503); "
            "probe the server's health endpoint (httpGet) instead"
        ]
    return []


def probe_window_seconds(probe: dict[str, Any]) -> int:
    """Seconds a probe tolerates failure from container start: initialDelaySeconds plus
    periodSeconds × failureThreshold (Kubernetes defaults 0, 10, 3)."""

    def field(name: str, default: int) -> int:
        value = probe.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    return field("initialDelaySeconds", 0) + field("periodSeconds", 10) * field("failureThreshold", 3)


def _restarts_during_load(lws: LeaderWorkerSet, weight_load_seconds: int) -> list[str]:
    findings: list[str] = []
    templates = [("leader", lws.leader_template), ("worker", lws.worker_template)]
    if lws.template.get("leaderTemplate") is None:
        templates = [("leader and worker", lws.worker_template)]
    whole_group = lws.restart_policy not in POD_ALONE_POLICIES
    restarted = "the container and its whole group" if whole_group else "the container"
    for role, template in templates:
        for container in _containers(template):
            name = f"{role} container {container.get('name', '?')}"
            startup = as_dict(container.get("startupProbe"))
            liveness = as_dict(container.get("livenessProbe"))
            if startup:
                window = probe_window_seconds(startup)
                if window < weight_load_seconds:
                    findings.append(
                        f"{name}: its startupProbe fails after {window}s, then the kubelet restarts "
                        f"{restarted}, before a multi-minute weight load (weightLoadSeconds "
                        f"{weight_load_seconds}) can finish; raise its periodSeconds × failureThreshold"
                    )
            elif liveness:
                window = probe_window_seconds(liveness)
                if window < weight_load_seconds:
                    findings.append(
                        f"{name}: its livenessProbe, with no startupProbe to hold it off, fails after "
                        f"{window}s, then the kubelet restarts {restarted}, before a multi-minute weight "
                        f"load (weightLoadSeconds {weight_load_seconds}) can finish; add a startupProbe"
                    )
    return findings


POLICY = GroupSpec()
