"""An existing object judged "as a CREATE": the synthesized AdmissionRequest names the kind and
resource the API server would, and is a dry run by the synthetic user."""

from __future__ import annotations

import pytest

from guardhook.commands.synthetic import as_create, describe, with_namespace
from guardhook.policies.base import target


@pytest.mark.parametrize(
    ("api_version", "kind", "group", "version", "resource"),
    [
        ("v1", "Service", "", "v1", "services"),
        ("policy/v1", "PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets"),
        ("autoscaling/v2", "HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers"),
        ("keda.sh/v1alpha1", "ScaledObject", "keda.sh", "v1alpha1", "scaledobjects"),
        (
            "leaderworkerset.x-k8s.io/v1",
            "LeaderWorkerSet",
            "leaderworkerset.x-k8s.io",
            "v1",
            "leaderworkersets",
        ),
        ("apps/v1", "StatefulSet", "apps", "v1", "statefulsets"),
        ("v1", "Pod", "", "v1", "pods"),
    ],
)
def test_kind_and_resource(api_version: str, kind: str, group: str, version: str, resource: str) -> None:
    obj = {"apiVersion": api_version, "kind": kind, "metadata": {"name": "x", "namespace": "serve"}}
    request = as_create(obj)
    assert request is not None
    assert request["kind"] == {"group": group, "version": version, "kind": kind}
    assert request["resource"] == {"group": group, "version": version, "resource": resource}
    assert request["requestResource"] == request["resource"]
    assert (request["operation"], request["name"], request["namespace"]) == ("CREATE", "x", "serve")
    assert request["object"] is obj and request["oldObject"] is None
    assert request["dryRun"] is True and request["userInfo"]["username"] == "guardhook:check"
    assert target(group, resource, "", "CREATE").matches(request)


def test_unknown_kinds_are_not_judged() -> None:
    assert as_create({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}) is None


def test_namespaced_kinds_default_to_the_default_namespace() -> None:
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "x"}}
    placed = with_namespace(service)
    assert placed["metadata"]["namespace"] == "default" and "namespace" not in service["metadata"]
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    assert with_namespace(node) is node
    request = as_create(node)
    assert request is not None and request["namespace"] == ""
    assert describe(placed) == "Service default/x" and describe(node) == "Node n"
