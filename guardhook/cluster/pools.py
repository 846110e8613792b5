"""Listing Gateway API Inference Extension InferencePools for the leader-service-sync reconciler.

The webhook's live view does not watch InferencePools (guardhook.cluster.view.live), so the
reconciler lists them once per round it needs them, across namespaces, at both API versions
leader-service judges (POOL_VERSIONS, as guardhook.policies.shared.traffic names them). A version
the API server does not serve (404: the CRD
is not installed) holds no pools; any other failure is reported and that version's pools are
left out of the round (the next round lists again).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from kubernetes.client.rest import ApiException
from urllib3.exceptions import HTTPError

from guardhook.cluster.model import as_dict
from guardhook.wire import KubeObject

NOT_FOUND = 404
POOL_KIND = "InferencePool"
POOL_RESOURCE = "inferencepools"
POOL_VERSIONS = (("inference.networking.k8s.io", "v1"), ("inference.networking.x-k8s.io", "v1alpha2"))
"""The API versions leader-service judges (guardhook.policies.shared.traffic)."""
LIST_TIMEOUT_SECONDS = 10.0
PAGE_LIMIT = 500


class CustomObjects(Protocol):
    """The CustomObjectsApi method the lister calls."""

    def list_cluster_custom_object(self, group: str, version: str, plural: str, **kwargs: Any) -> Any: ...


@dataclass
class PoolListing:
    """Every InferencePool listed (each with `kind` and `apiVersion` set, as list items carry
    neither) and the errors of versions that could not be listed."""

    pools: list[KubeObject] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def list_pools(api: CustomObjects) -> PoolListing:
    """List every InferencePool at both API versions, page by page. Never raises for an API or
    connection error (they land in `errors`)."""
    listing = PoolListing()
    for group, version in POOL_VERSIONS:
        try:
            listing.pools += _list_version(api, group, version)
        except ApiException as exc:
            if exc.status != NOT_FOUND:
                message = f"list {POOL_RESOURCE}.{group}/{version}: HTTP {exc.status} {exc.reason}"
                listing.errors.append(message)
        except (HTTPError, OSError) as exc:
            listing.errors.append(f"list {POOL_RESOURCE}.{group}/{version}: {exc}")
    return listing


def _list_version(api: CustomObjects, group: str, version: str) -> list[KubeObject]:
    found: list[KubeObject] = []
    token: str | None = None
    while True:
        kwargs: dict[str, Any] = {"limit": PAGE_LIMIT, "_request_timeout": LIST_TIMEOUT_SECONDS}
        if token:
            kwargs["_continue"] = token
        page = as_dict(api.list_cluster_custom_object(group, version, POOL_RESOURCE, **kwargs))
        for item in page.get("items") or []:
            if isinstance(item, dict):
                found.append({**item, "kind": POOL_KIND, "apiVersion": f"{group}/{version}"})
        token = str(as_dict(page.get("metadata")).get("continue") or "")
        if not token:
            return found
