"""Judge an existing object "as a CREATE": synthesize the AdmissionRequest the API server would send
when the object is created, for `guardhook check` (manifests) and `guardhook audit` (a cluster).

The kind → resource mapping is the API server's (`kubectl api-resources`) for the kinds guardhook
judges; the request's `kind`/`resource` group and version come from the object's `apiVersion`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from guardhook.cluster.model import metadata
from guardhook.wire import AdmissionRequest, KubeObject


@dataclass(frozen=True)
class KindInfo:
    """How the API serves one kind: its plural resource name and whether it is namespaced."""

    resource: str
    namespaced: bool = True


KINDS: dict[str, KindInfo] = {
    "Pod": KindInfo("pods"),
    "Service": KindInfo("services"),
    "InferencePool": KindInfo("inferencepools"),  # inference.networking.k8s.io/v1, x-k8s.io/v1alpha2
    "Node": KindInfo("nodes", namespaced=False),
    "PodDisruptionBudget": KindInfo("poddisruptionbudgets"),
    "HorizontalPodAutoscaler": KindInfo("horizontalpodautoscalers"),
    "ScaledObject": KindInfo("scaledobjects"),
    "LeaderWorkerSet": KindInfo("leaderworkersets"),
    "StatefulSet": KindInfo("statefulsets"),
    "Deployment": KindInfo("deployments"),
    "DeviceTaintRule": KindInfo("devicetaintrules", namespaced=False),
}

DEFAULT_NAMESPACE = "default"
SYNTHETIC_USER = "guardhook:check"


def split_api_version(api_version: str) -> tuple[str, str]:
    """("apps", "v1") for "apps/v1"; ("", "v1") for the core group's "v1"."""
    group, _, version = api_version.rpartition("/")
    return group, version


def with_namespace(obj: KubeObject, namespace: str = DEFAULT_NAMESPACE) -> KubeObject:
    """`obj`, or a copy with `metadata.namespace` set to `namespace` when it is a namespaced kind
    without one (kubectl applies such a manifest to the current namespace, "default" here)."""
    info = KINDS.get(str(obj.get("kind") or ""))
    if info is None or not info.namespaced or metadata(obj).get("namespace"):
        return obj
    copied = dict(obj)
    copied["metadata"] = {**metadata(obj), "namespace": namespace}
    return copied


def as_create(obj: KubeObject, username: str = SYNTHETIC_USER) -> AdmissionRequest | None:
    """The CREATE AdmissionRequest for `obj`, or None for a kind guardhook does not judge.

    The request is a dry run (`dryRun: true`) by `username` (group system:authenticated), so a
    policy never records anything for it.
    """
    kind = str(obj.get("kind") or "")
    info = KINDS.get(kind)
    if info is None:
        return None
    group, version = split_api_version(str(obj.get("apiVersion") or ""))
    meta = metadata(obj)
    request: AdmissionRequest = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": group, "version": version, "kind": kind},
        "resource": {"group": group, "version": version, "resource": info.resource},
        "requestKind": {"group": group, "version": version, "kind": kind},
        "requestResource": {"group": group, "version": version, "resource": info.resource},
        "name": str(meta.get("name") or ""),
        "namespace": str(meta.get("namespace") or "") if info.namespaced else "",
        "operation": "CREATE",
        "userInfo": {"username": username, "groups": ["system:authenticated"]},
        "object": obj,
        "oldObject": None,
        "dryRun": True,
    }
    return request


def describe(obj: KubeObject) -> str:
    """`Kind namespace/name` (or `Kind name` when cluster-scoped), for reports."""
    meta = metadata(obj)
    name = str(meta.get("name") or "?")
    namespace = str(meta.get("namespace") or "")
    return f"{obj.get('kind', '?')} {namespace + '/' if namespace else ''}{name}"
