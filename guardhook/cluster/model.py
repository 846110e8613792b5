"""Compact records of the objects the cluster view holds, parsed from API objects.

Only the fields the policies read are kept, so a view of a large cluster stays small. Every
`from_object` takes a decoded API object (dict) and never raises on a malformed one: missing or
mistyped fields become empty values.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from guardhook.cluster.resources import Resources, parse_resource_list, pod_requests
from guardhook.wire import KubeObject

TERMINAL_PHASES = ("Succeeded", "Failed")


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
        refs = []
        for raw in as_list(meta.get("ownerReferences")):
            raw = as_dict(raw)
            refs.append(
                OwnerRef(
                    kind=str(raw.get("kind", "")),
                    name=str(raw.get("name", "")),
                    uid=str(raw.get("uid", "")),
                    api_version=str(raw.get("apiVersion", "")),
                    controller=raw.get("controller") is True,
                )
            )
        return tuple(refs)


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
    if text.endswith("%") and text[:-1].isdigit():
        exact = int(text[:-1]) * replicas / 100
        return math.ceil(exact) if round_up else math.floor(exact)
    return int(text) if text.isdigit() else default


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


def gate_conditions(status: Mapping[str, Any], gates: tuple[str, ...]) -> dict[str, ConditionRecord]:
    """The conditions of `status.conditions` whose type is one of `gates` (only those are kept, so
    a view of a large cluster stays small)."""
    found: dict[str, ConditionRecord] = {}
    for cond in as_list(status.get("conditions")):
        cond = as_dict(cond)
        kind = cond.get("type")
        if kind in gates and kind not in found:
            found[kind] = ConditionRecord(
                status=str(cond.get("status") or ""),
                reason=str(cond.get("reason") or ""),
                message=str(cond.get("message") or ""),
                last_transition_time=str(cond.get("lastTransitionTime") or ""),
            )
    return found


def condition_true(status: Mapping[str, Any], condition_type: str) -> bool:
    """Whether `status.conditions` holds `condition_type` with status "True"."""
    for cond in as_list(status.get("conditions")):
        cond = as_dict(cond)
        if cond.get("type") == condition_type:
            return cond.get("status") == "True"
    return False


@dataclass(frozen=True, slots=True)
class PodRecord:
    """A pod as the policies see it. `requests` are the scheduler's effective requests
    (millicores for cpu, base units otherwise; see guardhook.cluster.resources).
    `containers_ready` is the ContainersReady condition (Ready without the readiness gates);
    `readiness_gates` the condition types of spec.readinessGates and `gate_conditions` the
    current conditions of those types."""

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
    requests: Resources = field(default_factory=dict)
    containers_ready: bool = False
    readiness_gates: tuple[str, ...] = ()
    gate_conditions: dict[str, ConditionRecord] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, str]:
        return (self.namespace, self.name)

    @property
    def terminal(self) -> bool:
        """Succeeded or Failed: holds no node resources any more."""
        return self.phase in TERMINAL_PHASES

    @staticmethod
    def from_object(obj: KubeObject) -> PodRecord:
        meta = metadata(obj)
        spec = as_dict(obj.get("spec"))
        status = as_dict(obj.get("status"))
        gates = readiness_gates(spec)
        return PodRecord(
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            uid=str(meta.get("uid") or ""),
            labels=str_map(meta.get("labels")),
            annotations=str_map(meta.get("annotations")),
            node_name=str(spec.get("nodeName") or ""),
            phase=str(status.get("phase") or ""),
            ready=condition_true(status, "Ready"),
            terminating=bool(meta.get("deletionTimestamp")),
            owners=OwnerRef.parse_all(meta),
            requests=pod_requests(spec),
            containers_ready=condition_true(status, "ContainersReady"),
            readiness_gates=gates,
            gate_conditions=gate_conditions(status, gates) if gates else {},
        )


@dataclass(frozen=True, slots=True)
class Taint:
    key: str
    value: str
    effect: str


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A node: labels, allocatable (guardhook.cluster.resources units), taints, schedulability."""

    name: str
    labels: dict[str, str]
    allocatable: Resources
    taints: tuple[Taint, ...]
    unschedulable: bool
    ready: bool

    @staticmethod
    def from_object(obj: KubeObject) -> NodeRecord:
        meta = metadata(obj)
        spec = as_dict(obj.get("spec"))
        status = as_dict(obj.get("status"))
        taints = tuple(
            Taint(str(t.get("key", "")), str(t.get("value", "") or ""), str(t.get("effect", "")))
            for t in map(as_dict, as_list(spec.get("taints")))
        )
        return NodeRecord(
            name=str(meta.get("name") or ""),
            labels=str_map(meta.get("labels")),
            allocatable=parse_resource_list(as_dict(status.get("allocatable"))),
            taints=taints,
            unschedulable=spec.get("unschedulable") is True,
            ready=condition_true(status, "Ready"),
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
