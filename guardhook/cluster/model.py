"""Compact records of the objects the cluster view holds, parsed from API objects.

Only the fields the policies read are kept, so a view of a large cluster stays small. Every
`from_object` takes a decoded API object (dict) and never raises on a malformed one: missing or
mistyped fields become empty values.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec

from guardhook.cluster import interning
from guardhook.cluster.resources import (
    Resources,
    parse_resource_list,
    pod_requests,
    resized_status,
    shared_pod_requests,
)
from guardhook.wire import KubeObject

TERMINAL_PHASES = ("Succeeded", "Failed")
# Pod conditions a component sets before it deletes the pod: Kubernetes' DisruptionTarget (k8s.io/api
# core/v1; reasons PreemptionByScheduler, DeletionByTaintManager, DeletionByDeviceTaintManager,
# DeletionByPodGC, TerminationByKubelet, EvictionByEvictionAPI) and Kueue's TerminationTarget
# (sigs.k8s.io/kueue pkg/controller/jobs/pod, set when Kueue stops a pod group).
DISRUPTION_CONDITIONS = ("DisruptionTarget", "TerminationTarget")


def digits(text: str) -> bool:
    """Whether `text` is one or more ASCII digits: what Go's strconv.Atoi, with which Kubernetes and
    LWS read numbers in labels, annotations and names, reads as a non-negative integer.
    `str.isdigit` alone also accepts characters such as "²", on which `int()` raises ValueError,
    and annotation values are any string a tenant writes."""
    return text.isascii() and text.isdigit()


def as_dict(value: Any) -> dict[str, Any]:
    """`value` if it is a dict, else an empty dict (malformed input never raises)."""
    return value if isinstance(value, dict) else {}


def as_list(value: Any) -> list[Any]:
    """`value` if it is a list, else an empty list."""
    return value if isinstance(value, list) else []


def str_map(value: Any) -> dict[str, str]:
    """A label or annotation map with only string keys and values kept."""
    return {k: v for k, v in as_dict(value).items() if isinstance(k, str) and isinstance(v, str)}


def metadata(obj: Mapping[str, Any] | None) -> dict[str, Any]:
    """`obj.metadata` as a dict (empty when absent)."""
    return as_dict((obj or {}).get("metadata"))


@dataclass(frozen=True, slots=True)
class OwnerRef:
    """One entry of metadata.ownerReferences."""

    kind: str
    name: str
    uid: str
    api_version: str
    controller: bool

    @staticmethod
    def parse_all(meta: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
        return tuple(OwnerRef(*_owner_fields(raw)) for raw in as_list(meta.get("ownerReferences")))

    @staticmethod
    def parse_all_shared(meta: Mapping[str, Any]) -> tuple[OwnerRef, ...]:
        """`parse_all(meta)`, shared with the equal tuple of another pod read recently (the
        replicas of one controller carry the same references; see guardhook.cluster.interning)."""
        refs = meta.get("ownerReferences")
        if not refs or not isinstance(refs, list):
            return ()
        return shared_owners(tuple(map(_owner_fields, refs)))


def _owner_fields(raw: Any) -> tuple[str, str, str, str, bool]:
    raw = as_dict(raw)
    return (
        str(raw.get("kind", "")),
        str(raw.get("name", "")),
        str(raw.get("uid", "")),
        str(raw.get("apiVersion", "")),
        raw.get("controller") is True,
    )


@functools.lru_cache(maxsize=interning.CACHE_SIZE)
def shared_owners(fields: tuple[tuple[str, str, str, str, bool], ...]) -> tuple[OwnerRef, ...]:
    """OwnerRefs of (kind, name, uid, apiVersion, controller) entries, shared with the equal tuple
    of another pod read recently."""
    return tuple(OwnerRef(*entry) for entry in fields)


def spec_replicas(obj: Mapping[str, Any] | None) -> int | None:
    """`spec.replicas` of an object (a StatefulSet, a Scale, ...) when it is an integer, else None."""
    replicas = as_dict((obj or {}).get("spec")).get("replicas")
    return replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else None


def scaled(value: Any, replicas: int, round_up: bool, default: int) -> int:
    """An int-or-percent field (rollout `maxSurge`/`maxUnavailable`, PDB `minAvailable`/...)
    resolved against `replicas`, as intstr.GetScaledValueFromIntOrPercent does; `default` when
    absent or malformed."""
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    text = str(value).strip()
    if text.endswith("%") and digits(text[:-1]):
        exact = int(text[:-1]) * replicas / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text) if digits(text) else default


def readiness_gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """The condition types of `spec.readinessGates` (Kubernetes PodReadinessGate.conditionType)."""
    gates = (as_dict(gate).get("conditionType") for gate in as_list(spec.get("readinessGates")))
    return tuple(gate for gate in gates if isinstance(gate, str) and gate)


@dataclass(frozen=True, slots=True)
class ConditionRecord:
    """One pod condition: status ("True", "False", "Unknown"), reason, message, and
    lastTransitionTime as the API server sent it (RFC 3339 text, "" when absent)."""

    status: str
    reason: str = ""
    message: str = ""
    last_transition_time: str = ""


Conditions = Mapping[str, Mapping[str, Any]]
"""`status.conditions` by type (see `conditions`)."""


def conditions(status: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The entries of `status.conditions` (pods, nodes) by type, in the order the API server sent
    them; the first entry of a type wins (the list is keyed by type); malformed entries are
    skipped. The one reader of conditions: `condition_true`, `gate_conditions` and
    `disruption_condition` take what it returns (pass it to read a status once for all three)."""
    found: dict[str, dict[str, Any]] = {}
    for cond in as_list(status.get("conditions")):
        if isinstance(cond, dict):
            kind = cond.get("type")
            if isinstance(kind, str) and kind not in found:
                found[kind] = cond
    return found


def gate_conditions(
    status: Mapping[str, Any], gates: tuple[str, ...], found: Conditions | None = None
) -> dict[str, ConditionRecord]:
    """The conditions of `status.conditions` whose type is one of `gates` (only those are kept, so
    a view of a large cluster stays small). `found`: `conditions(status)`, when already read."""
    found = conditions(status) if found is None else found
    return {
        gate: ConditionRecord(
            status=str(cond.get("status") or ""),
            reason=str(cond.get("reason") or ""),
            message=str(cond.get("message") or ""),
            last_transition_time=str(cond.get("lastTransitionTime") or ""),
        )
        for gate in gates
        if (cond := found.get(gate)) is not None
    }


def condition_true(status: Mapping[str, Any], condition_type: str, found: Conditions | None = None) -> bool:
    """Whether `status.conditions` holds `condition_type` with status "True". `found`:
    `conditions(status)`, when already read."""
    found = conditions(status) if found is None else found
    return (found.get(condition_type) or {}).get("status") == "True"


def disruption_condition(status: Mapping[str, Any], found: Conditions | None = None) -> str:
    """`"<type>/<reason>"` of the first DISRUPTION_CONDITIONS entry in `status.conditions` whose
    status is "True" (reason may be empty), else "". A condition with status "False" (the disruption
    controller clears a stale one that way) does not count. `found`: `conditions(status)`, when
    already read."""
    found = conditions(status) if found is None else found
    for kind, cond in found.items():
        if kind in DISRUPTION_CONDITIONS and cond.get("status") == "True":
            return f"{kind}/{cond.get('reason') or ''}"
    return ""


@dataclass(frozen=True, slots=True)
class Toleration:
    """One entry of a pod's `spec.tolerations` (core/v1 Toleration). `seconds` is
    `tolerationSeconds` (None: tolerate forever); operator "" means Equal, effect "" any effect."""

    key: str
    operator: str
    value: str
    effect: str
    seconds: int | None

    @staticmethod
    def parse_all(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
        return tuple(Toleration(*_toleration_fields(raw)) for raw in as_list(spec.get("tolerations")))

    @staticmethod
    def parse_all_shared(spec: Mapping[str, Any]) -> tuple[Toleration, ...]:
        """`parse_all(spec)`, shared with the equal tuple of another pod read recently (every pod
        carries the API server's default not-ready/unreachable tolerations)."""
        raw = spec.get("tolerations")
        if not raw or not isinstance(raw, list):
            return ()
        return shared_tolerations(tuple(map(_toleration_fields, raw)))


def _toleration_fields(raw: Any) -> tuple[str, str, str, str, int | None]:
    raw = as_dict(raw)
    seconds = raw.get("tolerationSeconds")
    return (
        str(raw.get("key") or ""),
        str(raw.get("operator") or "Equal"),
        str(raw.get("value") or ""),
        str(raw.get("effect") or ""),
        seconds if isinstance(seconds, int) and not isinstance(seconds, bool) else None,
    )


@functools.lru_cache(maxsize=interning.CACHE_SIZE)
def shared_tolerations(fields: tuple[tuple[str, str, str, str, int | None], ...]) -> tuple[Toleration, ...]:
    """Tolerations of (key, operator, value, effect, seconds) entries, shared with the equal tuple
    of another pod read recently."""
    return tuple(Toleration(*entry) for entry in fields)


# ---- what pods say of DRA claims and scheduling gates ------------------------------------------


@dataclass(frozen=True, slots=True)
class PodClaimRef:
    """One `spec.resourceClaims[]` entry: a pod-local `name` and either an existing claim
    (`claim_name`) or a template to stamp one from (`template_name`)."""

    name: str
    claim_name: str
    template_name: str


def pod_claim_refs(spec: Mapping[str, Any]) -> tuple[PodClaimRef, ...]:
    """The `spec.resourceClaims` of a pod (or pod template) spec."""
    return tuple(
        PodClaimRef(
            str(r.get("name") or ""),
            str(r.get("resourceClaimName") or ""),
            str(r.get("resourceClaimTemplateName") or ""),
        )
        for r in map(as_dict, as_list(spec.get("resourceClaims")))
    )


def pod_claim_names(spec: Mapping[str, Any], status: Mapping[str, Any]) -> tuple[str, ...]:
    """Names of the ResourceClaims (in the pod's namespace) a pod uses: those named in
    `spec.resourceClaims[].resourceClaimName`, those generated from templates
    (`status.resourceClaimStatuses[].resourceClaimName`) and the one the scheduler made for its
    DRA-backed extended resources (`status.extendedResourceClaimStatus.resourceClaimName`)."""
    names = [ref.claim_name for ref in pod_claim_refs(spec) if ref.claim_name]
    for entry in map(as_dict, as_list(status.get("resourceClaimStatuses"))):
        if entry.get("resourceClaimName"):
            names.append(str(entry["resourceClaimName"]))
    extended = as_dict(status.get("extendedResourceClaimStatus")).get("resourceClaimName")
    if extended:
        names.append(str(extended))
    return tuple(dict.fromkeys(names))


def timestamp_seconds(value: Any) -> float:
    """An RFC 3339 timestamp as the API server writes it (`2026-01-01T00:00:00Z`) in Unix seconds;
    0.0 when absent or unreadable."""
    if not isinstance(value, str) or not value:
        return 0.0
    try:
        parsed = datetime.fromisoformat(value)  # reads a trailing "Z" since Python 3.11
    except ValueError:
        return 0.0
    return parsed.timestamp() if parsed.tzinfo is not None else 0.0


def scheduling_gates(spec: Mapping[str, Any]) -> tuple[str, ...]:
    """Names in `spec.schedulingGates`: while any remain the scheduler does not place the pod."""
    return tuple(str(as_dict(g).get("name") or "") for g in as_list(spec.get("schedulingGates")))


NO_CONDITIONS: dict[str, ConditionRecord] = {}
"""The gate_conditions of every pod without readiness gates (shared; never mutated)."""


class PodExtras(msgspec.Struct, frozen=True, gc=False):
    """The fields of a pod record most pods of a fleet share: a disruption condition, tolerations,
    scheduling gates, claims, readiness gates and their conditions, a Workload API PodGroup (see
    `PodRecord` for each). Kept apart so a record is 48 B smaller (94 MB over the 1.95 million pods
    of issue 53's cluster), and shared: equal extras of many pods are one object (`pod_extras`)."""

    disruption: str = ""
    tolerations: tuple[Toleration, ...] = ()
    scheduling_gates: tuple[str, ...] = ()
    claims: tuple[str, ...] = ()
    readiness_gates: tuple[str, ...] = ()
    gate_conditions: dict[str, ConditionRecord] = NO_CONDITIONS
    pod_group: str = ""


NO_EXTRAS = PodExtras()
"""The extras of a pod with none of them (shared)."""

EXTRA_FIELDS = frozenset(PodExtras.__struct_fields__)
"""PodRecord attributes kept in its `more` (PodExtras)."""


def pod_extras(
    disruption: str,
    tolerations: tuple[Toleration, ...],
    scheduling_gates: tuple[str, ...],
    claims: tuple[str, ...],
    readiness_gates: tuple[str, ...],
    gate_conditions: dict[str, ConditionRecord],
    pod_group: str,
) -> PodExtras:
    """The PodExtras of these values: `NO_EXTRAS` when all are empty, else one shared with the
    equal extras of other pods read recently (every pod of a fleet carries the API server's default
    tolerations) when they hold no gate conditions, else a new one."""
    if gate_conditions:
        return PodExtras(
            disruption, tolerations, scheduling_gates, claims, readiness_gates, gate_conditions, pod_group
        )
    if not (disruption or tolerations or scheduling_gates or claims or readiness_gates or pod_group):
        return NO_EXTRAS
    return _shared_extras(disruption, tolerations, scheduling_gates, claims, readiness_gates, pod_group)


@functools.lru_cache(maxsize=interning.CACHE_SIZE)
def _shared_extras(
    disruption: str,
    tolerations: tuple[Toleration, ...],
    scheduling_gates: tuple[str, ...],
    claims: tuple[str, ...],
    readiness_gates: tuple[str, ...],
    pod_group: str,
) -> PodExtras:
    return PodExtras(
        disruption, tolerations, scheduling_gates, claims, readiness_gates, NO_CONDITIONS, pod_group
    )


class PodRecord(msgspec.Struct, frozen=True, gc=False):
    """A pod as the policies see it. `requests` are the scheduler's effective requests
    (millicores for cpu, base units otherwise; see guardhook.cluster.resources).
    `containers_ready` is the ContainersReady condition (Ready without the readiness gates);
    `readiness_gates` the condition types of spec.readinessGates and `gate_conditions` the
    current conditions of those types.

    A frozen msgspec Struct rather than a frozen dataclass: built in C, about 3x faster (a
    150,000-pod relist builds one per pod), and with `gc=False` the collector never traverses the
    view's records (they hold only strings, numbers and maps and tuples of those: no cycles).
    The fields most pods leave empty are read through properties from `more` (PodExtras, shared);
    build a record with them through `with_fields` (or `more=pod_extras(...)`). `with_fields`
    stands in for `dataclasses.replace`."""

    namespace: str
    name: str
    uid: str
    labels: dict[str, str]
    annotations: dict[str, str]
    node_name: str
    phase: str
    ready: bool
    terminating: bool
    owners: tuple[OwnerRef, ...]
    requests: Resources = msgspec.field(default_factory=dict)
    containers_ready: bool = False
    created: float = 0.0
    """`metadata.creationTimestamp` in Unix seconds (API server clock, whole seconds); 0.0 unknown."""
    more: PodExtras = NO_EXTRAS
    """The rarer fields (PodExtras), read through the properties below."""

    @property
    def disruption(self) -> str:
        """`disruption_condition` of the pod's status: "" unless a component marked it for removal."""
        return self.more.disruption

    @property
    def tolerations(self) -> tuple[Toleration, ...]:
        """spec.tolerations."""
        return self.more.tolerations

    @property
    def scheduling_gates(self) -> tuple[str, ...]:
        """Names in spec.schedulingGates."""
        return self.more.scheduling_gates

    @property
    def claims(self) -> tuple[str, ...]:
        """ResourceClaims (in the pod's namespace) the pod uses; see pod_claim_names."""
        return self.more.claims

    @property
    def readiness_gates(self) -> tuple[str, ...]:
        """The condition types of spec.readinessGates."""
        return self.more.readiness_gates

    @property
    def gate_conditions(self) -> dict[str, ConditionRecord]:
        """The current conditions of the readiness gates' types."""
        return self.more.gate_conditions

    @property
    def pod_group(self) -> str:
        """`spec.schedulingGroup.podGroupName`: the Workload API PodGroup the pod belongs to ("" none)."""
        return self.more.pod_group

    @property
    def gated(self) -> bool:
        """Held by `spec.schedulingGates`: the scheduler does not place it, so it claims nothing."""
        return bool(self.more.scheduling_gates)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def terminal(self) -> bool:
        """Succeeded or Failed: holds no node resources any more."""
        return self.phase in TERMINAL_PHASES

    def with_fields(self, **changes: Any) -> PodRecord:
        """A copy of this record with `changes` (field name -> value, the PodExtras ones
        included) applied, as `dataclasses.replace` does. Raises TypeError for a name that is no
        field."""
        moved = {name: changes.pop(name) for name in list(changes) if name in EXTRA_FIELDS}
        if moved:
            changes["more"] = msgspec.structs.replace(self.more, **moved)
        return msgspec.structs.replace(self, **changes)

    @staticmethod
    def from_object(obj: KubeObject) -> PodRecord:
        """The record of pod `obj`. Its strings, maps and tuples are shared with equal ones of other
        pods (guardhook.cluster.interning): a view of 150,000 pods holds each value once."""
        meta = metadata(obj)
        spec = as_dict(obj.get("spec"))
        status = as_dict(obj.get("status"))
        gates = readiness_gates(spec) if spec.get("readinessGates") else ()
        found = conditions(status)  # read once for Ready, ContainersReady, disruption and gates
        claimed = spec.get("resourceClaims") or status.get("resourceClaimStatuses")
        return PodRecord(
            namespace=interning.text(meta.get("namespace")),
            name=str(meta.get("name") or ""),  # unique per pod: not interned (interning)
            uid=str(meta.get("uid") or ""),
            labels=interning.str_map(meta.get("labels")),
            annotations=interning.shared_str_map(meta.get("annotations")),
            node_name=interning.text(spec.get("nodeName")),
            phase=interning.text(status.get("phase")),
            ready=condition_true(status, "Ready", found),
            terminating=bool(meta.get("deletionTimestamp")),
            owners=OwnerRef.parse_all_shared(meta),
            requests=pod_requests(spec, status)
            if spec.get("resources") and resized_status(status)
            else shared_pod_requests(spec),
            containers_ready=condition_true(status, "ContainersReady", found),
            created=timestamp_seconds(meta.get("creationTimestamp")),
            more=pod_extras(
                disruption_condition(status, found) if found else "",
                Toleration.parse_all_shared(spec),
                scheduling_gates(spec) if spec.get("schedulingGates") else (),
                pod_claim_names(spec, status) if claimed or status.get("extendedResourceClaimStatus") else (),
                gates,
                gate_conditions(status, gates, found) if gates else NO_CONDITIONS,
                interning.text(as_dict(spec.get("schedulingGroup")).get("podGroupName"))
                if spec.get("schedulingGroup")
                else "",
            ),
        )


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


class NodeRecord(msgspec.Struct, frozen=True, gc=False):
    """A node: labels, allocatable (guardhook.cluster.resources units), taints, schedulability.
    A frozen msgspec Struct, as `PodRecord` (made in C: 65,000 of them in issue 53's fleet)."""

    name: str
    labels: dict[str, str]
    allocatable: Resources
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool
    conditions: tuple[str, ...] = ()
    """Types of the node's conditions with status True other than Ready (the first entry of a
    type counts), such as the node lifecycle conditions of KEP-5683 (guardhook.cluster.going)."""
    since: tuple[float, ...] = ()
    """The `lastTransitionTime` of each of `conditions`, in the same order (Unix seconds; 0.0
    unknown): when the condition became True (guardhook.cluster.going.stale_conditions)."""

    @staticmethod
    def from_object(obj: KubeObject) -> NodeRecord:
        meta = metadata(obj)
        spec = as_dict(obj.get("spec"))
        status = as_dict(obj.get("status"))
        found = conditions(status)
        true = [t for t in found if t != "Ready" and condition_true(status, t, found)]
        return NodeRecord(
            str(meta.get("name") or ""),
            str_map(meta.get("labels")),
            _allocatable(status.get("allocatable")),
            node_taints(obj),
            spec.get("unschedulable") is True,
            condition_true(status, "Ready", found),
            tuple(true),
            tuple([timestamp_seconds(found[t].get("lastTransitionTime")) for t in true]) if true else (),
        )


ALLOCATABLE_KEPT = 256
"""Distinct node `allocatable` lists `_allocatable` remembers (a fleet has a few node shapes)."""

_allocatables: dict[tuple[tuple[str, str], ...], Resources] = {}


def _allocatable(raw: Any) -> Resources:
    """`parse_resource_list` of a node's `status.allocatable`, one map shared by the nodes that
    list the very same quantities (a node pool's): parsed once, not per node, and held once
    (records never mutate their maps). Anything but quantities written as strings is parsed
    afresh."""
    if not isinstance(raw, dict) or not raw:
        return parse_resource_list(as_dict(raw))
    for value in raw.values():
        if type(value) is not str:
            return parse_resource_list(raw)
    key = tuple(raw.items())
    found = _allocatables.get(key)
    if found is None:
        if len(_allocatables) >= ALLOCATABLE_KEPT:
            _allocatables.clear()
        found = _allocatables[key] = parse_resource_list(raw)
    return found


def node_taints(obj: KubeObject) -> tuple[Taint, ...]:
    """A Node object's `spec.taints` (what a taint decision reads of a Node under review, without
    the allocatable quantities a NodeRecord parses)."""
    return tuple(
        Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
        for t in map(as_dict, as_list(as_dict(obj.get("spec")).get("taints")))
    )


@dataclass(frozen=True, slots=True)
class StatefulSetRecord:
    namespace: str
    name: str
    labels: dict[str, str]
    owners: tuple[OwnerRef, ...]
    replicas: int

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @staticmethod
    def from_object(obj: KubeObject) -> StatefulSetRecord:
        meta = metadata(obj)
        replicas = spec_replicas(obj)
        return StatefulSetRecord(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            labels=str_map(meta.get("labels")),
            owners=OwnerRef.parse_all(meta),
            replicas=1 if replicas is None else replicas,
        )
