"""Where a pod stands in a LeaderWorkerSet: which LWS, which group, which rank (the LWS placement
of the group model).

Read from the pod's controller ownerReference together with its LWS labels (issue 20): a pod of a
worker StatefulSet (named after its leader pod: `<lws>-<g>` Ordinal, a generated name Hash) is a
worker whatever its labels say, and labels anyone may edit cannot turn a worker into a leader; a
pod of the leader
StatefulSet `<lws>` (Ordinal) or of the leader Deployment's ReplicaSet `<lws>-<hash>` (Hash,
lws KEP-898) is the leader of its group. Labels and key formats are the LWS API's
(guardhook.cluster.lws). The view's group index (guardhook.groups.index), every policy, plan and
reconciler place pods through here, so they all agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from guardhook.cluster.lws import (
    GROUP_INDEX_LABEL,
    GROUP_KEY_LABEL,
    NAME_LABEL,
    PREFIX,
    SIZE_ANNOTATION,
    WORKER_INDEX_LABEL,
)
from guardhook.cluster.model import OwnerRef, PodRecord, digits, metadata, str_map
from guardhook.groups.keys import ORDINAL_DIGITS, GroupKey, is_hash_key, ordinal, ordinal_key
from guardhook.wire import KubeObject


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
        """The leader pod of this group: `<lws>-<group>` (leader StatefulSet ordinal naming); ""
        for a Hash group, whose leader's name its ReplicaSet generated (guardhook.groups.lws reads
        it from the view)."""
        return "" if self.hashed else f"{self.lws_name}-{self.group_index}"

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


def worker_statefulset_group(lws_name: str, statefulset: str) -> GroupKey | None:
    """The group of an Ordinal LWS `lws_name` whose worker StatefulSet is named `statefulset`: the
    LWS controller names it after the group's leader pod, `<lws>-<g>`; None when the name does not
    fit (a Hash LWS's worker StatefulSets are named after generated leader names: read their
    leader pod instead)."""
    group = _suffix_index(statefulset, lws_name)
    return None if group is None else ordinal_key(group)


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
    `<sts>-<w>` of a worker StatefulSet, which is named after its leader pod (so `<lws>-...`), is
    worker w ≥ 1. The key is the labels' (nothing in a generated name says it): the controller
    decides only the rank. None otherwise."""
    for controller in owners:
        if controller.controller:
            break
    else:
        return None
    if not controller.api_version.startswith("apps/"):
        return None
    if controller.kind == "ReplicaSet" and controller.name.startswith(lws_name + "-"):
        return (key, 0)
    if controller.kind != "StatefulSet" or not controller.name.startswith(lws_name + "-"):
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
    key = _hash_key_label(labels)
    return (key, int(worker)) if key else None


def _hash_key_label(labels: Mapping[str, str]) -> str:
    """The Hash key the group-index and group-key labels agree on ("" when they do not hold one)."""
    group = labels.get(GROUP_INDEX_LABEL, "")
    return group if is_hash_key(group) and labels.get(GROUP_KEY_LABEL) == group else ""


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

    The LWS is the one its name label names when the controller fits it, else the one the
    controller's name says (a label removed or changed: `_placed`). The position comes from the controller
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
    """(LWS name, position, how the labels were inconsistent) by `group_member`'s rule, or None.

    The LWS is the name label's when the controller ownerReference fits it (or gives no reading);
    when the label is missing or names an LWS the controller does not fit, the controller's
    names say the LWS (`_owner_reading`, issue 48): a label a tenant may remove or change does not
    take a worker out of its group."""
    lws_name = labels.get(NAME_LABEL, "")
    if not lws_name and not _carries_lws_labels(labels):
        return None  # no LWS label at all (most pods of a cluster): nothing below can place it
    labelled = _labelled_position(labels)
    key = labelled[0] if labelled is not None else _hash_key_label(labels)
    owned = _owned(lws_name, key, owners, pod_name) if lws_name else None
    said_name = ""
    if owned is None:  # (a name label, or another LWS label: the gate above)
        read = _owner_reading(labelled, key, owners, pod_name)
        if read is not None and read[0] != lws_name:
            said_name = f"name label {lws_name!r}" if lws_name else "no name label"
            lws_name, owned = read
    if not lws_name:
        return None
    position, inconsistent = _judged_position(labelled, owned)
    if said_name:
        inconsistent = f"{said_name}, its controller makes LWS {lws_name}" + (
            f"; {inconsistent}" if inconsistent else ""
        )
    return None if position is None else (lws_name, position, inconsistent)


def _owned(lws_name: str, key: str, owners: Iterable[OwnerRef], pod_name: str) -> Position | None:
    """The pod's position in LWS `lws_name` by its controller (Hash when `key` is a Hash key)."""
    if key and ordinal(key) is None:
        # A Hash group: its key is the labels' (no name says it), the controller says the rank,
        # also when the worker-index label is missing or unreadable.
        return hash_owned_position(lws_name, key, owners, pod_name)
    return owned_position(lws_name, owners, pod_name)


def _carries_lws_labels(labels: Mapping[str, str]) -> bool:
    """Whether any `leaderworkerset.sigs.k8s.io/` label is left on the pod: the mark of a pod made
    from an LWS template, without which a StatefulSet's pod is not read as an LWS member."""
    return any(name.startswith(PREFIX) for name in labels)


def _owner_reading(
    labelled: Position | None, key: str, owners: Iterable[OwnerRef], pod_name: str
) -> tuple[str, Position] | None:
    """(LWS name, position) from the controller ownerReference's name alone, as the LWS controller
    names what it makes (lws pkg/controllers): the leader StatefulSet is `<lws>`, a worker
    StatefulSet is named after its leader pod (`<lws>-<g>` Ordinal; `<lws>-<hash>-<random>` Hash,
    its leader a pod of the leader Deployment's ReplicaSet `<lws>-<hash>`). A pod `<x>-<g>-<w>` of
    StatefulSet `<x>-<g>` could be worker w of `<x>` or leader of group w of `<x>-<g>`: the
    worker-index label decides when left, else the worker reading (the stricter for deletes). None when
    the controller is no apps/ StatefulSet or ReplicaSet or the pod's name does not fit it."""
    controller = next((owner for owner in owners if owner.controller), None)
    if controller is None or not controller.api_version.startswith("apps/"):
        return None
    if key and ordinal(key) is None:
        return _hash_owner_reading(key, controller, pod_name)
    if controller.kind != "StatefulSet":
        return None
    pod_index = _suffix_index(pod_name, controller.name)
    if pod_index is None:
        return None
    base, _, group = controller.name.rpartition("-")
    worker = (
        (base, (ordinal_key(int(group)), pod_index)) if base and digits(group) and pod_index >= 1 else None
    )
    leader = (controller.name, (ordinal_key(pod_index), 0))
    if labelled is not None and labelled[1] == 0:
        return leader
    return worker or leader


def _hash_owner_reading(key: str, controller: OwnerRef, pod_name: str) -> tuple[str, Position] | None:
    """`_owner_reading` for a Hash group (its key the labels'): a ReplicaSet `<lws>-<hash>` makes
    the leader, a StatefulSet `<lws>-<hash>-<random>` (its leader pod's name) worker w ≥ 1."""
    if controller.kind == "ReplicaSet":
        lws_name = controller.name.rpartition("-")[0]
        return (lws_name, (key, 0)) if lws_name else None
    if controller.kind != "StatefulSet":
        return None
    worker = _suffix_index(pod_name, controller.name)
    lws_name = controller.name.rsplit("-", 2)[0] if controller.name.count("-") >= 2 else ""
    return (lws_name, (key, worker)) if lws_name and worker is not None and worker >= 1 else None


def group_of_pod(pod: PodRecord) -> tuple[str, GroupKey] | None:
    """(LWS name, group index) of a pod record by `group_member`'s rule, without building a
    GroupMember: the view indexes every pod it applies by it."""
    labels = pod.labels
    if not labels:  # `_placed` places no pod without an LWS label
        return None
    lws_name = labels.get(NAME_LABEL)
    if lws_name:
        group = labels.get(GROUP_INDEX_LABEL)
        if group is not None and _consistent_ordinal(lws_name, group, labels.get(WORKER_INDEX_LABEL), pod):
            return (lws_name, group)
    found = _placed(labels, pod.owners, pod.name)
    return None if found is None else (found[0], found[1][0])


def _consistent_ordinal(lws_name: str, group: str, worker: str | None, pod: PodRecord) -> bool:
    """Whether `pod` is, by `_placed`'s rule, in Ordinal group `group` of LWS `lws_name` with its
    labels and its controller agreeing: the group-index and worker-index labels are numbers written
    as `ordinal_key` writes them (no leading zero), the controller is the apps/ StatefulSet the LWS
    controller makes for that position (`owned_position`: the leader StatefulSet `<lws>` for the
    leader `<lws>-<g>`, worker StatefulSet `<lws>-<g>` for worker `<lws>-<g>-<w>`, w >= 1). Then
    `_placed` finds the labelled position equal to the owned one and answers (lws_name, group):
    the fast path of `group_of_pod` for every pod of a healthy Ordinal LWS (a relist of a large
    cluster files millions). False means only "not sure": the full rule decides."""
    if not (worker and _canonical(group) and _canonical(worker) and len(group) <= ORDINAL_DIGITS):
        return False
    for controller in pod.owners:
        if controller.controller:
            break
    else:
        return False
    if controller.kind != "StatefulSet" or not controller.api_version.startswith("apps/"):
        return False
    leader = f"{lws_name}-{group}"
    if worker == "0":
        return controller.name == lws_name and pod.name == leader
    return controller.name == leader and pod.name == f"{leader}-{worker}"


def _canonical(number: str) -> bool:
    """Whether `number` is digits that `ordinal_key(int(number))` writes back unchanged."""
    return number.isascii() and number.isdigit() and (number[0] != "0" or len(number) == 1)


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
