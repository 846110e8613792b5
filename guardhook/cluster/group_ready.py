"""Group readiness: the leader's readiness gate `guardhook.io/group-ready` and the condition it
should carry, judged purely from the cluster view (issue 16, design.md §2).

Kubernetes facts (k8s.io/kubernetes pkg/kubelet/status/generate.go, GeneratePodReadyCondition):
a pod with `spec.readinessGates` is Ready only when ContainersReady is True AND every gate's
condition in `status.conditions` is "True"; a missing condition counts as not True ("corresponding
condition of pod readiness gate ... does not exist", reason ReadinessGatesNotReady). So a leader
carrying the gate is judged by its ContainersReady, never by its Ready (which waits on the gate).

A group is whole in the sense of `worker-delete` (guardhook.cluster.lws.group_health): all `size`
pods exist (terminal ones count as absent), none terminating, every worker Ready, plus here the
leader's own ContainersReady.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from guardhook.cluster.groups import populated_groups
from guardhook.cluster.lws import LeaderWorkerSet, member_of_pod
from guardhook.cluster.model import PodRecord
from guardhook.cluster.view.store import ClusterView

GATE = "guardhook.io/group-ready"
"""The readiness gate's conditionType, and the pod condition type the reconciler writes."""
OPT_IN_ANNOTATION = "guardhook.io/group-readiness"
"""On a LeaderWorkerSet: "true" opts in, "false" opts out even when configured on for all."""

# Condition reasons (CamelCase, as Kubernetes condition reasons are).
GROUP_WHOLE = "GroupWhole"
WORKER_MISSING = "WorkerMissing"
WORKER_TERMINATING = "WorkerTerminating"
LEADER_CONTAINERS_NOT_READY = "LeaderContainersNotReady"
WORKER_NOT_READY = "WorkerNotReady"
OPTED_OUT = "GroupReadinessOptedOut"


def opted_in(lws: LeaderWorkerSet, all_lws: bool = False) -> bool:
    """Whether `lws` gates its leaders on the group: the annotation `guardhook.io/group-readiness`
    "true" (or, with `all_lws` from the config, anything but "false")."""
    value = lws.annotations.get(OPT_IN_ANNOTATION, "").strip().lower()
    return value != "false" if all_lws else value == "true"


def gated(pod: PodRecord) -> bool:
    """Whether the pod carries guardhook's readiness gate."""
    return GATE in pod.readiness_gates


@dataclass(frozen=True)
class GroupReadiness:
    """The condition a leader should carry: `ready` (status "True"/"False"), a CamelCase `reason`
    and `detail` naming what is missing (e.g. "llm-xl-0-2", "3 of 4 pods")."""

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


def group_readiness(size: int, pods: Iterable[PodRecord]) -> GroupReadiness:
    """Judge one group from its pods (a leader has worker-index "0"). The first failing rule wins,
    in this order: WorkerMissing (fewer than `size` non-terminal pods), WorkerTerminating,
    LeaderContainersNotReady, WorkerNotReady; otherwise GroupWhole."""
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
    not_ready = sorted(p.name for p in present if not _is_leader(p) and not p.ready)
    if not_ready:
        return GroupReadiness(False, WORKER_NOT_READY, ", ".join(not_ready))
    return GroupReadiness(True, GROUP_WHOLE, f"{len(present)} of {size} pods Ready")


def _is_leader(pod: PodRecord) -> bool:
    member = member_of_pod(pod)
    return member is not None and member.is_leader


@dataclass(frozen=True)
class Leader:
    """A leader pod of an LWS group, with the LWS and the group index."""

    lws: LeaderWorkerSet
    group_index: int
    pod: PodRecord


def leaders(view: ClusterView, lws: LeaderWorkerSet) -> Iterator[Leader]:
    """The leader pods of groups 0..replicas-1 of `lws` in `view` (groups above are being scaled
    away: their pods are deleted next, and keep their last condition until then)."""
    for group_index in populated_groups(view, lws):  # a group without pods has no leader
        for pod in view.group_pods(lws.namespace, lws.name, group_index):
            member = member_of_pod(pod)
            if member is not None and member.is_leader:
                yield Leader(lws, group_index, pod)


def leader_readiness(view: ClusterView, leader: Leader) -> GroupReadiness:
    """The condition `leader` should carry, judged from its group's pods in `view`."""
    pods = view.group_pods(leader.lws.namespace, leader.lws.name, leader.group_index)
    return group_readiness(leader.lws.size, pods)


@dataclass(frozen=True)
class GateCounts:
    """Per opted-in LWS: leaders carrying the gate, those whose condition is True (ready by the
    gate), and those whose condition is not what the group's state says (`behind`: the
    reconciler has not caught up, or is not running)."""

    namespace: str
    name: str
    gated: int
    ready: int
    behind: int


def gate_counts(view: ClusterView, all_lws: bool = False) -> list[GateCounts]:
    """`GateCounts` for every opted-in LWS in `view`, sorted by namespace and name."""
    counts = []
    for lws in sorted(view.all_lws(), key=lambda lws: (lws.namespace, lws.name)):
        if not opted_in(lws, all_lws):
            continue
        gated_leaders = [leader for leader in leaders(view, lws) if gated(leader.pod)]
        ready = behind = 0
        for leader in gated_leaders:
            current = leader.pod.gate_conditions.get(GATE)
            ready += current is not None and current.status == "True"
            want = leader_readiness(view, leader)
            if not leader.pod.terminating and (
                current is None or (current.status, current.reason) != (want.status, want.reason)
            ):
                behind += 1
        counts.append(GateCounts(lws.namespace, lws.name, len(gated_leaders), ready, behind))
    return counts
