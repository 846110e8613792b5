"""What `guardhook check` could not judge for lack of context.

`group-pdb`, `leader-service` and `pod-counted-scaler` judge a PDB, Service/pool or scaler against the
LeaderWorkerSets beside it. Checked alone (a PDB without its LWS) they find nothing to object to
and would pass in silence, though the object may well count the pods of an LWS that simply was not
in the input. So, for each such object, `check` asks whether anything in the input or the context
(`--cluster-state`, `--kubeconfig`) tells what it is aimed at:

- a PDB's, Service's or InferencePool's selector matches the pods of some LWS
  (guardhook.groups.reach) or the pod template of some other workload (Deployment, StatefulSet,
  DaemonSet, ReplicaSet, Job, CronJob, Pod) in its namespace. Pods whose labels name an LWS that
  is not there (`leaderworkerset.sigs.k8s.io/name`, as a cluster dump's pods do) get a note naming
  it, whatever else matches, unless their own labels answer the policy: all in one group (a PDB),
  all leaders (a Service or pool);
- a scaler's `scaleTargetRef` is not a StatefulSet (so not an LWS's), or names a StatefulSet that is
  in the input, or an LWS in its namespace lets the policy judge the StatefulSet by its name.

When nothing does, the object gets a note (Unjudged) instead of silence.

Pods whose LWS is in neither (a cluster dump's bare pods) stand for it: `stand_in_lws` reads a
LeaderWorkerSet off them, so a PDB or Service beside them is judged as it is beside the LWS.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from guardhook.cluster.lws import GROUP_IDENTITY_HASH, NAME_LABEL, LeaderWorkerSet
from guardhook.cluster.model import as_dict, metadata, str_map
from guardhook.cluster.selectors import Selector, SelectorError, from_label_selector, from_map, matches
from guardhook.commands.scan import Located
from guardhook.groups import GroupRef, resolve_object_alone
from guardhook.groups.keys import ordinal
from guardhook.groups.reach import SYSTEM_LABELS, reach
from guardhook.policies.pod_counted_scaler import KEDA_DEFAULT_KIND
from guardhook.policies.shared.traffic import POOL_KIND, traffic_selector
from guardhook.wire import KubeObject

# Where each workload kind keeps the labels of the pods it creates.
POD_TEMPLATE_PATHS: dict[str, tuple[str, ...]] = {
    "Deployment": ("spec", "template"),
    "StatefulSet": ("spec", "template"),
    "DaemonSet": ("spec", "template"),
    "ReplicaSet": ("spec", "template"),
    "Job": ("spec", "template"),
    "CronJob": ("spec", "jobTemplate", "spec", "template"),
    "Pod": (),
}
LWS_KIND = "LeaderWorkerSet"
SCALER_KINDS = ("HorizontalPodAutoscaler", "ScaledObject")
TRAFFIC_KINDS = ("Service", POOL_KIND)
CONTEXT_FLAGS = "or pass --cluster-state PATH or --kubeconfig FILE"


@dataclass(frozen=True)
class Unjudged:
    """An object a policy could not judge for lack of context, and why."""

    source: str
    kind: str
    namespace: str
    name: str
    policy: str
    why: str

    def line(self) -> str:
        """`source: Kind namespace/name: not judged by [policy]: why`."""
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.source}: {self.kind} {where}: not judged by [{self.policy}]: {self.why}"

    def as_dict(self) -> dict[str, str]:
        """The JSON form, keyed like a Finding's (`message` holds the reason)."""
        return {
            "source": self.source,
            "kind": self.kind,
            "namespace": self.namespace,
            "name": self.name,
            "policy": self.policy,
            "message": self.why,
        }


class _PodLabels(NamedTuple):
    """The labels of a pod or of a workload's pod template, and for a pod, its place in an LWS
    group as the group model places it from the pod alone (guardhook.groups.resolve_object_alone;
    None for a template, or a pod of no LWS group)."""

    labels: dict[str, str]
    member: GroupRef | None


@dataclass
class _Namespace:
    lws: list[LeaderWorkerSet]
    pod_labels: list[_PodLabels]
    statefulsets: set[str]


def unjudged(
    objects: Sequence[Located], context: Iterable[KubeObject], active: Iterable[str]
) -> list[Unjudged]:
    """A note for each of `objects` that a policy in `active` (ids of policies with actions) could
    not judge because neither `objects` nor `context` holds what it is aimed at (module docstring)."""
    policies = set(active)
    namespaces = _index([*context, *(o.obj for o in objects)])
    notes: list[Unjudged] = []
    for located in objects:
        obj = located.obj
        kind = str(obj.get("kind") or "")
        namespace = str(metadata(obj).get("namespace") or "")
        ns = namespaces[namespace]
        found: tuple[str, str] | None = None
        if kind == "PodDisruptionBudget" and "group-pdb" in policies:
            found = _selector_note("group-pdb", _pdb_selector(obj), namespace, namespaces)
        elif kind in TRAFFIC_KINDS and "leader-service" in policies:
            traffic = traffic_selector(obj)
            if traffic is not None:
                found = _selector_note("leader-service", from_map(traffic.selector), namespace, namespaces)
        elif kind in SCALER_KINDS and "pod-counted-scaler" in policies:
            found = _scaler_note(obj, ns)
        if found is not None:
            meta = metadata(obj)
            notes.append(
                Unjudged(
                    located.source,
                    kind,
                    str(meta.get("namespace") or ""),
                    str(meta.get("name") or ""),
                    *found,
                )
            )
    return notes


def _index(objects: Iterable[KubeObject]) -> defaultdict[str, _Namespace]:
    namespaces: defaultdict[str, _Namespace] = defaultdict(lambda: _Namespace([], [], set()))
    for obj in objects:
        kind = str(obj.get("kind") or "")
        ns = namespaces[str(metadata(obj).get("namespace") or "")]
        if kind == LWS_KIND:
            ns.lws.append(LeaderWorkerSet(obj))
            continue
        if kind == "StatefulSet":
            ns.statefulsets.add(str(metadata(obj).get("name") or ""))
        path = POD_TEMPLATE_PATHS.get(kind)
        if path is None:
            continue
        template = obj
        for step in path:
            template = as_dict(template.get(step))
        member = _lws_member(obj) if kind == "Pod" else None
        ns.pod_labels.append(_PodLabels(str_map(metadata(template).get("labels")), member))
    return namespaces


def _pdb_selector(pdb: KubeObject) -> Selector | None:
    try:
        return from_label_selector(as_dict(pdb.get("spec")).get("selector"))
    except SelectorError:
        return None  # the policy reports a malformed selector itself


def _selector_note(
    policy: str, selector: Selector | None, namespace: str, namespaces: Mapping[str, _Namespace]
) -> tuple[str, str] | None:
    ns = namespaces[namespace]
    if selector is None:
        return None  # a null selector matches nothing: there is nothing to judge
    if any(reach(selector, lws).any for lws in ns.lws):
        return None
    matched = [pod for pod in ns.pod_labels if matches(selector, pod.labels)]
    present = {lws.name for lws in ns.lws}
    missing: defaultdict[str, list[GroupRef | None]] = defaultdict(list)
    for pod in matched:
        lws_name = pod.labels.get(NAME_LABEL)
        if lws_name is not None and lws_name not in present:
            missing[lws_name].append(pod.member)
    if missing:
        return _missing_lws_note(policy, namespace, missing)
    if matched:
        return None  # another workload's pods (or an LWS's that is here): the policy judged them
    elsewhere: set[str] = set()  # its LWS, or pods a dump holds of one, in another namespace
    for name, other in namespaces.items():
        if other is not ns:
            elsewhere |= {f"{name}/{lws.name}" for lws in other.lws if reach(selector, lws).any}
            elsewhere |= {
                f"{name}/{pod.labels[NAME_LABEL]}"
                for pod in other.pod_labels
                if NAME_LABEL in pod.labels and matches(selector, pod.labels)
            }
    hint = (
        f" (LeaderWorkerSet {', '.join(sorted(elsewhere))} in another namespace has pods it would match: "
        "does it lack its namespace?)"
        if elsewhere
        else ""
    )
    return (
        policy,
        "no LeaderWorkerSet (nor any other workload) in the input or context creates pods its "
        f"selector matches, so whether it selects the pods of LWS groups is unknown{hint}; add the "
        f"LeaderWorkerSet to the input, {CONTEXT_FLAGS}",
    )


def _missing_lws_note(
    policy: str, namespace: str, missing: dict[str, list[GroupRef | None]]
) -> tuple[str, str] | None:
    """The note for a selector matching pods whose LWS (`missing`: name -> the matched pods' group
    members, None for a template's labels) is not in the input or context, or None when those pods
    already answer the policy's question: group-pdb's, whether the selector spans groups (all in
    one group: no); leader-service's, whether it reaches workers (only leaders: no)."""
    if policy == "group-pdb":
        spanning = sorted(
            name for name, pods in missing.items() if None in pods or len({p.key for p in pods if p}) > 1
        )
        what, refused = "pods of more than one group of", "a budget across groups"
    else:
        spanning = sorted(
            name for name, pods in missing.items() if any(p is None or not p.is_leader for p in pods)
        )
        what, refused = "worker pods of", "traffic to workers"
    if not spanning:
        return None
    names = ", ".join(f"{namespace}/{name}" if namespace else name for name in spanning)
    return (
        policy,
        f"its selector matches {what} LeaderWorkerSet {names}, which is not in the input or context, so "
        f"it could not be judged against that LWS ({refused} is what [{policy}] refuses); add the "
        f"LeaderWorkerSet to the input, {CONTEXT_FLAGS}",
    )


def _scaler_note(scaler: KubeObject, ns: _Namespace) -> tuple[str, str] | None:
    ref = as_dict(as_dict(scaler.get("spec")).get("scaleTargetRef"))
    default_kind = KEDA_DEFAULT_KIND if scaler.get("kind") == "ScaledObject" else ""
    target_kind = str(ref.get("kind") or default_kind)
    target = str(ref.get("name") or "")
    if target_kind != "StatefulSet" or not target or target in ns.statefulsets or ns.lws:
        return None
    return (
        "pod-counted-scaler",
        f"its target StatefulSet {target} is not in the input or context, nor is any LeaderWorkerSet of "
        f"its namespace, so whether {target} belongs to an LWS is unknown; add the LeaderWorkerSet to the "
        f"input, {CONTEXT_FLAGS}",
    )


STAND_IN_ANNOTATION = "guardhook.io/read-off-pods"
"""Marks a LeaderWorkerSet `stand_in_lws` read off pods (its value: how many), never one of a cluster."""


def stand_in_lws(objects: Iterable[KubeObject]) -> list[KubeObject]:
    """A LeaderWorkerSet for each LWS that pods among `objects` belong to (as the group model places
    them from the pods alone: guardhook.groups.resolve_object_alone) but that is not among
    `objects` itself — a cluster dump's pods given without their LWS. Read off the pods: its name
    and namespace; its groups (replicas: the highest ordinal + 1, or for Hash groups their number, as
    `groupIdentity: Hash`); its size (the pods' size annotation, else the highest worker position
    + 1); its templates' labels: those every leader, or every worker, carries, less the labels the
    LWS and StatefulSet controllers set (guardhook.groups.reach.SYSTEM_LABELS). What the pods
    cannot show (annotations such as guardhook.io/group-pdbs, resources) is left out."""
    present = {
        (str(metadata(obj).get("namespace") or ""), str(metadata(obj).get("name") or ""))
        for obj in objects
        if obj.get("kind") == LWS_KIND
    }
    pods: defaultdict[tuple[str, str], list[tuple[GroupRef, dict[str, str]]]] = defaultdict(list)
    for obj in objects:
        member = _lws_member(obj) if obj.get("kind") == "Pod" else None
        if member is not None and (member.set.namespace, member.set.name) not in present:
            pods[member.set.namespace, member.set.name].append((member, str_map(metadata(obj).get("labels"))))
    return [_lws_of(namespace, name, members) for (namespace, name), members in sorted(pods.items())]


def _lws_member(pod: KubeObject) -> GroupRef | None:
    """The LWS group `pod` is in, placed from the pod alone; None for a pod of no LWS group."""
    member = resolve_object_alone(pod)
    return member if member is not None and member.set.kind == LWS_KIND else None


def _lws_of(namespace: str, name: str, members: list[tuple[GroupRef, dict[str, str]]]) -> KubeObject:
    groups = {member.key for member, _ in members}
    ordinals = [ordinal(group) for group in groups]
    hashed = None in ordinals
    replicas = len(groups) if hashed else max(o for o in ordinals if o is not None) + 1
    sizes = [member.size for member, _ in members if member.size is not None]
    size = max(sizes) if sizes else max(member.rank.worker or 0 for member, _ in members) + 1
    spec: dict[str, object] = {
        "replicas": replicas,
        "leaderWorkerTemplate": {
            "size": size,
            "workerTemplate": _template([labels for member, labels in members if not member.is_leader]),
            "leaderTemplate": _template([labels for member, labels in members if member.is_leader]),
        },
    }
    if hashed:
        spec["groupIdentity"] = GROUP_IDENTITY_HASH
    meta = {"name": name, "namespace": namespace, "annotations": {STAND_IN_ANNOTATION: str(len(members))}}
    return {"apiVersion": "leaderworkerset.x-k8s.io/v1", "kind": LWS_KIND, "metadata": meta, "spec": spec}


def _template(labels: list[dict[str, str]]) -> dict[str, object]:
    """A pod template with the labels all of `labels` share, less the controllers' own ({} for none:
    the leader template then falls back to the worker one, as the LWS API says)."""
    if not labels:
        return {}
    shared = {
        k: v for k, v in labels[0].items() if k not in SYSTEM_LABELS and all(o.get(k) == v for o in labels)
    }
    return {"metadata": {"labels": shared}}
