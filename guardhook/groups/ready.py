"""Group readiness: the leader's readiness gate `guardhook.io/group-ready` and the condition it
should carry, judged purely from the cluster view (issue 16, design.md §2).

Kubernetes facts (k8s.io/kubernetes pkg/kubelet/status/generate.go, GeneratePodReadyCondition):
a pod with `spec.readinessGates` is Ready only when ContainersReady is True AND every gate's
condition in `status.conditions` is "True"; a missing condition counts as not True ("corresponding
condition of pod readiness gate ... does not exist", reason ReadinessGatesNotReady). So a leader
carrying the gate is judged by its ContainersReady, never by its Ready (which waits on the gate).

A group is whole in the sense of `worker-delete` (guardhook.groups.health.group_health): all `size`
pods exist (terminal ones count as absent), none terminating, every worker Ready, plus here the
leader's own ContainersReady (a gated worker, of a `serving-pods: all` LWS, by its ContainersReady).

No LWS shape waits on the gate forever (issue 20; sigs.k8s.io/lws pkg/controllers/pod_controller.go):
LeaderCreated creates the worker StatefulSet at once, exclusive topology once the leader is
scheduled (neither waits on readiness), size 1 has no workers, RecreateGroupAfterStart and
subGroupPolicy wait on nothing a gate holds (pending phases, placement). Only LeaderReady waits on
the leader's Ready: until its worker StatefulSet exists the leader's condition is True
(`LeaderReadyBootstrap`, see `pod_readiness`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime

from guardhook.cluster.annotations import GROUP_READINESS_ANNOTATION, switch
from guardhook.cluster.lws import LEADER_READY, SERVING_ALL, LeaderWorkerSet
from guardhook.cluster.model import OwnerRef, PodRecord
from guardhook.cluster.view.store import ClusterView
from guardhook.groups.counts import populated_groups
from guardhook.groups.index import group_pods
from guardhook.groups.keys import GroupKey
from guardhook.groups.placement import member_of_pod

GATE = "guardhook.io/group-ready"
"""The readiness gate's conditionType, and the pod condition type the reconciler writes."""
OPT_IN_ANNOTATION = GROUP_READINESS_ANNOTATION
"""On a LeaderWorkerSet: "true" opts in, "false" opts out even when configured on for all."""

# Condition reasons (CamelCase, as Kubernetes condition reasons are).
GROUP_WHOLE = "GroupWhole"
WORKER_MISSING = "WorkerMissing"
WORKER_TERMINATING = "WorkerTerminating"
LEADER_CONTAINERS_NOT_READY = "LeaderContainersNotReady"
WORKER_NOT_READY = "WorkerNotReady"
OPTED_OUT = "GroupReadinessOptedOut"
LEADER_READY_BOOTSTRAP = "LeaderReadyBootstrap"
"""True while a `startupPolicy: LeaderReady` group has no worker StatefulSet yet (see
`pod_readiness`)."""

DEFAULT_STARTUP_WINDOW_SECONDS = 1800
"""How long a gated pod whose containers are ready may wait for its group before the watchdog
calls it held (the group-readiness parameter `startupWindowSeconds`)."""


def opted_in(lws: LeaderWorkerSet, all_lws: bool = False) -> bool:
    """Whether `lws` gates its leaders on the group: the annotation `guardhook.io/group-readiness`
    exactly "true" (or, with `all_lws` from the config, anything but exactly "false"); read by
    guardhook.cluster.annotations, as every guardhook annotation is."""
    value = switch(lws.annotations, OPT_IN_ANNOTATION)
    return value is not False if all_lws else value is True


def gates_workers(lws: LeaderWorkerSet) -> bool:
    """Whether every pod of a group carries the gate, not only its leader: a data-parallel LWS
    (`guardhook.io/serving-pods: "all"`), whose workers serve traffic too."""
    return lws.serving_pods == SERVING_ALL


def gated(pod: PodRecord) -> bool:
    """Whether the pod carries guardhook's readiness gate."""
    return GATE in pod.readiness_gates


@dataclass(frozen=True)
class GroupReadiness:
    """The condition a gated pod should carry: `ready` (status "True"/"False"), a CamelCase
    `reason` and `detail` naming what is missing (e.g. "llm-xl-0-2", "3 of 4 pods")."""

    ready: bool
    reason: str
    detail: str

    @property
    def status(self) -> str:
        """The condition's status: "True" or "False"."""
        return "True" if self.ready else "False"

    @property
    def message(self) -> str:
        """`Reason: detail`, e.g. `WorkerNotReady: llm-xl-0-2` (the condition's message)."""
        return f"{self.reason}: {self.detail}"


def serving_ready(pod: PodRecord) -> bool:
    """Whether `pod` counts as ready for its group: its ContainersReady when it carries the gate
    (its Ready waits on the very condition being judged, so reading Ready would never let a
    group of gated pods become whole), else its Ready."""
    return pod.containers_ready if gated(pod) else pod.ready


def group_readiness(size: int, pods: Iterable[PodRecord]) -> GroupReadiness:
    """Judge one group from its pods. The first failing rule wins, in this order: WorkerMissing
    (fewer than `size` non-terminal pods), WorkerTerminating, LeaderContainersNotReady,
    WorkerNotReady (a gated worker by its ContainersReady, see `serving_ready`); otherwise
    GroupWhole."""
    present = [p for p in pods if not p.terminal]
    if len(present) < size:
        return GroupReadiness(False, WORKER_MISSING, f"{len(present)} of {size} pods")
    terminating = sorted(p.name for p in present if p.terminating)
    if terminating:
        return GroupReadiness(False, WORKER_TERMINATING, ", ".join(terminating))
    leaders = [p for p in present if _is_leader(p)]
    not_ready_leaders = sorted(p.name for p in leaders if not p.containers_ready)
    if not_ready_leaders:
        return GroupReadiness(False, LEADER_CONTAINERS_NOT_READY, ", ".join(not_ready_leaders))
    not_ready = sorted(p.name for p in present if not _is_leader(p) and not serving_ready(p))
    if not_ready:
        return GroupReadiness(False, WORKER_NOT_READY, ", ".join(not_ready))
    return GroupReadiness(True, GROUP_WHOLE, f"{len(present)} of {size} pods Ready")


def _is_leader(pod: PodRecord) -> bool:
    member = member_of_pod(pod)
    return member is not None and member.is_leader


@dataclass(frozen=True)
class Leader:
    """A pod the gate applies to — a group's leader, or with `gates_workers` any pod of the
    group — with its LWS and group index. (Named for the common case: leaders.)"""

    lws: LeaderWorkerSet
    group_index: GroupKey
    pod: PodRecord

    @property
    def is_leader(self) -> bool:
        """Whether the pod is its group's leader (guardhook.groups.placement.group_member)."""
        return _is_leader(self.pod)


GatedPod = Leader


def leaders(view: ClusterView, lws: LeaderWorkerSet) -> Iterator[Leader]:
    """The leader pods of groups 0..replicas-1 of `lws` in `view` (groups above are being scaled
    away: their pods are deleted next, and keep their last condition until then)."""
    for group_index in populated_groups(view, lws):  # a group without pods has no leader
        for pod in group_pods(view, lws.namespace, lws.name, group_index):
            if _is_leader(pod):
                yield Leader(lws, group_index, pod)


def gate_targets(view: ClusterView, lws: LeaderWorkerSet) -> Iterator[GatedPod]:
    """The pods of groups 0..replicas-1 the gate applies to: the leaders, and for an LWS that
    `gates_workers` every pod, leader first within each group."""
    if not gates_workers(lws):
        yield from leaders(view, lws)
        return
    for group_index in populated_groups(view, lws):
        pods = group_pods(view, lws.namespace, lws.name, group_index)
        for pod in sorted(pods, key=lambda p: (not _is_leader(p), p.name)):
            if member_of_pod(pod) is not None:
                yield GatedPod(lws, group_index, pod)


def worker_statefulset_name(leader: PodRecord) -> str:
    """The worker StatefulSet of `leader`'s group: named after the leader pod in both group
    identities (`<lws>-<g>` Ordinal; the ReplicaSet's generated name Hash: lws pod_controller.go,
    KEP-898 "named after its leader pod, as today")."""
    return leader.name


def workers_created(view: ClusterView, leader: GatedPod) -> bool:
    """Whether the LWS controller has created the worker StatefulSet of `leader`'s group: the view
    holds the StatefulSet named after the leader pod and controlled by it (not by a predecessor
    of the same name, whose StatefulSet the garbage collector is removing), or a live worker pod of
    the group (which only that StatefulSet creates; covers a view that does not list
    StatefulSets)."""
    pod = leader.pod
    sts = view.statefulset(pod.namespace, worker_statefulset_name(pod))
    if sts is not None and any(_controls(owner, pod) for owner in sts.owners):
        return True
    group = group_pods(view, pod.namespace, leader.lws.name, leader.group_index)
    return any(not _is_leader(p) and not p.terminal and not p.terminating for p in group)


def _controls(owner: OwnerRef, pod: PodRecord) -> bool:
    same_uid = not owner.uid or not pod.uid or owner.uid == pod.uid
    return owner.controller and owner.kind == "Pod" and owner.name == pod.name and same_uid


def bootstrapping(view: ClusterView, leader: GatedPod) -> bool:
    """Whether `leader` is a `startupPolicy: LeaderReady` leader whose group's workers do not
    exist yet. The LWS controller (pod_controller.go) creates the worker StatefulSet only once
    the leader pod is Ready, and the kubelet reports a gated pod Ready only when the gate's
    condition is True: holding the leader until its group is whole would wait forever. Size 1
    groups have no worker StatefulSet and are whole with their leader alone."""
    lws = leader.lws
    if lws.startup_policy != LEADER_READY or lws.size <= 1 or not leader.is_leader:
        return False
    return not workers_created(view, leader)


def pod_readiness(view: ClusterView, target: GatedPod) -> GroupReadiness:
    """The condition `target` should carry: True `LeaderReadyBootstrap` while a LeaderReady leader
    waits for the worker StatefulSet its own readiness triggers (`bootstrapping`), else its
    group's verdict (`group_readiness`) — once the workers exist, the leader is held until the
    group is whole (the LWS controller never removes a created worker StatefulSet because its
    leader became unready)."""
    if bootstrapping(view, target):
        name = worker_statefulset_name(target.pod)
        return GroupReadiness(
            True,
            LEADER_READY_BOOTSTRAP,
            f"startupPolicy LeaderReady creates worker StatefulSet {name} only once this leader is "
            "Ready; held again when it appears, until the group is whole",
        )
    pods = group_pods(view, target.lws.namespace, target.lws.name, target.group_index)
    return group_readiness(target.lws.size, pods)


leader_readiness = pod_readiness


def held_seconds(pod: PodRecord, now: datetime) -> float | None:
    """Seconds a gated pod whose containers are ready has had its gate condition False (from the
    condition's lastTransitionTime) or never written (from the pod's creation: the kubelet holds
    a pod unready while a readiness gate has no condition, e.g. when no reconciler runs); None
    when it is not so held or the time is unreadable."""
    current = pod.gate_conditions.get(GATE)
    if not gated(pod) or pod.terminating or not pod.containers_ready:
        return None
    if current is None:
        created = pod.created
        return max(0.0, now.timestamp() - created) if created else None
    if current.status != "False" or not current.last_transition_time:
        return None
    try:
        since = datetime.fromisoformat(current.last_transition_time.replace("Z", "+00:00"))
    except ValueError:
        return None
    if since.tzinfo is None:
        since = since.replace(tzinfo=UTC)
    return max(0.0, (now - since).total_seconds())


def held_too_long(pod: PodRecord, window_seconds: float, now: datetime) -> float | None:
    """`held_seconds` when longer than `window_seconds` (the watchdog), else None."""
    held = held_seconds(pod, now)
    return held if held is not None and held > window_seconds else None


def held_pods(
    view: ClusterView,
    all_lws: bool = False,
    window_seconds: float = DEFAULT_STARTUP_WINDOW_SECONDS,
    now: datetime | None = None,
) -> list[tuple[GatedPod, float]]:
    """The watchdog: every gated pod of an opted-in LWS held longer than `window_seconds` with its
    containers ready (`held_too_long`), with the seconds held, in (namespace, LWS, group) order."""
    moment = now or datetime.now(UTC)
    found = []
    for lws in sorted(view.all_lws(), key=lambda lws: (lws.namespace, lws.name)):
        if not opted_in(lws, all_lws):
            continue
        for target in gate_targets(view, lws):
            seconds = held_too_long(target.pod, window_seconds, moment)
            if seconds is not None:
                found.append((target, seconds))
    return found


@dataclass(frozen=True)
class GateCounts:
    """Per opted-in LWS: pods carrying the gate (leaders, or every pod with `gates_workers`),
    those whose condition is True (ready by the gate), those whose condition is not what the
    group's state says (`behind`: the reconciler has not caught up, or is not running), and those
    held longer than the startup window with their containers ready (`held`, the watchdog)."""

    namespace: str
    name: str
    gated: int
    ready: int
    behind: int
    held: int = 0


def gate_counts(
    view: ClusterView,
    all_lws: bool = False,
    window_seconds: float = DEFAULT_STARTUP_WINDOW_SECONDS,
    now: datetime | None = None,
) -> Iterator[GateCounts]:
    """`GateCounts` for every opted-in LWS in `view`, in namespace and name order, each LWS
    counted as it is asked for (a scrape gives the GIL away between them)."""
    moment = now or datetime.now(UTC)
    for lws in sorted(view.all_lws(), key=lambda lws: (lws.namespace, lws.name)):
        if not opted_in(lws, all_lws):
            continue
        targets = [target for target in gate_targets(view, lws) if gated(target.pod)]
        ready = behind = held = 0
        for target in targets:
            current = target.pod.gate_conditions.get(GATE)
            ready += current is not None and current.status == "True"
            want = pod_readiness(view, target)
            if not target.pod.terminating and (
                current is None or (current.status, current.reason) != (want.status, want.reason)
            ):
                behind += 1
            held += held_too_long(target.pod, window_seconds, moment) is not None
        yield GateCounts(lws.namespace, lws.name, len(targets), ready, behind, held)
