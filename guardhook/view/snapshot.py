"""A cluster view listed once from the API server: LeaderWorkerSets, their pods, and PDBs.

The per-group PDB reconciler reads only these kinds, so a fresh list each round is all it needs
and never goes stale between rounds. Pods are listed with the selector
`leaderworkerset.sigs.k8s.io/name` (LWS pods only), which keeps a large cluster's list small.
"""

from __future__ import annotations

from typing import Any

from kubernetes import client

from guardhook.lws import LWS_API_GROUP, NAME_LABEL
from guardhook.view.store import KINDS, LEADERWORKERSETS, PODDISRUPTIONBUDGETS, PODS, ClusterView
from guardhook.wire import KubeObject

SNAPSHOT_KINDS = (LEADERWORKERSETS, PODS, PODDISRUPTIONBUDGETS)


def _plain(api_client: client.ApiClient, listed: Any) -> list[KubeObject]:
    """The items of a list answer as plain API-shaped dicts (camelCase keys)."""
    raw = listed if isinstance(listed, dict) else api_client.sanitize_for_serialization(listed)
    return [item for item in raw.get("items") or [] if isinstance(item, dict)]


def snapshot_view(api_client: client.ApiClient) -> ClusterView:
    """List LWSs (leaderworkerset.x-k8s.io/v1), LWS pods and policy/v1 PDBs across namespaces
    into a synced view (the kinds not listed are empty). Raises the client's ApiException or a
    urllib3 error when the API server cannot answer."""
    custom = client.CustomObjectsApi(api_client)
    core = client.CoreV1Api(api_client)
    policy = client.PolicyV1Api(api_client)
    listed = {
        LEADERWORKERSETS: custom.list_cluster_custom_object(LWS_API_GROUP, "v1", "leaderworkersets"),
        PODS: core.list_pod_for_all_namespaces(label_selector=NAME_LABEL),
        PODDISRUPTIONBUDGETS: policy.list_pod_disruption_budget_for_all_namespaces(),
    }
    view = ClusterView(source="api-server snapshot")
    for kind in KINDS:
        view.replace_kind(kind, _plain(api_client, listed[kind]) if kind in listed else [])
    return view
