"""Builders for the group-readiness tests: the sample fleet opted in, leaders gated as the
mutation leaves them, and pod edits as the kubelet would make them."""

from __future__ import annotations

import copy
from typing import Any

from guardhook.cluster.view.static import embedded_fleet_objects
from guardhook.groups.ready import GATE, OPT_IN_ANNOTATION

P = "leaderworkerset.sigs.k8s.io/"
Object = dict[str, Any]


def fleet(opted_in: bool = True, gated: bool = True) -> list[Object]:
    """A deep copy of the sample fleet; the LWS annotated `guardhook.io/group-readiness: "true"`
    and its leaders carrying the readiness gate (with no condition yet) as asked."""
    objects = copy.deepcopy(embedded_fleet_objects())
    for obj in objects:
        if obj["kind"] == "LeaderWorkerSet" and opted_in:
            obj["metadata"].setdefault("annotations", {})[OPT_IN_ANNOTATION] = "true"
        if obj["kind"] == "Pod" and gated and is_leader(obj):
            obj["spec"]["readinessGates"] = [{"conditionType": GATE}]
    return objects


def is_leader(pod: Object) -> bool:
    return pod["metadata"]["labels"].get(P + "worker-index") == "0"


def pod_of(objects: list[Object], name: str) -> Object:
    return next(o for o in objects if o["kind"] == "Pod" and o["metadata"]["name"] == name)


def set_condition(pod: Object, kind: str, status: bool | str, **fields: str) -> Object:
    """Set (or add) condition `kind` on `pod`; returns the pod."""
    value = status if isinstance(status, str) else ("True" if status else "False")
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    for condition in conditions:
        if condition["type"] == kind:
            condition.update(status=value, **fields)
            return pod
    conditions.append({"type": kind, "status": value, **fields})
    return pod


def group_ready(pod: Object | None) -> Object | None:
    """The pod's guardhook.io/group-ready condition, or None."""
    for condition in (pod or {}).get("status", {}).get("conditions", []):
        if condition["type"] == GATE:
            return dict(condition)
    return None
