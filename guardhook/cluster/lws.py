"""The LeaderWorkerSet group model: labels, the LWS spec, and a pod's place in its group.

Facts from the LWS source (sigs.k8s.io/lws v0.10, api/leaderworkerset/v1): every pod carries
`leaderworkerset.sigs.k8s.io/name`, `group-index`, `worker-index` (the leader is "0") and
`group-key`; pods carry the group size in the `size` annotation and workers name their leader in
`leader-name`. Leader pods are `L-<g>` (StatefulSet `L`); workers `L-<g>-<w>` (StatefulSet `L-<g>`).

Hash group identity (`spec.groupIdentity: Hash`, KEP-898, lws PRs #987 and #1050, on LWS main):
leaders come from a Deployment named `L` through its ReplicaSets (generated pod names), the
group-index and group-key labels both hold the group's random 40-character key, and each group's
worker StatefulSet is named after its leader's host name `L-<first 8 characters of the key>`
(workers `L-<key8>-<w>`). Every group key is a string (`GroupKey`): "3" or the Hash key.
A pod's position is read from its controller ownerReference together with those labels
(`group_member`): labels anyone may edit cannot turn a worker into a leader.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from guardhook.cluster.annotations import count
from guardhook.cluster.model import OwnerRef, PodRecord, as_dict, digits, metadata, str_map
from guardhook.wire import KubeObject

LWS_API_GROUP = "leaderworkerset.x-k8s.io"
LWS_API_VERSION = f"{LWS_API_GROUP}/v1"
LWS_KIND = "LeaderWorkerSet"
# The LWS controller's service account as its install (manifests and Helm chart defaults) names it:
# exempt by default, exactly (issue 20: a pattern would let any namespace's look-alike account
# bypass the guards). Another install is named in the configuration (`exemptions.lwsControllers`).
LWS_CONTROLLER = "system:serviceaccount:lws-system:lws-controller-manager"
LWS_CONTROLLER_PATTERN = LWS_CONTROLLER
"""The former name of LWS_CONTROLLER (it was a pattern); kept for imports."""

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
# spec.groupIdentity values (KEP-898): Ordinal (the default) or Hash; and what Hash mode adds: the
# readiness gate the LWS pod controller sets once the worker StatefulSet is Ready (only on groups of
# size > 1), the scheduling gate its pod webhook puts on every Hash leader, lifted once the group it
# replaces is gone (spec.groupReplacementPolicy PostTermination, the default; Immediate lifts it at
# once), and the length of a Hash group key.
GROUP_IDENTITY_ORDINAL = "Ordinal"
GROUP_IDENTITY_HASH = "Hash"
GROUP_READY_GATE = PREFIX + "group-ready"
GROUP_REPLACEMENT_GATE = PREFIX + "group-replacement"
POST_TERMINATION = "PostTermination"
HASH_KEY_LENGTH = 40
HASH_HOST_PREFIX = 8
# spec.startupPolicy values (api/leaderworkerset/v1).
LEADER_CREATED = "LeaderCreated"
LEADER_READY = "LeaderReady"


def _int_or(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, str) and digits(value):
        return int(value)
    return default


GroupKey = str
"""A group's key within its set, always a string: an Ordinal LWS group's ordinal ("3", as its
group-index label says it), a Hash group's 40-character key. Only the Lease ledger's wire form
keeps an ordinal as a JSON number (guardhook.ledger.base), so replicas of two versions agree."""

ORDINAL_DIGITS = 10
"""An ordinal is at most 10 digits (spec.replicas is an int32); a longer all-digit key is a key."""


def ordinal(key: GroupKey) -> int | None:
    """The ordinal `key` stands for ("3" -> 3), or None for a Hash key (or anything else)."""
    return int(key) if len(key) <= ORDINAL_DIGITS and digits(key) else None


def ordinal_key(index: int) -> GroupKey:
    """The key of ordinal group `index` ("3" for 3)."""
    return str(index)


def key_order(key: GroupKey) -> tuple[bool, int, str]:
    """A sort key putting ordinal groups first in numeric order, then Hash keys in text order."""
    number = ordinal(key)
    return (True, 0, key) if number is None else (False, number, "")


def below_replicas(key: GroupKey, replicas: int) -> bool:
    """Whether group `key` is one `spec.replicas` asks for: an ordinal below it; a Hash group
    always (Hash groups have no order: the leader Deployment's ReplicaSet chooses whom to remove)."""
    number = ordinal(key)
    return number is None or 0 <= number < replicas


def is_hash_key(value: str) -> bool:
    """Whether a group-index label value is a Hash group key (40 lowercase letters or digits)."""
    return len(value) == HASH_KEY_LENGTH and value.isascii() and value.isalnum() and value.lower() == value


def hash_host(lws_name: str, key: str) -> str:
    """A Hash group's leader host name, which names its worker StatefulSet: `<lws>-<key[:8]>`."""
    return f"{lws_name}-{key[:HASH_HOST_PREFIX]}"


@dataclass(frozen=True, slots=True)
class GroupMember:
    """Where a pod stands in an LWS: which LWS, which group, which position.

    `size` is None when the pod carries no size annotation. `inconsistent` says how the pod's
    labels disagree with its controller ownerReference ("" when they agree, or there is none to
    compare): the position is then the one the controller gives (see `group_member`).
    """

    namespace: str
    lws_name: str
    group_index: GroupKey
    worker_index: int
    size: int | None
    inconsistent: str = ""

    @property
    def is_leader(self) -> bool:
        return self.worker_index == 0

    @property
    def hashed(self) -> bool:
        """Whether the group is a Hash group (its key no ordinal)."""
        return ordinal(self.group_index) is None

    @property
    def leader_pod_name(self) -> str:
        """The leader pod of this group: `<lws>-<group>` (leader StatefulSet ordinal naming); for a
        Hash group, whose leader's name the ReplicaSet generated, its host name `<lws>-<key8>`
        (guardhook.groups reads the leader's real name from the view)."""
        if self.hashed:
            return hash_host(self.lws_name, self.group_index)
        return f"{self.lws_name}-{self.group_index}"

    @property
    def role(self) -> str:
        """The pod's role for messages: `leader` or `worker N`."""
        return "leader" if self.is_leader else f"worker {self.worker_index}"

    def note(self) -> str:
        """A sentence for an answer when the labels were inconsistent ("" when they were not)."""
        if not self.inconsistent:
            return ""
        judged = f"judged as {self.role} of group {self.group_index}"
        return f" (its labels were inconsistent: {self.inconsistent}; {judged})"


Position = tuple[GroupKey, int]
"""(group key, worker index)."""


def _suffix_index(name: str, prefix: str) -> int | None:
    """N when `name` is `<prefix>-<N>` (a StatefulSet pod's ordinal naming), else None."""
    rest = name[len(prefix) + 1 :] if name.startswith(prefix + "-") else ""
    return int(rest) if digits(rest) else None


def owned_position(lws_name: str, owners: Iterable[OwnerRef], pod_name: str) -> Position | None:
    """The pod's place by its controller ownerReference, as the LWS controller builds groups:
    a pod `<lws>-<g>` of the leader StatefulSet `<lws>` is the leader of group g, a pod
    `<lws>-<g>-<w>` of the worker StatefulSet `<lws>-<g>` (owned by that leader) is worker w ≥ 1.
    None when the controller is no such StatefulSet or the pod's name does not fit it (a
    StatefulSet names its pods `<statefulset>-<ordinal>`)."""
    for controller in owners:
        if controller.controller:
            break
    else:
        return None
    if controller.kind != "StatefulSet":
        return None
    if not controller.api_version.startswith("apps/"):
        return None
    if controller.name == lws_name:
        group = _suffix_index(pod_name, lws_name)
        return None if group is None else (ordinal_key(group), 0)
    group = _suffix_index(controller.name, lws_name)
    worker = _suffix_index(pod_name, controller.name)
    if group is None or worker is None or worker < 1:
        return None
    return (ordinal_key(group), worker)


def hash_owned_position(
    lws_name: str, key: str, owners: Iterable[OwnerRef], pod_name: str
) -> Position | None:
    """A Hash group pod's place by its controller ownerReference (lws KEP-898): a pod of a
    ReplicaSet `<lws>-<hash>` (the leader Deployment `<lws>`'s) is the leader of group `key`; a pod
    `<sts>-<w>` of the worker StatefulSet `<lws>-<key8>` is worker w ≥ 1. None otherwise."""
    for controller in owners:
        if controller.controller:
            break
    else:
        return None
    if not controller.api_version.startswith("apps/"):
        return None
    if controller.kind == "ReplicaSet" and controller.name.startswith(lws_name + "-"):
        return (key, 0)
    if controller.kind != "StatefulSet" or controller.name != hash_host(lws_name, key):
        return None
    worker = _suffix_index(pod_name, controller.name)
    return None if worker is None or worker < 1 else (key, worker)


def _labelled_position(labels: Mapping[str, str]) -> Position | None:
    group = labels.get(GROUP_INDEX_LABEL, "")
    worker = labels.get(WORKER_INDEX_LABEL, "")
    if not digits(worker):
        return None
    if digits(group) and len(group) <= ORDINAL_DIGITS:
        return (ordinal_key(int(group)), int(worker))
    # A Hash group: group-index and group-key hold the same 40-character key.
    if is_hash_key(group) and labels.get(GROUP_KEY_LABEL) == group:
        return (group, int(worker))
    return None


def _judged_position(labelled: Position | None, owned: Position | None) -> tuple[Position | None, str]:
    """The one rule (issue 20): the controller ownerReference places a worker whatever its labels
    say; labels cannot turn a worker into a leader, and a pod the labels call a worker stays one.
    Returns the position and, when the two disagree, how."""
    if owned is None or labelled == owned:
        return labelled, ""
    said = "unreadable" if labelled is None else f"group-index {labelled[0]}, worker-index {labelled[1]}"
    if owned[1] == 0 and labelled is not None and labelled[1] != 0:
        # Owned by the leader StatefulSet but labelled a worker: judged as the worker it claims
        # to be, the stricter reading for every guard.
        return labelled, f"labels say {said}, its controller is the {_leader_maker(owned)}"
    where = _leader_maker(owned) if owned[1] == 0 else f"worker StatefulSet of group {owned[0]}"
    return owned, f"labels say {said}, its controller is the {where}"


def _leader_maker(owned: Position) -> str:
    """What makes a leader: the leader StatefulSet (Ordinal) or the leader Deployment's ReplicaSet."""
    return "leader StatefulSet" if ordinal(owned[0]) is not None else "leader ReplicaSet"


def group_member(
    namespace: str,
    labels: Mapping[str, str],
    annotations: Mapping[str, str],
    owners: Iterable[OwnerRef] = (),
    pod_name: str = "",
) -> GroupMember | None:
    """Read a pod's group membership; None for a non-LWS pod.

    The LWS is the one its name label names. The position comes from the controller
    ownerReference (`owned_position`) and the group-index / worker-index labels: when they
    disagree the pod is judged by its controller — a pod of a worker StatefulSet is a worker
    whatever its labels say — and `inconsistent` says so. A pod with the name label but neither
    readable labels nor a fitting controller is treated as non-LWS. Every policy, the view's
    group index and the plans read membership through here, so they all agree.
    """
    found = _placed(labels, owners, pod_name)
    if found is None:
        return None
    lws_name, position, inconsistent = found
    size_raw = annotations.get(SIZE_ANNOTATION, "")
    return GroupMember(
        namespace=namespace,
        lws_name=lws_name,
        group_index=position[0],
        worker_index=position[1],
        size=int(size_raw) if digits(size_raw) else None,
        inconsistent=inconsistent,
    )


def _placed(
    labels: Mapping[str, str], owners: Iterable[OwnerRef], pod_name: str
) -> tuple[str, Position, str] | None:
    """(LWS name, position, how the labels were inconsistent) by `group_member`'s rule, or None."""
    lws_name = labels.get(NAME_LABEL)
    if not lws_name:
        return None
    labelled = _labelled_position(labels)
    if labelled is not None and ordinal(labelled[0]) is None:
        owned = hash_owned_position(lws_name, labelled[0], owners, pod_name)
    else:
        owned = owned_position(lws_name, owners, pod_name)
    position, inconsistent = _judged_position(labelled, owned)
    return None if position is None else (lws_name, position, inconsistent)


def group_of_pod(pod: PodRecord) -> tuple[str, GroupKey] | None:
    """(LWS name, group index) of a pod record by `group_member`'s rule, without building a
    GroupMember: the view indexes every pod it applies by it."""
    found = _placed(pod.labels, pod.owners, pod.name)
    return None if found is None else (found[0], found[1][0])


def member_of_object(obj: KubeObject | None) -> GroupMember | None:
    """`group_member` for a pod given as an API object (e.g. a review's object or oldObject)."""
    meta = metadata(obj)
    return group_member(
        str(meta.get("namespace") or ""),
        str_map(meta.get("labels")),
        str_map(meta.get("annotations")),
        OwnerRef.parse_all(meta),
        str(meta.get("name") or ""),
    )


def member_of_pod(pod: PodRecord) -> GroupMember | None:
    """`group_member` for a pod record from the cluster view."""
    return group_member(pod.namespace, pod.labels, pod.annotations, pod.owners, pod.name)


@dataclass(frozen=True, slots=True)
class GroupHealth:
    """The state of one group: whole when it has `size` pods, none terminating, all Ready
    (design.md §1). `problems` says why a group is broken, for messages."""

    group_index: GroupKey
    size: int
    pods: int
    whole: bool
    problems: tuple[str, ...]


def group_health(
    group_index: GroupKey,
    size: int,
    pods: Iterable[PodRecord],
    doomed: Callable[[PodRecord], str] | None = None,
) -> GroupHealth:
    """Judge one group from its live pods (terminal pods count as absent). `doomed`, when given,
    says why a pod neither terminating nor terminal is going all the same ("" when it is not; see
    guardhook.cluster.going): a marked or NoExecute-tainted pod breaks its group as a terminating
    one does."""
    present = [p for p in pods if not p.terminal]
    whole = len(present) >= size and all(p.ready and not p.terminating for p in present)
    if whole and (doomed is None or not any(doomed(p) for p in present)):  # the common case
        return GroupHealth(group_index, size, len(present), True, ())
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

    __slots__ = (
        "obj",
        "meta",
        "annotations",
        "spec",
        "template",
        "worker_template",
        "leader_template",
        "derived",
    )

    def __init__(self, obj: KubeObject) -> None:
        self.obj = obj
        # Read once: a decision reads these maps a few dozen times. The view replaces its wrapper
        # on every update, so they follow the object (nothing rewrites an object's maps in place).
        self.meta: dict[str, Any] = metadata(obj)
        self.annotations: dict[str, str] = str_map(self.meta.get("annotations"))
        self.spec: dict[str, Any] = as_dict(obj.get("spec"))
        self.template: dict[str, Any] = as_dict(self.spec.get("leaderWorkerTemplate"))
        self.worker_template: dict[str, Any] = as_dict(self.template.get("workerTemplate"))
        # The leader pod template falls back to the worker template (LWS API).
        self.leader_template: dict[str, Any] = (
            as_dict(self.template.get("leaderTemplate")) or self.worker_template
        )
        self.derived: dict[str, Any] = {}
        """What policies read out of this object, kept as long as the object (a view's LWS is
        replaced on every update): values that depend on the object alone, never on the view."""

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
    def replicas(self) -> int:
        return _int_or(self.spec.get("replicas"), 1)

    @property
    def size(self) -> int:
        return _int_or(self.template.get("size"), 1)

    @property
    def group_identity(self) -> str:
        """`spec.groupIdentity`: "Ordinal" (the default) or "Hash" (KEP-898: leaders from a
        Deployment, groups keyed by random 40-character keys)."""
        return str(self.spec.get("groupIdentity") or GROUP_IDENTITY_ORDINAL)

    @property
    def hashed(self) -> bool:
        """Whether `spec.groupIdentity` is Hash."""
        return self.group_identity == GROUP_IDENTITY_HASH

    @property
    def group_replacement_policy(self) -> str:
        """`spec.groupReplacementPolicy` of a Hash LWS: "PostTermination" (the default: a
        replacement leader stays scheduling-gated until the group it replaces is gone) or
        "Immediate"."""
        return str(self.spec.get("groupReplacementPolicy") or POST_TERMINATION)

    @property
    def startup_policy(self) -> str:
        """`spec.startupPolicy`: "LeaderCreated" (the default) or "LeaderReady" (the worker
        StatefulSet of a group is created only once its leader pod is Ready)."""
        return str(self.spec.get("startupPolicy") or LEADER_CREATED)

    @property
    def restart_policy(self) -> str:
        return str(self.template.get("restartPolicy") or RECREATE_GROUP_ON_POD_RESTART)

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
    """A non-negative integer annotation, or `default` when absent or malformed
    (guardhook.cluster.annotations.count)."""
    return count(annotations, key, default)
