"""Policy `group-spec`: lint a LeaderWorkerSet spec for settings that hurt serving groups.

Rules (design.md §2; LWS v0.10 API defaults from sigs.k8s.io/lws api/leaderworkerset/v1):

- `restartPolicy: None`: a failed pod is restarted alone, so the group keeps serving without it
  instead of being recreated whole.
- a rollout that takes serving groups down: `maxUnavailable` > 0 with `maxSurge` 0 on more than
  one replica (LWS defaults: maxUnavailable 1, maxSurge 0). Percentages resolve against
  `spec.replicas` as the LWS controller does: maxUnavailable rounds down, maxSurge rounds up.
- a leader without a `readinessProbe`, or whose readiness only opens a TCP socket: the leader's
  readiness is what Services and the group count see, and an open port says nothing about loaded
  weights.
- a probe that would give up on a multi-minute weight load with no `startupProbe` in front of it:
  a liveness probe restarts the container (and with it the group) before the weights are loaded; a
  readiness probe with no startup probe keeps the group out of service with no signal why. The
  threshold is the parameter `weightLoadSeconds` (default 300).

Requests: leaderworkersets CREATE and UPDATE. Reads only the request object, never the view, so
it cannot be stale. Default action: Warn.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from guardhook.cluster.lws import LeaderWorkerSet
from guardhook.cluster.model import as_dict, as_list, scaled
from guardhook.policies.base import ALLOW, Judgement, Policy, PolicyContext, Violation, target

DEFAULT_WEIGHT_LOAD_SECONDS = 300
# What a probe that gives up does to a container that is still loading weights.
PROBE_EFFECTS = (("livenessProbe", "restarting it"), ("readinessProbe", "marking it unready"))


class GroupSpec(Policy):
    id = "group-spec"
    targets = (target("leaderworkerset.x-k8s.io", "leaderworkersets", "", "CREATE", "UPDATE"),)
    default_actions = ("Warn",)
    params = {"weightLoadSeconds": DEFAULT_WEIGHT_LOAD_SECONDS}
    reads_view = False

    def judge(self, ctx: PolicyContext) -> Judgement:
        """One violation listing every finding (joined by "; "), or ALLOW when the spec is clean."""
        if not ctx.object:
            return ALLOW
        lws = LeaderWorkerSet(ctx.object)
        findings = lint(lws, int(ctx.params.get("weightLoadSeconds", DEFAULT_WEIGHT_LOAD_SECONDS)))
        if not findings:
            return ALLOW
        return Judgement(violation=Violation(f"LeaderWorkerSet {lws.name}: " + "; ".join(findings)))


def lint(lws: LeaderWorkerSet, weight_load_seconds: int) -> list[str]:
    """Every finding for `lws`, as short sentences (see the module docstring for the rules)."""
    findings: list[str] = []
    if lws.restart_policy == "None":
        findings.append(
            "restartPolicy None restarts a failed pod alone and leaves its group broken; "
            "use RecreateGroupOnPodRestart"
        )
    findings += _rollout(lws)
    findings += _leader_readiness(lws)
    findings += _startup(lws, weight_load_seconds)
    return findings


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
            f"(maxUnavailable {unavailable}, maxSurge 0); set maxSurge 1 and maxUnavailable 0"
        ]
    return []


def _containers(template: dict[str, Any]) -> Iterator[dict[str, Any]]:
    spec = as_dict(template.get("spec"))
    for container in as_list(spec.get("containers")):
        if isinstance(container, dict):
            yield container


def _leader_readiness(lws: LeaderWorkerSet) -> list[str]:
    probes = [as_dict(c.get("readinessProbe")) for c in _containers(lws.leader_template)]
    probes = [p for p in probes if p]
    if not probes:
        return ["leader has no readinessProbe, so it counts as Ready before its model is loaded"]
    if all(set(p) & {"tcpSocket", "httpGet", "exec", "grpc"} == {"tcpSocket"} for p in probes):
        return ["leader readinessProbe only checks a TCP socket, which opens before the weights are loaded"]
    return []


def probe_window_seconds(probe: dict[str, Any]) -> int:
    """Seconds a probe tolerates failure from container start: initialDelaySeconds plus
    periodSeconds × failureThreshold (Kubernetes defaults 0, 10, 3)."""

    def field(name: str, default: int) -> int:
        value = probe.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else default

    return field("initialDelaySeconds", 0) + field("periodSeconds", 10) * field("failureThreshold", 3)


def _startup(lws: LeaderWorkerSet, weight_load_seconds: int) -> list[str]:
    findings: list[str] = []
    templates = [("leader", lws.leader_template), ("worker", lws.worker_template)]
    if lws.template.get("leaderTemplate") is None:
        templates = [("leader and worker", lws.worker_template)]
    for role, template in templates:
        for container in _containers(template):
            if container.get("startupProbe"):
                continue
            for kind, effect in PROBE_EFFECTS:
                probe = as_dict(container.get(kind))
                if not probe:
                    continue
                window = probe_window_seconds(probe)
                if window < weight_load_seconds:
                    findings.append(
                        f"{role} container {container.get('name', '?')} has a {kind} and no startupProbe: "
                        f"it gives up after {window}s ({effect}), less than a multi-minute weight load "
                        f"(weightLoadSeconds {weight_load_seconds}); add a startupProbe"
                    )
                    break
    return findings


POLICY = GroupSpec()
