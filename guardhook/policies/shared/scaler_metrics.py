"""Which metrics of an HPA or a KEDA ScaledObject count pods: their desired replica count is a
ratio times the number of Ready pods the target's `/scale` selector matches.

From the HPA controller (kubernetes pkg/controller/podautoscaler/replica_calculator.go):
`Resource`, `ContainerResource` and `Pods` metrics give `ceil(usageRatio × ready pods)`
(GetResourceReplicas, GetRawResourceReplicas, GetMetricReplicas → calcPlainMetricReplicas), and so
do `Object` and `External` metrics with a `Value` target (getUsageRatioReplicaCount); an `Object`
or `External` metric with an `AverageValue` target gives `ceil(total ÷ target)`, a count of
replicas whatever the pods (GetObjectPerPodMetricReplicas, GetExternalPerPodMetricReplicas). An
autoscaling/v2 HPA with no metrics scales on CPU utilization (80%). KEDA turns a ScaledObject's
`cpu` and `memory` triggers into `Resource` metrics and every other trigger into an `External`
metric whose target type is the trigger's `metricType` (default `AverageValue`).

When the selector matches every pod of a multi-pod replica (a Grove PodCliqueSet's
`status.hpaPodSelector`, grove #744), a pod-counted metric scales replicas by pods.
"""

from __future__ import annotations

from typing import Any

from guardhook.cluster.model import as_dict, as_list

POD_COUNTED_TYPES = ("Resource", "ContainerResource", "Pods")
KEDA_RESOURCE_TRIGGERS = ("cpu", "memory")


def _hpa_metric(metric: dict[str, Any]) -> str | None:
    kind = str(metric.get("type") or "")
    if kind in POD_COUNTED_TYPES:
        body = as_dict(metric.get(kind[0].lower() + kind[1:]))
        name = as_dict(body.get("metric")).get("name") or body.get("name") or ""
        return f"{kind} metric {name}".rstrip()
    if kind in ("Object", "External"):
        body = as_dict(metric.get(kind.lower()))
        target = as_dict(body.get("target"))
        if target.get("type") == "Value":
            name = as_dict(body.get("metric")).get("name") or ""
            return f"{kind} metric {name} with a Value target".replace("  ", " ")
    return None


def pod_counted_metrics(obj: dict[str, Any], keda: bool) -> list[str]:
    """The pod-counted metrics of an HPA (autoscaling/v2 `spec.metrics`) or a KEDA ScaledObject
    (`spec.triggers`), described for a message; empty when every metric counts replicas."""
    spec = as_dict(obj.get("spec"))
    found: list[str] = []
    if keda:
        for trigger in as_list(spec.get("triggers")):
            trigger = as_dict(trigger)
            kind = str(trigger.get("type") or "")
            if kind in KEDA_RESOURCE_TRIGGERS:
                found.append(f"KEDA {kind} trigger (a Resource metric)")
            elif trigger.get("metricType") == "Value":
                found.append(f"KEDA {kind} trigger with metricType Value")
        return found
    metrics = as_list(spec.get("metrics"))
    if not metrics:
        return ["CPU utilization (the default of an HPA without metrics)"]
    for metric in metrics:
        described = _hpa_metric(as_dict(metric))
        if described:
            found.append(described)
    return found
