"""The LeaderWorkerSet group model: labels, the LWS spec, and a pod's place in its group.

Facts from the LWS source (sigs.k8s.io/lws v0.10, api/leaderworkerset/v1): every pod carries
`leaderworkerset.sigs.k8s.io/name`, `group-index`, `worker-index` (the leader is "0") and
`group-key`; pods carry the group size in the `size` annotation and workers name their leader in
`leader-name`. Leader pods are `L-<g>` (StatefulSet `L`); workers `L-<g>-<w>` (StatefulSet `L-<g>`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from guardhook.cluster.model import OwnerRef, PodRecord, as_dict, metadata, str_map
from guardhook.wire import KubeObject

LWS_API_GROUP = "leaderworkerset.x-k8s.io"
LWS_API_VERSION = f"{LWS_API_GROUP}/v1"
LWS_KIND = "LeaderWorkerSet"
# The LWS controller's service account in any namespace or Helm release (exempt by default).
LWS_CONTROLLER_PATTERN = "system:serviceaccount:*:*lws-controller-manager"

PREFIX = "leaderworkerset.sigs.k8s.io/"
NAME_LABEL = PREFIX + "name"
GROUP_INDEX_LABEL = PREFIX + "group-index"
WORKER_INDEX_LABEL = PREFIX + "worker-index"
GROUP_KEY_LABEL = PREFIX + "group-key"
SIZE_ANNOTATION = PREFIX + "size"
LEADER_NAME_ANNOTATION = PREFIX + "leader-name"
EXCLUSIVE_TOPOLOGY_ANNOTATION = PREFIX + "exclusive-topology"
# guardhook's own LWS annotation: which pods of a group serve traffic. "leaders" (the default) for
# tensor/pipeline-parallel groups whose leader alone serves; "all" for data-parallel groups (e.g.
# vLLM --data-parallel-hybrid-lb) where every pod serves its ranks.
SERVING_PODS_ANNOTATION = "guardhook.io/serving-pods"
SERVING_LEADERS = "leaders"
SERVING_ALL = "all"
SERVING_PODS_VALUES = (SERVING_LEADERS, SERVING_ALL)
# LWS restartPolicy values (api/leaderworkerset/v1): under the two recreating ones a deleted pod or
# a restarted container makes the LWS controller delete the leader and recreate the whole group
# (pod_controller.go handleRestartPolicy); under None (formerly "Default") it does nothing.
RECREATE_GROUP_ON_POD_RESTART = "RecreateGroupOnPodRestart"
RECREATE_GROUP_AFTER_START = "RecreateGroupAfterStart"
RECREATING_POLICIES = (RECREATE_GROUP_ON_POD_RESTART, RECREATE_GROUP_AFTER_START)


def _int_or(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    return default


@dataclass(frozen=True, slots=True)
class GroupMember:
    """Where a pod stands in an LWS: which LWS, which group, which position.

    `size` is None when the pod carries no size annotation.
    """

    namespace: str
    lws_name: str
    group_index: int
    worker_index: int
    size: int | None

    @property
    def is_leader(self) -> bool:
        return self.worker_index == 0

    @property
    def leader_pod_name(self) -> str:
        """The leader pod of this group: `<lws>-<group>` (leader StatefulSet ordinal naming)."""
        return f"{self.lws_name}-{self.group_index}"


def group_member(
    namespace: str, labels: Mapping[str, str], annotations: Mapping[str, str]
) -> GroupMember | None:
    """Read a pod's group membership from its labels and annotations; None for a non-LWS pod.

    A pod with the name label but an unreadable group or worker index is treated as non-LWS.
    """
    lws_name = labels.get(NAME_LABEL)
    group = labels.get(GROUP_INDEX_LABEL, "")
    worker = labels.get(WORKER_INDEX_LABEL, "")
    if not lws_name or not group.isdigit() or not worker.isdigit():
        return None
    size_raw = annotations.get(SIZE_ANNOTATION, "")
    return GroupMember(
        namespace=namespace,
        lws_name=lws_name,
        group_index=int(group),
        worker_index=int(worker),
        size=int(size_raw) if size_raw.isdigit() else None,
    )


def member_of_object(obj: KubeObject | None) -> GroupMember | None:
    """`group_member` for a pod given as an API object (e.g. a review's oldObject)."""
    meta = metadata(obj)
    return group_member(
        str(meta.get("namespace") or ""), str_map(meta.get("labels")), str_map(meta.get("annotations"))
    )


def member_of_pod(pod: PodRecord) -> GroupMember | None:
    """`group_member` for a pod record from the cluster view."""
    return group_member(pod.namespace, pod.labels, pod.annotations)


@dataclass(frozen=True, slots=True)
class GroupHealth:
    """The state of one group: whole when it has `size` pods, none terminating, all Ready
    (design.md §1). `problems` says why a group is broken, for messages."""

    group_index: int
    size: int
    pods: int
    whole: bool
    problems: tuple[str, ...]


def group_health(
    group_index: int, size: int, pods: Iterable[PodRecord], doomed: Callable[[PodRecord], str] | None = None
) -> GroupHealth:
    """Judge one group from its live pods (terminal pods count as absent). `doomed`, when given,
    says why a pod neither terminating nor terminal is going all the same ("" when it is not; see
    guardhook.cluster.going): a marked or NoExecute-tainted pod breaks its group as a terminating
    one does."""
    present = [p for p in pods if not p.terminal]
    problems: list[str] = []
    if len(present) < size:
        problems.append(f"{len(present)} of {size} pods exist")
    terminating = sorted(p.name for p in present if p.terminating)
    if terminating:
        problems.append("terminating: " + ", ".join(terminating))
    going = {p.name: doomed(p) for p in present if not p.terminating} if doomed is not None else {}
    going = {name: why for name, why in going.items() if why}
    if going:
        problems.append("going: " + ", ".join(f"{name} ({why})" for name, why in sorted(going.items())))
    not_ready = sorted(p.name for p in present if not p.ready and not p.terminating and p.name not in going)
    if not_ready:
        problems.append("not Ready: " + ", ".join(not_ready))
    return GroupHealth(group_index, size, len(present), not problems, tuple(problems))


class LeaderWorkerSet:
    """Read-only accessors over a LeaderWorkerSet object (leaderworkerset.x-k8s.io/v1).

    Defaults follow the LWS webhook: replicas 1, size 1, restartPolicy RecreateGroupOnPodRestart,
    rollout maxUnavailable 1 / maxSurge 0; leaders use the worker template when no leader template
    is given.
    """

    __slots__ = ("obj",)

    def __init__(self, obj: KubeObject) -> None:
        self.obj = obj

    @property
    def meta(self) -> dict[str, Any]:
        return metadata(self.obj)

    @property
    def name(self) -> str:
        return str(self.meta.get("name") or "")

    @property
    def namespace(self) -> str:
        return str(self.meta.get("namespace") or "")

    @property
    def uid(self) -> str:
        return str(self.meta.get("uid") or "")

    @property
    def annotations(self) -> dict[str, str]:
        return str_map(self.meta.get("annotations"))

    @property
    def spec(self) -> dict[str, Any]:
        return as_dict(self.obj.get("spec"))

    @property
    def template(self) -> dict[str, Any]:
        return as_dict(self.spec.get("leaderWorkerTemplate"))

    @property
    def replicas(self) -> int:
        return _int_or(self.spec.get("replicas"), 1)

    @property
    def size(self) -> int:
        return _int_or(self.template.get("size"), 1)

    @property
    def restart_policy(self) -> str:
        return str(self.template.get("restartPolicy") or RECREATE_GROUP_ON_POD_RESTART)

    @property
    def worker_template(self) -> dict[str, Any]:
        return as_dict(self.template.get("workerTemplate"))

    @property
    def leader_template(self) -> dict[str, Any]:
        """The leader pod template, falling back to the worker template."""
        leader = as_dict(self.template.get("leaderTemplate"))
        return leader or self.worker_template

    @property
    def rollout(self) -> dict[str, Any]:
        strategy = as_dict(self.spec.get("rolloutStrategy"))
        return as_dict(strategy.get("rollingUpdateConfiguration"))

    @property
    def exclusive_topology(self) -> str | None:
        return self.annotations.get(EXCLUSIVE_TOPOLOGY_ANNOTATION) or None

    @property
    def serving_pods(self) -> str:
        """SERVING_ALL when the `guardhook.io/serving-pods` annotation is exactly "all", else
        SERVING_LEADERS (the default, also for an unreadable value: see `serving_pods_unreadable`)."""
        all_serve = self.annotations.get(SERVING_PODS_ANNOTATION) == SERVING_ALL
        return SERVING_ALL if all_serve else SERVING_LEADERS

    @property
    def serving_pods_unreadable(self) -> str | None:
        """The raw `guardhook.io/serving-pods` value when it is set but neither "leaders" nor "all"
        (group-spec warns about it), else None."""
        raw = self.annotations.get(SERVING_PODS_ANNOTATION)
        return raw if raw is not None and raw not in SERVING_PODS_VALUES else None


def lws_owner(obj: KubeObject) -> OwnerRef | None:
    """The LeaderWorkerSet among `obj`'s ownerReferences (kind and API group both match), or None."""
    for owner in OwnerRef.parse_all(metadata(obj)):
        if owner.kind == LWS_KIND and owner.api_version.startswith(LWS_API_GROUP + "/"):
            return owner
    return None


def int_annotation(annotations: Mapping[str, str], key: str, default: int) -> int:
    """A non-negative integer annotation, or `default` when absent or malformed."""
    raw = annotations.get(key, "")
    return int(raw) if raw.isdigit() else default
